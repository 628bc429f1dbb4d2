"""What a tree of runs shares: one concurrency bound, budgets charged up the tree, the secrets
to mask, and the stop a sub-plan raises for the whole run."""

from __future__ import annotations

# Lazy imports (inside functions), for start-up time: asyncio only once a run starts (`planrun
# validate` imports this module).
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from planrun.masking import Masker
    from planrun.plan.definition import Limits

SUB_PLAN_TOOL = "plan"
STEP_SEPARATOR = "/"  # never in a step id (ids are [A-Za-z0-9_.-]+), so PARENT/CHILD is unambiguous

AskFn = Callable[[str, str], Awaitable[bool]]  # (step id, question) -> the answer was yes


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
        import asyncio  # here, not at the top: `planrun validate` imports this module

        self.jobs = max(1, jobs)
        self._sem = asyncio.Semaphore(self.jobs)

    async def acquire(self, tool: str) -> None:
        if tool != SUB_PLAN_TOOL:
            await self._sem.acquire()

    def release(self, tool: str) -> None:
        if tool != SUB_PLAN_TOOL:
            self._sem.release()


class Budget:
    """`limits.max_steps`, `limits.tool_caps` and `limits.max_replans` of one run, charged
    together with its parents'.

    A step execution (or a planner call) counts toward its own plan's limits and every
    enclosing plan's; the first limit reached refuses it (so the tighter bound wins).
    """

    __slots__ = ("limits", "plan", "parent", "executions", "tool_counts", "spent", "replans")
    limits: Limits
    plan: str
    parent: Budget | None
    executions: int
    tool_counts: dict[str, int]
    spent: bool  # one of its own limits refused a step
    replans: int  # planner calls made in this run and the sub-plans below it

    def __init__(
        self,
        limits: Limits,
        plan: str,
        parent: Budget | None = None,
        executions: int = 0,
        tool_counts: dict[str, int] | None = None,
        spent: bool = False,
        replans: int = 0,
    ) -> None:
        self.limits = limits
        self.plan = plan
        self.parent = parent
        self.executions = executions
        self.tool_counts = {} if tool_counts is None else tool_counts
        self.spent = spent
        self.replans = replans

    def _chain(self) -> list[Budget]:
        chain: list[Budget] = []
        budget: Budget | None = self
        while budget is not None:
            chain.append(budget)
            budget = budget.parent
        return chain

    def replans_left(self) -> tuple[int, str]:
        """Planner calls still allowed here and in every enclosing plan, and the limit that
        bounds them (`limits.max_replans is 2`, naming the enclosing plan when it is one)."""
        left, text = None, ""
        for b in self._chain():
            n = max(0, b.limits.max_replans - b.replans)
            if left is None or n < left:
                where = "" if b is self else f" (in the enclosing plan '{b.plan}')"
                left, text = n, f"limits.max_replans is {b.limits.max_replans}{where}"
        return left or 0, text

    def charge_replans(self, calls: int) -> None:
        for b in self._chain():
            b.replans += calls

    def charge(self, tool: str) -> str | None:
        """Count one execution of `tool`; the refusal text when a limit is reached."""
        chain = self._chain()
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
        self._maskers: list[Masker] = []

    def add(self, masker: Masker) -> None:
        self._maskers.append(masker)

    def values(self) -> list[str]:
        """Every string form of every secret of the tree (what a cache entry must not hold)."""
        return [form for masker in self._maskers for form in masker.values()]

    @property
    def empty(self) -> bool:
        """No run of the tree has secrets (yet): nothing to mask (the event bus reads it)."""
        return not self._maskers

    def __call__(self, value: Any) -> Any:
        for masker in self._maskers:
            value = masker(value)
        return value
