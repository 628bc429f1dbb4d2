"""`python -m planrun` and the `planrun` command."""

# Lazy imports (inside functions): the signal handlers are set before anything else is imported,
# so Ctrl-C during the imports of click and the CLI exits 130 quietly.
import _signal  # the C module: `signal` itself takes long enough to import to be hit
import gc
import os
import sys


def main() -> None:
    """The command line, with Ctrl-C handled from the first instant (see planrun.run.interrupts)."""

    def quiet_exit(signum: int, frame: object) -> None:
        os._exit(130)  # still starting up: nothing to stop or save yet

    _signal.signal(_signal.SIGINT, quiet_exit)
    _signal.signal(_signal.SIGTERM, quiet_exit)
    # SIGHUP too (a closed terminal, a dropped SSH session), as make does, unless planrun was
    # started ignoring it (`nohup`): it stays ignored, here and in a run (planrun.run.interrupts).
    if _signal.getsignal(_signal.SIGHUP) != _signal.SIG_IGN:
        _signal.signal(_signal.SIGHUP, quiet_exit)
    # A value may hold half a surrogate pair (a Jinja literal or JSON can spell "\ud800"):
    # whatever prints it writes the escape, never fails with an encoding error.
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")

    from planrun.errors import ExitNow
    from planrun.run.interrupts import exit_now, install_quiet_exit

    install_quiet_exit()  # the same, and also ending the commands of a run, if any
    # Loading and validating a large plan allocates many small objects that live for the
    # whole command; the default thresholds make the collector rescan them over and over.
    gc.set_threshold(100_000, 50, 100)
    from planrun.cli.commands import main as cli

    try:
        # One program name however it is started: usage lines and shell completion.
        cli(prog_name="planrun")
    except ExitNow as end:  # a run is recorded: leave without waiting for its worker threads
        exit_now(end.code if isinstance(end.code, int) else 1)


if __name__ == "__main__":
    main()
