"""Types, errors, status, small file and shell helpers: imports nothing of rlhf."""
