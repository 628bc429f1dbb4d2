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
                   for it; a matrix step's has matrix=true too), its title and a reason too ("each instance asks the cache" when the
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

import math
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from planrun.masking import mask_keeping_names
from planrun.run.runtree import MaskChain

# Each kind of event is a typed NamedTuple: immutable, matched by class (`case StepFailed():`),
# read by attribute. Not @dataclass(frozen=True, slots=True): making twelve of those costs ~70 M
# instructions at import (each one exec's its generated methods), 15% of a one-step run; the
# twelve NamedTuples cost ~13 M (no `from __future__ import annotations` here: string
# annotations would cost ~7 M more, each compiled by typing). `event`, the last field, is the kind's
# documented name (never given: its default). `ts` 0.0: stamped by the bus as it is emitted.


class Absent:
    """A key the event's JSON leaves out (`key` outside a cached run; null is a value there)."""

    __slots__ = ()

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "ABSENT"

    def __reduce__(self) -> str:
        return "ABSENT"  # the one marker (it is compared by identity), also through copy and pickle


ABSENT = Absent()


def present(value: Any) -> Any:
    """`value`, None for ABSENT: what a reader of an optional field sees."""
    return None if value is ABSENT else value


class RunStarted(NamedTuple):
    plan: str
    run_id: str = ""
    digest: str = ""
    resumed: bool = False
    title: str | None = None
    jobs: int | None = None
    variables: dict[str, Any] | None = None
    steps: list[dict[str, Any]] | None = None
    targets: list[str] | None = None
    kept: list[str] | None = None  # on resume only
    ts: float = 0.0
    event: str = "run.started"

    @property
    def step(self) -> None:  # a run's event is about no step
        return None


class StepStarted(NamedTuple):
    plan: str
    step: str
    status: str = "running"
    attempt: int = 1
    fingerprint: str | None = None
    tool: str | None = None
    title: str | None = None
    reason: str | None = None  # the first attempt's only
    again: bool | None = None  # on resume only
    instances: list[str] | None = None  # a foreach step's only
    matrix: bool | None = None  # a matrix step's only: true
    ts: float = 0.0
    event: str = "step.started"


class StepOutput(NamedTuple):
    plan: str
    step: str
    stream: str = "stdout"
    line: str = ""
    ts: float = 0.0
    event: str = "step.output"


class StepRetrying(NamedTuple):
    plan: str
    step: str
    attempt: int = 1
    error: str | None = None
    delay_s: float = 0.0
    stderr_tail: str | None = None
    title: str | None = None
    ts: float = 0.0
    event: str = "step.retrying"


class StepSucceeded(NamedTuple):
    plan: str
    step: str
    status: str = "succeeded"
    attempts: int = 1
    duration_s: float | None = None
    result: Any = None
    fingerprint: str | None = None
    output: str | None | Absent = ABSENT  # a foreach step has none
    result_variable: str | None = None
    result_masked: bool | None = None  # True, or left out
    key: str | None | Absent = ABSENT
    instances: list[str] | None = None
    title: str | None = None
    ts: float = 0.0
    event: str = "step.succeeded"


class StepFailed(NamedTuple):
    plan: str
    step: str
    status: str = "failed"
    attempts: int = 1
    duration_s: float | None = None
    error: str | None = None
    detail: str | None | Absent = ABSENT  # a foreach step has none (nor output, stderr_tail)
    result: Any = None
    fingerprint: str | None = None
    result_variable: str | None = None
    output: str | None | Absent = ABSENT
    stderr_tail: str | None | Absent = ABSENT
    instances: list[str] | None = None
    result_masked: bool | None = None
    title: str | None = None
    ts: float = 0.0
    event: str = "step.failed"


class StepSkipped(NamedTuple):
    plan: str
    step: str
    status: str = "skipped"
    reason: str | None = None
    error: str | None = None  # upstream failed only
    title: str | None = None
    ts: float = 0.0
    event: str = "step.skipped"


class StepInterrupted(NamedTuple):
    plan: str
    step: str
    status: str = "interrupted"
    attempts: int = 0
    duration_s: float | None = None
    result: Any | Absent = ABSENT  # a foreach step's: as far as its instances came
    result_variable: str | None | Absent = ABSENT
    instances: list[str] | None = None
    fingerprint: str | None | Absent = ABSENT
    result_masked: bool | None = None
    title: str | None = None
    ts: float = 0.0
    event: str = "step.interrupted"


class StepCached(NamedTuple):
    plan: str
    step: str
    status: str = "cached"
    key: str | None = None
    reason: str = "cached"
    source: str = "local"
    result: Any = None
    result_variable: str | None = None
    fingerprint: str | None = None
    attempts: int = 0
    duration_s: float = 0.0
    output: str | None = None
    replayed: bool = False
    result_masked: bool | None = None
    title: str | None = None
    ts: float = 0.0
    event: str = "step.cached"


class StepResumed(NamedTuple):
    plan: str
    step: str
    status: str = "succeeded"
    attempts: int = 0
    duration_s: float | None = None
    result: Any = None
    error: str | None | Absent = ABSENT  # a kept foreach step has none (nor reason)
    reason: str | None | Absent = ABSENT
    fingerprint: str | None = None
    result_variable: str | None = None
    result_masked: bool | None = None
    key: str | None | Absent = ABSENT  # a kept instance has none
    instances: list[str] | None = None
    title: str | None = None
    ts: float = 0.0
    event: str = "step.resumed"


class PlanDiff(NamedTuple):
    plan: str
    removed: list[str] | None = None
    added: list[str] | None = None
    revised: list[str] | None = None
    revision: int | None = None
    error: str | None = None
    steps: list[dict[str, Any]] | None = None
    step: str | None = None  # a sub-plan's diff, as its parent reports it: the `plan` step's id
    ts: float = 0.0
    event: str = "plan.diff"


class RunFinished(NamedTuple):
    plan: str
    status: str | None = None
    reason: str | None = None
    duration_s: float | None = None
    error: str | None = None
    ts: float = 0.0
    event: str = "run.finished"

    @property
    def step(self) -> None:  # a run's event is about no step
        return None


RunEvent = (
    RunStarted
    | StepStarted
    | StepOutput
    | StepRetrying
    | StepSucceeded
    | StepFailed
    | StepSkipped
    | StepInterrupted
    | StepCached
    | StepResumed
    | PlanDiff
    | RunFinished
)
StepEvent = (
    StepStarted
    | StepOutput
    | StepRetrying
    | StepSucceeded
    | StepFailed
    | StepSkipped
    | StepInterrupted
    | StepCached
    | StepResumed
)
Subscriber = Callable[[RunEvent], None]
ENVELOPE = ("plan", "step", "ts", "event")


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


# -- the JSON edge: an event as its documented JSON document, and back ------------------------

# Keys left out when None (each kind's others are written, null or not).
_OMIT_NONE: dict[type[Any], frozenset[str]] = {
    RunStarted: frozenset({"kept"}),
    StepStarted: frozenset({"reason", "again", "instances", "matrix", "title"}),
    StepRetrying: frozenset({"title"}),
    StepSucceeded: frozenset({"result_masked", "instances", "title"}),
    StepFailed: frozenset({"result_masked", "instances", "title"}),
    StepSkipped: frozenset({"error", "title"}),
    StepInterrupted: frozenset({"result_masked", "instances", "title"}),
    StepCached: frozenset({"result_masked", "title"}),
    StepResumed: frozenset({"result_masked", "instances", "title"}),
    PlanDiff: frozenset({"steps"}),  # a sub-plan's diff goes up without its steps
}
# A foreach step's own events (they carry `instances`) list their keys in this order.
_FOREACH = (
    "status",
    "attempts",
    "duration_s",
    "result",
    "result_variable",
    "instances",
    "fingerprint",
    "title",
    "result_masked",
)
_FOREACH_STARTED = (
    "status",
    "tool",
    "title",
    "instances",
    "matrix",
    "attempt",
    "fingerprint",
    "reason",
    "again",
)
_KEPT_INSTANCE = (  # a foreach instance kept on resume (its step.resumed has no `key`)
    "title",
    "status",
    "attempts",
    "duration_s",
    "result",
    "error",
    "reason",
    "fingerprint",
    "result_variable",
    "result_masked",
)


def _keys(event: RunEvent) -> tuple[str, ...]:
    """The event's data keys in the order its JSON lists them."""
    if getattr(event, "instances", None) is not None:
        if isinstance(event, StepStarted):
            return _FOREACH_STARTED
        return (*_FOREACH, "error") if isinstance(event, StepFailed) else _FOREACH
    if isinstance(event, StepResumed) and event.key is ABSENT:
        return _KEPT_INSTANCE
    return event._fields


def event_json(event: RunEvent) -> dict[str, Any]:
    """The event's documented JSON document: ts, event, plan, step (step events), its data,
    each kind's keys in their documented order, an optional one left out when not set."""
    doc: dict[str, Any] = {"ts": iso_ts(event.ts), "event": event.event, "plan": event.plan}
    if event.step is not None:
        doc["step"] = event.step
    omit = _OMIT_NONE.get(type(event), frozenset())
    for key in _keys(event):
        if key in ENVELOPE:
            continue
        value = getattr(event, key)
        if value is ABSENT or (value is None and key in omit):
            continue
        doc[key] = value
    return doc


class EventBus:
    """Fans each event out to every subscriber, in subscription order; stamps its time (`ts`,
    seconds since the epoch) when it has none, and masks the run's secrets in its data."""

    def __init__(self, mask: Callable[[Any], Any] | None = None) -> None:
        self._subscribers: list[Subscriber] = []
        self._mask = mask

    def subscribe(self, fn: Subscriber) -> None:
        self._subscribers.append(fn)

    def emit(self, event: RunEvent) -> None:
        if not event.ts:
            event = event._replace(ts=time.time())
        mask = self._mask
        # A tree's chain without secrets (yet): the event is not copied to be masked.
        if mask is not None and not (isinstance(mask, MaskChain) and mask.empty):
            data = {k: v for k, v in event._asdict().items() if k not in ENVELOPE}
            masked = mask_keeping_names(mask, data, event.step)
            if masked is not data:
                event = event._replace(**masked)
        for fn in self._subscribers:
            fn(event)
