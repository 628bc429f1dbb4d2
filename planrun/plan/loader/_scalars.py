"""Planrun's rules for YAML scalars (JSON types only), shared by both YAML readers; no PyYAML."""

from __future__ import annotations

import math
import re
from typing import Any

TAG = "tag:yaml.org,2002:"
STR, INT, FLOAT, BOOL, NULL_SCALAR = (
    TAG + name for name in ("str", "int", "float", "bool", "null")
)
MAP, SEQ = TAG + "map", TAG + "seq"

# First characters with which a plain scalar can be anything but a string.
MAYBE_NOT_STR = frozenset("-+.0123456789~nNtTfF")
_WORDS: dict[str, Any] = {
    "~": None,
    "null": None,
    "Null": None,
    "NULL": None,
    "true": True,
    "True": True,
    "TRUE": True,
    "false": False,
    "False": False,
    "FALSE": False,
}
# YAML's infinity and NaN: no JSON reader takes them, and every document of a run is JSON.
_NOT_FINITE = frozenset(
    sign + word for sign in ("", "+", "-") for word in (".inf", ".Inf", ".INF")
) | {".nan", ".NaN", ".NAN"}


class NotFinite(ValueError):
    """A scalar YAML reads as infinity or NaN (`.inf`, `.nan`, `1.0e+999`): JSON has neither.
    Its message is the loader's diagnostic."""

    def __init__(self, text: str) -> None:
        super().__init__(
            f"{text} is not a JSON number (JSON has no NaN or infinity; quote it for the text)"
        )


# Numbers a la JSON, restricted to what YAML 1.1 (PyYAML's dumper) also reads as numbers,
# so text PyYAML writes always reads back unchanged: no 0x/0o/underscores/60:30, and
# floats need a dot (1.5, 1.0e+3).  Anything else is a string.  Compiled at their first use
# (re's cache), not at import: a plan without a plain number needs neither.
_INT_RE = r"[-+]?(?:0|[1-9][0-9]*)\Z"
_FLOAT_RE = r"(?:[-+]?[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][-+][0-9]+)?\Z"


def plain_value(value: str) -> Any:
    """The value of an untagged plain scalar that may not be a string; NotFinite for one
    YAML reads as infinity or NaN."""
    if not value:
        return None
    if value in _WORDS:
        return _WORDS[value]
    if value in _NOT_FINITE:
        raise NotFinite(value)
    if re.match(_INT_RE, value):
        try:
            return int(value)
        except ValueError:  # more digits than Python converts: keep the text
            return value
    if re.match(_FLOAT_RE, value):
        number = float(value)
        if math.isinf(number):  # past the largest double (1.0e+999)
            raise NotFinite(value)
        return number
    return value
