# Resume across context-parallel degrees: a checkpoint saved at CP 2 resumes at CP 1 and CP 4, one
# saved at CP 1 at CP 2 (issue 38); see test_resume.sh's case cp.
exec bash "$(dirname "$0")/test_resume.sh" "$1" "$2" cp
