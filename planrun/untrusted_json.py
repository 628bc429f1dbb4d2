"""JSON from files anyone may have put under `.planrun/` (state, cache entries, shortcuts): parsed
so that whatever the bytes are, the caller sees a value or a ValueError.

`json.loads` raises RecursionError, not ValueError, for data nested a few thousand levels deep
(`[[[[…`); every reader of such a file already treats ValueError as "corrupt", so it is turned
into one here rather than caught at each reader.
"""

from __future__ import annotations

import json
from typing import Any


def loads(data: bytes | str) -> Any:
    """The parsed value; ValueError for anything that is not JSON planrun can hold."""
    try:
        return json.loads(data)
    except RecursionError:
        raise ValueError("nested too deeply") from None
