"""JSON planrun did not write in this run: files anyone may have put under `.planrun/` (state,
cache entries, shortcuts), an HTTP body, a planner's answer, an MCP tool's text, a config file.
Whatever the bytes are, the caller sees a value or a ValueError, and the value is what RFC 8259
calls JSON.

`json.loads` raises RecursionError, not ValueError, for data nested a few thousand levels deep
(`[[[[…`); every reader already treats ValueError as "not JSON" (a corrupt file, text), so it is
turned into one here rather than caught at each reader. Python's reader also takes `NaN`,
`Infinity` and `1e999` (read as infinity), which no JSON writer may write back: taken in, they
would make the run's own documents (`--output json`, events, state) something jq and other
readers refuse, so they are refused here too.
"""

from __future__ import annotations

import json
import math
from typing import Any


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")


def _finite(number: str) -> float:
    value = float(number)
    if not math.isfinite(value):
        raise ValueError(f"{number[:40]} is too large for a JSON number")
    return value


def loads(data: bytes | str) -> Any:
    """The parsed value of strict JSON; ValueError for anything else, `NaN`, `Infinity`, a
    number past the largest float and nesting deeper than the reader goes included."""
    try:
        return json.loads(data, parse_constant=_not_json, parse_float=_finite)
    except RecursionError:
        raise ValueError("nested too deeply") from None
