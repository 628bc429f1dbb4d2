"""`planrun mcp`: planrun itself as an MCP server, one typed tool per CLI command.

Only the `planrun mcp` command imports this module, so it may import the (slow) MCP SDK at
the top: nothing else in planrun pays for it.
"""

from __future__ import annotations

# Lazy imports (inside functions), for start-up time: validation, state, catalog, model and request
# only for the tool that needs them.
import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from mcp.server.mcpserver import Context
from mcp_types import CallToolResult, TextContent
from pydantic import Field

from planrun.errors import ExitCode, PlanInvalid, PlanrunError, UsageError, quoted
from planrun.mcp.http import listen, parse_http_address, serve_http
from planrun.mcp.progress import ProgressReporter
from planrun.mcp.runs import Runs
from planrun.mcp.shapes import (
    ApproveArg,
    DryRunDoc,
    PlanArg,
    PlanRowDoc,
    RunDoc,
    ValidateDoc,
    VariablesArg,
)
from planrun.mcp.stdio import Answers, serve_stdio
from planrun.mcp.strict import StrictServer
from planrun.plan.discovery import PLAN_EXTENSIONS

INLINE_LABEL = "<inline>"  # the `file` of diagnostics for inline plan text; names it "inline"
PATH_MAX = 4096  # bytes of the longest path Linux opens; a longer `plan` is not a path
ANSWER_GRACE_S = 10  # seconds a stopping stdio server waits for its answers to reach stdout
HANG_UP_GRACE_S = 5  # then seconds it keeps serving until the client hangs up

# ---- helpers ----------------------------------------------------------------------------------


class PlanSource:
    """A `plan` argument resolved to a file path or to inline text with a label."""

    def __init__(self, plan: str, cwd: str) -> None:
        self.text: str | None = None
        self.path: str | None = None
        candidate = plan.strip()
        # A path is one line naming an existing file; a plan's text is anything else. A
        # one-line value that cannot be a plan's text (no mapping in it) or ends in a plan
        # extension is meant as a path, so a typo in it is "not found" rather than a
        # confusing YAML error about a scalar.
        if candidate and "\n" not in candidate:
            # one too long to name a file is not looked up (a stat would only say so, slowly)
            full = candidate if os.path.isabs(candidate) else os.path.join(cwd, candidate)
            if len(candidate) <= PATH_MAX and os.path.isfile(full):
                self.path = candidate
                return
            if len(candidate) <= PATH_MAX and os.path.isdir(full):
                raise UsageError(f"{quoted(candidate)} is a directory, not a plan file")
            if candidate.endswith(PLAN_EXTENSIONS) or not any(c in candidate for c in ":{"):
                raise UsageError(f"plan file not found: {quoted(candidate)}")
        self.text = plan

    @property
    def label(self) -> str:
        return self.path if self.path is not None else INLINE_LABEL


ERROR_LINE_WIDTH = 2000  # characters of one line of a tool error (what it quotes is cut)


def error_text(exc: BaseException) -> str:
    """What the CLI prints for this error: every diagnostic line, or one message; a line that
    quotes a huge value (a plan name made a state file's path) is cut to ERROR_LINE_WIDTH."""
    if isinstance(exc, PlanInvalid):
        lines = [d.render() for d in exc.diagnostics] or ["invalid plan"]
        return "\n".join(quoted(line, ERROR_LINE_WIDTH) for line in lines)
    if isinstance(exc, PlanrunError):
        return quoted(str(exc), ERROR_LINE_WIDTH)
    return (
        f"internal error: {type(exc).__name__}: {exc} "
        "(this is a bug in planrun; please report it with the plan that caused it)"
    )


def _json_safe(doc: Any) -> Any:
    """As `--output json` prints it (default=str): a value the runner left as a Path, a set…"""
    return json.loads(json.dumps(doc, ensure_ascii=False, default=str))


async def _answer(work: Callable[[], Awaitable[Any]]) -> CallToolResult:
    """The tool's document as structured content (and as the CLI's JSON text), or a tool error.

    Errors are returned rather than raised as ToolError, which the SDK would prefix with
    "Error executing tool NAME: ": diagnostics stay exactly the CLI's `file:line:col:` lines.
    """
    try:
        doc = _json_safe(await work())
    except Exception as exc:  # CancelledError is not an Exception: a cancelled call stays one
        if not isinstance(exc, PlanrunError):
            logging.getLogger(__name__).exception("planrun mcp: tool failed")
        return CallToolResult(
            content=[TextContent(type="text", text=error_text(exc))], is_error=True
        )
    text = json.dumps(doc, indent=2, ensure_ascii=False)
    structured = doc if isinstance(doc, dict) else {"result": doc}
    return CallToolResult(
        content=[TextContent(type="text", text=text)], structured_content=structured
    )


def with_start_dir(variables: dict[str, Any] | None, cwd: str) -> dict[str, Any]:
    """The tool's `variables` over planrun's own: `invocation_dir` is the directory the
    server was started in, as for `planrun run` started there."""
    from planrun.plan.discovery import INVOCATION_DIR

    return {INVOCATION_DIR: cwd, **(variables or {})}


def validate_document(plan: str, variables: dict[str, Any] | None, cwd: str) -> dict[str, Any]:
    """`planrun validate --format json` for one plan (text or path)."""
    from planrun.plan.validate import load_and_check

    src = PlanSource(plan, cwd)
    try:
        diags = load_and_check(src.label, with_start_dir(variables, cwd), text=src.text).diagnostics
    except PlanInvalid as exc:  # unparsable: the parse errors are the answer
        diags = exc.diagnostics
    valid = not any(d.severity == "error" for d in diags)
    return {"valid": valid, "diagnostics": [d.to_json() for d in diags]}


def status_doc(plan: str, cwd: str) -> dict[str, Any]:
    """`planrun status --output json`; StateError when the plan never ran here."""
    from planrun.plan.validate import written_plan
    from planrun.state import default_state_path, no_state, read_state, status_document

    src = PlanSource(plan, cwd)
    written = written_plan(src.label, text=src.text, label=src.label)
    path = default_state_path(cwd, written.name)
    state = read_state(path, written.name)
    if state is None:
        raise no_state(written.name, path, src.label, "plan_run", written.unreadable)
    return status_document(state)


def list_doc(directory: str, cwd: str) -> list[dict[str, Any]]:
    """`planrun list --output json`."""
    from planrun.cli.catalog import list_plans

    full = directory if os.path.isabs(directory) else os.path.join(cwd, directory)
    if not os.path.isdir(full):
        raise UsageError(f"no such directory: {quoted(directory)}")
    return list_plans(directory, cwd)


async def run_doc(
    runs: Runs,
    plan: str,
    variables: dict[str, Any] | None,
    *,
    dry_run: bool = False,
    resume: bool = False,
    approve: bool = False,
    ctx: Context | None = None,
) -> dict[str, Any]:
    """`planrun run|resume [--dry-run] --output json`, in the server's event loop."""
    from planrun.run.request import RunRequest

    cwd = os.getcwd()
    src = PlanSource(plan, cwd)
    req = RunRequest(
        plan=src.label,
        text=src.text,
        variables=with_start_dir(variables, cwd),
        dry_run=dry_run,
        resume=resume,
        yes=approve,
        interactive=False,  # never ask: no terminal behind an MCP client
        console=False,  # stdout is the protocol channel (stdio); progress goes as notifications
        cwd=cwd,
        start_hint="plan_run",  # the way to start a run here is a tool call, not a command
    )
    reporter = ProgressReporter(ctx) if ctx is not None and not dry_run else None
    if reporter is not None:
        req.subscribers.append(reporter)
        reporter.start()
    try:
        doc = await runs.run(req)
    finally:
        if reporter is not None:
            await reporter.finish()
    if doc.get("reason") == "approval_required" and isinstance(doc.get("error"), str):
        doc["error"] += " (call again with approve: true)"
    return doc


# ---- the server -------------------------------------------------------------------------------


class PlanrunServer(StrictServer):
    """The MCP server with planrun's seven tools; it owns the runs in flight and, on stdio, the
    answers still owed to the client (what a server stopping on a signal waits for)."""

    def __init__(self) -> None:
        super().__init__(
            "planrun",
            instructions=(
                "Validate, dry-run, run and resume planrun plans (YAML/JSON DAGs of tool calls), "
                "and read their status. A `plan` argument is the plan's text or a file path."
            ),
            log_level="WARNING",
        )
        self.runs = Runs()
        self.answers: Answers | None = None  # noted only while serving stdio
        _add_run_tools(self)
        _add_reading_tools(self)

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> Any:
        if self.answers is None or context is None:
            return await super().call_tool(name, arguments, context)
        with self.answers.call(context.request_id):
            return await super().call_tool(name, arguments, context)

    async def run_stdio_async(self) -> None:
        self.answers = Answers()
        # The SDK's own run_stdio_async, with a stdout that tells when an answer has left.
        await serve_stdio(self._lowlevel_server, self.answers)


def _add_run_tools(server: PlanrunServer) -> None:
    """plan_validate, plan_dry_run, plan_run and plan_resume."""

    @server.tool()
    async def plan_validate(
        plan: PlanArg, variables: VariablesArg = None
    ) -> Annotated[CallToolResult, ValidateDoc]:
        """Check a plan (schema, references, expressions, tools, policy, cycles) without running it.

        Returns every problem at once, each with file, line and column, as
        `planrun validate --format json` prints them.
        """
        return await _answer(_now(validate_document, plan, variables, os.getcwd()))

    @server.tool()
    async def plan_dry_run(
        plan: PlanArg, variables: VariablesArg = None
    ) -> Annotated[CallToolResult, DryRunDoc]:
        """Show what a run would do: steps in start order, grouped in parallel waves, with resolved
        arguments (a value that needs an earlier step's result shows as `<step result>`).
        Runs nothing and writes no state. An invalid plan is a tool error listing its diagnostics.
        """
        return await _answer(lambda: run_doc(server.runs, plan, variables, dry_run=True))

    @server.tool()
    async def plan_run(
        plan: PlanArg, ctx: Context, variables: VariablesArg = None, approve: ApproveArg = False
    ) -> Annotated[CallToolResult, RunDoc]:
        """Run a plan and return its result (`planrun run --output json`): status
        (succeeded | failed | interrupted | blocked), reason, and every step's status, result
        and error. Step progress is reported as progress notifications. State is kept under the
        server's working directory (`.planrun/state/<plan name>.json`), so plan_resume can
        continue a failed run. An invalid plan is a tool error listing its diagnostics.
        """
        return await _answer(
            lambda: run_doc(server.runs, plan, variables, approve=approve, ctx=ctx)
        )

    @server.tool()
    async def plan_resume(
        plan: PlanArg, ctx: Context, variables: VariablesArg = None, approve: ApproveArg = False
    ) -> Annotated[CallToolResult, RunDoc]:
        """Continue the last run of a plan (`planrun resume`): steps that succeeded and are
        unchanged are not run again; failed, pending and changed steps (and what depends on
        them) are. No saved state is a tool error.
        """
        return await _answer(
            lambda: run_doc(server.runs, plan, variables, resume=True, approve=approve, ctx=ctx)
        )


def _add_reading_tools(server: PlanrunServer) -> None:
    """plan_status, plan_list and plan_schema: they read, and run nothing."""

    @server.tool()
    async def plan_status(plan: PlanArg) -> Annotated[CallToolResult, RunDoc]:
        """The last (or current) run of a plan, from its state file (`planrun status --output
        json`). A plan that never ran is a tool error.
        """
        return await _answer(_now(status_doc, plan, os.getcwd()))

    @server.tool()
    async def plan_list(
        dir: Annotated[
            str,
            Field(description="Directory to search, relative to the server's working directory."),
        ] = "plans",
    ) -> Annotated[CallToolResult, list[PlanRowDoc]]:
        """The plan files under a directory (default ./plans), each with its name, title, number
        of steps and last run status (null if never run), as `planrun list --output json`.
        The structured result is `{"result": [...]}`.
        """
        return await _answer(_now(list_doc, dir, os.getcwd()))

    @server.tool()
    async def plan_schema() -> Annotated[CallToolResult, dict[str, Any]]:
        """The JSON Schema (Draft 2020-12) of the plan format, as `planrun schema` prints it."""
        from planrun.plan.model import plan_json_schema

        return await _answer(_now(plan_json_schema))


def _now(fn: Callable[..., Any], *args: Any) -> Callable[[], Awaitable[Any]]:
    """A synchronous piece of work in the shape `_answer` takes (run when awaited)."""

    async def work() -> Any:
        return fn(*args)

    return work


def _quiet_logging() -> None:
    """Keep the SDK's INFO chatter (and uvicorn's access log) out of the user's terminal.

    Logging goes to stderr anyway; on stdio the SDK also points fd 1 at stderr while it serves,
    so a stray print() in a tool or a child process cannot corrupt the protocol stream.
    """
    logging.getLogger().setLevel(logging.WARNING)
    for name in ("mcp", "uvicorn", "uvicorn.access", "uvicorn.error", "httpx2", "httpx"):
        logging.getLogger(name).setLevel(logging.WARNING)


def serve(http: str | None = None) -> None:
    """Serve until the client goes away: stdio when `http` is None, else streamable HTTP at
    `http://HOST:PORT/mcp`. Binding beyond loopback is the caller's choice; nothing is refused.
    """
    server = PlanrunServer()
    _quiet_logging()
    if http is None:
        asyncio.run(_until_signalled(server))
        return
    host, port = parse_http_address(http)
    sock = listen(host, port)
    port = sock.getsockname()[1]  # the port chosen for `:0`
    shown = f"[{host}]" if ":" in host else host
    print(f"planrun mcp: serving streamable HTTP at http://{shown}:{port}/mcp", file=sys.stderr)
    sys.stderr.flush()
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C is how one stops a server
        app = server.streamable_http_app(host=host)  # DNS-rebinding protection on loopback hosts
        asyncio.run(serve_http(app, server.runs, host, port, sock))


async def _until_signalled(server: PlanrunServer) -> None:
    """Serve stdio; on SIGTERM or SIGINT stop the runs in flight, answer their calls, and leave.

    Python's default SIGTERM would end the process at once, leaving the steps' processes
    running and their state `running`. And the SDK reads stdin in a worker thread that
    cancellation cannot interrupt, so a cancelled server would linger until the client sends a
    line or closes stdin: so the process ends itself (exit 130) once the calls in flight have
    their answers on stdout and the client hangs up, or HANG_UP_GRACE_S after those answers.
    """
    loop = asyncio.get_running_loop()
    serving = asyncio.ensure_future(server.run_stdio_async())
    leaving: list[asyncio.Task[None]] = []

    async def leave() -> None:
        answers = server.answers
        owed = set(answers.owed) if answers is not None else set()  # the calls in flight now
        await server.runs.interrupt()
        if answers is not None:
            await answers.until_answered(owed, timeout_s=ANSWER_GRACE_S)
        # A client may still ask something after its answer (the SDK's client fetches the
        # tool list to check a result against its schema): serve until it hangs up.
        await asyncio.wait([serving], timeout=HANG_UP_GRACE_S)
        sys.stderr.flush()
        os._exit(int(ExitCode.INTERRUPTED))

    def on_signal() -> None:
        if leaving:  # a second signal: at once
            os._exit(int(ExitCode.INTERRUPTED))
        leaving.append(loop.create_task(leave()))

    signals = (signal.SIGINT, signal.SIGTERM)
    for sig in signals:
        loop.add_signal_handler(sig, on_signal)
    try:
        await serving
    finally:
        for sig in signals:
            loop.remove_signal_handler(sig)
    if leaving:  # the client hung up after a signal: leave as signalled
        await leaving[0]
