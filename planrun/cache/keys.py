"""A cached step's key: SHA-256 over everything that decides its result (the list below).

The material is kept apart (args, env, upstream, sources) so that a miss can say which part
changed; the key is the hash of all of it plus planrun's cache format.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

CACHE_FORMAT = 3  # bump when the key or the entry layout changes: old entries stop matching
_ENV_READ = r"\benv\s*(?:\.\s*([A-Za-z_]\w*)|\[\s*(['\"])(.*?)\2\s*\])"  # compiled on first use (re's cache), not at import
ALL_ENV = "*"


def canonical(value: Any) -> bytes:
    """A stable byte form of a JSON-like value (sorted keys, no whitespace)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return text.encode("utf-8", "surrogatepass")


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


Seal = Callable[[bytes], str]  # how a step's key material is digested: sha256_hex, or keyed


def digest_value(value: Any, seal: Seal = sha256_hex) -> str:
    return seal(canonical(value))


def sources_part(sources: Mapping[str, str]) -> str:
    """The digest of a walk's files: their sorted paths, each with its content's SHA-256."""
    text = "\n".join([f"{p}\0{sources[p]}" for p in sorted(sources)])
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class Material:
    """What a key is made of, part by part.

    The source files enter the key as one digest (`part`, see sources_part), so that a run
    whose walk found exactly the files and stats of an earlier one can reuse that digest
    without looking at each file's hash (planrun.cache.statcache); their path -> hash map is
    made on demand (`load`), which only a miss needs (reasons, the stored manifest)."""

    __slots__ = ("args", "upstream", "part", "dotenv", "env", "seal", "_files", "_load")

    def __init__(
        self,
        args: str,  # digest of tool, resolved args, declared sources/outputs and env values read
        upstream: dict[str, str] | None = None,  # dep id -> its key or result digest
        files: dict[str, str] | None = None,  # the walk's files: path -> content sha256
        *,
        part: str | None = None,  # sources_part(files), when known without them
        dotenv: dict[str, str] | None = None,  # dotenv file -> content sha256 or "absent"
        load: Callable[[], dict[str, str]] | None = None,  # makes `files` when not given
        env: str = "",  # digest of the effective values of the names the plan provides
        seal: Seal = sha256_hex,  # keyed (planrun.cache.sealing) when a secret is part of it
    ) -> None:
        self.args = args
        self.upstream = upstream if upstream is not None else {}
        self.dotenv = dotenv if dotenv is not None else {}
        self.env, self.seal = env, seal
        self._files = files
        self._load = load
        self.part = part if part is not None else sources_part(self.files)

    @property
    def files(self) -> dict[str, str]:
        if self._files is None:
            self._files = self._load() if self._load is not None else {}
        return self._files

    @property
    def sources(self) -> dict[str, str]:
        """Every file in the key with its content hash: the walk's files and the dotenv files."""
        return {**self.files, **self.dotenv}

    def key(self) -> str:
        parts = [f"planrun-cache/{CACHE_FORMAT}", self.args]
        parts += [f"u {d}\0{self.upstream[d]}" for d in sorted(self.upstream)]
        parts.append(f"s {self.part}")
        parts += [f"d {p}\0{self.dotenv[p]}" for p in sorted(self.dotenv)]
        parts.append(f"e {self.env}")
        return self.seal("\n".join(parts).encode("utf-8", "surrogatepass"))

    def sources_digest(self) -> str:
        return digest_value(sorted(self.sources.items()), self.seal)


def env_names(texts: Iterable[str]) -> set[str]:
    """The `env` names read by expressions (`env.X`, `env['X']`); ALL_ENV when read otherwise."""
    names: set[str] = set()
    for text in texts:
        reads = list(re.finditer(_ENV_READ, text))
        found = {m.group(1) or m.group(3) for m in reads}
        if len(re.findall(r"\benv\b", text)) > len(reads):
            found.add(ALL_ENV)  # `env | tojson`, env[name]: the whole environment is read
        if "get" in found:  # rare: only then is the text looked at again
            _env_gets(text, found)
        names |= found
    return names


def _env_gets(text: str, names: set[str]) -> None:
    """`env.get('X')` reads X (not a variable named `get`); `env.get(name)` reads any."""
    calls = len(re.findall(r"\benv\s*\.\s*get\s*\(", text))
    literal = re.findall(r"\benv\s*\.\s*get\s*\(\s*(['\"])(.*?)\1", text)
    names.update(name for _quote, name in literal)
    if calls > len(literal):
        names.add(ALL_ENV)
    if calls and not re.search(r"\benv\s*\.\s*get\b(?!\s*\()", text):
        names.discard("get")  # every `env.get` here is a call


def env_read(env: Mapping[str, str], names: set[str]) -> dict[str, str | None]:
    """The values of the `env` names a step's args read (all of them for ALL_ENV)."""
    if ALL_ENV in names:
        return dict(env)
    return {n: env.get(n) for n in sorted(names)}


def provided_env(
    provided: Iterable[str], env: Mapping[str, str], args: Any
) -> dict[str, str | None]:
    """The effective value of each name the plan gives every step's environment (its dotenv
    files; a plan-level `env:` would join them), after the process environment (`env`)
    overrode it: a name the step's own `args.env` sets is in its args already."""
    own = args.get("env") if isinstance(args, dict) else None
    mine = own if isinstance(own, dict) else {}
    return {n: env.get(n) for n in sorted(set(provided)) if n not in mine}


def first_difference(old: Mapping[str, str], new: Mapping[str, str]) -> list[str]:
    """Names whose values differ (added, removed or changed), sorted."""
    return sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
