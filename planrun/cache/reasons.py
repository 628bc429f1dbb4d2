"""Why a cached step runs: one short reason, found by comparing with its most recent entry."""

from __future__ import annotations

from typing import Any

from planrun.cache import NO_ENTRY
from planrun.cache.keys import Material, first_difference
from planrun.cache.store import MAX_ENTRY_BYTES, CacheStore, CorruptCache, is_key
from planrun.errors import one_line
from planrun.untrusted_json import loads


def _more(names: list[str]) -> str:
    # A file name may hold a newline, an escape sequence or undecodable bytes (surrogates):
    # the reason is one printable line on the console, in events and in the dry-run.
    return one_line(names[0]) + (f" (+{len(names) - 1} more)" if len(names) > 1 else "")


def miss_reason(store: CacheStore, previous_key: str | None, material: Material) -> str:
    """`args changed`, `upstream changed: X`, `sources changed: P (+N more)` or `no cache entry`."""
    # `.planrun/cache-recent.json` may come with a repository: only a SHA-256 names an entry
    # (`../x` or a NUL would name a file elsewhere, or none). Checked here, on a miss only.
    if previous_key is None or not is_key(previous_key):
        return NO_ENTRY
    entry = store.get(previous_key, quiet=True)
    if entry is None:
        return NO_ENTRY
    old: dict[str, Any] = entry.material
    if old.get("args") != material.args:
        return "args changed"
    old_up = old.get("upstream")
    if isinstance(old_up, dict):
        changed = [d for d in material.upstream if old_up.get(d) != material.upstream[d]]
        changed += sorted(d for d in old_up if d not in material.upstream)
        if changed:
            return f"upstream changed: {_more(changed)}"
    if old.get("sources_digest") != material.sources_digest():
        paths = _changed_paths(store, old.get("sources"), material.sources)
        return f"sources changed: {_more(paths)}" if paths else "sources changed"
    if old.get("env") != material.env:  # a name the plan gives steps, set in the environment
        return "args changed"
    return NO_ENTRY


def _changed_paths(store: CacheStore, blob: Any, now: dict[str, str]) -> list[str]:
    if not isinstance(blob, str):
        return []
    try:
        # (bounded: anyone sharing the directory may have put any file under that name)
        old = loads(store.read_blob(blob, MAX_ENTRY_BYTES))
        before = {str(p): str(h) for p, h in old}
    except (CorruptCache, ValueError, TypeError):
        return []
    return first_difference(before, now)
