"""Text shown in one line: the first line of an error or a description, cut to a width."""

from __future__ import annotations


def first_line(text: object, width: int | None = None) -> str:
    """The first non-blank-trimmed line of `text` ("" for None or blank), at most `width`
    characters (cut with "…")."""
    stripped = "" if text is None else str(text).strip()
    line = stripped.splitlines()[0] if stripped else ""
    if width is not None and len(line) > width:
        return line[: width - 1] + "…"
    return line
