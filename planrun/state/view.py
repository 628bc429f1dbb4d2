"""What `status`, `list` and `run --output json` show of a run state."""

from __future__ import annotations

# Lazy imports (inside functions), for start-up time: sub-plan step ordering only for a run that
# has sub-plan steps.
from collections.abc import Collection
from typing import Any

from planrun.run.stepcounts import counts_text, matrix_steps_of, state_counts
from planrun.state.model import RunState, StepState
from planrun.text import first_line, format_duration

# --------------------------------------------------------------------- reports


def status_document(state: RunState) -> dict[str, Any]:
    """The run document, as `run --output json` prints it: {plan, status, reason, duration_s,
    error, steps, variables} (plus `revisions` after a replan)."""
    doc: dict[str, Any] = {
        "plan": state.plan,
        "status": state.status,
        "reason": state.reason,
        "duration_s": state.duration_s,
        "error": state.error,
        "steps": [
            {
                "id": sid,
                "status": st.status,
                "attempts": st.attempts,
                "duration_s": st.duration_s,
                "result": st.result,
                "error": st.error,
            }
            for sid, st in _in_tree_order(state.steps)
        ],
        "variables": state.variables,
    }
    if state.revisions:
        doc["revisions"] = state.revisions
    return doc


def _in_tree_order(steps: dict[str, StepState]) -> list[tuple[str, StepState]]:
    """The plan's steps, each followed by its sub-plan's steps (PARENT/CHILD ids) and its
    foreach instances (ID[N], in index order)."""
    from planrun.run.substeps import row_order

    return [(sid, steps[sid]) for sid in row_order(steps)]


def render_status_text(state: RunState, matrix_steps: Collection[str] = ()) -> str:
    """A plain-text table: the run's status line, then one row per step. `matrix_steps`: the
    plan's matrix steps (the state holds no step's kind), whose instances are counted as such."""
    head = f"plan {state.plan}: {state.status}"
    if state.reason:
        head += f" ({state.reason})"
    head += f", {format_duration(state.duration_s)}"
    if state.started_at:
        head += f", started {state.started_at}"
    lines = [head]
    if state.error:
        lines.append(f"error: {first_line(state.error, 200)}")
    if state.steps:  # counted as the console, the report and JUnit count them
        matrices = {*matrix_steps, *matrix_steps_of((), state.revisions)}
        lines.append(counts_text(state_counts(state.steps), matrices))
    # ERROR holds a step's error only; NOTE why it ended as it did without one (a skip's
    # reason, "unchanged since last run" for a step a resume kept).
    rows = [("STEP", "STATUS", "ATTEMPTS", "DURATION", "ERROR", "NOTE")]
    for sid, st in _in_tree_order(state.steps):
        error = first_line(st.error, 80)
        note = "" if error else first_line(st.reason or "", 80)
        rows.append((sid, st.status, str(st.attempts), format_duration(st.duration_s), error, note))
    last = len(rows[0]) - 1
    widths = [max(len(r[i]) for r in rows) for i in range(last)]
    lines.append("")
    for r in rows:
        cells = [r[i].ljust(widths[i]) for i in range(last)] + [r[last]]
        lines.append("  ".join(cells).rstrip())
    if state.revisions:
        lines.append("")
        for rev in state.revisions:
            diff = rev.get("diff") or {}
            parts = [
                f"{k} {', '.join(map(str, diff.get(k) or []))}"
                for k in ("removed", "added", "revised")
                if diff.get(k)
            ]
            lines.append(f"revision {rev.get('revision')}: " + ("; ".join(parts) or "no change"))
    return "\n".join(lines) + "\n"
