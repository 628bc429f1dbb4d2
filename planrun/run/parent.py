"""What a run hands down to the sub-plans its steps start, so a tree of runs keeps one set of rules.

A `plan` step runs its sub-plan through the same run path as a top-level run; what the sub-plan
may not decide for itself comes from here: the approval answer, the policy on top of its own,
the concurrency slots and budgets it shares, the secrets to mask and the event stream its steps
report to, under the id PARENT_STEP/CHILD_STEP.
"""

from __future__ import annotations

# Lazy import (inside a function), for start-up time: fnmatch only under a `deny` policy.
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from planrun.errors import Diagnostic
from planrun.plan.definition import Policy
from planrun.run.events import PlanDiff, RunEvent, RunFinished, RunStarted, present
from planrun.run.runtree import (
    STEP_SEPARATOR,
    SUB_PLAN_TOOL,
    AskFn,
    Budget,
    MaskChain,
    Notice,
    RunStopped,
    Slots,
)

if TYPE_CHECKING:
    from planrun.plan.checked import CheckedPlan
    from planrun.plan.definition import Plan, Policy
    from planrun.run.procgroups import ProcessGroups
    from planrun.tools.base import RunPlanFn, ToolCaller

__all__ = [
    "STEP_SEPARATOR",
    "SUB_PLAN_TOOL",
    "AskFn",
    "Budget",
    "MaskChain",
    "Notice",
    "ParentContext",
    "RunStopped",
    "Slots",
    "denied_by",
    "forward_steps",
    "merge_policy",
]


class ParentContext(NamedTuple):
    """A run, as the parent of the sub-plans its `plan` steps start (a NamedTuple: a frozen
    dataclass of this size costs ~1 ms of every run's start-up to build)."""

    prefix: str  # this run's id path: "" at the top, "deploy/" inside step deploy, "a/b/" ...
    plan: str  # the top run's plan name: every event of the tree carries it
    plan_stack: tuple[str, ...]  # real paths of the plan files running, outermost first
    cwd: str
    yes: bool  # --yes (or MCP approve): every gate is answered
    ask: AskFn | None  # the TTY question, with the full step id; None: no one to ask
    policy: Policy  # this run's own policy merged with every enclosing one
    jobs: int
    slots: Slots
    budget: Budget
    masks: MaskChain
    emit: Callable[[RunEvent], None]  # the top run's event bus
    executor: ToolCaller  # the run's executor (planrun.executors.base.Executor)
    keep_going: bool = False
    stream: bool = False
    notice: Notice | None = None
    mcp_config: str | None = None
    run_id: str = ""  # the top run's id: its shell commands carry it (planrun/run/leftovers.py)
    groups: ProcessGroups | None = None  # the top run's commands' process groups
    # On resume: what the top run's previous run recorded, by full step id (`deploy/push`), so
    # a sub-plan started again keeps its steps that succeeded, as a plan resumed on its own.
    previous: Mapping[str, Any] | None = None
    run_plan: RunPlanFn | None = None  # the one run path, for the `plan` tool's sub-plans
    # The tree's sub-plans running now, by their prefix (`deploy/`): how a parent stopped by a
    # failure stops them as an abort does (their `always` steps still run), not as an interrupt.
    aborts: dict[str, Callable[[], None]] | None = None
    # The directory planrun was started in, which a sub-plan knows as `invocation_dir` as it
    # would run on its own (None: a library caller that gave none).
    invocation_dir: str | None = None

    def child_prefix(self, step_id: str) -> str:
        return f"{self.prefix}{step_id}{STEP_SEPARATOR}"


def merge_policy(outer: Policy, own: Policy) -> Policy:
    """The parent's policy on top of the child's: a deny in either denies, and a
    require_approval pattern from either applies."""

    def union(a: list[str], b: list[str]) -> list[str]:
        return list(dict.fromkeys([*a, *b]))

    return Policy(
        require_approval=union(outer.require_approval, own.require_approval),
        deny=union(outer.deny, own.deny),
    )


def denied_by(checked: CheckedPlan, plan: Plan, outer: Policy) -> list[Diagnostic]:
    """Steps whose tool an enclosing plan's `policy.deny` denies, each at its `tool:` line."""
    out: list[Diagnostic] = []
    if not outer.deny:
        return out
    import fnmatch

    # The planner tool is a tool call too (a command planner is not a tool: no name to match).
    planner = plan.replan.tool if plan.replan is not None else None
    calls: list[tuple[tuple[str | int, ...], str, str]] = [
        (("steps", i, "tool"), f"step '{s.id}': tool", s.tool) for i, s in enumerate(plan.steps)
    ]
    if planner is not None:
        calls.append((("replan", "tool"), "replan: planner tool", planner))
    for where, what, tool in calls:
        pattern = next((p for p in outer.deny if fnmatch.fnmatchcase(tool, p)), None)
        if pattern is not None:
            line, col = checked.doc.pos(where)
            text = f"{what} '{tool}' is denied by policy of the enclosing plan (deny: '{pattern}')"
            out.append(Diagnostic(checked.doc.file, line, col, "error", text))
    return out


def forward_steps(parent: ParentContext, prefix: str) -> Callable[[RunEvent], None]:
    """A sub-plan's bus subscriber: its step events, renamed PREFIX + id, to the top run's bus.

    Run-level events (run.started, run.finished) stay inside the sub-plan: the top run's state
    and reports describe the top run. A child's result variable is its own, never the
    parent's, so it is not passed on. A foreach step's `instances` are step ids too: they
    are renamed with it (bare, they were rows of the top run's state that never ran). The
    sub-plan's `plan.diff` goes up as the `plan.diff` of the `plan` step (its `step`), its ids
    renamed, without the revised plan's steps: the steps it routed around are reported as the
    top plan's are (JUnit, the run document, the state), and no revision of the top plan is
    recorded.
    """

    def forward(event: RunEvent) -> None:
        if isinstance(event, PlanDiff):
            parent.emit(_sub_plan_diff(event, parent.plan, prefix))
            return
        if isinstance(event, RunStarted | RunFinished):
            return
        changes: dict[str, Any] = {"plan": parent.plan, "step": prefix + event.step}
        if present(getattr(event, "result_variable", None)) is not None:
            changes["result_variable"] = None
        instances = getattr(event, "instances", None)
        if isinstance(instances, list):
            changes["instances"] = [prefix + str(sid) for sid in instances]
        parent.emit(event._replace(**changes))

    return forward


def _sub_plan_diff(event: PlanDiff, plan: str, prefix: str) -> PlanDiff:
    """A sub-plan's plan.diff as its parent reports it: under the `plan` step's id (a nested
    one's under its own, renamed), the step ids renamed PREFIX + id, without its steps."""

    def renamed(ids: list[str] | None) -> list[str] | None:
        return [prefix + str(sid) for sid in ids] if isinstance(ids, list) else ids

    step = prefix + event.step if event.step is not None else prefix.removesuffix("/")
    return event._replace(
        plan=plan,
        step=step,
        steps=None,
        removed=renamed(event.removed),
        added=renamed(event.added),
        revised=renamed(event.revised),
    )
