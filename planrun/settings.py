"""How one run is to be run: what the run path hands the scheduler besides the plan."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from planrun.runtree import Budget, Slots
from planrun.tools.base import ParentContext, Services

if TYPE_CHECKING:  # the cache package is imported only by runs that use it
    from planrun.cache.session import CacheSession
    from planrun.plan import Step


class RunSettings:
    """What the scheduler is told besides the plan: -j, the answers and bounds of the run tree,
    the services lent to tools, the step cache."""

    __slots__ = (
        "jobs",
        "keep_going",
        "yes",
        "stream",
        "cwd",
        "env",
        "ask",
        "services",
        "mask",
        "slots",
        "budget",
        "prefix",
        "parent",
        "cache",
    )
    jobs: int
    keep_going: bool
    yes: bool
    stream: bool
    cwd: str
    env: dict[str, str]
    ask: Callable[[str, str], Awaitable[bool]] | None  # (step id, question) at a TTY
    services: Services  # the MCP pool, notices, dotenv
    mask: Callable[[Any], Any] | None  # secrets -> *** (for fingerprints and results)
    slots: Slots | None  # shared with sub-plans: at most `-j` steps of the tree at once
    budget: Budget | None  # this plan's limits, charged with every enclosing plan's
    prefix: str  # "PARENT_STEP/" for a sub-plan: how its step ids show in messages
    parent: ParentContext | None  # this run, for the sub-plans its `plan` steps start
    cache: CacheSession | None  # hit or miss before a step, store after it succeeds

    def __init__(
        self,
        jobs: int,
        keep_going: bool = False,
        yes: bool = False,
        stream: bool = False,
        cwd: str = ".",
        env: dict[str, str] | None = None,
        ask: Callable[[str, str], Awaitable[bool]] | None = None,
        services: Services | None = None,
        mask: Callable[[Any], Any] | None = None,
        slots: Slots | None = None,
        budget: Budget | None = None,
        prefix: str = "",
        parent: ParentContext | None = None,
        cache: CacheSession | None = None,
    ) -> None:
        self.jobs = jobs
        self.keep_going = keep_going
        self.yes = yes
        self.stream = stream
        self.cwd = cwd
        self.env = {} if env is None else env
        self.ask = ask
        self.services = Services() if services is None else services
        self.mask = mask
        self.slots = slots
        self.budget = budget
        self.prefix = prefix
        self.parent = parent
        self.cache = cache

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
