"""What a run report shows, computed from a run's state: one row per step, times, the critical path."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from planrun.plan.expressions import ExpressionError, resolve, to_text
from planrun.run.stepcounts import counts_text, matrix_steps_of, state_counts
from planrun.run.substeps import row_order
from planrun.state import RunState, StepState
from planrun.text import format_duration, title_beyond_id

OUTPUT_TAIL_LINES = 30
OUTPUT_TAIL_CHARS = 4000
ERROR_CHARS = 2000
_INSTANCE = re.compile(r"^(.*)\[(\d+)\]$")  # `lint[3]`: an instance of a foreach step


@dataclass(frozen=True)
class StepRow:
    """One step (or foreach instance) of the run, as the report shows it."""

    id: str
    title: str
    tool: str
    status: str
    attempts: int
    start_s: float | None  # seconds after the run started; None when it did not run
    end_s: float | None
    duration_s: float | None
    error: str
    reason: str
    output: str  # the tail of its output (or of its result), possibly empty
    cached: bool = False
    remote: bool = False  # taken from the remote cache
    retries: str = ""  # after a retry: each failed attempt, its error and stderr tail
    kept: bool = False  # succeeded in an earlier run, not run again
    critical: bool = False
    group: bool = False  # a foreach step: its bar spans its instances
    instance: bool = False  # an instance `ID[N]` of a foreach step


@dataclass(frozen=True)
class RunReport:
    """The run as a whole, and its steps in plan order."""

    plan: str
    title: str
    status: str
    reason: str
    error: str
    started_at: str
    duration_s: float | None
    span_s: float  # the timeline's length: the run, or its last step's end if later
    jobs: int | None
    steps: list[StepRow]
    counts: str = ""  # `7 steps (5 succeeded, 2 cached); 3 foreach instances (3 cached)`
    critical_s: float = 0.0  # how long the critical path took


@dataclass(frozen=True)
class PlanInfo:
    """What the report needs from the plan: titles, tools and effective dependencies."""

    title: str = ""
    titles: Mapping[str, str] = field(default_factory=dict)
    tools: Mapping[str, str] = field(default_factory=dict)
    deps: Mapping[str, list[str]] = field(default_factory=dict)
    matrix: frozenset[str] = frozenset()  # the matrix steps (the others fan out by foreach)


def _ts(text: str | None) -> float | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def clip(text: str, limit: int) -> str:
    """`text`, cut to `limit` characters with "…"."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _tail(text: str) -> str:
    lines = text.rstrip("\n").split("\n")
    if len(lines) > OUTPUT_TAIL_LINES:
        lines = [f"… ({len(lines) - OUTPUT_TAIL_LINES} earlier lines)", *lines[-OUTPUT_TAIL_LINES:]]
    out = "\n".join(lines)
    return out if len(out) <= OUTPUT_TAIL_CHARS else "…" + out[-(OUTPUT_TAIL_CHARS - 1) :]


def output_tail(step: StepState) -> str:
    """The last lines of what the step printed; for other tools, its result as JSON. A step
    that printed nothing shows its failure detail (a shell step's command), as the console
    does."""
    result = step.result
    if isinstance(result, dict) and ("stdout" in result or "stderr" in result):
        text = str(result.get("stdout") or "") + str(result.get("stderr") or "")
        if not text.strip() and step.error:
            text = step.detail or ""
    elif step.detail:
        text = step.detail
    elif result is None:
        text = ""
    elif isinstance(result, str):
        text = result
    else:
        try:
            text = json.dumps(result, indent=2, ensure_ascii=False, default=str)
        except (TypeError, ValueError):
            text = str(result)
    return _tail(text) if text.strip() else ""


def retries_text(step: StepState) -> str:
    """Each failed attempt of a step that was retried: `attempt 1 (0.02s): ERROR` and the
    tail of its stderr, indented; "" for a step that had no retry."""
    log = [e for e in step.attempts_log if isinstance(e, dict)]
    if not log or (len(log) == 1 and step.status == "failed"):
        return ""  # its one failed attempt is the error and output shown already
    lines = []
    for entry in log:
        took = entry.get("duration_s")
        took_text = f" ({format_duration(took)})" if isinstance(took, int | float) else ""
        lines.append(f"attempt {entry.get('attempt')}{took_text}: {entry.get('error') or ''}")
        tail = entry.get("stderr_tail")
        lines += [f"  {line}" for line in str(tail or "").splitlines()]
    return clip("\n".join(lines), ERROR_CHARS * 4)


def base_id(step_id: str) -> str:
    """`lint` for `lint[3]`; the id itself for a plain step."""
    m = _INSTANCE.match(step_id)
    return m.group(1) if m else step_id


def _title(st: StepState, sid: str, plan: PlanInfo, variables: dict[str, Any]) -> str:
    """The title as rendered when the step started; else as written, rendered if it can be."""
    recorded = getattr(st, "title", None)
    if isinstance(recorded, str) and recorded:
        return clip(recorded, 200)
    title = plan.titles.get(sid) or plan.titles.get(base_id(sid)) or sid
    if "${" in title:
        # a step that never ran may read results that never came: then it stays as written
        with contextlib.suppress(ExpressionError):
            title = to_text(resolve(title, {**variables, "env": {}, "steps": {}}))
    return clip(title, 200)


REMOTE_REASON = "cached (remote)"  # the reason a step taken from the remote cache keeps


def _is_cached(st: StepState) -> bool:
    return st.status == "cached" or "cache" in (st.reason or "").lower()


def build_report(state: RunState, plan: PlanInfo, now: float) -> RunReport:
    """The report of the run recorded in `state` (`now` ends the bars of steps still running)."""
    run_start = _ts(state.started_at)
    run_end = _ts(state.ended_at)
    times: dict[str, tuple[float, float]] = {}
    rows: list[StepRow] = []
    for sid, st in state.steps.items():
        kept = st.kept
        start = _ts(st.started_at)
        end = _ts(st.ended_at) or (now if st.status == "running" and start else None)
        if kept or run_start is None or start is None or start < run_start - 1:
            start = end = None  # not run in this run
        elif end is not None and isinstance(st.duration_s, int | float) and st.attempts > 1:
            # started_at is the last attempt's start; the bar spans every attempt
            start = max(run_start, min(start, end - st.duration_s))
        if start is not None and end is not None and end >= start:
            times[sid] = (start - (run_start or start), end - (run_start or start))
    if run_start is not None and run_end is None:
        run_end = max(
            [
                now if state.status == "running" else run_start,
                *(run_start + e for _, e in times.values()),
            ]
        )
    span = max([(run_end or 0) - (run_start or 0), *(e for _, e in times.values()), 0.001])
    instances = _instances(list(state.steps))
    # A foreach step's bar only spans its instances: the path runs through the instances.
    ran = {sid: t for sid, t in times.items() if sid not in instances}
    path = critical_path(ran, {sid: _deps_of(sid, plan, instances) for sid in ran})
    # a foreach step is on the critical path when one of its instances is
    critical = path | {base_id(sid) for sid in path if base_id(sid) in state.steps}
    for sid in row_order(state.steps):  # as every view lists them (planrun.run.substeps)
        st = state.steps[sid]
        start_end = times.get(sid)
        rows.append(
            StepRow(
                id=sid,
                title=title_beyond_id(sid, _title(st, sid, plan, state.variables)) or sid,
                tool=plan.tools.get(base_id(sid), ""),
                status=st.status,
                attempts=st.attempts,
                start_s=start_end[0] if start_end else None,
                end_s=start_end[1] if start_end else None,
                duration_s=st.duration_s,
                error=clip(st.error or "", ERROR_CHARS),
                reason=st.reason or "",
                output=output_tail(st),
                cached=_is_cached(st),
                remote=st.reason == REMOTE_REASON,
                retries=retries_text(st),
                kept=st.kept,
                critical=sid in critical,
                group=bool(instances.get(sid)),
                instance=base_id(sid) != sid,
            )
        )
    return RunReport(
        plan=state.plan,
        title=plan.title,
        status=state.status,
        reason=state.reason or "",
        error=clip(state.error or "", ERROR_CHARS),
        started_at=state.started_at or "",
        duration_s=state.duration_s,
        span_s=span,
        jobs=jobs if isinstance(jobs := getattr(state, "jobs", None), int) else None,
        steps=rows,
        counts=counts_text(
            state_counts(state.steps), plan.matrix | matrix_steps_of((), state.revisions)
        ),
        critical_s=_busy(times[s] for s in path),
    )


def _busy(spans: Any) -> float:
    """How long at least one of the time spans was running (overlaps counted once)."""
    total, reach = 0.0, float("-inf")
    for start, end in sorted(spans):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


def _instances(ids: list[str]) -> dict[str, list[str]]:
    """foreach step id -> its recorded instance ids, by index."""
    out: dict[str, list[str]] = {}
    for sid in ids:
        base = base_id(sid)
        if base != sid:
            out.setdefault(base, []).append(sid)
    for group in out.values():
        group.sort(key=lambda s: int(s[s.rindex("[") + 1 : -1]))
    return out


def _deps_of(sid: str, plan: PlanInfo, instances: dict[str, list[str]]) -> list[str]:
    """What a step waited for: its dependencies, a foreach step standing for its instances."""
    out: list[str] = []
    for dep in plan.deps.get(base_id(sid), []):
        out.extend(instances.get(dep) or [dep])
    return out


def critical_path(
    times: Mapping[str, tuple[float, float]], deps: Mapping[str, list[str]]
) -> set[str]:
    """The chain of steps that decided when the run ended.

    From the step that ended last, walk back to the dependency that ended last (the one it
    waited for), and so on: the steps on that chain are the ones whose speed-up would have
    shortened the run.
    """
    if not times:
        return set()
    # On a tie (one clock tick), the later start: a step that waited for another ends no
    # earlier than it, so the later starter is the downstream one.
    current: str | None = max(times, key=lambda s: (times[s][1], times[s][0]))
    path: set[str] = set()
    while current is not None and current not in path:
        path.add(current)
        ran = [d for d in deps.get(current, []) if d in times]
        current = max(ran, key=lambda d: times[d][1]) if ran else None
    return path
