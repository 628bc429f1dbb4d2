"""How a run gets its cache: options from the request, one session per run, dry-run previews."""

from __future__ import annotations

# Lazy imports (inside functions), for start-up time: expressions, fanout and suggest only for
# --explain, a preview or a bad cache option.
import os
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from planrun.cache import ALL_FORCED, CACHED, FORCED, NO_ENTRY, OFF
from planrun.cache.cachedir import refusal
from planrun.cache.session import (
    CacheOptions,
    CacheSession,
    Upstream,
    cache_directory,
    linked_place,
    step_cached,
)
from planrun.errors import UsageError
from planrun.plan.fanout import fans_out
from planrun.plan.instances import parent_of

if TYPE_CHECKING:
    from planrun.cache.remote import RemoteOptions
    from planrun.plan.definition import Plan, Step
    from planrun.run.request import CacheRequest, Prepared
    from planrun.run.runtree import Notice

UNKNOWN = "unknown"  # a dry-run's status for a step only the run can decide
UNKNOWN_AFTER = "unknown: runs after "


def open_session(
    options: CacheOptions,
    plan: Plan,
    cwd: str,
    env: dict[str, str],
    warn: Callable[[str], None],
    secret_values: Callable[[], list[str]] = list,
    *,
    dry_run: bool = False,
    provided: Iterable[str] = (),
) -> CacheSession | None:
    """A session when some step of the plan is cached and the cache is on, else None.
    `provided`: the names the plan gives every step's environment (its dotenv files')."""
    if not options.enabled or not any(step_cached(s) for s in plan.steps):
        return None
    link = linked_place(cwd, options.directory)
    if link is not None:
        warn(f"{link} is a symbolic link: the cache is not used (choose one with --cache-dir)")
        return None
    why = refusal(cache_directory(cwd, options.directory))
    if why is not None:
        warn(f"{why}: the cache is not used (choose another with --cache-dir)")
        return None
    dotenv = list(plan.dotenv)
    shared = frozenset(s.id for s in plan.steps if fans_out(s) and _shares_outputs(s))
    session = CacheSession(
        options,
        plan.name or "plan",
        cwd,
        env,
        warn,
        secret_values,
        dotenv,
        dry_run=dry_run,
        shared=shared,
        provided=provided,
        secret_names=list(plan.secrets),
        servers={name: entry.to_dict() for name, entry in plan.servers.items()},
    )
    if options.remote is not None and not dry_run:
        from planrun.cache.remote import RemoteCache

        session.remote = RemoteCache(options.remote, session.store, warn)
    return session


def _shares_outputs(step: Step) -> bool:
    """Whether every instance of a foreach step has the same `outputs` patterns (none reads
    the element or `index`): then its instances share what the patterns match."""
    from planrun.plan.expressions import ExpressionError, parse_template
    from planrun.plan.fanout import loop_names

    loop = loop_names(step)
    for text in step.outputs or ():
        try:
            tpl = parse_template(text)
        except ExpressionError:
            return False
        if tpl is not None and any(loop & e.names for e in tpl.exprs):
            return False
    return bool(step.outputs)


def preview(
    plan: Plan,
    order: list[str],
    deps: dict[str, list[str]],
    variables: dict[str, Any],
    env: dict[str, str],
    options: CacheOptions,
    cwd: str,
    warn: Callable[[str], None],
    prep: Prepared | None = None,
) -> dict[str, dict[str, Any]]:
    """Dry-run: {step id: {status: hit|miss|off|unknown, reason}} in start order. Hashes,
    writes nothing (but the stat records, which only save re-reading). `prep`: the prepared
    run (its dotenv names and secrets), when there is one."""
    secrets = prep.masker(variables).values if prep is not None else list
    provided = list(prep.dotenv) if prep is not None else ()
    session = open_session(options, plan, cwd, env, warn, secrets, dry_run=True, provided=provided)
    out: dict[str, dict[str, Any]] = {}
    results: dict[str, Any] = {}  # results known now: those of hits
    try:
        for sid in order:
            parent = parent_of(sid)  # a foreach instance is previewed as its step over its item
            step = plan.step(parent or sid)
            if session is None or not step_cached(step):
                out[sid] = {"status": "off", "reason": OFF}
                continue
            scope: Mapping[str, Any] = _scope(plan, variables, env, results)
            if sid.endswith("[*]"):  # a list not known before the dry-run: maybe from a hit
                out[sid] = _preview_fan(session, sid, step, deps[sid], scope, results, out)
                continue
            if parent is not None:
                step, scope = preview_instance(step, sid, scope)
            out[sid] = _preview_step(session, sid, step, deps[sid], scope, results, out)
    finally:
        if session is not None:
            session.close()
    return out


def _preview_step(
    session: CacheSession,
    sid: str,
    step: Step,
    deps: list[str],
    scope: Mapping[str, Any],
    results: dict[str, Any],
    seen: dict[str, dict[str, Any]],
) -> dict[str, Any]:
    from planrun.plan.expressions import ExpressionError
    from planrun.run.scope import with_patterns
    from planrun.run.stepcall import call_args

    forced = session.options.forced(sid)
    first = session.recent_key(sid) is None and not forced  # never stored: say so, not "changed"
    keyless = [d for d in deps if d not in session.keys]
    if keyless and not forced:
        return _after(keyless[0], seen, first)
    try:
        args = call_args(step, scope)
        step = with_patterns(step, scope)
    except ExpressionError:
        if forced:
            return {"status": "miss", "reason": FORCED}
        missed = next((d for d in deps if seen.get(d, {}).get("status") != "hit"), None)
        if missed is not None:
            return _after(missed, seen, first)
        return {"status": "miss", "reason": NO_ENTRY if first else "args changed"}
    upstream = [Upstream(d, "succeeded", results.get(d)) for d in deps]
    decision = session.decide(sid, step, args, upstream)
    if decision.key is not None:
        session.keys[sid] = decision.key  # dependents see the key this step would run or hit with
    if decision.status == "hit" and decision.entry is not None and parent_of(sid) is None:
        results[sid] = decision.entry.result
    return {"status": decision.status, "reason": decision.reason}


def _after(dep: str, seen: dict[str, dict[str, Any]], first: bool) -> dict[str, Any]:
    """A step whose key needs what `dep` gives when it runs. After a step that misses (a new
    key), a miss is certain; after an uncached step, or one whose status is itself unknown,
    only the run knows: its result may be the same as last time, and then this step hits."""
    before = seen.get(dep, {})
    if before.get("status") == "miss":
        return {"status": "miss", "reason": f"upstream changed: {dep}"}
    if first:
        return {"status": "miss", "reason": NO_ENTRY}
    root = str(before.get("reason", "")).removeprefix(UNKNOWN_AFTER)
    after = root if before.get("status") == UNKNOWN else dep
    return {"status": UNKNOWN, "reason": UNKNOWN_AFTER + after}


def _preview_fan(
    session: CacheSession,
    sid: str,
    step: Step,
    deps: list[str],
    scope: Mapping[str, Any],
    results: dict[str, Any],
    seen: dict[str, dict[str, Any]],
) -> dict[str, Any]:
    """`ID[*]`: a foreach whose list reads a result. When the hits give that result, each
    instance is previewed: a hit if all would hit, else the first miss; else as one step."""
    from planrun.plan.expressions import ExpressionError
    from planrun.plan.fanout import (
        FanOutError,
        InstanceScope,
        bindings,
        instance_step,
        resolve_elements,
    )

    parent = sid[: -len("[*]")]
    try:
        items = resolve_elements(step, scope)
    except (ExpressionError, FanOutError):  # reads a step that will run (or is not cached)
        missed = next((d for d in deps if seen.get(d, {}).get("status") != "hit"), None)
        stored = session.recent_key(f"{parent}[0]") is not None  # its instances ran before
        if missed and stored and not session.options.forced(sid):
            return _after(missed, seen, first=False)
        return _preview_step(session, sid, step, deps, scope, results, seen)
    for n, item in enumerate(items):
        one = InstanceScope(scope, bindings(step, item, n))
        found = _preview_step(
            session, f"{parent}[{n}]", instance_step(step, n), deps, one, results, seen
        )
        if found["status"] != "hit":
            return found
    return {"status": "hit", "reason": CACHED}


def preview_instance(
    step: Step, iid: str, scope: Mapping[str, Any]
) -> tuple[Any, Mapping[str, Any]]:
    """A foreach instance's step and scope for a preview (its element, when the list is
    known now; else the scope as it is, where its args cannot resolve)."""
    from planrun.plan.expressions import ExpressionError
    from planrun.plan.fanout import (
        FanOutError,
        InstanceScope,
        bindings,
        instance_step,
        resolve_elements,
    )

    try:
        n = int(iid[iid.rindex("[") + 1 : -1])
        items = resolve_elements(step, scope)
        return instance_step(step, n), InstanceScope(scope, bindings(step, items[n], n))
    except (ValueError, IndexError, ExpressionError, FanOutError):
        return step, scope


def _scope(
    plan: Plan, variables: dict[str, Any], env: dict[str, str], results: dict[str, Any]
) -> dict[str, Any]:
    """What args can read before anything runs: variables, env, and the results of hits."""
    scope: dict[str, Any] = {**variables, "env": env}
    # A hit is `succeeded` to expressions, as in the run (it counts as succeeded for `when`).
    scope["steps"] = {
        d: {"status": "succeeded", "result": r, "error": None} for d, r in results.items()
    }
    for d, r in results.items():
        var = plan.step(d).result_variable
        if var:
            scope[var] = r
    return scope


# ---- the run's side (called by the runner, which passes its request and prepared plan) --


def _warn_stderr(message: str) -> None:
    print(f"planrun: warning: {message}", file=sys.stderr)


def run_cache_options(req: CacheRequest, prep: Prepared) -> CacheOptions:
    """The options of a top-level run; an unknown `--force ID` is a usage error (an instance
    of a foreach step, `lint[2]`, may be forced on its own)."""
    remote = run_remote_options(req)
    forced = [f for f in prep.forced if f != ALL_FORCED]
    known = set(prep.graph.order)
    fans = {s.id for s in prep.plan.steps if fans_out(s)}
    unknown = [f for f in forced if f not in known and parent_of(f) not in fans]
    if unknown:
        from planrun.suggest import closest

        word = unknown[0]
        match = closest(word, known)
        if match is not None and match in fans and (step := parent_of(word)):
            match += word[len(step) :]  # `--force` takes an instance: point at that one
        hint = f" (did you mean '{match}'?)" if match else ""
        raise UsageError(f"--force: no step '{word}' in the plan{hint}")
    return CacheOptions(
        enabled=not req.no_cache,
        directory=req.cache_dir,
        force_all=ALL_FORCED in prep.forced,
        force=frozenset(forced),
        explain=req.explain,
        remote=remote,
    )


def run_remote_options(req: CacheRequest) -> RemoteOptions | None:
    """The run's remote cache (--remote-cache and its flags, else the environment)."""
    if not (req.remote or os.environ.get("PLANRUN_REMOTE_CACHE")):
        seconds(req.timeout)  # checked all the same
        return None  # (planrun.cache.remote not imported: most runs have no remote)
    from planrun.cache.remote import remote_options

    return remote_options(req.remote, req.read_only, seconds(req.timeout), os.environ)


def seconds(text: str | None) -> float | None:
    """--remote-cache-timeout's value: a positive number of seconds."""
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < 86400:
        raise UsageError(f"--remote-cache-timeout: {text!r} is not a number of seconds")
    return value


def open_run_cache(
    cwd: str,
    prep: Prepared,
    options: CacheOptions,
    notice: Notice | None,
    secret_values: Callable[[], list[str]],
) -> CacheSession | None:
    """The run's session (None when no step is cached or with --no-cache); warnings go to
    the console's notice line (or stderr without one). `secret_values`: every secret of the
    run's tree."""
    warn = (lambda m: notice(m, warning=True)) if notice is not None else _warn_stderr
    env = prep.environment()
    return open_session(
        options, prep.plan, cwd, env, warn, secret_values, provided=list(prep.dotenv)
    )


def preview_dry_run(req: CacheRequest, cwd: str, prep: Prepared, doc: dict[str, Any]) -> None:
    """Dry-run: add each step's `cache: {status, reason}` (hashes sources, stores nothing)."""
    deps = {s["id"]: s["depends_on"] for s in doc["steps"]}
    order = [s["id"] for s in doc["steps"]]
    found = preview(
        prep.plan,
        order,
        deps,
        prep.variables,
        prep.environment(),
        run_cache_options(req, prep),
        cwd,
        _warn_stderr,
        prep,
    )
    for s in doc["steps"]:
        s["cache"] = found[s["id"]]
