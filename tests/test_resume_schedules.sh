# Resume across schedules: a checkpoint saved under 1F1B resumes under zero-bubble (issue 35); see
# test_resume.sh.
exec bash "$(dirname "$0")/test_resume.sh" "$1" "$2" schedules
