"""Values of `secrets:` variables, masked as `***` wherever they would be shown or stored.

A secret is masked in every string form it can take on its way to a screen or a file:

- a string as it is, and each line of a multi-line string (a stderr tail or `--stream` shows
  lines one by one);
- a number or boolean as its JSON text (`pin: 987654321` hides `987654321`), and a number
  anywhere in a result whose text is a secret's;
- a mapping or list: each leaf (`${creds.password}` alone is hidden) and the JSON texts of the
  whole (`${creds}` rendered into a string);
- quoted forms: JSON-escaped (a value with `"` or `\\n` inside JSON text) and shell-quoted
  (`'it'"'"'s'`, `'it'\\''s'`, as a `$ cmd` line shows a list command).

Masking builds new values and never changes the ones steps receive.
"""

from __future__ import annotations

# Lazy import (inside a function), for start-up time: shlex only once there are secrets.
import json
import re
from collections.abc import Iterator, Mapping
from functools import lru_cache
from typing import Any

MASK = "***"


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
            v = self.variables.get(n)
            if v is None:
                v = self.env.get(n)
            if v is not None:
                out.append(v)
        return out

    def values(self) -> list[str]:
        """Every string form of every secret, longest first."""
        return list(_forms_of(_key(self.secret_values()))[0])

    def __call__(self, value: Any) -> Any:
        secrets = self.secret_values()
        if not secrets:
            return value
        forms, pattern = _forms_of(_key(secrets))
        if pattern is None:
            return value
        return _mask(value, pattern, frozenset(forms))


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


def _forms(value: Any) -> Iterator[str]:
    import shlex

    if isinstance(value, dict | list):
        yield json.dumps(value, ensure_ascii=False)
        yield json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        for item in value.values() if isinstance(value, dict) else value:
            yield from _forms(item)
        return
    if value is None or isinstance(value, bool):
        return  # true/false/null hide nothing (masking every "true" would garble output)
    if not isinstance(value, str):
        yield json.dumps(value)
        return
    yield value
    lines = value.splitlines()
    if len(lines) > 1:
        yield from (line for line in lines if line.strip())
    for text in (value, *lines):
        yield json.dumps(text, ensure_ascii=False)[1:-1]
        yield json.dumps(text)[1:-1]
        yield shlex.quote(text)
        yield "'" + text.replace("'", "'\\''") + "'"


def _mask(value: Any, pattern: re.Pattern[str], forms: frozenset[str]) -> Any:
    if isinstance(value, str):
        return pattern.sub(MASK, value) if value else value
    if isinstance(value, dict):
        return {k: _mask(v, pattern, forms) for k, v in value.items()}
    if isinstance(value, list):
        return [_mask(v, pattern, forms) for v in value]
    if isinstance(value, int | float) and not isinstance(value, bool):
        return MASK if json.dumps(value) in forms else value
    return value
