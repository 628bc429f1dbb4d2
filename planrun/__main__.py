"""`python -m planrun`."""

from planrun.cli import main

# One program name however it is started: usage lines and shell completion (`_PLANRUN_COMPLETE`).
main(prog_name="planrun")
