"""Functions for examples/python-step.yaml (the `python` tool imports from the working directory)."""

from __future__ import annotations

import statistics


def describe(numbers: list[float]) -> dict[str, float]:
    """Summary statistics of a list of numbers (the result must be JSON: a dict of floats)."""
    return {
        "count": len(numbers),
        "mean": statistics.fmean(numbers),
        "median": statistics.median(numbers),
        "max": max(numbers),
    }


async def slugify(text: str) -> str:
    """An `async def` works too: it runs on planrun's event loop."""
    return "-".join(text.lower().split())
