"""Text from steps made safe to print on a terminal.

A step's output may hold escape sequences: colours, but also cursor moves that garble the
live view, window-title and clipboard (OSC 52) requests, hyperlinks, or a terminal reset.
At a terminal the console shows step text with every escape sequence removed and other
control characters (but tab and line feed) shown as `^X`; its own colours are added after.
"""

from __future__ import annotations

import re
import sys

__all__ = ["echo_view", "terminal_safe"]

# The patterns are compiled on first use (re's cache), not at import: a run that prints no step
# text at a terminal (--quiet, a pipe) never needs them.
# CSI (ESC [ ... final), OSC (ESC ] ... BEL or ST), DCS/SOS/PM/APC strings, two-byte escapes,
# and the 8-bit C1 forms of the same introducers.
_SEQUENCE = (
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]"
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"
    r"|\x1b[ -/]*[0-~]?"
)
_CONTROL = r"[\x00-\x08\x0b-\x1f\x7f\x80-\x9f]"


def terminal_safe(text: str) -> str:
    """`text` without escape sequences, other control characters shown as `^X`."""
    if not re.search(_CONTROL, text):
        return text
    text = re.sub(_SEQUENCE, "", text)
    return re.sub(_CONTROL, _caret, text)


def _caret(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x20:
        return "^" + chr(code + 0x40)
    if code == 0x7F:
        return "^?"
    return f"\\x{code:02x}"


def echo_view(text: str) -> None:
    """Print a command's text view (status, list, graph, the dry run) on stdout: at a terminal
    as `terminal_safe` shows it, for titles, names and values are the plan's text or data."""
    import click

    if _stdout_is_terminal():
        text = terminal_safe(text)
    click.echo(text, nl=False)


def _stdout_is_terminal() -> bool:
    try:
        return bool(sys.stdout.isatty())
    except (AttributeError, ValueError, OSError):
        return False
