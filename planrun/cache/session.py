"""One run's use of the cache: decide hit or miss before a step, store after it succeeds.

The scheduler calls `before_local` (which restores outputs on a hit; then `ask_remote` for a
miss the remote may have) and `after` (which stores a successful run, or names a declared output
that was not produced), and `close` once at the end.
"""

from __future__ import annotations

# Lazy imports (inside functions), for start-up time: the reasons of a miss only when a step
# misses.
import asyncio
import contextlib
import json
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from planrun.atomicwrite import atomic_write
from planrun.cache import CACHED, FORCED, NO_ENTRY, OFF, step_cached
from planrun.cache.globs import compile_patterns, file_stat, match_stats
from planrun.cache.keys import (
    Material,
    Seal,
    canonical,
    digest_value,
    env_names,
    env_read,
    provided_env,
    sha256_hex,
)
from planrun.cache.listings import Listings
from planrun.cache.outputs import (
    Collected,
    OutputMissing,
    collect_outputs,
    covered,
    foreign_output,
    linked_part,
    outputs_to_restore,
    restore_outputs,
    snapshot,
)
from planrun.cache.restoretmp import RestoreTemp
from planrun.cache.safeio import read_regular
from planrun.cache.siblings import Siblings
from planrun.cache.statcache import StatRecords
from planrun.cache.store import CacheStore, CorruptCache, Entry, write_problem
from planrun.errors import one_line
from planrun.plan.instances import parent_of
from planrun.run.events import StepCached
from planrun.run.stepcall import call_template
from planrun.text import os_cause
from planrun.untrusted_json import loads

if TYPE_CHECKING:
    from planrun.cache.remote import RemoteCache, RemoteOptions
    from planrun.plan.definition import Step

ENV_DIR = "PLANRUN_CACHE_DIR"


class CacheOptions:
    """The run's cache flags: --no-cache, --cache-dir, --force [ID], --explain."""

    __slots__ = ("enabled", "directory", "force_all", "force", "explain", "remote")

    def __init__(
        self,
        enabled: bool = True,
        directory: str | None = None,
        force_all: bool = False,
        force: frozenset[str] = frozenset(),
        explain: bool = False,
        remote: RemoteOptions | None = None,
    ) -> None:
        self.enabled, self.directory, self.force_all = enabled, directory, force_all
        self.force, self.explain, self.remote = force, explain, remote

    def forced(self, sid: str) -> bool:
        """`--force`, or `--force ID` naming this step, this instance or its foreach step."""
        if self.force_all:
            return True
        return bool(self.force) and (sid in self.force or parent_of(sid) in self.force)


class Decision:
    """hit (the step does not run), miss (it runs, then is stored) or off; and why."""

    __slots__ = ("status", "reason", "key", "entry", "material", "source")

    def __init__(
        self,
        status: str,
        reason: str,
        key: str | None = None,
        entry: Entry | None = None,
        material: Material | None = None,
    ) -> None:
        self.status, self.reason, self.key = status, reason, key
        self.entry, self.material = entry, material
        self.source = "local"  # where a hit came from: local or remote


class Upstream:
    """A dependency as the cache sees it: its id, status, result and, when the cache keyed
    it (it ran, hit, or was kept by a resume from a run that keyed it), its key."""

    __slots__ = ("id", "status", "result", "key")

    def __init__(self, id: str, status: str, result: Any, key: str | None = None) -> None:
        self.id, self.status, self.result, self.key = id, status, result, key


def cache_directory(cwd: str, given: str | None) -> str:
    """--cache-dir, else $PLANRUN_CACHE_DIR, else .planrun/cache (relative to `cwd`)."""
    path = given or os.environ.get(ENV_DIR) or os.path.join(".planrun", "cache")
    return os.path.normpath(os.path.join(cwd, path))


def linked_place(cwd: str, given: str | None) -> str | None:
    """`.planrun`, or the default cache directory `.planrun/cache`, when it is a symbolic link
    (a repository can ship either pointing anywhere): writing through it would write outside
    the working directory. A directory the user names (--cache-dir, $PLANRUN_CACHE_DIR) may
    be a link; the stat records and listings still live in `.planrun`."""
    places = [".planrun"]
    if not (given or os.environ.get(ENV_DIR)):
        places.append(os.path.join(".planrun", "cache"))
    return next((p for p in places if os.path.islink(os.path.join(cwd, p))), None)


def _step_texts(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        if "${" in value:
            yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _step_texts(v)
    elif isinstance(value, list):
        for v in value:
            yield from _step_texts(v)


def _written(step: Step, server: dict[str, Any] | None) -> list[Any]:
    """What the step's tool call is made of, as written: its args (a `run` step's scripts),
    `env` and `cwd`, and for a `SERVER.TOOL` the entry of that server (its command, args,
    env, url...: another server is another tool)."""
    written = [call_template(step), step.env, step.cwd]
    return written if server is None else [*written, server]


class CacheSession:
    """The cache for one run (or dry-run) of one plan in one working directory."""

    def __init__(
        self,
        options: CacheOptions,
        plan_name: str,
        cwd: str,
        env: dict[str, str],
        warn: Callable[[str], None],
        secret_values: Callable[[], list[str]] = list,
        dotenv: Sequence[str] = (),
        dry_run: bool = False,
        shared: frozenset[str] = frozenset(),
        provided: Iterable[str] = (),  # names the plan puts in every step's environment
        secret_names: Sequence[str] = (),  # the plan's `secrets:`
        servers: Mapping[str, dict[str, Any]] | None = None,  # the plan's, as written
    ) -> None:
        self.options, self.plan_name, self.cwd, self.env = options, plan_name, cwd, env
        self.warn, self.secret_values, self.dotenv = warn, secret_values, dotenv
        self.dry_run, self.provided, self.secret_names = dry_run, tuple(provided), secret_names
        self.servers = servers or {}
        self._keyed: Seal | None = None
        self.shared = shared  # foreach steps whose instances share their `outputs` patterns
        self.siblings = Siblings()
        self.temp = RestoreTemp(cwd)
        self.remote: RemoteCache | None = None  # set by the run when it has a remote
        self.keys: dict[str, str] = {}  # steps done this run -> their key
        self._pending: dict[str, Decision] = {}
        self._changed: dict[str, str] = {}  # step -> its newest key, to save
        self._made: dict[str, Entry] = {}  # step -> the entry its run just stored, to upload
        self.root = cache_directory(cwd, options.directory)
        inside = os.path.relpath(self.root, cwd).replace(os.sep, "/")
        self._own = [] if inside == ".." or inside.startswith("../") else [inside]
        self.store = CacheStore(self.root, warn)
        state_dir = os.path.join(cwd, ".planrun")
        self.records = StatRecords.load(os.path.join(state_dir, "stat-records"))
        self.listings = Listings.load(os.path.join(state_dir, "listings"))
        self._recent_path = os.path.join(state_dir, "cache-recent.json")
        self._recent: dict[str, Any] = _read_json(self._recent_path)

    # ---- decisions -------------------------------------------------------------------------

    def material(self, step: Step, args: Any, upstream: Sequence[Upstream]) -> Material:
        """Everything the key of `step` covers, with its source files hashed (stat first)."""
        patterns = tuple(step.sources or ())
        found = self._walk(patterns)
        part, files = self.records.walk_digest(self.cwd, found)
        outputs = tuple(step.outputs or ())
        server = self._server(step)
        read = env_read(self.env, env_names(_step_texts(_written(step, server))))
        given = provided_env(self.provided, self.env, args)  # dotenv names, as overridden
        results = [u.result for u in upstream if u.key is None and u.id not in self.keys]
        probe = [args, patterns, outputs, read, given, results, list(found), server]
        seal = self._seal(step, probe)
        dotenv = self._dotenv_digests(seal)
        up = {
            u.id: self.keys.get(u.id)
            or u.key
            or digest_value(["succeeded" if u.status == "cached" else u.status, u.result], seal)
            for u in upstream
        }
        tool: list[Any] = [step.tool, args, list(patterns), list(outputs), read]
        digest = digest_value(tool if server is None else [*tool, server], seal)
        kw: dict[str, Any] = {"part": part, "dotenv": dotenv, "seal": seal}
        kw["env"] = digest_value(given, seal) if given else ""
        if files is None:  # remembered: the per-file map is made only if a miss needs it
            return Material(digest, up, load=lambda: self.records.digests_of(self.cwd, found), **kw)
        return Material(digest, up, files, **kw)

    def _server(self, step: Step) -> dict[str, Any] | None:
        """The entry of the server a `SERVER.TOOL` step calls (None for a built-in tool)."""
        name, dot, _tool = (step.tool or "").partition(".")
        return self.servers.get(name) if dot else None

    def _walk(self, patterns: tuple[str, ...]) -> dict[str, os.stat_result]:
        """The files the `sources` patterns match now, with their stats."""
        if not patterns:
            return {}
        return match_stats(self.cwd, compile_patterns(patterns), [self.root], self.listings.names)

    def _dotenv_digests(self, seal: Seal) -> dict[str, str]:
        """Each dotenv file -> its content's digest ("absent" when it cannot be read): they
        reach every step's environment."""
        dotenv: dict[str, str] = {}
        for name in self.dotenv:
            path = name.rstrip("?")
            try:
                dotenv[path] = seal(
                    self.records.digest(self.cwd, file_stat(self.cwd, path)).encode()
                )
            except OSError:
                dotenv[path] = "absent"
        return dotenv

    def _changed_while_running(
        self, step: Step, material: Material, produced: set[str]
    ) -> str | None:
        """A source or dotenv file whose bytes are not those the key was made of (edited while
        the step ran), None when all are. Outputs that are also sources are left out: the step
        wrote them (the overlap has its own warning)."""
        dotenv = self._dotenv_digests(material.seal)
        changed = [p for p in sorted(dotenv) if dotenv[p] != material.dotenv.get(p)]
        if changed:
            return changed[0]
        found = self._walk(tuple(step.sources or ()))
        part, files = self.records.walk_digest(self.cwd, found)
        if part == material.part:
            return None
        now = files if files is not None else self.records.digests_of(self.cwd, found)
        before = material.files
        names = sorted(p for p in set(before) | set(now) if p not in produced)
        changed = [p for p in names if before.get(p) != now.get(p)]
        if changed:
            return changed[0]
        return None if produced else "a source"  # (produced: only the outputs it wrote differ)

    def _seal(self, step: Step, probe: list[Any]) -> Seal:
        """sha256_hex; keyed (planrun.cache.sealing) when a secret is in the step's key material."""
        forms = [v.encode("utf-8", "surrogatepass") for v in self._forms()]
        if not forms and not self.secret_names:
            return sha256_hex
        from planrun.cache.sealing import holds_secret, keyed_seal, material_key, names_secret

        written = _written(step, self._server(step))
        texts = _step_texts([written, list(step.sources or ()), list(step.outputs or ())])
        if not names_secret(texts, self.secret_names) and not holds_secret(canonical(probe), forms):
            return sha256_hex
        if self._keyed is None:
            self._keyed = keyed_seal(material_key())
        return self._keyed

    def _forms(self) -> list[str]:
        return [v for v in self.secret_values() if isinstance(v, str) and v]

    def decide(self, sid: str, step: Step, args: Any, upstream: Sequence[Upstream]) -> Decision:
        """Hit, miss or off for `step` with these resolved args; a hit restores its outputs."""
        if not self.options.enabled or not step_cached(step):
            return Decision("off", OFF)
        material = self.material(step, args, upstream)
        key = material.key()
        if self.options.forced(sid):
            decision = Decision("miss", FORCED, key, None, material)
        else:
            decision = self._lookup(sid, step, key, material)
        return self._decided(sid, step, decision)

    def _decided(self, sid: str, step: Step, decision: Decision) -> Decision:
        """Book a decision: a hit marks its entry used, a miss waits to be stored."""
        key = decision.key
        if decision.status == "hit" and not self.dry_run and key is not None:
            self.keys[sid] = key
            # Back to an entry other than the step's latest (an earlier state of its sources):
            # marked used now whatever its age, so that pruning keeps it before the entries
            # made since. A run that hits the latest entries again writes nothing.
            back = self.recent_key(sid) != key
            if back:
                self._changed[sid] = key  # (what _set_recent does, without a second lookup)
            self.store.touch(key, now=back)
        else:
            self._pending[sid] = decision
            parent = self._shared_parent(sid)
            if parent is not None and not self.dry_run and decision.status == "miss":
                before = snapshot(self.cwd, list(step.outputs or ()), [self.root])
                self.siblings.started(parent, sid, before)
        return decision

    def _shared_parent(self, sid: str) -> str | None:
        parent = parent_of(sid)
        return parent if parent is not None and parent in self.shared else None

    def _lookup(self, sid: str, step: Step, key: str, material: Material) -> Decision:
        entry = self.store.get(key)
        if entry is not None:
            return self._hit(sid, step, entry, material)
        from planrun.cache.reasons import miss_reason  # only a miss needs it

        reason = miss_reason(self.store, self.recent_key(sid), material)
        return Decision("miss", reason, key, None, material)

    def _hit(
        self,
        sid: str,
        step: Step,
        entry: Entry,
        material: Material,
        held: Mapping[str, bytes] | None = None,
    ) -> Decision:
        """A hit on `entry` (its outputs restored), or a miss when they cannot be. `held`:
        blob bytes in hand, verified already (restore_outputs)."""
        key = entry.key
        try:
            self._restore(sid, step, entry, held)
            return Decision("hit", CACHED, key, entry, material)
        except CorruptCache as exc:
            self.warn(f"step '{sid}': cache entry {key[:12]} not usable ({exc}): running it")
            return Decision("miss", NO_ENTRY, key, None, material)

    def _restore(
        self, sid: str, step: Step, entry: Entry, held: Mapping[str, bytes] | None = None
    ) -> None:
        """Put a hit's outputs back where missing or different: only paths the step's own
        `outputs` match, never through a link (CorruptCache before anything is written)."""
        foreign = foreign_output(entry.outputs, list(step.outputs or ()), self._own)
        if foreign is not None:
            raise CorruptCache(f"it names {one_line(foreign)!r}, not one of the step's outputs")
        todo = outputs_to_restore(self.cwd, entry.outputs, self.records)
        checked: set[str] = set()
        for o, _ in todo:
            link = linked_part(self.cwd, o.path, checked)
            if link is not None:
                raise CorruptCache(
                    f"cannot restore {one_line(o.path)}: a symbolic link is in the way ({link})"
                )
        if self.dry_run:
            return
        parent = self._shared_parent(sid)
        if parent is not None:  # a sibling's files are its own (planrun.cache.siblings)
            left = {t[0].path for t in todo}
            todo = [t for t in todo if self.siblings.writable(parent, sid, self.cwd, t[0].path)]
            left.difference_update(t[0].path for t in todo)  # not written: a sibling's
            self.siblings.claim(parent, sid, [o.path for o in entry.outputs if o.path not in left])
        if todo:
            restore_outputs(self.cwd, self.store, todo, self.records, self.temp, held)

    def before_local(
        self, sid: str, step: Step, args: Any, upstream: Mapping[str, Any]
    ) -> Decision:
        """Hit or miss from the local store alone (the scheduler then asks the remote, when
        `asks_remote`, with `ask_remote`). In the event loop's own thread: with its stat records
        a lookup costs microseconds per file, less than handing it to a worker thread (which,
        on a busy machine, waits for a time slice). Only a cold run reads files here.

        `upstream`: the step's dependencies' records (anything with `status` and `result`)."""
        if not self.options.enabled or not step_cached(step):
            return Decision("off", OFF)
        deps = [
            Upstream(d, str(r.status), r.result, getattr(r, "cache_key", None))
            for d, r in upstream.items()
        ]
        return self.decide(sid, step, args, deps)

    def asks_remote(self, decision: Decision) -> bool:
        """Whether the remote is to be asked for this local miss (not for a forced step)."""
        remote = self.remote
        return not (
            remote is None
            or remote.down
            or self.dry_run
            or decision.status != "miss"
            or decision.reason == FORCED
            or decision.key is None
        )

    async def ask_remote(self, sid: str, step: Step, decision: Decision) -> Decision:
        """A local miss asked of the remote: what it has is brought into the local store and
        then taken as any local entry is (every rule of a hit holds); else the miss."""
        assert self.remote is not None and decision.key is not None
        assert decision.material is not None
        fetched = await self.remote.fetch(decision.key)  # now in the local store too
        if fetched is None:
            return decision
        entry, held = fetched
        parent = self._shared_parent(sid)
        if parent is not None:  # not a running instance after all: its siblings may store
            self.siblings.not_running(parent, sid)
        found = self._hit(sid, step, entry, decision.material, held)
        if found.status != "hit":
            return decision
        found.source = "remote"
        self._pending.pop(sid, None)
        return self._decided(sid, step, found)

    # ---- after a successful run ------------------------------------------------------------

    def stores(self, sid: str) -> bool:
        """Whether a run of `sid` is to be stored (it was looked up: a miss)."""
        return sid in self._pending

    async def after(self, sid: str, step: Step, result: Any, secret: bool = False) -> str | None:
        """Store a successful run; returns an error when a declared output was not produced.
        `secret`: the result is bound to a secret variable (it is then not stored)."""
        decision = self._pending.pop(sid, None)
        if decision is None or decision.key is None or decision.material is None:
            return None
        error = await asyncio.to_thread(self._store, sid, step, result, decision, secret)
        made = self._made.pop(sid, None)
        remote = self.remote
        if error is None and remote is not None and made is not None:
            await remote.upload(made)
        return error

    def _store(
        self, sid: str, step: Step, result: Any, decision: Decision, secret: bool = False
    ) -> str | None:
        assert decision.key is not None and decision.material is not None
        parent = self._shared_parent(sid)
        keep = None
        if parent is not None:  # which of the matched files are its own (planrun.cache.siblings)
            now = snapshot(self.cwd, list(step.outputs or ()), [self.root])
            keep = self.siblings.keeper(parent, sid, now)
        try:
            collected = collect_outputs(
                self.cwd, list(step.outputs or ()), [self.root], self.records, keep, self._own
            )
        except OutputMissing as exc:
            return str(exc)
        except OSError as exc:
            where = f" {exc.filename}," if exc.filename else ""
            return f"cannot read{where} an output of step '{sid}': {os_cause(exc)}"
        self._warn_unstored(sid, collected.linked, "is behind a symbolic link")
        self._warn_unstored(sid, collected.owned, "is in planrun's own directory")
        overlap = self._warn_overlap(sid, step, collected)
        # What it made is not what the key's sources make: stored, it would come back once
        # they are what they were (and its dependents are keyed on its result, not its key).
        edited = self._changed_while_running(step, decision.material, set(overlap))
        if edited is not None:
            self.warn(
                f"step '{sid}': {one_line(edited)} changed while it ran: not stored in the cache"
            )
            return None
        self.keys[sid] = decision.key
        if secret or self._holds_secret(result, collected):
            self.warn(f"step '{sid}': result held a secret: not stored in the cache")
            return None
        if self._named_by_secret(o.path for o in collected.files):
            self.warn(f"step '{sid}': output name holds a secret: not stored in the cache")
            return None
        out = result if isinstance(result, dict) else {}
        try:
            for digest, data in collected.contents.items():
                self.store.put_blob(data, digest)
            for digest, path in collected.large.items():
                self.store.put_blob_file(path, digest)
            sources = decision.material.sources
            # A file name that holds a secret is never stored: the reasons then name no file.
            manifest = (
                None if self._named_by_secret(sources) else canonical(sorted(sources.items()))
            )
            made = Entry(
                key=decision.key,
                plan=self.plan_name,
                step=sid,
                result=result,
                exit=int(out.get("exit_code") or 0),
                stdout=str(out.get("stdout") or ""),
                stderr=str(out.get("stderr") or ""),
                outputs=collected.files,
                material={
                    "args": decision.material.args,
                    "upstream": decision.material.upstream,
                    "sources": None if manifest is None else self.store.put_blob(manifest),
                    "sources_digest": decision.material.sources_digest(),
                    "env": decision.material.env,
                },
                created=time.time(),
            )
            self.store.put(made)
        except OSError as exc:
            self.warn(f"step '{sid}': not stored in the cache: {write_problem(exc)}")
            return None
        except (TypeError, ValueError) as exc:
            self.warn(f"step '{sid}': not stored in the cache ({exc})")
            return None
        self._set_recent(sid, decision.key)
        self._made[sid] = made  # what the remote gets (the file is never read back for it)
        return None

    def _warn_overlap(self, sid: str, step: Step, collected: Collected) -> list[str]:
        """The outputs its own `sources` match too, with one warning when there are any."""
        if not step.sources:
            return []
        matcher = compile_patterns(tuple(step.sources))
        overlap = [o.path for o in collected.files if covered(matcher, o.path)]
        if overlap:
            self.warn(
                f"step '{sid}': its outputs are also its sources ({one_line(overlap[0])}"
                + (f" +{len(overlap) - 1} more" if len(overlap) > 1 else "")
                + "): it will not hit the cache"
            )
        return overlap

    def _warn_unstored(self, sid: str, paths: list[str], why: str) -> None:
        """One warning for the matched outputs `paths` that are not stored, and `why`."""
        if paths:
            more = f" (+{len(paths) - 1} more)" if len(paths) > 1 else ""
            self.warn(
                f"step '{sid}': output {one_line(paths[0])}{more} {why}: not stored in the cache"
            )

    def _named_by_secret(self, names: Iterable[str]) -> bool:
        forms = self._forms()
        return bool(forms) and any(f in name for name in names for f in forms)

    def _holds_secret(self, result: Any, files: Collected) -> bool:
        values = [v for v in self.secret_values() if v]
        if not values:
            return False
        text = canonical(result).decode("utf-8", "replace")
        return any(v in text for v in values) or files.holds([v.encode() for v in values])

    # ---- most recent entries and the end of the run ------------------------------------

    def recent_key(self, sid: str) -> str | None:
        if sid in self._changed:
            return self._changed[sid]
        steps = self._recent.get(self.plan_name)
        key = steps.get(sid) if isinstance(steps, dict) else None
        return key if isinstance(key, str) else None

    def _set_recent(self, sid: str, key: str) -> None:
        if self.recent_key(sid) != key:
            self._changed[sid] = key

    async def aclose(self) -> None:
        """`close`, and the remote's connections."""
        try:
            self.close()
        finally:
            if self.remote is not None:
                await self.remote.aclose()

    def close(self) -> None:
        """Save the stat records and listings (also after a dry-run) and the steps' most recent
        entries.

        The recent-entry file is re-read first so that runs of other plans (or of this one)
        that finished meanwhile keep theirs; it only shapes the reasons, never a hit."""
        self.store.close()
        self.temp.close()
        self.records.save()
        self.listings.save()
        if not self._changed or self.dry_run:
            return
        doc = _read_json(self._recent_path)
        steps = doc.get(self.plan_name)
        doc[self.plan_name] = {**(steps if isinstance(steps, dict) else {}), **self._changed}
        with contextlib.suppress(OSError):
            os.makedirs(os.path.dirname(self._recent_path), exist_ok=True)
            atomic_write(self._recent_path, json.dumps(doc, separators=(",", ":")).encode())


def _read_json(path: str) -> dict[str, Any]:
    try:
        doc = loads(read_regular(path, 64 << 20))  # bounded: only a shortcut
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def hit_event(
    plan: str, sid: str, decision: Decision, step: Step, fingerprint: str | None
) -> StepCached:
    """The `step.cached` event of a hit: the recorded result and the replayed output."""
    entry = decision.entry
    assert entry is not None
    output = (entry.stdout + entry.stderr) or None
    return StepCached(
        plan,
        sid,
        key=decision.key,
        reason=CACHED if decision.source == "local" else f"{CACHED} (remote)",
        source=decision.source,
        result=entry.result,
        result_variable=step.result_variable,
        fingerprint=fingerprint,
        output=output,
        replayed=output is not None,
    )
