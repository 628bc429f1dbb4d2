"""How one run is to be run: what the run path hands the scheduler besides the plan."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from planrun.runtree import Budget, Slots
from planrun.tools.base import ParentContext, Services

if TYPE_CHECKING:  # the cache package is imported only by runs that use it
    from planrun.cache.session import CacheSession


@dataclass
class RunSettings:
    jobs: int
    keep_going: bool = False
    yes: bool = False
    stream: bool = False
    cwd: str = "."
    env: dict[str, str] = field(default_factory=dict)
    ask: Callable[[str], Awaitable[bool]] | None = None  # approval prompt at a TTY
    services: Services = field(default_factory=Services)  # the MCP pool, notices, dotenv
    mask: Callable[[Any], Any] | None = None  # secrets -> *** (for fingerprints and results)
    slots: Slots | None = None  # shared with sub-plans: at most `-j` steps of the tree at once
    budget: Budget | None = None  # this plan's limits, charged with every enclosing plan's
    prefix: str = ""  # "PARENT_STEP/" for a sub-plan: how its step ids show in messages
    parent: ParentContext | None = None  # this run, for the sub-plans its `plan` steps start
    cache: CacheSession | None = None  # hit or miss before a step, store after it succeeds
