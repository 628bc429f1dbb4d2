"""`validate`'s warning for a `sources` pattern that matches no file where the step would read it.

It looks at the files, not only the plan, so it is made on every `validate`, never kept by the
plan cache. A pattern that holds `${…}` (or a step whose directory does) is known only when the
step runs, and an exclude (`!…`) selects nothing by itself: neither is looked at.
"""

from __future__ import annotations

import os
from typing import Any

from planrun.errors import Diagnostic
from planrun.plan.schema_errors import Collector


def unmatched_sources(checked: Any, cwd: str) -> list[Diagnostic]:
    """A warning for each literal `sources` pattern of a checked plan that matches no file."""
    plan = checked.plan
    if plan is None or not any(s.sources for s in plan.steps):
        return []
    # (the cache's glob matching only for a plan whose steps declare sources)
    from planrun.cache.globs import PatternError, compile_patterns, first_match

    out = Collector(checked.doc)
    skip = (os.path.join(cwd, ".planrun"),)
    for i, step in enumerate(plan.steps):
        base = _step_directory(step)
        if not step.sources or base is None:
            continue
        where = os.path.normpath(os.path.join(cwd, base))
        for n, pattern in enumerate(step.sources):
            if pattern.startswith("!") or "${" in pattern:
                continue
            try:
                matcher = compile_patterns((pattern,))
            except PatternError:  # reported by the plan's own checks
                continue
            if first_match(where, matcher, skip) is None:  # one file settles it
                out.add(
                    ("steps", i, "sources", n),
                    f"step '{step.id}': sources[{n}] '{pattern}' matches no file",
                    severity="warning",
                )
    return out.items


def _step_directory(step: Any) -> str | None:
    """Where a step's sources are read from, relative to the working directory, or None when
    only the run can tell (a directory written with `${…}`)."""
    cwd = step.cwd
    if cwd is None and step.tool == "shell" and isinstance(step.args, dict):
        cwd = step.args.get("cwd")
    if cwd is None:
        return "."
    return cwd if isinstance(cwd, str) and "${" not in cwd else None
