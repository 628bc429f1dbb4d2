"""The in-process layer (tests/conftest.py) leaves the test process with working streams.

A run swaps sys.stdout and sys.stderr for its own capture, and the environment modules it
imports stay imported afterwards. A module that binds the stream it finds at import time keeps
it for good: the MCP SDK's `stdio_client` takes `errlog=sys.stderr` as a default (what
`Client(StdioServerParameters(...))` uses); distributed's logging handlers hold sys.stderr. If
that stream is closed with the run, every later MCP server the test process starts fails in
subprocess.py with "ValueError: I/O operation on closed file" — in whichever test comes next in
that worker, so it looked like a flake of tests/test_secrets_shapes.py under load.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.slow  # starts two MCP servers

# Run in a fresh interpreter: in the test process the SDK may already be imported (another
# test file imports it at collection), and then no run can be the first to import it.
_SCRIPT = textwrap.dedent(
    """
    import asyncio, os, sys
    sys.path.insert(0, {root!r})
    from tests.conftest import planrun_inprocess

    assert "mcp" not in sys.modules
    plan = "servers: {{me: {{command: %r, args: [-m, planrun, mcp]}}}}\\nsteps: []\\n"
    open("p.yaml", "w").write(plan % sys.executable)
    r = planrun_inprocess("tools", "p.yaml", "--output", "json", cwd=".")
    assert r.code == 0, r
    assert "me.plan_run" in r.out, r
    assert "mcp.client.stdio" in sys.modules  # the run imported the SDK

    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    async def main():
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "planrun", "mcp"], env=dict(os.environ)
        )
        async with Client(params, read_timeout_seconds=30) as client:
            return await client.list_tools()

    print(len(asyncio.run(main()).tools), "tools")
    bound = stdio_client.__wrapped__.__defaults__[0]  # errlog, bound at import, in the run
    print("after the run", file=bound, flush=True)
    """
)


def test_a_stream_bound_during_an_in_process_run_stays_usable(tmp_path):
    script = _SCRIPT.format(root=str(ROOT))
    r = subprocess.run(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().endswith("tools"), r.stdout
    # What a module bound during the run writes afterwards reaches the process's own stderr,
    # as it would had the module been imported outside the run.
    assert "after the run" in r.stderr, r.stderr
