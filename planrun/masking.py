"""Values of `secrets:` variables, masked as `***` wherever they would be shown or stored.

A secret is masked in every string form it can take on its way to a screen or a file:

- a string as it is, trimmed of surrounding whitespace (`${out.stdout | trim}`), and each line
  of a multi-line string (a stderr tail or `--stream` shows lines one by one);
- a number as its JSON text (`pin: 987654321` hides `987654321`), and a number anywhere in a
  result whose text is a secret's (true, false and null hide nothing);
- a mapping or list: each leaf (`${creds.password}` alone is hidden) and the JSON texts of the
  whole (`${creds}` rendered into a string);
- but a part (a leaf, a line) shorter than MIN_PART characters is not masked on its own;
- a key of a mapping that is a secret (a result keyed by a token), as a whole;
- quoted forms: JSON-escaped (a value with `"` or `\\n` inside JSON text) and shell-quoted
  (`'it'"'"'s'`, `'it'\\''s'`, as a `$ cmd` line shows a list command).

Masking builds new values and never changes the ones steps receive. What planrun records
about a run itself (step ids and other names, digests, statuses, counts: `mask_keeping_names`)
is never masked.

A step whose result is bound to a secret variable makes a secret known only as it ends: its
own record (its events, its state) is masked with its result as the secret (`shown_result`,
`masked_by`), and it is not streamed nor stored in the cache. (Not added to the run's secrets
for good: a foreach step's instances would each add one, and masking with thousands of values
is quadratic; the list is a secret once bound.)
"""

from __future__ import annotations

# Lazy import (inside a function), for start-up time: shlex only once there are secrets.
import json
import re
from collections.abc import Callable, Iterator, Mapping
from functools import lru_cache
from typing import Any

from planrun.errors import one_line
from planrun.status import Reason

MASK = "***"
# A part of a secret (a leaf of a mapping or list, a line of a multi-line value) shorter than
# this is not masked on its own: a shell result bound as a secret holds `exit_code: 0`, a JSON
# value split over lines has lines `{` and `}`, and masking those would hide every `0` and
# brace of every output. The whole value is masked whatever its length.
MIN_PART = 3


def shown_result(mask: Callable[[Any], Any] | None, result: Any, secret: bool) -> tuple[Any, bool]:
    """A step's result as shown and stored, and whether a secret was masked in it (so that
    resume does not restore it); `secret`: the result is bound to a secret variable."""
    shown = mask(result) if mask is not None else result
    if secret:
        shown = masked_by(result, shown)
    return shown, shown is not result and shown != result


def masked_by(secret: Any, value: Any) -> Any:
    """`value` with `secret` masked in it, in all its forms."""
    return _masked(value, [secret])


def _masked(value: Any, secrets: list[Any]) -> Any:
    forms, pattern = _forms_of(_key(secrets))
    return value if pattern is None else _mask(value, pattern, frozenset(forms))


class Masker:
    """Replaces the values of `secrets:` variables with `***` in any JSON-like value."""

    def __init__(
        self, names: list[str], variables: dict[str, Any], env: Mapping[str, str] | None = None
    ) -> None:
        self.names = names
        self.variables = variables  # live: result variables named as secrets count once bound
        self.env = env or {}  # a secret may be an environment value (read from a dotenv file)

    def secret_values(self) -> list[Any]:
        out = []
        for n in self.names:
            # Both when both are set: `--var API_KEY=...` does not change the environment
            # steps get from a dotenv file, so both values reach steps.
            for v in (self.variables.get(n), self.env.get(n)):
                if v is not None and v not in out:
                    out.append(v)
        return out

    def values(self) -> list[str]:
        """Every string form of every secret, longest first."""
        return list(_forms_of(_key(self.secret_values()))[0])

    def __call__(self, value: Any) -> Any:
        secrets = self.secret_values()
        return _masked(value, secrets) if secrets else value


def _key(values: list[Any]) -> str:
    # A hashable key for the cache below: the secrets as JSON (they are JSON values).
    return json.dumps(values, sort_keys=True, ensure_ascii=False, default=str)


@lru_cache(maxsize=64)
def _forms_of(key: str) -> tuple[tuple[str, ...], re.Pattern[str] | None]:
    forms: set[str] = set()
    for value in json.loads(key):
        forms.update(_forms(value))
    forms.discard("")
    ordered = tuple(sorted(forms, key=len, reverse=True))
    if not ordered:
        return ordered, None
    return ordered, re.compile("|".join(map(re.escape, ordered)))


def _forms(value: Any, part: bool = False) -> Iterator[str]:
    import shlex

    if isinstance(value, dict | list):
        yield json.dumps(value, ensure_ascii=False)
        yield json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        for item in value.values() if isinstance(value, dict) else value:
            yield from _forms(item, part=True)
        return
    if value is None or isinstance(value, bool):
        return  # true/false/null hide nothing (masking every "true" would garble output)
    if not isinstance(value, str):
        if not part or len(json.dumps(value)) >= MIN_PART:
            yield json.dumps(value)
        return
    if part and len(value) < MIN_PART:
        return
    lines = value.splitlines()
    lines = [line for line in lines if len(line.strip()) >= MIN_PART] if len(lines) > 1 else []
    if value.strip() != value and len(value.strip()) >= MIN_PART:
        lines.append(value.strip())  # a command's output ends with a newline: `| trim` drops it
    for text in (value, *lines):
        yield text
        if not text.isprintable():  # as a one-line message quotes it (errors.one_line)
            yield one_line(text)
        yield json.dumps(text, ensure_ascii=False)[1:-1]
        yield json.dumps(text)[1:-1]
        yield shlex.quote(text)
        yield "'" + text.replace("'", "'\\''") + "'"


def _mask(value: Any, pattern: re.Pattern[str], forms: frozenset[str]) -> Any:
    if isinstance(value, str):
        return pattern.sub(MASK, value) if value else value
    if isinstance(value, dict):
        # A key that is a secret (a result keyed by a token) is masked whole; a key is not
        # searched for a short secret's text: it would turn planrun's own field names
        # (`status`, `result`) into others.
        return {(MASK if k in forms else k): _mask(v, pattern, forms) for k, v in value.items()}
    if isinstance(value, list):
        return [_mask(v, pattern, forms) for v in value]
    if isinstance(value, int | float) and not isinstance(value, bool):
        return MASK if json.dumps(value) in forms else value
    return value


# What planrun records about a run, never masked: the names the plan gives (step ids, tools,
# result variables), digests planrun makes (fingerprints, cache keys, run ids), and its own
# counts and words (statuses, attempts, durations). They tell nothing about a secret, and a
# short secret's text inside one made it another name (phantom `release-***` steps in the
# state), another digest (a fingerprint that never matches on resume), or no longer a count
# or a status (`attempt: ***` crashed the console, `succe***` made the state unreadable).
_NAMES = (
    "status",
    "attempt",
    "attempts",
    "duration_s",
    "delay_s",
    "jobs",
    "revision",
    "stream",
    "fingerprint",
    "key",
    "digest",
    "run_id",
    "plan",
    "tool",
    "result_variable",
    "instances",
    "removed",
    "added",
    "revised",
)
_STEP_NAMES = ("id", "tool", "depends_on", "result_variable", "status", "attempts", "duration_s")
_REASONS = frozenset(Reason)  # a run's reason; a step's reason is text, masked


def mask_keeping_names(
    mask: Callable[[Any], Any], data: dict[str, Any], step: str | None = None
) -> dict[str, Any]:
    """`data` (an event's, a result document) masked, its names and digests as they are."""
    masked = mask(data)
    if masked is data:  # no secrets
        return data
    for key in _NAMES:
        if key in data:
            masked[key] = data[key]
    if isinstance(data.get("reason"), str) and data["reason"] in _REASONS:
        masked["reason"] = data["reason"]
    if data.get("title") is not None and data.get("title") == step:  # an untitled step
        masked["title"] = step
    steps = data.get("steps")  # run.started's, plan.diff's, a result document's
    if isinstance(steps, list):
        masked["steps"] = [_step_names(s, m) for s, m in zip(steps, masked["steps"], strict=True)]
    return masked


def _step_names(step: Any, masked: Any) -> Any:
    if not isinstance(step, dict) or not isinstance(masked, dict):
        return masked
    kept = {k: step[k] for k in _STEP_NAMES if k in step}
    if step.get("title") == step.get("id"):
        kept["title"] = step.get("title")
    return {**masked, **kept}
