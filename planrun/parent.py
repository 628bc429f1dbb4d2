"""What a run hands down to the sub-plans its steps start, so a tree of runs keeps one set of rules.

A `plan` step runs its sub-plan through the same run path as a top-level run; what the sub-plan
may not decide for itself comes from here: the approval answer, the policy on top of its own,
the concurrency slots and budgets it shares, the secrets to mask and the event stream its steps
report to, under the id PARENT_STEP/CHILD_STEP.
"""

from __future__ import annotations

import asyncio
import fnmatch
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from planrun.errors import Diagnostic
from planrun.events import Event

if TYPE_CHECKING:
    from planrun.executors.base import Executor
    from planrun.model import Limits, Plan, Policy
    from planrun.validate import CheckedPlan

SUB_PLAN_TOOL = "plan"
STEP_SEPARATOR = "/"  # never in a step id (ids are [A-Za-z0-9_.-]+), so PARENT/CHILD is unambiguous

AskFn = Callable[[str], Awaitable[bool]]


class Notice(Protocol):
    """The console's notice line (runner messages, warnings)."""

    def __call__(self, text: str, *, warning: bool = False) -> None: ...


class RunStopped(Exception):
    """A sub-plan stopped the whole run: an approval not given or refused, or a budget of the
    parent (or further up) spent. The `plan` step raises it so the parent stops the same way."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason  # approval_required | denied | step_budget
        self.message = message


class Slots:
    """One concurrency bound (`-j`) shared by a run and all its sub-plans.

    A `plan` step takes no slot: it only waits for its children, which need the slots. Waiters
    are served first come, first served.
    """

    def __init__(self, jobs: int) -> None:
        self.jobs = max(1, jobs)
        self._sem = asyncio.Semaphore(self.jobs)

    async def acquire(self, tool: str) -> None:
        if tool != SUB_PLAN_TOOL:
            await self._sem.acquire()

    def release(self, tool: str) -> None:
        if tool != SUB_PLAN_TOOL:
            self._sem.release()


@dataclass
class Budget:
    """`limits.max_steps` and `limits.tool_caps` of one run, charged together with its parents'.

    A step execution counts toward its own plan's limits and every enclosing plan's; the first
    limit reached refuses it (so the tighter bound wins).
    """

    limits: Limits
    plan: str
    parent: Budget | None = None
    executions: int = 0
    tool_counts: dict[str, int] = field(default_factory=dict)
    spent: bool = False  # one of its own limits refused a step

    def charge(self, tool: str) -> str | None:
        """Count one execution of `tool`; the refusal text when a limit is reached."""
        chain: list[Budget] = []
        budget: Budget | None = self
        while budget is not None:
            chain.append(budget)
            budget = budget.parent
        for b in chain:
            refusal = b._refusal(tool)
            if refusal is not None:
                b.spent = True
                return refusal if b is self else f"{refusal} (in the enclosing plan '{b.plan}')"
        for b in chain:
            b.executions += 1
            b.tool_counts[tool] = b.tool_counts.get(tool, 0) + 1
        return None

    def _refusal(self, tool: str) -> str | None:
        limits = self.limits
        if limits.max_steps is not None and self.executions >= limits.max_steps:
            return f"step budget exhausted: limits.max_steps is {limits.max_steps}"
        cap = limits.tool_caps.get(tool)
        if cap is not None and self.tool_counts.get(tool, 0) >= cap:
            return f"step budget exhausted: limits.tool_caps.{tool} is {cap}"
        return None

    def spent_here_or_above(self) -> bool:
        budget: Budget | None = self
        while budget is not None:
            if budget.spent:
                return True
            budget = budget.parent
        return False


class MaskChain:
    """The secrets of every run in the tree: each run adds its masker, and everything the tree
    shows or stores passes through all of them (a child's output hides the parent's secrets, and
    a child's secrets stay hidden in the result the parent records)."""

    def __init__(self) -> None:
        self._maskers: list[Callable[[Any], Any]] = []

    def add(self, masker: Callable[[Any], Any]) -> None:
        self._maskers.append(masker)

    @property
    def empty(self) -> bool:
        """No run of the tree has secrets: nothing to mask."""
        return not self._maskers

    def __call__(self, value: Any) -> Any:
        for masker in self._maskers:
            value = masker(value)
        return value


@dataclass(frozen=True)
class ParentContext:
    """A run, as the parent of the sub-plans its `plan` steps start."""

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
    emit: Callable[[Event], None]  # the top run's event bus
    executor: Executor
    keep_going: bool = False
    stream: bool = False
    notice: Notice | None = None
    mcp_config: str | None = None

    def child_prefix(self, step_id: str) -> str:
        return f"{self.prefix}{step_id}{STEP_SEPARATOR}"


def merge_policy(outer: Policy, own: Policy) -> Policy:
    """The parent's policy on top of the child's: a deny in either denies, and a
    require_approval pattern from either applies."""
    from planrun.model import Policy

    def union(a: list[str], b: list[str]) -> list[str]:
        return list(dict.fromkeys([*a, *b]))

    return Policy(
        require_approval=union(outer.require_approval, own.require_approval),
        deny=union(outer.deny, own.deny),
    )


def denied_by(checked: CheckedPlan, plan: Plan, outer: Policy) -> list[Diagnostic]:
    """Steps whose tool an enclosing plan's `policy.deny` denies, each at its `tool:` line."""
    out: list[Diagnostic] = []
    for i, step in enumerate(plan.steps):
        pattern = next((p for p in outer.deny if fnmatch.fnmatchcase(step.tool, p)), None)
        if pattern is not None:
            line, col = checked.doc.pos(("steps", i, "tool"))
            out.append(
                Diagnostic(
                    checked.doc.file,
                    line,
                    col,
                    "error",
                    f"step '{step.id}': tool '{step.tool}' is denied by policy of the "
                    f"enclosing plan (deny: '{pattern}')",
                )
            )
    return out


def forward_steps(parent: ParentContext, prefix: str) -> Callable[[Event], None]:
    """A sub-plan's bus subscriber: its step events, renamed PREFIX + id, to the top run's bus.

    Run-level events (run.started, run.finished, plan.diff) stay inside the sub-plan: the top
    run's state and reports describe the top run. A child's result variable is its own, never
    the parent's, so it is not passed on.
    """

    def forward(event: Event) -> None:
        if event.step is None or not event.event.startswith("step."):
            return
        data = event.data
        if data.get("result_variable") is not None:
            data = {**data, "result_variable": None}
        parent.emit(Event(event.event, parent.plan, prefix + event.step, data, event.ts))

    return forward


@dataclass(frozen=True)
class SubPlanCall:
    """One `plan` step starting its sub-plan: the parent run, the step, the sub-plan's file."""

    parent: ParentContext
    step_id: str
    path: str  # real path of the sub-plan file

    @property
    def prefix(self) -> str:
        return self.parent.child_prefix(self.step_id)

    @property
    def stack(self) -> tuple[str, ...]:
        return (*self.parent.plan_stack, self.path)

    def ask(self) -> AskFn | None:
        """The parent's TTY question for this sub-plan's steps, which it names PREFIX + id."""
        ask, prefix = self.parent.ask, self.prefix
        if ask is None:
            return None

        async def ask_here(step_id: str) -> bool:
            return await ask(prefix + step_id)

        return ask_here
