"""Values of `secrets:` variables, masked as `***` wherever they would be shown or stored."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from planrun.expressions import to_text


class Masker:
    """Replaces the values of `secrets:` variables with `***` in any JSON-like value."""

    def __init__(
        self, names: list[str], variables: dict[str, Any], env: Mapping[str, str] | None = None
    ) -> None:
        self.names = names
        self.variables = variables  # live: result variables named as secrets count once bound
        self.env = env or {}  # a secret may be an environment value (read from a dotenv file)

    def values(self) -> list[str]:
        out = []
        for n in self.names:
            v = self.variables.get(n)
            if v is None:
                v = self.env.get(n)
            if v is None:
                continue
            text = v if isinstance(v, str) else to_text(v)
            if text:
                out.append(text)
        return sorted(out, key=len, reverse=True)

    def __call__(self, value: Any) -> Any:
        secrets = self.values()
        return _mask(value, secrets) if secrets else value


def _mask(value: Any, secrets: list[str]) -> Any:
    if isinstance(value, str):
        for s in secrets:
            if s in value:
                value = value.replace(s, "***")
        return value
    if isinstance(value, dict):
        return {k: _mask(v, secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [_mask(v, secrets) for v in value]
    return value
