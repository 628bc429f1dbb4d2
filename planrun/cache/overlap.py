"""Which of a step's `outputs` its own `sources` also match, read from the patterns alone.

The run warns after the fact (the files it wrote); this says it before anything runs, from
`planrun validate`, for outputs written as paths or globs: an output pattern is taken as a
path (its wildcards as plain characters), so `src/gen.py` and `src/*.py` are caught under
`src/**/*.py` or `src`, while overlaps only files can show are left to the run.
"""

from __future__ import annotations

from collections.abc import Sequence

from planrun.cache.globs import PatternError, compile_patterns
from planrun.cache.outputs import covered


def overlapping_outputs(sources: Sequence[str], outputs: Sequence[str]) -> list[int]:
    """Positions in `outputs` of the patterns its `sources` take."""
    try:
        matcher = compile_patterns(tuple(sources))
    except PatternError:  # reported by the schema check already
        return []
    found = []
    for n, pattern in enumerate(outputs):
        path = pattern
        while path.startswith("./"):
            path = path[2:]
        path = path.rstrip("/")
        if path and not path.startswith("!") and covered(matcher, path):
            found.append(n)
    return found
