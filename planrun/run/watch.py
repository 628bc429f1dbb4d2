"""`planrun run --watch`: after each run, wait for a change to a file that matters to the selected
steps (a source, the plan file, a dotenv file), then run again; Ctrl-C ends it.

The waiting is watchfiles' (inotify, FSEvents, kqueue or polling, as the system offers), imported
only here. What counts as a change is decided before each run (the plan may have changed): the
files the selected steps' `sources` match (rendered, under a step's `cwd`), the plan and its
dotenv files; planrun's own `.planrun/` directory and every step's `outputs` never count, so a
run that writes them does not start another. The watch begins before the run, so a change made
while it goes starts the next run as soon as it ends. Changes within 200 ms of each other are
one change. Each run is a whole run through the one run path (state, reporters, the cache
skipping what did not change).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any, NamedTuple

from planrun.errors import ExitCode, PlanrunError, one_line
from planrun.plan.definition import Step, replace
from planrun.plan.expressions import ExpressionError
from planrun.run.interrupts import signalled_in_last_run
from planrun.run.scope import known_scope, with_patterns
from planrun.run.stepcall import step_place, under

QUIET_MS = 200  # changes closer together than this are one change
LONGEST_MS = 2000  # ...but a change is acted on at the latest this long after the first one
TICK_MS = 100  # how often the wait looks up from the watcher (first: to say it is watching)


class WatchScope(NamedTuple):
    """Which run is watched: its plan, targets and variables (to find the selected steps)."""

    plan: str
    only: list[str]
    variables: dict[str, Any]
    vars_file: str | None


def watch_scope(
    found: Any, only: list[str], variables: Mapping[str, Any], vars_file: str | None
) -> WatchScope:
    """The scope of `run --watch`: `found` is the plan (planrun.plan.discovery.Found)."""
    from planrun.plan.discovery import with_builtins

    return WatchScope(found.plan, list(only), with_builtins(found, variables), vars_file)


class Relevant:
    """Whether a changed path is a change for the run: a watchfiles filter."""

    def __init__(self, cwd: str, files: set[str], sources: list[Any], outputs: list[Any]) -> None:
        self.cwd = cwd
        self.files = files  # absolute: the plan file, dotenv files
        self.sources = sources  # planrun.cache.globs.Matcher of each selected step
        self.outputs = outputs  # ... of every step's outputs

    def __call__(self, change: Any, path: str) -> bool:
        if os.path.normpath(path) in self.files:
            return True
        rel = os.path.relpath(path, self.cwd).replace(os.sep, "/")
        if rel == ".planrun" or rel.startswith(".planrun/"):
            return False
        if any(_matches(m, rel) for m in self.outputs):
            return False
        return any(_matches(m, rel) for m in self.sources)

    def roots(self) -> list[str]:
        """The directories and files to watch: the sources' literal roots (or the nearest
        directory that exists, so that a new file is seen), the plan and dotenv files."""
        found: set[str] = set(self.files)
        for matcher in self.sources:
            for root in matcher.roots:
                path = os.path.normpath(os.path.join(self.cwd, root))
                while not os.path.exists(path) and os.path.dirname(path) != path:
                    path = os.path.dirname(path)
                found.add(path)
        for file in self.files:  # a plan or dotenv file that does not exist (yet): its directory
            if not os.path.exists(file):
                found.discard(file)
                found.add(os.path.dirname(file))
        return sorted(found)


def _matches(matcher: Any, rel: str) -> bool:
    """`rel` or a directory above it is matched (a pattern naming a directory holds its files)."""
    if matcher.included(rel):
        return True
    parts = rel.split("/")
    return any(matcher.included("/".join(parts[:i])) for i in range(1, len(parts)))


def relevant_files(scope: WatchScope, cwd: str, previous: Relevant | None) -> Relevant:
    """What counts as a change for the run of `scope`, from the plan as it is now. A plan that no
    longer loads keeps the previous sources (its run has said what is wrong with it)."""
    from planrun.cache.globs import PatternError, compile_patterns
    from planrun.run.context import root_context
    from planrun.run.runner import RunRequest, prepare

    plan_file = os.path.normpath(os.path.join(cwd, scope.plan))
    try:
        req = RunRequest(
            scope.plan, None, scope.variables, scope.vars_file, only=scope.only, cwd=cwd
        )
        prep = prepare(root_context(req))
    except PlanrunError:
        if previous is not None:
            return previous
        return Relevant(cwd, {plan_file}, [], [])
    files = {plan_file}
    for name in prep.plan.dotenv:
        files.add(os.path.normpath(os.path.join(cwd, name.removesuffix("?"))))
    sources, outputs = [], []
    selected = set(prep.selected)
    known = known_scope(prep.variables, {**prep.dotenv, **os.environ})
    for written in prep.plan.steps:
        step = _placed_patterns(written, known)
        with contextlib.suppress(PatternError):
            if step.outputs:
                outputs.append(compile_patterns(tuple(step.outputs)))
            if step.sources and step.id in selected:
                sources.append(compile_patterns(tuple(step.sources)))
    return Relevant(cwd, files, sources, outputs)


def _placed_patterns(step: Step, scope: Mapping[str, Any]) -> Step:
    """The step's `sources` and `outputs` as the cache reads them: `${...}` rendered, relative to
    the working directory (a step's `cwd`). A pattern that reads what is known only in the run
    (a foreach element, a step's result) has a wildcard for each `${...}`."""
    try:
        return with_patterns(step, scope)
    except ExpressionError:
        pass
    try:
        place = step_place(step, scope)
    except ExpressionError:
        place = None
    found: dict[str, list[str]] = {}
    for field in ("sources", "outputs"):
        patterns = [_wildcarded(p) for p in getattr(step, field) or ()]
        found[field] = [under(place, p) if place is not None else p for p in patterns]
    return replace(step, **found)


def _wildcarded(pattern: str) -> str:
    """`pattern` with each `${...}` as `*`: `data/${item}.csv` stands for `data/*.csv`."""
    return re.sub(r"\$\{[^}]*\}", "*", pattern)


@contextlib.contextmanager
def _stopped_by_signals(stop: threading.Event) -> Iterator[None]:
    """While waiting, Ctrl-C (SIGINT), SIGTERM and SIGHUP end the wait, not the process."""
    signals = [signal.SIGINT, signal.SIGTERM]
    if signal.getsignal(signal.SIGHUP) != signal.SIG_IGN:
        signals.append(signal.SIGHUP)
    saved = {sig: signal.getsignal(sig) for sig in signals}
    for sig in signals:
        signal.signal(sig, lambda signum, frame: stop.set())
    try:
        yield
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)


class Watcher:
    """A watch for relevant changes from before a run until the wait after it: a change made
    while the run goes (its result may be stale) is not lost. The watching is done in a
    thread; `wait` returns what changed, at once when something changed during the run."""

    def __init__(self, relevant: Relevant) -> None:
        self.relevant = relevant
        self._stop = threading.Event()
        self._ready = threading.Event()  # the watcher is in place (or could not be)
        self._found = threading.Event()
        self._lock = threading.Lock()
        self._changed: set[str] = set()
        self.error: OSError | None = None
        self._thread = threading.Thread(target=self._watch, name="planrun-watch", daemon=True)
        self._thread.start()
        self._ready.wait()

    def _watch(self) -> None:
        import watchfiles

        try:
            for changes in watchfiles.watch(
                *self.relevant.roots(),
                watch_filter=self.relevant,
                debounce=LONGEST_MS,
                step=QUIET_MS,
                stop_event=self._stop,
                rust_timeout=TICK_MS,
                yield_on_timeout=True,
                raise_interrupt=False,
                ignore_permission_denied=True,
            ):
                self._ready.set()  # the first tick: the watcher is in place
                if changes:
                    with self._lock:
                        self._changed.update(path for _change, path in changes)
                    self._found.set()
        except OSError as exc:  # a root that vanished, no more inotify watches...
            self.error = exc
        finally:
            self._ready.set()
            self._found.set()

    def pending(self) -> bool:
        """Whether something changed since the watch began (during the run). A change in the
        run's last moments is told once it settled (changes within QUIET_MS are one change)."""
        self._found.wait((QUIET_MS + 2 * TICK_MS) / 1000)
        return self._found.is_set() and not self.error

    def wait(self, stop: threading.Event) -> list[str] | None:
        """The changed paths once something relevant changed (at once if it did during the
        run); None once `stop` is set. OSError when the watch failed."""
        while not stop.is_set():
            if self._found.wait(TICK_MS / 1000):
                break
        else:
            return None
        if self.error is not None:
            raise self.error
        with self._lock:
            return sorted(self._changed)

    def close(self) -> None:
        self._stop.set()
        self._thread.join()


def _say(message: str) -> None:
    with contextlib.suppress(Exception):
        sys.stderr.write(one_line(f"planrun: {message}") + "\n")
        sys.stderr.flush()


def watch_runs(
    scope: WatchScope, first: Callable[[], ExitCode], rerun: Callable[[], ExitCode]
) -> ExitCode:
    """Run `first`, then `rerun` at each change until Ctrl-C: the last run's exit code. A
    change during a run starts the next run as soon as it ends. An interrupted run ends the
    watch (exit 130)."""
    cwd = os.getcwd()
    stop = threading.Event()
    relevant = relevant_files(scope, cwd, None)
    run = first
    while True:
        watcher = Watcher(relevant)
        try:
            code = run()
            # A Ctrl-C as the run ended stopped nothing, but it still ends the watch.
            if code == ExitCode.INTERRUPTED or signalled_in_last_run():
                return code
            with _stopped_by_signals(stop):
                during = watcher.pending()
                if not during and not stop.is_set():
                    _say("watching for changes (Ctrl-C to stop)")
                try:
                    changed = watcher.wait(stop)
                except OSError as exc:
                    _say(f"cannot watch for changes: {exc.strerror or exc}")
                    return code
        finally:
            watcher.close()
        if changed is None:
            return code
        shown = os.path.relpath(changed[0], cwd)
        more = f" and {len(changed) - 1} more" if len(changed) > 1 else ""
        _say(f"changed{' during the run' if during else ''}: {shown}{more}; running again")
        relevant = relevant_files(scope, cwd, relevant)
        run = rerun
