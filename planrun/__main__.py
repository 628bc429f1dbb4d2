"""`python -m planrun` and the `planrun` command."""

# Lazy imports (inside functions): the signal handlers are set before anything else is imported,
# so Ctrl-C during the imports of click and the CLI exits 130 quietly.
import _signal  # the C module: `signal` itself takes long enough to import to be hit
import os
import sys


def main() -> None:
    """The command line, with Ctrl-C handled from the first instant (see planrun.interrupts)."""

    def quiet_exit(signum: int, frame: object) -> None:
        os._exit(130)  # still starting up: nothing to stop or save yet

    _signal.signal(_signal.SIGINT, quiet_exit)
    _signal.signal(_signal.SIGTERM, quiet_exit)
    # SIGHUP too (a closed terminal, a dropped SSH session), as make does, unless planrun was
    # started ignoring it (`nohup`): it stays ignored, here and in a run (planrun.interrupts).
    if _signal.getsignal(_signal.SIGHUP) != _signal.SIG_IGN:
        _signal.signal(_signal.SIGHUP, quiet_exit)
    # A value may hold half a surrogate pair (a Jinja literal or JSON can spell "\ud800"):
    # whatever prints it writes the escape, never fails with an encoding error.
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")

    from planrun.interrupts import install_quiet_exit

    install_quiet_exit()  # the same, and also ending the commands of a run, if any
    from planrun.cli import main as cli

    # One program name however it is started: usage lines and shell completion.
    cli(prog_name="planrun")


if __name__ == "__main__":
    main()
