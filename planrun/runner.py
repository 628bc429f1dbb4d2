"""`planrun run` as a pipeline: load → validate → select → (dry-run) → approve → state → schedule → report.

Each stage is a small function; `execute` strings them together and returns the result document
and the exit code. Nothing here imports click: the CLI and the MCP server both call it.
"""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from planrun.errors import ExitCode, PlanInvalid, PlanrunError, StateError, UsageError
from planrun.events import Event, EventBus
from planrun.expressions import Expr, ExpressionError, parse_template, to_text
from planrun.graph import PlanGraph
from planrun.model import Plan, Step
from planrun.validate import CheckedPlan, check_document


@dataclass
class RunRequest:
    """Everything `planrun run` can be told (CLI options, MCP tool arguments)."""

    plan: str  # a path, or a label for inline text
    text: str | None = None  # inline plan text (MCP)
    variables: dict[str, Any] = field(default_factory=dict)  # --var
    vars_file: str | None = None
    jobs: int | None = None
    state: str | None = None
    no_state: bool = False
    resume: bool = False
    keep_going: bool = False
    yes: bool = False
    only: list[str] = field(default_factory=list)
    dry_run: bool = False
    output: str = "text"
    events: str | None = None
    junit: str | None = None
    quiet: bool = False
    stream: bool = False
    executor: str | None = None
    address: str | None = None
    planner: str | None = None
    mcp_config: str | None = None
    cwd: str = field(default_factory=os.getcwd)
    interactive: bool = False  # a TTY to ask approval questions at
    console: bool = True  # human progress on stderr
    subscribers: list[Callable[[Event], None]] = field(default_factory=list)


@dataclass
class Prepared:
    checked: CheckedPlan
    plan: Plan
    variables: dict[str, Any]
    selected: list[str]
    graph: PlanGraph


EXIT_FOR_STATUS = {
    "succeeded": ExitCode.OK,
    "failed": ExitCode.RUN_FAILED,
    "interrupted": ExitCode.INTERRUPTED,
    "blocked": ExitCode.BLOCKED,
}


def _abs(path: str, cwd: str) -> str:
    return path if os.path.isabs(path) else os.path.join(cwd, path)


def load_vars_file(path: str, cwd: str) -> dict[str, Any]:
    """`--vars-file`: a YAML or JSON mapping (read by the plan loader: JSON types only)."""
    from planrun.loader import load_document

    full = _abs(path, cwd)
    try:
        if (
            os.path.isfile(full)
            and os.path.getsize(full) < 4096
            and not Path(full).read_bytes().strip()
        ):
            return {}  # an empty vars file sets nothing
        doc = load_document(full)
    except UsageError:
        raise UsageError(f"vars file not found: {path}") from None
    except PlanInvalid as exc:
        first = exc.diagnostics[0]
        raise UsageError(f"vars file {path}:{first.line}:{first.col}: {first.message}") from None
    if not isinstance(doc.data, dict):
        raise UsageError(f"vars file {path} must hold a mapping of names to values")
    return doc.data


def load_checked(req: RunRequest, extra_vars: dict[str, Any]) -> CheckedPlan:
    """Load and check the plan; PlanInvalid on any error."""
    from planrun.loader import load_document, load_text

    if req.text is not None:
        doc = load_text(req.text, req.plan)
    else:
        doc = load_document(_abs(req.plan, req.cwd) if not os.path.isabs(req.plan) else req.plan)
        doc.file = req.plan
    servers = None
    if req.mcp_config:
        from planrun.mcp_client import parse_mcp_config

        servers = parse_mcp_config(_abs(req.mcp_config, req.cwd))
    checked = check_document(doc, extra_vars, servers)
    errors = [d for d in checked.diagnostics if d.severity == "error"]
    if errors or checked.plan is None:
        raise PlanInvalid(errors)
    return checked


def prepare(req: RunRequest) -> Prepared:
    """Load, validate, merge variables and select the steps to run."""
    extra = {**(load_vars_file(req.vars_file, req.cwd) if req.vars_file else {}), **req.variables}
    checked = load_checked(req, extra)
    plan = checked.plan
    assert plan is not None
    if req.mcp_config:
        plan = _with_mcp_config(plan, req.mcp_config, req.cwd)
    variables = {**plan.variables, **extra}
    graph = PlanGraph.build(plan.steps)
    selected = list(graph.order)
    if req.only:
        unknown = [o for o in req.only if o not in graph.deps]
        if unknown:
            from planrun.validate import did_you_mean

            hint = did_you_mean(unknown[0], set(graph.order))
            raise UsageError(
                f"--only: no step '{unknown[0]}' in the plan" + (f" ({hint})" if hint else "")
            )
        keep = graph.upstream(req.only)
        selected = [sid for sid in graph.order if sid in keep]
    return Prepared(checked, plan, variables, selected, graph)


def _with_mcp_config(plan: Plan, path: str, cwd: str) -> Plan:
    from planrun.mcp_client import parse_mcp_config
    from planrun.model import ServerEntry

    servers = dict(plan.servers)
    for name, entry in parse_mcp_config(_abs(path, cwd)).items():
        servers.setdefault(name, ServerEntry.model_validate(entry))
    return plan.model_copy(update={"servers": servers})


# ---- dry-run -----------------------------------------------------------------------------


def dry_run_document(prep: Prepared) -> dict[str, Any]:
    """The SPEC §8 dry-run document: start order in waves, resolved args with placeholders."""
    plan, graph = prep.plan, prep.graph
    keep = set(prep.selected)
    sub = PlanGraph(
        order=[s for s in graph.order if s in keep],
        deps={s: [d for d in graph.deps[s] if d in keep] for s in graph.order if s in keep},
        kinds=graph.kinds,
        titles=graph.titles,
        tools=graph.tools,
    )
    waves = sub.waves()
    producers: dict[str, str] = {}
    for s in plan.steps:
        if s.result_variable:
            producers.setdefault(s.result_variable, s.id)
    scope = {**prep.variables, "env": dict(os.environ), "steps": {}}
    steps_out = []
    for wave in waves:
        for sid in wave:
            step = plan.step(sid)
            steps_out.append(
                {
                    "id": sid,
                    "title": _preview(step.title or sid, scope, producers),
                    "tool": step.tool,
                    "args": _preview(step.args, scope, producers),
                    "depends_on": sub.deps[sid],
                    "when": step.when,
                    "approval": needs_approval(plan, step),
                }
            )
    return {"plan": plan.name, "waves": waves, "steps": steps_out}


def needs_approval(plan: Plan, step: Step) -> bool:
    import fnmatch

    return step.approval or any(
        fnmatch.fnmatchcase(step.tool, p) for p in plan.policy.require_approval
    )


def _preview(value: Any, scope: dict[str, Any], producers: dict[str, str]) -> Any:
    """Resolve what is known now; a value that needs a step's result becomes `<id result>`."""
    if isinstance(value, dict):
        return {k: _preview(v, scope, producers) for k, v in value.items()}
    if isinstance(value, list):
        return [_preview(v, scope, producers) for v in value]
    if not isinstance(value, str):
        return value
    try:
        tpl = parse_template(value)
    except ExpressionError as exc:
        return f"<error: {exc.message}>"
    if tpl is None:
        return value.replace("$${", "${")

    def one(expr: Expr) -> Any:
        for name in sorted(expr.names):
            if name in producers:
                return f"<{producers[name]} result>"
        if expr.step_refs:
            return f"<{sorted(expr.step_refs)[0]} result>"
        try:
            return expr.evaluate(scope)
        except ExpressionError as exc:
            return f"<error: {exc.message}>"

    if tpl.whole is not None:
        return one(tpl.whole)
    return "".join(p if isinstance(p, str) else to_text(one(p)) for p in tpl.parts)


def render_dry_run(doc: dict[str, Any]) -> str:
    """Dry-run text: waves in start order, each step with tool, args, dependencies, condition."""
    import json

    lines = [
        f"plan {doc['plan']}: {len(doc['steps'])} steps in {len(doc['waves'])} waves (dry run)"
    ]
    by_id = {s["id"]: s for s in doc["steps"]}
    for n, wave in enumerate(doc["waves"], 1):
        lines.append(f"wave {n}" + (f" ({len(wave)} in parallel)" if len(wave) > 1 else ""))
        for sid in wave:
            s = by_id[sid]
            head = f"  {'∥' if len(wave) > 1 else '•'} {sid}"
            if s["title"] != sid:
                head += f"  {s['title']}"
            head += f"  [{s['tool']}]"
            if s["approval"]:
                head += "  ⚠ needs approval"
            lines.append(head)
            if s["args"]:
                lines.append(f"      args: {json.dumps(s['args'], ensure_ascii=False)}")
            if s["depends_on"]:
                lines.append(f"      after: {', '.join(s['depends_on'])}")
            if s["when"] is not None:
                lines.append(f"      when: {s['when']}")
    return "\n".join(lines) + "\n"


# ---- secrets -----------------------------------------------------------------------------


class Masker:
    """Replaces the values of `secrets:` variables with `***` in any JSON-like value."""

    def __init__(self, names: list[str], variables: dict[str, Any]) -> None:
        self.names = names
        self.variables = variables  # live: result variables named as secrets count once bound

    def values(self) -> list[str]:
        out = []
        for n in self.names:
            v = self.variables.get(n)
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


# ---- the run -----------------------------------------------------------------------------


def blocked_document(plan: Plan, selected: list[str], steps: list[str]) -> dict[str, Any]:
    return {
        "plan": plan.name,
        "status": "blocked",
        "reason": "approval_required",
        "duration_s": 0.0,
        "error": f"approval required for: {', '.join(steps)} (use --yes, or run at a terminal)",
        "steps": [
            {
                "id": s,
                "status": "pending",
                "attempts": 0,
                "duration_s": None,
                "result": None,
                "error": None,
            }
            for s in selected
        ],
        "variables": {},
    }


async def execute(req: RunRequest) -> tuple[dict[str, Any], ExitCode]:
    """Run (or dry-run) a plan; returns the result document and the exit code.

    Raises PlanrunError (PlanInvalid, UsageError, StateError) for problems found before any step.
    """
    prep = prepare(req)
    plan = prep.plan
    if req.dry_run:
        return Masker(plan.secrets, prep.variables)(dry_run_document(prep)), ExitCode.OK
    gated = [sid for sid in prep.selected if needs_approval(plan, plan.step(sid))]
    if gated and not req.yes and not req.interactive:
        doc = blocked_document(plan, prep.selected, gated)
        masker = Masker(plan.secrets, prep.variables)
        return masker(doc), ExitCode.BLOCKED
    return await _run(req, prep)


async def _run(req: RunRequest, prep: Prepared) -> tuple[dict[str, Any], ExitCode]:
    from planrun.executors.local import LocalExecutor
    from planrun.scheduler import PreviousStep, RunSettings, Scheduler, result_document

    plan = prep.plan
    name = plan.name or "plan"
    store = None
    previous: dict[str, PreviousStep] | None = None
    revisions: list[dict[str, Any]] = []
    if not req.no_state:
        from planrun.state import StateStore, default_state_path

        path = _abs(req.state, req.cwd) if req.state else str(default_state_path(req.cwd, name))
        from pathlib import Path

        store = StateStore(Path(path), name)
        store.acquire()
        try:
            if req.resume:
                old = store.load()
                if old is None:
                    raise StateError(
                        f"no saved state for plan '{name}' at {path}: start it with 'planrun run {req.plan}'"
                    )
                previous = {
                    sid: PreviousStep(
                        st.status,
                        st.fingerprint,
                        st.result,
                        st.result_variable,
                        st.attempts,
                        st.duration_s,
                    )
                    for sid, st in old.steps.items()
                }
                if old.revisions:
                    prep = _revised(prep, old.revisions, req.only)
                    plan = prep.plan
                    revisions = list(old.revisions)
                for st in old.steps.values():
                    if st.status in ("succeeded", "ignored") and st.result_variable:
                        prep.variables[st.result_variable] = st.result
        except BaseException:
            store.release()
            raise
    elif req.resume:
        raise UsageError("--resume needs state: drop --no-state")

    variables = dict(prep.variables)
    masker = Masker(plan.secrets, variables)
    bus = EventBus(mask=masker if plan.secrets else None)
    closers: list[Callable[[], None]] = []
    console = None
    if req.console:
        from planrun.reporters.console import ConsoleReporter

        console = ConsoleReporter(
            sys.stderr,
            quiet=req.quiet,
            stream_output=req.stream,
            resume_hint=req.plan if store is not None else None,
        )
        if req.resume:
            bus.subscribe(_why_notices(console))
        bus.subscribe(console.handle)
        closers.append(console.close)
    if store is not None:
        bus.subscribe(store.handle)
    try:
        if req.events:
            from planrun.reporters.jsonl import JsonLinesReporter

            jl = JsonLinesReporter(_abs(req.events, req.cwd))
            bus.subscribe(jl.handle)
            closers.append(jl.close)
        if req.junit:
            from planrun.reporters.junit import JUnitReporter

            ju = JUnitReporter(_abs(req.junit, req.cwd))
            bus.subscribe(ju.handle)
            closers.append(ju.close)
    except OSError as exc:
        for close in closers:
            close()
        if store is not None:
            store.release()
        raise UsageError(f"cannot write {exc.filename}: {exc.strerror}") from None
    for fn in req.subscribers:
        bus.subscribe(fn)

    services: dict[str, Any] = {
        "notice": console.notice if console is not None else None,
        "plan_stack": (os.path.realpath(_abs(req.plan, req.cwd)),),
    }
    pool = None
    executor: Any = LocalExecutor()
    try:
        if plan.servers:
            from planrun.checktools import check_tools, make_pool

            pool = make_pool(plan, variables, req.cwd)
            services["mcp"] = pool
            # Before the first step: every SERVER.TOOL exists and its literal args fit.
            found = await check_tools(
                plan,
                prep.checked.doc,
                pool,
                unreachable_is_error=False,
                selected=set(prep.selected),
            )
            if console is not None:
                for d in found:
                    if d.severity == "warning":
                        console.notice(d.render(), warning=True)
            errors = [d for d in found if d.severity == "error"]
            if errors:
                raise PlanInvalid(errors)
        executor = _make_executor(req, plan, executor)
        await executor.start()
        ask = _tty_ask(console) if req.interactive and not req.yes else None
        settings = RunSettings(
            jobs=req.jobs or (plan.limits.max_concurrency or os.cpu_count() or 1),
            keep_going=req.keep_going,
            yes=req.yes,
            stream=req.stream,
            cwd=req.cwd,
            env=dict(os.environ),
            ask=ask,
            services=services,
        )
        replanner = None
        if plan.replan is not None or req.planner:
            from planrun.replan import make_replanner

            replanner = make_replanner(plan, req, services)
        sched = Scheduler(
            plan, prep.selected, variables, executor, bus, settings, previous, replanner
        )
        masker.variables = sched.variables
        sched.revisions = revisions
        sched.replans = len(revisions)
        selected_set = set(prep.selected)
        bus.emit(
            Event(
                "run.started",
                name,
                None,
                {
                    "run_id": uuid.uuid4().hex[:12],
                    "digest": plan_digest(plan),
                    "resumed": previous is not None,
                    "variables": variables,
                    "steps": [
                        {
                            "id": s.id,
                            "title": s.title or s.id,
                            "tool": s.tool,
                            "depends_on": prep.graph.deps[s.id],
                        }
                        for s in plan.steps
                        if s.id in selected_set
                    ],
                },
            )
        )
        outcome = await sched.run()
        bus.emit(
            Event(
                "run.finished",
                name,
                None,
                {
                    "status": outcome.status,
                    "reason": outcome.reason,
                    "duration_s": outcome.duration_s,
                    "error": outcome.error,
                },
            )
        )
        doc = result_document(name, sched.order, sched.records, outcome, sched.variables)
        if sched.revisions:
            doc["revisions"] = sched.revisions
        return masker(doc), EXIT_FOR_STATUS[outcome.status]
    finally:
        try:
            if pool is not None:
                await pool.aclose()
            await executor.aclose()
        finally:
            for close in closers:
                close()
            if store is not None:
                store.close()


def _revised(prep: Prepared, revisions: list[dict[str, Any]], only: list[str]) -> Prepared:
    """On resume, continue the plan as the planner last revised it."""
    from planrun.replan import apply_revisions

    plan = apply_revisions(prep.plan, revisions)
    graph = PlanGraph.build(plan.steps)
    keep = graph.upstream([o for o in only if o in graph.deps]) if only else set(graph.order)
    selected = [sid for sid in graph.order if sid in keep]
    return Prepared(prep.checked, plan, prep.variables, selected, graph)


def _why_notices(console: Any) -> Callable[[Event], None]:
    """On resume, say why each step that runs again does."""

    def on_event(event: Event) -> None:
        if event.event == "step.started" and event.data.get("why"):
            console.notice(f"running '{event.step}' again: {event.data['why']}")

    return on_event


def _make_executor(req: RunRequest, plan: Plan, local: Any) -> Any:
    kind = req.executor or (plan.executor.type if plan.executor else None)
    address = (
        req.address
        or (plan.executor.address if plan.executor else None)
        or os.environ.get("PLANRUN_DASK_ADDRESS")
    )
    if kind is None and req.address:
        kind = "dask"
    if kind in (None, "local"):
        return local
    if kind == "dask":
        from planrun.executors.dask import DaskExecutor

        return DaskExecutor(address, local=local, cwd=req.cwd)
    raise UsageError(f"unknown executor '{kind}': use 'local' or 'dask'")


def _tty_ask(console: Any) -> Callable[[str], Any]:
    lock = asyncio.Lock()

    async def ask(step_id: str) -> bool:
        async with lock:

            def prompt() -> bool:
                sys.stderr.write(f"step '{step_id}' needs approval. Run it? [y/N] ")
                sys.stderr.flush()
                answer = sys.stdin.readline().strip().lower()
                return answer in ("y", "yes")

            if console is None:
                return await asyncio.to_thread(prompt)
            with console.suspend():  # the live view must not hide the question
                return await asyncio.to_thread(prompt)

    return ask


def plan_digest(plan: Plan) -> str:
    import hashlib
    import json

    blob = json.dumps(plan.model_dump(mode="json"), sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def run_sync(req: RunRequest) -> tuple[dict[str, Any], ExitCode]:
    """`execute` in a fresh event loop, with SIGINT/SIGTERM turned into a clean interruption."""
    import signal

    async def main() -> tuple[dict[str, Any], ExitCode]:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        hits = 0

        def on_signal() -> None:
            nonlocal hits
            hits += 1
            if hits > 1:  # second Ctrl-C: exit at once (the journal is valid), leave no process
                shell = sys.modules.get("planrun.tools.shell")
                if shell is not None:
                    shell.kill_live_groups()
                os._exit(int(ExitCode.INTERRUPTED))
            if task is not None:
                task.cancel()

        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, on_signal)
        try:
            return await _interruptible(execute(req))
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)

    return asyncio.run(main())


async def _interruptible(coro: Any) -> tuple[dict[str, Any], ExitCode]:
    """Cancellation before the scheduler runs (loading, starting servers) is an interruption too."""
    try:
        result: tuple[dict[str, Any], ExitCode] = await coro
        return result
    except asyncio.CancelledError:
        raise PlanrunError("interrupted before any step ran", ExitCode.INTERRUPTED) from None
