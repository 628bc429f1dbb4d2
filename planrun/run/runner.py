"""`planrun run` as a pipeline: prepare (load, validate, select) → (dry-run) → gate → schedule → report.

Each stage is a small function; `run_request` strings them together. It is the one run path: a
top-level run (CLI, library, `planrun mcp`) and a sub-plan started by a `plan` step both go
through it, each with the context its factory made (planrun.run.context). Nothing here imports click.
"""

from __future__ import annotations

# Lazy imports (inside functions), for start-up time: validation, the loader, the plan cache, the
# dry run, MCP and the cache only for the runs that use them (a plan-cache hit loads no pydantic).
import asyncio
import os
from collections.abc import Callable
from typing import Any

from planrun.errors import ExitCode, PlanInvalid, PlanrunError, UsageError
from planrun.inputfiles import NotARegularFile, read_regular_file
from planrun.masking import mask_keeping_names
from planrun.plan.checked import CheckedPlan
from planrun.plan.definition import Plan, replace
from planrun.plan.dotenv import load_dotenv, rendered_names
from planrun.plan.expressions import Words
from planrun.plan.graph import PlanGraph
from planrun.plan.params import CLI_ARGS, bind_params
from planrun.plan.targets import select
from planrun.plan.variables import start_variables
from planrun.run.context import RunContext, root_context
from planrun.run.interrupts import run_interruptibly
from planrun.run.launch import launch
from planrun.run.parent import STEP_SEPARATOR, denied_by, merge_policy
from planrun.run.request import Finished, Prepared, RunRequest, abs_path
from planrun.run.runstate import kept_on_resume, recorded_targets, resume_decision
from planrun.run.scope import StepRecord
from planrun.status import Reason, Status

__all__ = ["Finished", "Prepared", "RunRequest", "execute", "prepare", "run_request", "run_sync"]


def load_vars_file(path: str, cwd: str) -> dict[str, Any]:
    """`--vars-file`: a YAML or JSON mapping (read by the plan loader: JSON types only)."""
    from planrun.plan.loader import load_text

    try:
        raw = read_regular_file(abs_path(path, cwd))  # a FIFO is refused, never read
    except (FileNotFoundError, NotADirectoryError):
        raise UsageError(f"vars file not found: {path}") from None
    except NotARegularFile as exc:
        raise UsageError(f"vars file {path} is {exc.kind}, not a regular file") from None
    except OSError as exc:
        raise UsageError(f"cannot read vars file {path}: {exc.strerror or exc}") from None
    if _sets_nothing(raw):
        return {}  # an empty vars file (blank, comments, a document marker) sets nothing
    suffix = os.path.splitext(path)[1].lower()
    fmt = "json" if suffix == ".json" else "yaml" if suffix in (".yaml", ".yml") else None
    try:
        doc = load_text(raw, path, fmt)
    except PlanInvalid as exc:
        first = exc.diagnostics[0]
        # The loader reads plans; this file is not one.
        message = first.message.replace("plan file", "vars file").replace("a plan ", "a vars file ")
        message = message.replace("plan is ", "vars file is ")
        raise UsageError(f"vars file {path}:{first.line}:{first.col}: {message}") from None
    if not isinstance(doc.data, dict):
        raise UsageError(f"vars file {path} must hold a mapping of names to values")
    return doc.data


def vars_file_place(path: str | None, cwd: str) -> Callable[[str], str] | None:
    """Where a name's value is in the --vars-file `path` (`vars file F:LINE:COL`), for an
    error about that value (bind_params): the file is read again then, and only then."""
    if not path:
        return None
    from planrun.plan.loader import load_text

    full = abs_path(path, cwd)

    def place(name: str) -> str:
        try:
            line, col = load_text(read_regular_file(full), path).pos((name,))
        except (OSError, PlanInvalid):  # changed since it was read: its name, no position
            return f"vars file {path}"
        return f"vars file {path}:{line}:{col}"

    return place


def _sets_nothing(raw: bytes | str) -> bool:
    """Only blank lines, comments and YAML document markers."""
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    return all(
        not line or line.startswith("#") or line in ("---", "...")
        for line in (part.strip() for part in text.lstrip("\ufeff").splitlines())
    )


def load_checked(req: RunRequest, extra_vars: dict[str, Any]) -> CheckedPlan:
    """Load and check the plan (a plan file through the plan cache); PlanInvalid on any error."""
    servers = None
    if req.mcp_config:
        from planrun.mcp.client import parse_mcp_config

        servers = parse_mcp_config(abs_path(req.mcp_config, req.cwd))
    if req.text is not None:
        from planrun.plan.loader import load_text
        from planrun.plan.validate import check_document

        checked = check_document(load_text(req.text, req.plan), extra_vars, servers)
    else:
        from planrun.plan.cache import check_plan_file

        path = abs_path(req.plan, req.cwd)
        checked = check_plan_file(path, extra_vars, servers, file=req.plan, cwd=req.cwd)
    errors = [d for d in checked.diagnostics if d.severity == "error"]
    if errors or checked.plan is None:
        raise PlanInvalid(errors)
    return checked


def prepare(ctx: RunContext) -> Prepared:
    """Load, validate, merge variables and select the steps to run.

    A sub-plan also gets its parent's policy on top of its own: a tool denied there is an
    error here (PlanInvalid, nothing of it runs).
    """
    req = ctx.request
    extra = {**(load_vars_file(req.vars_file, req.cwd) if req.vars_file else {}), **req.variables}
    checked = load_checked(req, extra)
    plan = checked.plan
    assert plan is not None
    outer = ctx.outer_policy
    if outer is not None:
        denied = denied_by(checked, plan, outer)
        if denied:
            raise PlanInvalid(denied)
        plan = replace(plan, policy=merge_policy(outer, plan.policy))

    environ = os.environ if req.environ is None else req.environ
    given = {
        CLI_ARGS: Words(),
        **bind_params(
            plan.params,
            extra,
            required=req.params_required,
            env=environ,
            place=vars_file_place(req.vars_file, req.cwd),
        ),
    }  # exit 2: a bad value, a required one missing (but for `show`)
    variables = start_variables(plan.variables, given, environ, checked.doc, plan.secrets)
    dotenv: dict[str, str] = {}
    if plan.dotenv:
        names = rendered_names(checked.doc, plan.dotenv, variables, environ)
        plan = replace(plan, dotenv=names)  # `${...}` in file names rendered
        dotenv = load_dotenv(checked.doc, names, req.cwd)
    graph = PlanGraph.build(plan.steps)
    top = outer is None  # a sub-plan has no targets and no --force of its own
    only = req.only or (recorded_targets(req, plan) if req.resume and top else [])
    chosen = select(plan, graph, only, ctx.forced, req.plan, internal=req.internal_targets)
    return Prepared(
        checked,
        plan,
        variables,
        chosen.selected,
        graph,
        dotenv,
        chosen.targets,
        chosen.forced,
        req.environ,
    )


# ---- the run -----------------------------------------------------------------------------


def blocked_document(
    plan: Plan,
    selected: list[str],
    steps: list[str],
    kept: dict[str, Any] | None = None,
    variables: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The document of a run blocked before its first step (on resume, the kept steps are
    shown as what they are, the others pending), with the run's `variables` as its state has
    them."""
    from planrun.run.outcome import Outcome, result_document

    records = {sid: (kept or {}).get(sid) or StepRecord() for sid in selected}
    error = f"approval required for: {', '.join(steps)}"
    outcome = Outcome(Status.BLOCKED, Reason.APPROVAL_REQUIRED, error, 0.0)
    return result_document(plan.name or "", selected, records, outcome, dict(variables or {}))


async def execute(req: RunRequest) -> tuple[dict[str, Any], ExitCode]:
    """Run (or dry-run) a plan; returns the result document and the exit code.

    Raises PlanrunError (PlanInvalid, UsageError, StateError) for problems found before any step.
    """
    from planrun.tools.pymodules import run_scope

    with run_scope():  # what its python steps import is the run's own
        finished = await run_request(root_context(req))
    return finished.document, finished.code


async def run_request(ctx: RunContext) -> Finished:
    """The one run path: prepare → (dry-run) → gate → schedule → report, for a top-level run
    and a sub-plan alike (`ctx`, from planrun.run.context's factories, says which it is)."""
    prep = prepare(ctx)
    if ctx.request.dry_run:
        return dry_run(ctx.request, prep)
    blocked = gate(ctx, prep)
    if blocked is not None:
        return blocked
    return await launch(ctx, prep, run_request)


def dry_run(req: RunRequest, prep: Prepared) -> Finished:
    """What would run (on resume: again, and why), with what the cache has (a sub-plan is
    never dry-run on its own: its `plan` step is a row of its parent's dry run)."""
    from planrun.cache.wiring import preview_dry_run
    from planrun.run.dryrun import dry_run_document, mark_resume
    from planrun.run.resume import kept_results

    decided = None
    if req.resume:  # what would run again, and why
        prep, decided = resume_decision(req, prep)
    plan = prep.plan
    known = kept_results(plan, prep.selected, decided.kept) if decided is not None else {}
    doc = dry_run_document(
        plan, prep.graph, prep.selected, prep.variables, prep.environment(), known=known
    )
    if decided is not None:
        mark_resume(doc, decided.kept, decided.reasons)
    preview_dry_run(req.cache_request, req.cwd, prep, doc)
    return Finished(mask_keeping_names(prep.masker(prep.variables), doc), ExitCode.OK)


def gate(ctx: RunContext, prep: Prepared) -> Finished | None:
    """Without --yes and without a TTY to ask at, a step that needs approval (in this plan or
    a sub-plan named literally) blocks the run before anything starts."""
    from planrun.run.gate import gated_steps

    req = ctx.request
    if ctx.yes or ctx.can_ask:
        return None
    gated = gated_steps(
        prep.plan,
        prep.selected,
        prep.variables,
        prep.environment(),
        cwd=req.cwd,
        prefix=ctx.prefix,
        stack=ctx.stack,
    )
    kept: dict[str, Any] = {}
    if gated and req.resume:  # a step kept from the last run is not asked again
        kept = kept_on_resume(req, prep)
        gated = [g for g in gated if g.split(STEP_SEPARATOR, 1)[0] not in kept]
    if not gated:
        return None
    doc = blocked_document(prep.plan, prep.selected, gated, kept, prep.variables)
    doc = mask_keeping_names(ctx.blocked_masker(prep), doc)
    ctx.record_blocked(prep, doc, kept)  # a top-level run's state, events and JUnit say it
    return Finished(doc, ExitCode.BLOCKED)


def run_sync(req: RunRequest) -> tuple[dict[str, Any], ExitCode]:
    """`execute` in a fresh event loop, with SIGINT/SIGTERM turned into a graceful interruption
    of the run's commands (planrun.run.interrupts), through the run's own registry of them."""
    import copy

    from planrun.run.procgroups import ProcessGroups

    req = copy.copy(req)
    if req.groups is None:
        req.groups = ProcessGroups()
    return run_interruptibly(_interruptible(execute(req)), req.groups)


async def _interruptible(coro: Any) -> tuple[dict[str, Any], ExitCode]:
    """Cancellation before the scheduler runs (loading, starting servers) is an interruption too."""
    try:
        result: tuple[dict[str, Any], ExitCode] = await coro
        return result
    except asyncio.CancelledError:
        raise PlanrunError("interrupted before any step ran", ExitCode.INTERRUPTED) from None
