"""The one event stream of a run: every reporter and the state store subscribe to it.

Event names and their data (besides `ts`, `event`, `plan`, and `step` for step events; every
event about a step but `step.output` also carries `title`, rendered for that step, as written
when it cannot be rendered yet):

- `run.started`    run_id, digest, resumed (bool), jobs (-j), variables (dict, secrets masked),
                   steps: [{id, title, tool, depends_on}] in file order (titles as known
                   when the run starts), targets (the ids the run targeted; null without
                   targets)
- `step.started`   attempt (1-based), fingerprint, status="running", tool, title (rendered); reason
                   on the first attempt: why it runs (with again=true on resume, for a step that
                   ran before: why it runs again; else the cache's reason, "cache off" for a step
                   the cache does not cover)
                   A foreach step's own step.started has instances: [ids] (no attempt runs
                   for it), its title and a reason too ("each instance asks the cache" when the
                   cache covers it, each instance then giving its own); its instances `ID[N]` have the events of any step, and the step
                   closes with step.succeeded | step.failed | step.skipped | step.interrupted
                   (or step.resumed) carrying the instances and the result list.
- `step.output`    stream ("stdout"|"stderr"), line  (only with --stream; not written to JSON Lines)
- `step.retrying`  attempt (the one that failed), error, delay_s, stderr_tail (its last stderr
                   lines, "" when none)
- `step.succeeded` status="succeeded", attempts, duration_s, result, fingerprint, output (captured
                   text or null), result_variable (name or null), result_masked (true when a
                   secret was masked in the result), key (its cache key, or null; only in a
                   run that has a cache)
- `step.failed`    status="failed" | "ignored", attempts, duration_s, error (one line), detail (text or
                   null: e.g. stderr tail and command), result (null, or partial), fingerprint,
                   result_variable, stderr_tail (of the last attempt; null when none ran)
- `step.skipped`   status="skipped", reason ("condition false" | "upstream failed: <id>"), error
                   (upstream failed only)
- `step.interrupted` status="interrupted", attempts, duration_s
- `step.cached`    status="cached", key, reason="cached", result, result_variable, fingerprint,
                   attempts=0, duration_s=0, output (recorded stdout+stderr, replayed), replayed
- `step.resumed`   a step kept from the previous run, as recorded there: status ("succeeded" |
                   "ignored" | "skipped"), attempts, duration_s, result, error, reason,
                   fingerprint, result_variable, result_masked, key (its cache key or null)
- `plan.diff`      removed, added, revised (lists of step ids), revision (int), error; with
                   `step` set, a sub-plan's revision under its `plan` step (ids renamed)
- `run.finished`   status, reason, duration_s, error (one line or null)
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

from planrun.masking import mask_keeping_names
from planrun.record import Record

Subscriber = Callable[["Event"], None]


# (second, its formatted prefix), replaced as one tuple so a thread never sees a mixed pair
_second_cache: list[tuple[int, str]] = [(-1, "")]


def iso_ts(ts: float) -> str:
    """ISO 8601 UTC with milliseconds: 2026-11-26T02:07:04.123Z.

    Character for character what datetime.fromtimestamp(ts, UTC) formats, at a fifth of its
    cost (every event is stamped): the seconds part is formatted once per second.
    """
    frac, whole = math.modf(ts)
    micros = round(frac * 1e6)  # rounded half-even like datetime.fromtimestamp, then truncated
    sec = int(whole)
    if micros >= 1_000_000:
        sec += 1
        micros -= 1_000_000
    cached_sec, prefix = _second_cache[0]
    if sec != cached_sec:
        prefix = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(sec))
        _second_cache[0] = (sec, prefix)
    return f"{prefix}.{micros // 1000:03d}Z"


class Event(Record):
    """One thing that happened in a run: its name, the plan, the step (if any), the event's
    data (see above) and when it happened (`ts`, seconds since the epoch; now by default)."""

    __slots__ = ("event", "plan", "step", "data", "ts")
    event: str
    plan: str
    step: str | None
    data: dict[str, Any]
    ts: float

    def __init__(
        self,
        event: str,
        plan: str,
        step: str | None = None,
        data: dict[str, Any] | None = None,
        ts: float | None = None,
    ) -> None:
        self.event = event
        self.plan = plan
        self.step = step
        self.data = {} if data is None else data
        self.ts = time.time() if ts is None else ts

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"ts": iso_ts(self.ts), "event": self.event, "plan": self.plan}
        if self.step is not None:
            doc["step"] = self.step
        doc.update(self.data)
        return doc


class EventBus:
    """Fans each event out to every subscriber, in subscription order."""

    def __init__(self, mask: Callable[[Any], Any] | None = None) -> None:
        self._subscribers: list[Subscriber] = []
        self._mask = mask

    def subscribe(self, fn: Subscriber) -> None:
        self._subscribers.append(fn)

    def mask(self, value: Any) -> Any:
        """`value` with the run's secrets masked (what leaves the run without being an event:
        the planner's context)."""
        return self._mask(value) if self._mask is not None else value

    def emit(self, event: Event) -> None:
        if self._mask is not None and event.data:
            event.data = mask_keeping_names(self._mask, event.data, event.step)
        for fn in self._subscribers:
            fn(event)
