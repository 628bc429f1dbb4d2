"""Human progress for a run: timestamped lines in CI logs, a live rich view at a terminal.

Output of steps running in parallel never interleaves: a step's captured output is printed as
one block under the line that ends the step (or, with `stream_output`, line by line prefixed
`[step-id] `).
"""

from __future__ import annotations

# Lazy imports (inside functions), for start-up time: rich and the live view only at a terminal.
import asyncio
import os
import sys
import time
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from typing import Any, TextIO

from planrun.plan.instances import parent_of
from planrun.reporters.github import GROUP_END, error_line, group_start, on_github_actions
from planrun.reporters.lines import (
    diff_words,
    failed_and_stopped,
    failure_body,
    is_terminal,
    resume_command,
    symbols,
    wants_color,
)
from planrun.reporters.tally import RunTally
from planrun.reporters.termsafe import terminal_safe
from planrun.run.events import (
    PlanDiff,
    RunEvent,
    RunFinished,
    RunStarted,
    StepCached,
    StepEvent,
    StepFailed,
    StepInterrupted,
    StepOutput,
    StepResumed,
    StepRetrying,
    StepSkipped,
    StepStarted,
    StepSucceeded,
    present,
)
from planrun.run.stepcounts import instances_text, steps_text
from planrun.status import Status
from planrun.text import counted, first_line, format_duration, title_beyond_id

_RESET = "\x1b[0m"


class ConsoleReporter:
    """EventBus subscriber printing a run's progress for people.

    `stream` defaults to `sys.stderr` (looked up when the reporter is made). `color` and `live`
    default to "the stream is a terminal" (colour also honours NO_COLOR / FORCE_COLOR; the live
    view is off when `quiet`). `resume_hint` is the command shown when a run is interrupted or
    fails: a full command starting with "planrun ", or a plan path (then shown as
    `planrun resume <path>`).

    Writes are buffered: inside a running asyncio loop the lines of one loop iteration are
    written together at its end; elsewhere they go straight to the stream, unflushed. A failed
    step, the summary, `notice()` and `close()` flush. Call `flush()` (or use `suspend()` while
    prompting) before writing to the same terminal yourself.
    """

    def __init__(
        self,
        stream: TextIO | None = None,
        *,
        quiet: bool = False,
        stream_output: bool = False,
        color: bool | None = None,
        live: bool | None = None,
        resume_hint: str | None = None,
        explain: bool = False,
        matrix_steps: Collection[str] = (),
    ) -> None:
        self._stream: TextIO = stream if stream is not None else sys.stderr
        tty = is_terminal(self._stream)
        self._tty = tty
        dumb = os.environ.get("TERM") == "dumb"
        if color is None:
            color = wants_color(tty and not dumb)
        self.quiet = quiet
        self.stream_output = stream_output
        self._streamed: set[str] = set()  # steps whose lines were shown as they came
        self.color = color
        self._live_wanted = live if live is not None else (tty and not dumb and not quiet)
        self._live_forced = live is True and not tty
        self.resume_hint = resume_hint
        self.explain = explain  # --explain: say why for every step, "cache off" included
        self.matrix_steps = frozenset(matrix_steps)  # said `matrix`, the other fan-outs `foreach`
        # On GitHub Actions: step output in collapsible groups, failures as annotations.
        self.github = on_github_actions(os.environ)

        self._bar, self._sym = symbols(getattr(self._stream, "encoding", None), color)

        self.tally = RunTally()  # statuses and counts: the events, kept apart from their lines

        self._clock_sec = -1
        self._clock_prefix = ""
        self._pending: list[str] = []
        self._scheduled = False
        self._broken = False
        self._closed = False
        self._live: Any = None  # planrun.reporters.live.LiveScreen while the view is shown
        self._raw: Any = None  # planrun.reporters.live.Raw, once the live view is shown
        self._held: list[str] | None = None  # lines kept back while a question is open

    # -- the subscriber protocol ------------------------------------------------------------

    def handle(self, event: RunEvent) -> None:
        if self._closed:
            return
        later_run = isinstance(event, RunStarted) and self.tally.root is not None
        self.tally.apply(event)
        if later_run:
            return  # a sub-plan's run.started stays on its own bus (parent.forward_steps)
        match event:
            case StepStarted():
                self._step_started(event)
            case StepOutput():
                self._step_output(event)
            case StepSucceeded():
                self._step_succeeded(event)
            case StepFailed():
                self._step_failed(event)
            case StepCached():
                self._step_cached(event)
            case StepResumed():
                self._step_resumed(event)
            case StepSkipped() | StepInterrupted() | StepRetrying():
                self._step_stopped(event)
            case RunStarted():
                self._run_started(event)
            case PlanDiff():
                self._plan_diff(event)
            case RunFinished():
                self._run_finished(event)

    __call__ = handle

    def close(self) -> None:
        """Flush, and take the live view down (idempotent; the stream is left open)."""
        if self._closed:
            return
        self.flush()
        self._stop_live()
        self._closed = True

    def notice(self, text: str, *, warning: bool = False) -> None:
        """Print a runner message in the same style; `warning=True` also shows when quiet."""
        if self.quiet and not warning:
            return
        self._write(self._line(time.time(), "warn" if warning else "note", text))
        self.flush()

    def flush(self) -> None:
        """Write out buffered lines now."""
        self._scheduled = False
        if self._pending:
            text = "".join(self._pending)
            self._pending.clear()
            self._emit(text)
        if self._live is None and not self._broken:
            try:
                self._stream.flush()
            except (BrokenPipeError, ValueError):
                self._broken = True

    @contextmanager
    def suspend(self) -> Iterator[None]:
        """Hide the live view around an approval prompt, showing it again afterwards. The
        lines of the steps that go on meanwhile are kept back until then: printed, they would
        run into the question's line and the answer typed after it."""
        self.flush()
        was_live = self._live is not None
        self._stop_live()
        self._held = []
        try:
            yield
        finally:
            held, self._held = self._held, None
            if was_live and not self._closed:
                self._start_live()
            if held:
                self._emit("".join(held))
                self.flush()

    # -- output plumbing ---------------------------------------------------------------------

    def _clock(self, ts: float) -> str:
        sec = int(ts)
        if sec != self._clock_sec:  # strftime is the slow part; once per second is enough
            self._clock_sec = sec
            prefix = time.strftime("%H:%M:%S", time.localtime(sec))
            self._clock_prefix = f"\x1b[2m{prefix}" if self.color else prefix
        ms = int((ts - sec) * 1000)
        return f"{self._clock_prefix}.{ms:03d}{_RESET if self.color else ''}"

    def _line(self, ts: float, kind: str, text: str, *, painted: bool = False) -> str:
        """One progress line. Its text quotes titles, plan names and errors, which may come
        from data (a foreach element, a result): at a terminal it is made safe like step
        output, unless `painted` (our own colours around step ids, which are plain)."""
        text = text if painted else self._safe(text)
        return f"{self._clock(ts)} {self._sym[kind]} {text}\n"

    def _block(self, text: str) -> str:
        prefix = f"  {self._bar} "
        text = self._safe(text)
        return "".join(f"{prefix}{line}\n" for line in text.rstrip("\n").split("\n"))

    def _output(self, event: StepEvent, text: str) -> str:
        """A step's output block; on GitHub Actions in a group named after the step."""
        if not self.github:
            return self._block(text)
        title = title_beyond_id(event.step or "", self.tally.title(event.plan, event.step or ""))
        head = group_start(self._id(event).strip(), self._safe(title or ""))
        return f"{head}\n{self._block(text)}{GROUP_END}\n"

    def _safe(self, text: str) -> str:
        """Step text as shown: at a terminal without its escape sequences (termsafe)."""
        return terminal_safe(text) if self._tty else text

    def _write(self, text: str) -> None:
        if self._scheduled:
            self._pending.append(text)
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            # No loop in this thread: write through, leaving buffering to the stream.
            if self._pending:
                self._pending.append(text)
                self.flush()
            else:
                self._emit(text)
            return
        # Coalesce everything printed during this loop iteration into one write at its end,
        # so a burst of 1000 finishing steps is one write, and nothing waits longer than that.
        # Above the live view every print redraws the view (~0.3 ms), so there lines are
        # gathered for a tenth of a second, about as often as the view refreshes anyway.
        self._pending.append(text)
        self._scheduled = True
        if self._live is None:
            loop.call_soon(self.flush)
        else:
            loop.call_later(0.1, self.flush)

    def _emit(self, text: str) -> None:
        if self._broken:
            return
        if self._held is not None:
            self._held.append(text)
            return
        if self._live is not None:
            # Printed through rich so the live view moves down, but as raw text: rich's own
            # line rendering costs ~30 µs a line, and our lines are already formatted.
            self._live.print(self._raw(text))
            return
        try:
            self._stream.write(text)
        except BrokenPipeError:  # `planrun run ... 2>&1 | head`: stop printing, keep running
            self._broken = True

    def _id(self, event: StepEvent) -> str:
        step = event.step
        if event.plan == self.tally.root or self.tally.root is None:
            # A foreach instance is shown indented under its step.
            return f"  {step}" if parent_of(step) is not None else step
        return f"{event.plan}:{step}"

    def _name(self, event: StepEvent) -> str:
        """The step as people read it: its id (plan:id for a sub-plan's), then its title."""
        title = title_beyond_id(event.step, self.tally.title(event.plan, event.step))
        if title is None:
            return self._id(event)  # "build (Build)" would only repeat the id
        return f"{self._id(event)} ({title})"

    # -- events ------------------------------------------------------------------------------

    def _run_started(self, event: RunStarted) -> None:
        """The root run's start (the only run.started that reaches here)."""
        if self._live_wanted:
            self._start_live()
        if self.quiet:
            return
        what = f"resuming {event.plan}" if event.resumed else f"run {event.plan} started"
        text = f"{what}: {counted(len(event.steps or []), 'step')}"
        self._write(self._line(event.ts, "start", text))

    def _step_started(self, event: StepStarted) -> None:
        attempt = event.attempt or 1
        reason = event.reason
        again = bool(event.again)  # on resume: the reason is why it runs again
        if again and reason and not self.quiet:
            text = f"running '{self._name(event).lstrip()}' again: {reason}"  # unindented
            self._write(self._line(event.ts, "note", text))
        if self.quiet or self._live is not None:
            return  # the live view shows running steps itself
        tool = event.tool or self.tally.tools.get(event.step)
        text = f"{self._name(event)} started"
        if tool:
            text += f" [{tool}]"
        if attempt > 1:
            text += f" (attempt {attempt})"
        instances = event.instances
        if isinstance(instances, list):
            n = len(instances)
            matrix = bool(event.matrix)  # a sub-plan's too: the event says which it is
            empty = "no combination left" if matrix else "empty"
            count = counted(n, "instance") if n else empty
            text += f": {'matrix' if matrix else 'foreach'}, {count}"
        if reason and not again and (self.explain or reason != "cache off") and attempt == 1:
            text += f": {reason}"  # why it runs (the cache's reason)
        self._write(self._line(event.ts, "start", text))

    def _step_output(self, event: StepOutput) -> None:
        if not self.stream_output:
            return
        self._streamed.add(event.step)
        line = self._safe(str(event.line).rstrip("\r\n"))
        self._write(f"[{self._id(event).lstrip()}] {line}\n")  # an instance: unindented

    def _step_retrying(self, event: StepRetrying) -> None:
        # Shown when quiet too: a failed attempt is a failure, and a step that passed only on a
        # later try is the flaky step a quiet CI log must still show.
        delay = event.delay_s
        wait = f" in {format_duration(delay)}" if isinstance(delay, int | float) else ""
        why = f"attempt {event.attempt} failed: {first_line(event.error)}"
        text = self._line(event.ts, "retry", f"{self._name(event)} retrying{wait} ({why})")
        tail = event.stderr_tail
        if tail and not self._was_streamed(event):  # why it failed (--stream showed it already)
            text += self._block(str(tail))
        self._write(text)

    def _step_succeeded(self, event: StepSucceeded) -> None:
        if self.quiet:
            return
        text = self._line(
            event.ts,
            "ok",
            f"{self._name(event)} succeeded ({format_duration(event.duration_s)})",
        )
        output = present(event.output)
        if output and not self._was_streamed(event):
            text += self._output(event, str(output))
        self._write(text)

    def _step_failed(self, event: StepFailed) -> None:
        status = event.status or "failed"
        ignored = status == "ignored"
        error = first_line(event.error) or "failed"
        if self.quiet and ignored:
            return
        attempts = event.attempts or 1
        notes = ["ignored"] if ignored else []
        if attempts > 1:
            notes.append(f"attempt {attempts}")
        note = f" ({', '.join(notes)})" if notes else ""
        text = self._line(
            event.ts, "ignored" if ignored else "fail", f"{self._name(event)} failed{note}: {error}"
        )
        output, detail = present(event.output), present(event.detail)
        body = failure_body(
            None if self._was_streamed(event) or not output else str(output),
            str(detail) if detail else None,
        )
        if body:
            text += self._output(event, body)
        if self.github and not ignored:
            text += error_line(self._id(event).strip(), str(event.error or "failed")) + "\n"
        self._write(text)
        if not ignored:
            self.flush()  # a failure should be visible in the log now, not after the next burst

    def _was_streamed(self, event: StepEvent) -> bool:
        # With --stream, a step whose result becomes a secret is not streamed (its value is
        # known only at its end): its output is shown with its last line, masked.
        return self.stream_output and event.step in self._streamed

    def _step_stopped(self, event: StepSkipped | StepInterrupted | StepRetrying) -> None:
        match event:
            case StepRetrying():
                self._step_retrying(event)
            case StepSkipped(reason=reason) if not self.quiet:
                text = f"{self._name(event)} skipped: {reason or 'skipped'}"
                self._write(self._line(event.ts, "skip", text))
            case StepInterrupted(duration_s=duration_s) if not self.quiet:
                text = f"{self._name(event)} interrupted after {format_duration(duration_s)}"
                self._write(self._line(event.ts, "stop", text))

    def _step_cached(self, event: StepCached) -> None:
        if self.quiet:
            return
        where = " (remote)" if event.source == "remote" else ""
        text = self._line(event.ts, "kept", f"{self._name(event)} cached{where}")
        output = event.output
        if output and self.stream_output:  # as a running step's lines are shown: `[ID] line`
            lines = f"(replayed from the cache)\n{output}".rstrip("\n").split("\n")
            sid = self._id(event).lstrip()
            text += "".join(f"[{sid}] {self._safe(line)}\n" for line in lines)
        elif output:
            text += self._output(event, f"(replayed from the cache)\n{output}")
        self._write(text)

    def _step_resumed(self, event: StepResumed) -> None:
        status = str(event.status or Status.SUCCEEDED)
        if not self.quiet:
            note = "" if status == Status.SUCCEEDED else f" ({status})"
            text = f"{self._name(event)} kept from the previous run{note}"
            self._write(self._line(event.ts, "kept", text))

    def _plan_diff(self, event: PlanDiff) -> None:
        if self.quiet:
            return
        head, changes = diff_words(event, self.color)
        if event.step is not None:  # a sub-plan's revision (planrun.run.parent)
            head = f"{event.step}: {head}"
        text = self._line(event.ts, "diff", f"{head}: {changes}", painted=True)
        if event.error:
            text += self._block(f"after: {event.error}")
        self._write(text)

    def _run_finished(self, event: RunFinished) -> None:
        if event.plan != self.tally.root:  # the root run's end only (see _run_started)
            return
        self.flush()
        self._stop_live()
        self._write(self.summary(event))
        self.flush()

    # -- summary -----------------------------------------------------------------------------

    def summary(self, event: RunFinished) -> str:
        """The closing text: counts per status, failed steps with their error, resume hint."""
        status = str(event.status or "finished")
        reason = event.reason
        counts = self.tally.step_counts()  # as status, the report and JUnit count them
        head = f"run {status}"
        if reason and reason not in (status, "completed"):
            head += f" ({reason})"
        kind = {"succeeded": "ok", "interrupted": "stop"}.get(status, "fail")
        text = f"{head}: {steps_text(counts)}"
        took = event.duration_s
        if isinstance(took, int | float):  # unknown: no "in -"
            text += f" in {format_duration(took)}"
        if counts.total_instances:  # foreach/matrix instances, counted apart from their steps
            text += f"; {instances_text(counts, counts.kind(self.matrix_steps))}"
        out = self._line(event.ts or time.time(), kind, text)
        error = first_line(event.error)
        # "step 'b' failed: <error>" only repeats the failed-steps list below
        errors = self.tally.errors
        if error and status != "succeeded" and not any(e in error for e in errors.values()):
            out += f"  {self._safe(error)}\n"
        shown = {step: self._safe(error) for step, error in errors.items()}
        out += failed_and_stopped(shown, self.tally.status, self._sym["fail"])
        if self.resume_hint and status in ("interrupted", "failed"):
            out += f"resume with: {resume_command(self.resume_hint)}\n"
        return out

    # -- the live view -----------------------------------------------------------------------

    def _start_live(self) -> None:
        from rich.console import Console

        from planrun.reporters.live import LiveScreen, LiveView, Raw

        self._raw = Raw
        rich = Console(
            file=self._stream,
            force_terminal=True if self._live_forced else None,
            no_color=not self.color,
            highlight=False,
        )
        self._live = LiveScreen(
            rich,
            LiveView(self._render),
            per_second=8,
            redirect_stderr=self._stream is sys.stderr,
        )
        self._live.start()

    def _stop_live(self) -> None:
        live, self._live = self._live, None
        if live is not None:
            live.stop()

    def _render(self, height: int) -> Any:
        from planrun.reporters.live import LiveData, render_live

        tally = self.tally
        running = list(tally.running.copy().items())  # dict.copy is atomic under the GIL
        titles = {sid: tally.titles.get((tally.root or "", sid), sid) for sid, _ in running}
        return render_live(
            LiveData(tally.done, tally.tools, tally.run_ts, running, titles, tally.status), height
        )
