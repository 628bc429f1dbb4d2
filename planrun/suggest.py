"""The one "did you mean" of planrun: the closest known name to a misspelt one."""

from __future__ import annotations

from collections.abc import Iterable


def closest(word: str, choices: Iterable[str]) -> str | None:
    """The one of `choices` closest to `word`, or None when none is close. A word shaped like
    an instance id (`m[1]`) is compared by its step part first: as a whole word, a short
    step's instance is too far from the step's id for the cutoff (`m[1]` against `m`)."""
    import difflib  # only for a message: not on the start-up path of a run

    ordered = sorted(choices)
    cut = word.rfind("[")
    step = word[:cut] if cut > 0 and word.endswith("]") else None
    for w in (step, word) if step else (word,):
        match = difflib.get_close_matches(w, ordered, n=1, cutoff=0.6)
        if match:
            return match[0]
    return None


def did_you_mean(word: str, choices: Iterable[str]) -> str | None:
    """`did you mean 'NAME'?` for the closest of `choices`, or None when none is close."""
    match = closest(word, choices)
    return f"did you mean '{match}'?" if match else None
