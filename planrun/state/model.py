"""What a run's state is: the run and its steps as recorded, and where the file lives."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import field, fields
from typing import Any

from planrun.records import record
from planrun.run.events import iso_ts
from planrun.state.check import (
    check_step_fields,
)
from planrun.status import STEP_STATUSES, Status

STATE_VERSION = 1


# The journal is folded into the snapshot once it is larger than this and than the last
# snapshot: each compaction is paid for by at least as many journal bytes, so it stays linear.
COMPACT_MIN_BYTES = 4 << 20  # journal size before the first compaction during a run
REFRESH_MIN_S = 0.05  # the snapshot is at most this much (or 20 snapshot-writes) behind

JOURNAL_SUFFIX = ".journal"
LOCK_SUFFIX = ".lock"


@record()
class StepState:
    """What is known about one step of the run."""

    status: str = Status.PENDING
    attempts: int = 0
    result: Any = None
    error: str | None = None
    started_at: str | None = None
    ended_at: str | None = None
    duration_s: float | None = None
    fingerprint: str | None = None
    result_variable: str | None = None
    reason: str | None = None  # why it was skipped ("condition false", "upstream failed: a")
    detail: str | None = None  # failure detail (command, stderr tail)
    title: str | None = None  # the title as rendered when it last started (for reports)
    result_masked: bool = False  # a secret was masked in `result`: it is not the value
    cache_key: str | None = None  # the key the cache gave it (its dependents' keys name it)
    kept: bool = False  # kept from the previous run by `resume` (step.resumed), whatever its status
    # each failed attempt of its last run: {attempt, error, stderr_tail, duration_s}
    attempts_log: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        # Shallow on purpose: a deep copy of the result (dataclasses.asdict's) is slow for big ones.
        return {
            "status": self.status,
            "attempts": self.attempts,
            "result": self.result,
            "error": self.error,
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "duration_s": self.duration_s,
            "fingerprint": self.fingerprint,
            "result_variable": self.result_variable,
            "reason": self.reason,
            "detail": self.detail,
            "title": self.title,
            "result_masked": self.result_masked,
            "cache_key": self.cache_key,
            "kept": self.kept,
            "attempts_log": self.attempts_log,
        }

    @classmethod
    def from_json(cls, doc: Any) -> StepState:
        check_step_fields(doc, STEP_STATUSES)
        if doc.keys() <= _STEP_FIELDS:  # as this version writes it: no copy to filter
            return cls(**doc)
        return cls(**{k: v for k, v in doc.items() if k in _STEP_FIELDS})


_STEP_FIELDS = frozenset(f.name for f in fields(StepState))


@record()
class RunState:
    """The whole state of a run: what the state file holds."""

    plan: str
    version: int = STATE_VERSION
    digest: str | None = None
    run_id: str | None = None
    status: str = Status.RUNNING
    reason: str | None = None
    error: str | None = None
    started_at: str | None = None
    ended_at: str | None = None
    duration_s: float | None = None
    variables: dict[str, Any] = field(default_factory=dict)
    steps: dict[str, StepState] = field(default_factory=dict)  # in plan order
    revisions: list[dict[str, Any]] = field(default_factory=list)
    pid: int | None = None
    jobs: int | None = None  # -j of the run (for the run report)
    # the step ids the run targeted (None: none; `resume` repeats them)
    targets: list[str] | None = None


# The run's scalar fields in the snapshot's key order: version and plan first.
RUN_SCALARS = ("version", "plan") + tuple(
    name
    for name in (f.name for f in fields(RunState))
    if name not in ("version", "plan", "variables", "steps", "revisions")
)


# The most of a plan name kept in its state file's name, in bytes: the longest name beside it
# (`.NAME.json.<12 hex>.tmp`, the temporary snapshot) stays under 255 bytes, the usual limit.
_NAME_BYTES = 200


def default_state_path(cwd: str, plan_name: str) -> str:
    """`<cwd>/.planrun/state/<plan name>.json`. A name no file name can hold as it is (a `/`,
    `..`, too long) is flattened and shortened, and gets a digest of the whole name, so two
    such plans never share one state file (the second would be refused as foreign)."""
    name = plan_name.replace("/", "_").replace("\\", "_").replace("\0", "_")
    if name in ("", ".", ".."):
        name = name.replace(".", "_") or "_"
    if name != plan_name or len(name.encode("utf-8", "surrogatepass")) > _NAME_BYTES:
        kept = name.encode("utf-8", "surrogatepass")[:_NAME_BYTES].decode("utf-8", "ignore")
        digest = hashlib.sha256(plan_name.encode("utf-8", "surrogatepass")).hexdigest()[:12]
        name = f"{kept}-{digest}"
    return os.path.join(cwd, ".planrun", "state", f"{name}.json")


def _json_default(value: Any) -> Any:
    # Results are meant to be JSON already; a stray object must not crash the run's bookkeeping.
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


encode_step = json.JSONEncoder(separators=(",", ":"), default=_json_default).encode


state_time = iso_ts  # one fast formatter for events and state (see planrun.run.events)
