"""What a run's state is: the run and its steps as recorded, and where the file lives."""

from __future__ import annotations

import json
import os
from typing import Any

from planrun.events import iso_ts
from planrun.record import Record
from planrun.statecheck import (
    check_step_fields,
)
from planrun.status import STEP_STATUSES, Status

STATE_VERSION = 1


# The journal is folded into the snapshot once it is larger than this and than the last
# snapshot: each compaction is paid for by at least as many journal bytes, so it stays linear.
COMPACT_MIN_BYTES = 4 << 20  # journal size before the first compaction during a run
REFRESH_MIN_S = 0.05  # the snapshot is at most this much (or 20 snapshot-writes) behind

_JOURNAL_SUFFIX = ".journal"
_LOCK_SUFFIX = ".lock"


class StepState(Record):
    """What is known about one step of the run."""

    __slots__ = (
        "status",
        "attempts",
        "result",
        "error",
        "started_at",
        "ended_at",
        "duration_s",
        "fingerprint",
        "result_variable",
        "reason",
        "detail",
        "title",
        "result_masked",
        "cache_key",
        "attempts_log",
    )
    status: str
    attempts: int
    result: Any
    error: str | None
    started_at: str | None
    ended_at: str | None
    duration_s: float | None
    fingerprint: str | None
    result_variable: str | None
    reason: str | None  # why it was skipped ("condition false", "upstream failed: a")
    detail: str | None  # failure detail (command, stderr tail)
    title: str | None  # the title as rendered when it last started (for reports)
    result_masked: bool  # a secret was masked in `result`: it is not the value
    cache_key: str | None  # the key the cache gave it (its dependents' keys name it)
    # each failed attempt of its last run: {attempt, error, stderr_tail, duration_s}
    attempts_log: list[dict[str, Any]]

    def __init__(
        self,
        status: str = Status.PENDING,
        attempts: int = 0,
        result: Any = None,
        error: str | None = None,
        started_at: str | None = None,
        ended_at: str | None = None,
        duration_s: float | None = None,
        fingerprint: str | None = None,
        result_variable: str | None = None,
        reason: str | None = None,
        detail: str | None = None,
        title: str | None = None,
        result_masked: bool = False,
        cache_key: str | None = None,
        attempts_log: list[dict[str, Any]] | None = None,
    ) -> None:
        self.status = status
        self.attempts = attempts
        self.result = result
        self.error = error
        self.started_at = started_at
        self.ended_at = ended_at
        self.duration_s = duration_s
        self.fingerprint = fingerprint
        self.result_variable = result_variable
        self.reason = reason
        self.detail = detail
        self.title = title
        self.result_masked = result_masked
        self.cache_key = cache_key
        self.attempts_log = [] if attempts_log is None else attempts_log

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
            "attempts_log": self.attempts_log,
        }

    @classmethod
    def from_json(cls, doc: Any) -> StepState:
        check_step_fields(doc, STEP_STATUSES)
        return cls(**{k: v for k, v in doc.items() if k in _STEP_FIELDS})


_STEP_FIELDS = frozenset(StepState._FIELDS)


class RunState(Record):
    """The whole state of a run: what the state file holds."""

    __slots__ = (
        "plan",
        "version",
        "digest",
        "run_id",
        "status",
        "reason",
        "error",
        "started_at",
        "ended_at",
        "duration_s",
        "variables",
        "steps",
        "revisions",
        "pid",
        "jobs",
    )
    plan: str
    version: int
    digest: str | None
    run_id: str | None
    status: str
    reason: str | None
    error: str | None
    started_at: str | None
    ended_at: str | None
    duration_s: float | None
    variables: dict[str, Any]
    steps: dict[str, StepState]  # in plan order
    revisions: list[dict[str, Any]]
    pid: int | None
    jobs: int | None  # -j of the run (for the run report)

    def __init__(
        self,
        plan: str,
        version: int = STATE_VERSION,
        digest: str | None = None,
        run_id: str | None = None,
        status: str = Status.RUNNING,
        reason: str | None = None,
        error: str | None = None,
        started_at: str | None = None,
        ended_at: str | None = None,
        duration_s: float | None = None,
        variables: dict[str, Any] | None = None,
        steps: dict[str, StepState] | None = None,
        revisions: list[dict[str, Any]] | None = None,
        pid: int | None = None,
        jobs: int | None = None,
    ) -> None:
        self.plan = plan
        self.version = version
        self.digest = digest
        self.run_id = run_id
        self.status = status
        self.reason = reason
        self.error = error
        self.started_at = started_at
        self.ended_at = ended_at
        self.duration_s = duration_s
        self.variables = {} if variables is None else variables
        self.steps = {} if steps is None else steps
        self.revisions = [] if revisions is None else revisions
        self.pid = pid
        self.jobs = jobs


# The run's scalar fields in the snapshot's key order: version and plan first.
_RUN_SCALARS = ("version", "plan") + tuple(
    name
    for name in RunState.__slots__
    if name not in ("version", "plan", "variables", "steps", "revisions")
)


def default_state_path(cwd: str, plan_name: str) -> str:
    """`<cwd>/.planrun/state/<plan name>.json` (a name that could escape the dir is flattened)."""
    name = plan_name.replace("/", "_").replace("\\", "_").replace("\0", "_")
    if name in ("", ".", ".."):
        name = name.replace(".", "_") or "_"
    return os.path.join(cwd, ".planrun", "state", f"{name}.json")


def _json_default(value: Any) -> Any:
    # Results are meant to be JSON already; a stray object must not crash the run's bookkeeping.
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


_encode = json.JSONEncoder(separators=(",", ":"), default=_json_default).encode


_iso_ts = iso_ts  # one fast formatter for events and state (see planrun.events)
