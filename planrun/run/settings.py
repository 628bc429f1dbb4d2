"""How one run is to be run: what the run path hands the scheduler besides the plan."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from planrun.run.parent import ParentContext
from planrun.run.runtree import Budget, Slots
from planrun.tools.base import Services

if TYPE_CHECKING:  # the cache package is imported only by runs that use it
    from planrun.cache.session import CacheSession
    from planrun.plan.definition import Step


class RunSettings:
    """What the scheduler is told besides the plan: the run's context (-j, the answers and bounds
    of the run tree, read from it, never copied), the question asked at a gate, the environment,
    the services lent to tools, the step cache."""

    __slots__ = ("parent", "env", "ask", "services", "cache")
    parent: ParentContext  # this run, as the parent of the sub-plans its `plan` steps start
    env: dict[str, str]
    ask: Callable[[str, str], Awaitable[bool]] | None  # (step id, question) at a TTY
    services: Services  # the MCP pool, notices, dotenv
    cache: CacheSession | None  # hit or miss before a step, store after it succeeds

    def __init__(
        self,
        parent: ParentContext,
        env: dict[str, str] | None = None,
        ask: Callable[[str, str], Awaitable[bool]] | None = None,
        services: Services | None = None,
        cache: CacheSession | None = None,
    ) -> None:
        self.parent = parent
        self.env = {} if env is None else env
        self.ask = ask
        self.services = Services() if services is None else services
        self.cache = cache

    # What the run's context says, under the names the scheduler reads.

    @property
    def jobs(self) -> int:
        return self.parent.jobs

    @property
    def keep_going(self) -> bool:
        return self.parent.keep_going

    @property
    def yes(self) -> bool:
        return self.parent.yes

    @property
    def stream(self) -> bool:
        return self.parent.stream

    @property
    def cwd(self) -> str:
        return self.parent.cwd

    @property
    def mask(self) -> Callable[[Any], Any]:
        """Secrets -> *** (for fingerprints and results): every run's of the tree."""
        return self.parent.masks

    @property
    def slots(self) -> Slots:
        """Shared with sub-plans: at most `-j` steps of the tree at once."""
        return self.parent.slots

    @property
    def budget(self) -> Budget:
        """This plan's limits, charged with every enclosing plan's."""
        return self.parent.budget

    @property
    def prefix(self) -> str:
        """`PARENT_STEP/` for a sub-plan: how its step ids show in messages."""
        return self.parent.prefix

    async def outputs_made(self, sid: str, step: Step, result: Any, secret: bool) -> str | None:
        """After a step succeeded: store it when the cache missed it (its outputs checked then);
        for a step that declares outputs with the cache off, check them alone. The error when
        one was not produced (`declared output not produced: PATTERN`), else None."""
        if self.cache is not None and self.cache.stores(sid):
            return await self.cache.after(sid, step, result, secret)
        if not step.outputs:
            return None
        import asyncio

        from planrun.cache.outputs import unproduced_output  # only for a step declaring some

        return await asyncio.to_thread(unproduced_output, self.cwd, list(step.outputs), [])
