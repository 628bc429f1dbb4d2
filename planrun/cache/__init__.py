"""Incremental runs: source globs, keys, stat records and the content-addressed cache store."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from planrun.plan.definition import Step

# The reasons a step is or is not taken from the cache that need no comparison (the others are
# made by planrun.cache.reasons, imported only on a miss).
NO_ENTRY = "no cache entry"
FORCED = "forced"
OFF = "cache off"
CACHED = "cached"
ALL_FORCED = "*"  # what a bare --force stands for among the --force IDs


def step_cached(step: Step) -> bool:
    """`cache: true`, or `sources`/`outputs` given and `cache` not false.

    Here, not in planrun.cache.session, so that a run can ask it without importing the cache
    machinery (~10 ms) for a plan that caches nothing.
    """
    if step.cache is not None:
        return step.cache
    return bool(step.sources or step.outputs)
