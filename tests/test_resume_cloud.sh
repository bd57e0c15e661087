# Resume from the cloud tier (a real S3 server on loopback): see test_resume_tiers.sh.
exec bash "$(dirname "$0")/test_resume_tiers.sh" "$1" "$2" cloud
