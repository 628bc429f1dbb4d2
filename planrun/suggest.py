"""The one "did you mean" of planrun: the closest known name to a misspelt one."""

from __future__ import annotations

from collections.abc import Iterable


def closest(word: str, choices: Iterable[str]) -> str | None:
    """The one of `choices` closest to `word`, or None when none is close."""
    import difflib  # only for a message: not on the start-up path of a run

    match = difflib.get_close_matches(word, sorted(choices), n=1, cutoff=0.6)
    return match[0] if match else None


def did_you_mean(word: str, choices: Iterable[str]) -> str | None:
    """`did you mean 'NAME'?` for the closest of `choices`, or None when none is close."""
    match = closest(word, choices)
    return f"did you mean '{match}'?" if match else None
