"""Durations as plans write them (`500ms`, `30s`, `5m`, `1h`, `1m30s`, a number of seconds).

Apart from planrun.plan.model so that a command that only parses a duration (`planrun cache prune
--older-than`) does not import pydantic.
"""

from __future__ import annotations

import math
import re
import sys
from typing import Any

LONGEST_DURATION = sys.float_info.max
"""Any finite number of seconds is a duration; what is larger (`.inf`, `1e400`, which JSON and
YAML readers give as infinity) is not. The schema says the same with `maximum`."""

# At most 100 digits before the point: no sum of such parts in any file reaches infinity, so
# the pattern alone (as the schema has it) decides which strings are durations.
_NUMBER = r"[0-9]{1,100}(?:\.[0-9]+)?"
_PART = rf"{_NUMBER} *(?:ms|s|m|h)"
# One pattern for the schema and for parse_duration, so that both accept the same strings:
# a bare number of seconds ("30"), or number-unit parts ("500ms", "1m30s", "1m 30s").
DURATION_PATTERN = rf"^ *(?:{_NUMBER}|{_PART}(?: *{_PART})*) *$"
# Compiled at the first duration parsed (re's cache), not at import: checking a plan imports this
# module, and most plans have no duration.
_DURATION_PART = rf"({_NUMBER}) *(ms|s|m|h)"
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_BAD_DURATION = "use a number of seconds or a string like '500ms', '30s', '5m', '1h'"


def parse_duration(value: Any) -> float:
    """Seconds from `500ms`, `30s`, `5m`, `1h`, `1m30s` or a number of seconds (finite, >= 0)."""
    if isinstance(value, bool):
        raise ValueError(f"a duration is not a boolean: {_BAD_DURATION}")
    if isinstance(value, int | float):
        # Compared before any conversion: exact for an int of any size, as the schema's
        # `maximum` is, and false for NaN.
        if isinstance(value, float) and math.isnan(value):
            raise ValueError(f"bad duration {_shown(value)}: {_BAD_DURATION}")
        if value < 0:
            raise ValueError("a duration cannot be negative")
        if value > LONGEST_DURATION:
            raise ValueError(f"bad duration {_shown(value)}: too long")
        seconds = float(value)
    elif isinstance(value, str) and re.fullmatch(DURATION_PATTERN, value):
        parts = re.findall(_DURATION_PART, value)
        seconds = sum(float(n) * _UNIT[u] for n, u in parts) if parts else float(value)
    else:
        raise ValueError(f"bad duration {_shown(value)}: {_BAD_DURATION}")
    return seconds


def _shown(value: Any) -> str:
    """The value in a message, cut short (a 400-digit number is not worth a screenful)."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
