"""The plan cache: a plan that checked without errors is kept under `.planrun/plans/`, so that
running or validating it again skips reading YAML, pydantic validation and expression parsing.

The key is SHA-256 over everything `validate.check_document` depends on. The audit of it and of
what it calls (schema_errors, plan_variables, builtin_args, conditions, expressions, fanout,
graph, suggest, tools):

* the plan file's bytes, and its name as given: the default plan name and the file of every
  diagnostic come from it;
* the NAMES of the variables given with --var / --vars-file: the check reads only the set of
  names (undefined and reserved names, `secrets:` entries). Their values are never read by the
  check, never in the key and never stored;
* the servers from --mcp-config, their content: the names decide "unknown MCP server", the
  entries are validated into the plan;
* planrun's code: the path, size and mtime_ns of every .py file of the planrun package that is
  imported, so two trees (say worktrees on PYTHONPATH) never read each other's entries, and
  Python's version;
* the libraries the check runs: pydantic and pydantic_core (the schema), PyYAML (the loader),
  jinja2 (expressions that are not plain references are parsed by it, and its filters and tests
  are the known ones): path, size and mtime_ns of each package's __init__.py, found without
  importing it. (wcmatch, which matches a step's `outputs` against its `sources` for the
  overlap warning and expands braces against its limit of 1000 patterns, is not in the key:
  looking it up would cost every run for what only an upgrade that changed its matching or
  its limit could make stale, a warning or a pattern that must be split);
* PLANRUN_NO_FAST_YAML, the loader's one switch (both readers give the same data by design);
* this user's secret (planrun/usersecret.py), first: everything above can be known on another
  machine with the same install, so an entry made there and shipped in a repository's
  `.planrun/plans/` would otherwise be a hit here, and the plan it holds (its `approval` and
  `policy` removed, its commands changed) would run instead of the file the user reads.
  Without a secret (no usable home directory) the plan cache is off.

Nothing else is read by the check: no other file, no other environment variable, not the
working directory, not the clock. `env.X` in an expression is only a name to it; the environment
is read when a run starts. Dotenv files are read after the check (by `validate`, and when a run
starts), never cached.

Not stored: a plan with errors (warnings are stored and printed again on a hit), inline text
(MCP), a plan whose own `variables:` give a value to a name in `secrets:` (the value would be
on disk in clear), and the server entries that came from --mcp-config (they can hold expanded
environment variables; on a hit they are merged in again from the config, as on a miss).

An entry is small JSON: the runtime plan (`to_dict(exclude_defaults=True, exact=True)`: no
default values, infinity and NaN kept), the diagnostics, and last the plan's digest (what
`run.started` reports, planrun/plan/digest.py) sealed with this user's secret over every byte
of the entry before it, so that a hit does not dump the whole plan again to work it out, and
an edited entry's digest is never believed (it is worked out again from the plan the entry
holds). A hit builds
the plan back without PyYAML, pydantic or jinja2; its Document is lazy (loader.LazyDocument):
the file's bytes, already read for the key, are parsed only if a position is asked for.

Files are handled as the state files are (planrun/state/files.py): `.planrun/` and
`.planrun/plans/` must not be symbolic links, entries are opened with O_NOFOLLOW|O_NONBLOCK and
must be regular files of the current user, and are written through an O_EXCL temporary file and
a rename. Anything wrong with an entry (corrupt, truncated, foreign, another format, a FIFO, a
link) is a miss, silently; an unwritable `.planrun/` means no caching. At most MAX_ENTRIES are
kept, the newest by mtime (pruned on write). PLANRUN_NO_PLAN_CACHE=1 turns the cache off.
"""

from __future__ import annotations

# Lazy imports (inside functions), for start-up time: validation (pydantic) only on a miss; the
# rest only where used.
import contextlib
import hashlib
import json
import os
import stat
import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from planrun.errors import Diagnostic
from planrun.plan.checked import CheckedPlan
from planrun.plan.digest import seal
from planrun.plan.loader import LazyDocument, load_bytes, read_plan
from planrun.usersecret import user_secret

if TYPE_CHECKING:
    from planrun.plan.definition import Plan

ENV_OFF = "PLANRUN_NO_PLAN_CACHE"
FORMAT = 2  # bump when an entry's shape or the plan's dict form changes
MAX_ENTRIES = 64
MAX_ENTRY_BYTES = 64 << 20
_DEPENDENCIES = ("pydantic", "pydantic_core", "yaml", "jinja2")
_STALE_TEMP_NS = 600 * 10**9  # a temporary file a killed writer left behind

_fingerprint: str | None = None


def enabled() -> bool:
    return os.environ.get(ENV_OFF, "") in ("", "0")


def check_plan_file(
    path: str,
    variables: Mapping[str, Any] | None = None,
    servers: Mapping[str, Any] | None = None,
    *,
    file: str | None = None,
    cwd: str | None = None,
    cache: bool = True,
) -> CheckedPlan:
    """The checked plan in `path` (errors included, as validate.load_and_check gives it),
    from the plan cache under `cwd` when it is there.

    `file` is the name diagnostics use (default `path`); `servers` come from --mcp-config.
    Raises UsageError/PlanInvalid as the loader does for a file that cannot be read or parsed.
    """
    file = path if file is None else file
    raw = read_plan(path, file)
    secret = user_secret() if cache and enabled() else None
    if secret is None:  # off, or no secret to key entries with: no entry is read or written
        return _check(raw, file, variables, servers)
    key = plan_key(raw, file, variables or {}, servers, secret)
    store = PlanStore(os.path.join(cwd or os.getcwd(), ".planrun"))
    hit = store.get(key)
    if hit is not None:
        found = _decode(hit, key, servers, secret)
        if found is not None:
            plan, diagnostics, stored = found
            doc = LazyDocument(file, lambda: load_bytes(raw, file))
            return CheckedPlan(plan, diagnostics, doc, stored)
    checked = _check(raw, file, variables, servers)
    blob = _encode(checked, key, secret, servers)
    if blob is not None:
        store.put(key, blob)
    return checked


def _check(
    raw: bytes,
    file: str,
    variables: Mapping[str, Any] | None,
    servers: Mapping[str, Any] | None,
) -> CheckedPlan:
    from planrun.plan.validate import check_document

    doc = load_bytes(raw, file)  # named as the user gave it (its errors too), not by full path
    return check_document(doc, variables, servers)


# ---- the key -------------------------------------------------------------------------------


def plan_key(
    raw: bytes,
    file: str,
    variables: Mapping[str, Any],
    servers: Mapping[str, Any] | None,
    secret: bytes = b"",
) -> str:
    """SHA-256 (hex) over everything the check of this plan depends on (see the module doc),
    keyed with this user's secret (planrun.usersecret)."""
    head = {
        "format": FORMAT,
        "code": code_fingerprint(),
        "file": file,
        "variables": sorted(str(name) for name in variables),  # names only
        "servers": _server_data(servers),
        "fast_yaml": os.environ.get("PLANRUN_NO_FAST_YAML"),
    }
    h = hashlib.sha256(secret)
    h.update(json.dumps(head, sort_keys=True, default=repr).encode("utf-8", "replace"))
    h.update(b"\0")
    h.update(raw)
    return h.hexdigest()


def code_fingerprint() -> str:
    """planrun's modules and the checking libraries (path, size, mtime_ns) and Python's
    version, hashed once per process."""
    global _fingerprint
    if _fingerprint is None:
        import importlib.util

        parts: list[Any] = [sys.version, sys.implementation.cache_tag]
        package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        parts.append(package)
        parts.extend(_modules(package, ""))
        for name in _DEPENDENCIES:
            spec = importlib.util.find_spec(name)
            origin = spec.origin if spec is not None else None
            parts.append([name, origin, _stat_of(origin) if origin else None])
        _fingerprint = hashlib.sha256(json.dumps(parts).encode("utf-8", "replace")).hexdigest()
    return _fingerprint


def _modules(directory: str, prefix: str) -> list[list[Any]]:
    """[relative path, size, mtime_ns] of every .py file below `directory`, sorted."""
    found: list[list[Any]] = []
    with os.scandir(directory) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False) and entry.name != "__pycache__":
                found.extend(_modules(entry.path, f"{prefix}{entry.name}/"))
            elif entry.name.endswith(".py"):
                st = entry.stat()
                found.append([prefix + entry.name, st.st_size, st.st_mtime_ns])
    return sorted(found)


def _stat_of(path: str) -> list[int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns]


# ---- entries -------------------------------------------------------------------------------


def _encode(
    checked: CheckedPlan, key: str, secret: bytes, servers: Mapping[str, Any] | None = None
) -> bytes | None:
    """The entry for a plan that checked without errors; None if it must not be stored."""
    plan = checked.plan
    if plan is None or not checked.ok or set(plan.secrets) & set(plan.variables):
        return None
    # Without defaults: 6x smaller, a 1,000-step plan loads 3x faster. exact: `.inf` stays
    # infinity (JSON mode's null would change what a hit runs).
    data = plan.to_dict(exclude_defaults=True, exact=True)
    # Servers from --mcp-config are merged in again on a hit: only the plan's own are stored.
    own = checked.doc.data.get("servers")
    own_names = set(own) if isinstance(own, dict) else set()
    data["servers"] = {n: e for n, e in data.get("servers", {}).items() if n in own_names}
    entry: dict[str, Any] = {
        "planrun_plan_cache": FORMAT,
        "key": key,
        "plan": data,
        "diagnostics": [
            [d.file, d.line, d.col, d.severity, d.message, d.hint] for d in checked.diagnostics
        ],
    }
    try:
        blob = json.dumps(entry, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        if not servers:  # (with --mcp-config's servers merged in, a hit works it out again)
            digest = checked.digest()  # the run about to start takes it from here too
            blob = blob[:-1] + _digest_tail(digest, seal(secret, key, digest, blob[:-1]))
    except (TypeError, ValueError, UnicodeEncodeError):  # a value JSON cannot hold: not cached
        return None
    return blob if len(blob) <= MAX_ENTRY_BYTES else None


def _digest_tail(digest: str, tag: str) -> bytes:
    """The entry's last member, the digest and its seal over every byte before it."""
    return f',"digest":["{digest}","{tag}"]}}'.encode()


def _decode(
    blob: bytes, key: str, servers: Mapping[str, Any] | None, secret: bytes = b""
) -> tuple[Plan, list[Diagnostic], Callable[[], str | None] | None] | None:
    """The plan, diagnostics and stored digest of an entry, or None for anything but a
    well-formed entry of this key (a cache is never an error). The plan's digest is taken from
    the entry only if its seal matches the entry's bytes, checked when a run first asks for it."""
    try:
        entry = json.loads(blob)
        if entry["planrun_plan_cache"] != FORMAT or entry["key"] != key:
            return None
        diagnostics = []
        for file, line, col, severity, message, hint in entry["diagnostics"]:
            if severity != "warning":
                return None
            diagnostics.append(
                Diagnostic(str(file), int(line), int(col), severity, str(message), hint)
            )
        data = entry["plan"]
        stored = entry.get("digest") if not servers else None
        data["servers"] = {**_server_data(servers), **data["servers"]}  # the plan's own win
        from planrun.plan.definition import Plan

        plan = Plan.from_dict(data)
    except Exception:  # noqa: BLE001 - whatever is wrong with it, it is a miss
        return None
    if stored is None:
        return plan, diagnostics, None
    return plan, diagnostics, lambda: _stored_digest(blob, stored, key, secret)


def _stored_digest(blob: bytes, stored: Any, key: str, secret: bytes) -> str | None:
    """The entry's digest of its plan (`stored`, the entry's "digest"), if it is sealed with
    this user's secret over the entry's bytes as written; None otherwise (then the run works
    it out)."""
    if not (isinstance(stored, list) and len(stored) == 2 and secret):
        return None
    digest, tag = stored
    if not (isinstance(digest, str) and isinstance(tag, str)):
        return None
    tail = _digest_tail(digest, tag)
    if not blob.endswith(tail):  # not as written: edited
        return None
    import hmac

    expected = seal(secret, key, digest, blob[: -len(tail)])
    return digest if hmac.compare_digest(expected, tag) else None


def _server_data(servers: Mapping[str, Any] | None) -> dict[str, Any]:
    """--mcp-config's servers (ServerEntry objects, or raw entries) as plain data."""
    return {n: e.to_dict() if hasattr(e, "to_dict") else e for n, e in (servers or {}).items()}


# ---- the store -----------------------------------------------------------------------------


class PlanStore:
    """`.planrun/plans/KEY.json` under a working directory."""

    def __init__(self, state_root: str) -> None:
        self.root = state_root
        self.dir = os.path.join(state_root, "plans")

    def _dirs_safe(self) -> bool:
        """Both directories exist and neither is a symbolic link (or anything but a directory)."""
        for d in (self.root, self.dir):
            try:
                if not stat.S_ISDIR(os.lstat(d).st_mode):
                    return False
            except OSError:
                return False
        return True

    def get(self, key: str) -> bytes | None:
        """The bytes of the entry for `key`: a regular file of this user, else None."""
        if not self._dirs_safe():
            return None
        from planrun.cache.safeio import read_regular_stat

        path = os.path.join(self.dir, f"{key}.json")
        try:
            data, st = read_regular_stat(path, MAX_ENTRY_BYTES, flags=os.O_NOFOLLOW)
        except OSError:  # missing, a link, a FIFO, too large, unreadable: a miss
            return None
        return data if st.st_uid == os.geteuid() else None

    def put(self, key: str, blob: bytes) -> None:
        """Write the entry atomically and prune; failing to write only costs speed."""
        try:
            for d in (self.root, self.dir):
                with contextlib.suppress(FileExistsError):
                    os.mkdir(d, 0o700)
                if not stat.S_ISDIR(os.lstat(d).st_mode):  # never through a link
                    return
            from planrun.atomicwrite import atomic_write

            atomic_write(os.path.join(self.dir, f"{key}.json"), blob, 0o600)
            self.prune()
        except OSError:  # read-only, full, not ours: no caching
            return

    def prune(self, keep: int = MAX_ENTRIES) -> None:
        """Keep the newest `keep` entries; remove temporary files a killed writer left."""
        entries: list[tuple[int, str]] = []
        stale_before = None
        with os.scandir(self.dir) as it:
            for e in it:
                try:
                    mtime = e.stat(follow_symlinks=False).st_mtime_ns
                except OSError:
                    continue
                if e.name.endswith(".json"):
                    entries.append((mtime, e.path))
                elif e.name.endswith(".tmp"):
                    if stale_before is None:
                        import time

                        stale_before = time.time_ns() - _STALE_TEMP_NS
                    if mtime < stale_before:
                        with contextlib.suppress(OSError):
                            os.unlink(e.path)
        entries.sort(reverse=True)
        for _, path in entries[keep:]:
            with contextlib.suppress(OSError):
                os.unlink(path)
