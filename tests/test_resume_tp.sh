# Resume across a TP-degree change (2 -> 1, 2 -> 4) and asymmetric pipelines: see test_resume.sh.
exec bash "$(dirname "$0")/test_resume.sh" "$1" "$2" tp
