"""How one run is to be run: what the run path hands the scheduler besides the plan."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from planrun.run.parent import ParentContext
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

        return await asyncio.to_thread(unproduced_output, self.parent.cwd, list(step.outputs), [])
