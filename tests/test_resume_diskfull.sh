# A full disk during a save: an error event, training goes on, resume from the last good step.
# See test_resume_tiers.sh.
exec bash "$(dirname "$0")/test_resume_tiers.sh" "$1" "$2" diskfull
