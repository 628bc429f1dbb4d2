"""MCP tools as plan steps, against real servers from PyPI and small scripts of our own."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from tests.conftest import ROOT, assert_no_process_left, assert_no_traceback, unique_mark

# MCP servers and Dask clusters take seconds to start: `pytest -m 'not slow'` skips these.
pytestmark = pytest.mark.slow

SERVERS = ROOT / "tests" / "mcp_servers"


def _server(name: str) -> tuple[str, str]:
    """A server entry for tests/mcp_servers/NAME, tagged with a word unique to this test (an
    argument the server ignores), and that word: other tests' servers are not this one's."""
    mark = unique_mark()
    return f'{{command: "{sys.executable}", args: ["{SERVERS / name}", "{mark}"]', mark


def test_time_example_runs(run, tmp_path):
    r = run("run", str(ROOT / "examples/mcp-time.yaml"), "--output", "json", "--no-state")
    assert r.code == 0, r
    steps = {s["id"]: s for s in r.json["steps"]}
    assert steps["now"]["result"]["timezone"] == "UTC"
    assert "Tokyo" in steps["report"]["result"]


def test_git_example_on_a_temporary_repository(run, tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "a.txt").write_text("hello\n")
    subprocess.run([*git, "add", "a.txt"], check=True)
    subprocess.run([*git, "commit", "-qm", "first commit"], check=True)
    r = run(
        "run",
        str(ROOT / "examples/mcp-git.yaml"),
        "--var",
        f"repo={repo}",
        "--output",
        "json",
        "--no-state",
    )
    assert r.code == 0, r
    steps = {s["id"]: s for s in r.json["steps"]}
    assert "first commit" in steps["log"]["result"]
    assert "first commit" in (repo / ".git/planrun-summary.txt").read_text()


def test_unknown_tool_is_an_invalid_plan(run, write):
    write(
        "p.yaml",
        """
        servers: {time: {command: mcp-server-time}}
        steps:
          - {id: a, tool: time.get_current_tim, args: {timezone: UTC}}
    """,
    )
    r = run("run", "p.yaml")
    assert r.code == 3, r
    assert "p.yaml:3:" in r.out and "did you mean 'get_current_time'" in r.out
    r = run("validate", "--check-tools", "p.yaml", "--format", "json")
    assert r.code == 3 and r.json["diagnostics"][0]["line"] == 3


def test_a_server_whose_name_holds_a_dot_is_named_in_the_error(run, write):
    """`SERVER.TOOL` splits at the first dot, so a server named `my.srv` (a name some client
    configs use) can never be called: the error says why, rather than only that `my` is unknown."""
    write(
        "p.yaml",
        """
        servers: {my.srv: {command: mcp-server-time}}
        steps:
          - {id: a, tool: my.srv.get_current_time, args: {timezone: UTC}}
    """,
    )
    r = run("validate", "p.yaml", "--format", "json")
    assert r.code == 3, r
    (diag,) = r.json["diagnostics"]
    assert diag["line"] == 3, diag
    assert "unknown MCP server 'my'" in diag["message"], diag
    assert "'my.srv'" in diag["message"] and "first '.'" in diag["message"], diag


def test_bad_literal_arguments_are_invalid_and_templated_ones_fail_the_step(run, write):
    write(
        "p.yaml",
        """
        servers: {time: {command: mcp-server-time}}
        steps:
          - {id: a, tool: time.get_current_time, args: {timezone: 5, extra: 1}}
    """,
    )
    r = run("validate", "--check-tools", "p.yaml")
    assert r.code == 3, r
    assert "p.yaml:3:" in r.out and "5 is not of type 'string'" in r.out and "warning" in r.out
    write(
        "q.yaml",
        """
        variables: {tz: Not/AZone}
        servers: {time: {command: mcp-server-time}}
        steps:
          - {id: a, tool: time.get_current_time, args: {timezone: "${tz}"}}
    """,
    )
    r = run("run", "q.yaml", "--output", "json")
    assert r.code == 1, r
    err = r.json["steps"][0]["error"]
    assert "time" in err and "get_current_time" in err
    assert_no_traceback(r)


def test_missing_server_command_fails_the_step(run, write):
    write(
        "p.yaml",
        """
        servers: {ghost: {command: no-such-mcp-server-binary}}
        steps:
          - {id: a, tool: ghost.anything, on_failure: continue}
          - {id: b, tool: echo, args: {value: 1}, depends_on: [a]}
          - {id: c, tool: echo, args: {value: 2}}
    """,
    )
    r = run("run", "p.yaml", "--output", "json")
    assert r.code == 1, r
    s = {x["id"]: x for x in r.json["steps"]}
    assert "ghost" in s["a"]["error"] and "not found" in s["a"]["error"]
    assert s["b"]["status"] == "skipped" and s["c"]["status"] == "succeeded"
    assert_no_traceback(r)


def test_bad_env_file_line_fails_the_step_with_its_position(run, write):
    # envFile is read by the rules of a plan's dotenv files: a line that is not KEY=VALUE is
    # an error at its file:line:col, never skipped; the server is not started.
    write(".env", "GOOD=1\n= a value without its key\n")
    write(
        "p.yaml",
        f"""
        servers: {{probe: {{command: "{sys.executable}", envFile: .env}}}}
        steps:
          - {{id: a, tool: probe.anything}}
    """,
    )
    r = run("run", "p.yaml", "--output", "json")
    assert r.code == 1, r
    err = r.json["steps"][0]["error"]
    assert "probe" in err and ".env:2:1:" in err and "KEY=VALUE" in err
    assert "\n" not in err
    assert_no_traceback(r)


def test_server_that_exits_mid_run(run, write):
    entry, mark = _server("crashy_server.py")
    write(
        "p.yaml",
        f"""
        servers: {{crashy: {entry}}}}}
        steps:
          - {{id: ok, tool: crashy.echo, args: {{text: hi}}}}
          - {{id: boom, tool: crashy.crash, depends_on: [ok]}}
          - {{id: after, tool: crashy.echo, args: {{text: again}}, depends_on: [boom]}}
    """,
    )
    r = run("run", "p.yaml", "--output", "json", "--keep-going")
    assert r.code == 1, r
    s = {x["id"]: x for x in r.json["steps"]}
    assert s["ok"]["status"] == "succeeded"
    assert s["boom"]["status"] == "failed" and "crashy" in s["boom"]["error"]
    assert_no_traceback(r)
    assert_no_process_left(mark)


def test_server_that_never_answers_is_bounded(run, write):
    entry, mark = _server("silent_server.py")
    write(
        "p.yaml",
        f"""
        servers:
          mute: {entry}, connect_timeout: 2s}}
        steps:
          - {{id: a, tool: mute.anything, timeout: 5s}}
    """,
    )
    r = run("run", "p.yaml", "--output", "json")
    assert r.code == 1, r
    assert "mute" in r.json["steps"][0]["error"]
    assert_no_traceback(r)
    assert_no_process_left(mark)


def test_tools_lists_builtin_and_server_tools(run, write):
    write(
        "p.yaml",
        """
        servers: {time: {command: mcp-server-time}}
        steps:
          - {id: a, tool: time.get_current_time, args: {timezone: UTC}}
    """,
    )
    r = run("tools", "p.yaml", "--output", "json")
    assert r.code == 0, r
    rows = {t["name"]: t for t in r.json}
    assert rows["shell"]["source"] == "builtin"
    assert rows["time.get_current_time"]["source"] == "time"
    assert "timezone" in rows["time.get_current_time"]["input_schema"]["properties"]


def test_mcp_config_file_supplies_servers(run, write):
    write(".mcp.json", '{"mcpServers": {"time": {"command": "mcp-server-time"}}}')
    write(
        "p.yaml",
        """
        steps:
          - {id: a, tool: time.get_current_time, args: {timezone: UTC}}
    """,
    )
    assert run("validate", "p.yaml").code == 3  # without the config the server is unknown
    r = run("run", "p.yaml", "--mcp-config", ".mcp.json", "--no-state", "--output", "json")
    assert r.code == 0, r


def test_git_binary_available():
    assert shutil.which("git")


def test_silent_server_is_bounded_by_the_step_timeout(run, write):
    entry, mark = _server("silent_server.py")
    write(
        "p.yaml",
        f"""
        servers:
          mute: {entry}}}
        steps:
          - {{id: a, tool: mute.anything, timeout: 1s}}
    """,
    )
    r = run("run", "p.yaml", "--output", "json")
    assert r.code == 1, r  # the step's 1 s, not the 20 s default connect timeout:
    assert r.json["steps"][0]["error"] == "MCP server 'mute' tool 'anything': timed out after 1s"
    assert_no_process_left(mark)


def test_tools_names_a_server_that_cannot_start_in_one_line(run, write):
    entry, _ = _server("hostile_server.py")
    write(
        "p.yaml",
        f"""
        servers:
          fine: {entry}}}
          gone: {{command: planrun-no-such-server}}
        steps:
          - {{id: a, tool: gone.x}}
    """,
    )
    r = run("tools", "p.yaml", "--output", "json")
    assert r.code == 1, r
    assert r.err.strip() == (
        "planrun: error: MCP server 'gone': command not found: planrun-no-such-server"
    )
    assert r.json == {
        "error": "MCP server 'gone': command not found: planrun-no-such-server",
        "exit_code": 1,
    }
    assert_no_traceback(r)


def test_a_server_with_a_malformed_tool_list_fails_its_steps_not_planrun(run, write):
    entry, mark = _server("hostile_server.py")
    entry = entry.replace('"]', '", "--bad-schema"]')
    write(
        "p.yaml",
        f"""
        servers: {{h: {entry}}}}}
        steps:
          - {{id: a, tool: h.say, args: {{text: hi}}}}
    """,
    )
    r = run("run", "p.yaml", "--output", "json", "--no-state")
    assert r.code == 1, r
    error = r.json["steps"][0]["error"]
    assert error.startswith("MCP server 'h' tool 'say': malformed tools/list answer"), error
    assert "internal error" not in r.err
    assert_no_traceback(r)
    assert_no_process_left(mark)
    r = run("tools", "p.yaml")
    assert r.code == 1, r
    assert r.err.startswith("planrun: error: MCP server 'h' tools/list: malformed answer"), r
    assert_no_traceback(r)


def test_a_tool_schema_with_a_dangling_reference_is_not_checked(run, write):
    entry, mark = _server("hostile_server.py")
    write(
        "p.yaml",
        f"""
        servers: {{h: {entry}}}}}
        steps:
          - {{id: a, tool: h.refy, args: {{text: hi, x: 1}}}}
          - {{id: b, tool: h.odd.name}}
    """,
    )
    r = run("run", "p.yaml", "--output", "json", "--no-state")
    assert r.code == 0, r
    assert [s["result"] for s in r.json["steps"]] == ["hi", "odd"]
    assert_no_traceback(r)
    assert_no_process_left(mark)
    r = run("validate", "p.yaml", "--check-tools")
    assert r.code == 0, r
    assert "arguments not checked" in r.out, r


def test_tools_shows_odd_tool_listings_safely(run, write):
    entry, mark = _server("hostile_server.py")
    entry = entry.replace('"]', '", "--odd-tools"]')
    write("p.yaml", f"servers: {{h: {entry}}}}}\nsteps: []\n")
    r = run("tools", "p.yaml")
    assert r.code == 0, r
    assert "\x1b" not in r.out and "\x07" not in r.out
    odd = [line for line in r.out.splitlines() if line.startswith("h.odd\\")]
    assert odd == ["h.odd\\x1b[31m(a\\nb?)  [h]  \\x1b]0;pwned\\x07 line one"], r.out
    r = run("tools", "p.yaml", "--output", "json")
    assert r.code == 0, r
    rows = {t["name"]: t for t in r.json}
    assert rows["h.odd\x1b[31m"]["description"] == "\x1b]0;pwned\x07 line one\nline two"
    assert_no_process_left(mark)


def test_a_run_s_duration_covers_starting_its_servers_in_every_view(run, write, tmp_path):
    """The run starts when it opens, before its MCP servers start and their tools are listed
    and checked: `run.started`'s time, the state's `started_at`, and one duration from there
    to its end, the same in the console, `--output json`, the state, JUnit and the report."""
    import json
    import xml.etree.ElementTree as ET
    from datetime import datetime

    from planrun.text import format_duration

    entry, mark = _server("hostile_server.py")
    # the server notes when it was started, then serves as usual
    entry = entry.replace(
        f'args: ["{SERVERS / "hostile_server.py"}"',
        "args: [\"-c\", \"import runpy, sys, time; open('server-started', 'w').write(repr("
        f"time.time())); sys.argv = sys.argv[:1] + sys.argv[2:]; runpy.run_path('"
        f"{SERVERS / 'hostile_server.py'}', run_name='__main__')\", \"-\"",
    )
    write(
        "p.yaml",
        f"""
        name: timed
        servers: {{h: {entry}}}}}
        steps:
          - {{id: a, tool: h.say, args: {{text: hi}}}}
        """,
    )
    r = run(
        "run", "p.yaml", "--output", "json", "--events", "ev.jsonl", "--junit", "j.xml",
        "--report", "r.html",
    )  # fmt: skip
    assert r.code == 0, r
    assert_no_process_left(mark)
    events = {
        e["event"]: e for e in map(json.loads, (tmp_path / "ev.jsonl").read_text().splitlines())
    }

    def at(iso: str) -> float:
        return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()

    began, ended = at(events["run.started"]["ts"]), at(events["run.finished"]["ts"])
    server = float((tmp_path / "server-started").read_text())
    assert began <= server, "the run started after its server"
    took = r.json["duration_s"]
    # From the run's start (before its server started) to its end: within the events' times,
    # which are read as the clock is (first) and after it (last), a slow machine only widening
    # the gap between them, never narrowing it (2 ms: milliseconds in the events' times).
    assert took >= ended - server - 0.002, (took, ended - server)
    assert took <= ended - began + 0.002, (took, ended - began)
    assert events["run.finished"]["duration_s"] == took
    assert r.err.strip().splitlines()[-1].endswith(f"in {format_duration(took)}"), r.err
    state = run("status", "p.yaml", "--output", "json").json
    assert state["duration_s"] == took
    snapshot = json.loads((tmp_path / ".planrun/state/timed.json").read_text())
    assert snapshot["started_at"] == events["run.started"]["ts"]
    suite = ET.parse(tmp_path / "j.xml").getroot().find("testsuite")
    assert suite is not None and suite.get("time") == f"{took:.3f}"
    assert format_duration(took) in (tmp_path / "r.html").read_text()


@pytest.mark.parametrize("lines", [1, 1000])
def test_a_server_s_megabyte_error_is_kept_cut_everywhere(run, write, tmp_path, lines):
    """A tool error and a JSON-RPC error of 1 MB (one line, or a thousand): the step fails with
    the first line cut, the text kept up to client.ERROR_TEXT_CHARS with a marker saying how
    much more there was, in its result, events, state, console and report."""
    entry, mark = _server("hostile_server.py")
    write(
        "p.yaml",
        f"""
        servers: {{h: {entry}}}}}
        defaults: {{on_failure: continue}}
        steps:
          - {{id: a, tool: h.fail, args: {{size: 1000000, lines: {lines}}}}}
          - {{id: b, tool: h.rpc_error, args: {{size: 1000000, lines: {lines}}}}}
    """,
    )
    r = run("run", "p.yaml", "--output", "json", "--events", "ev.jsonl")
    assert r.code == 1, r
    assert_no_traceback(r)
    assert_no_process_left(mark)
    assert [s["status"] for s in r.json["steps"]] == ["failed", "failed"], r
    events = [json.loads(line) for line in (tmp_path / "ev.jsonl").read_text().splitlines()]
    failed = [e for e in events if e["event"] == "step.failed"]
    assert len(failed) == 2, failed
    for event in failed:
        assert len(event["error"]) < 2200, event["error"][:300]
        assert "more characters" in event["detail"], event["detail"][-300:]
        assert len(event["detail"]) < 17_000
    kept = {
        "console": r.err,
        "events": (tmp_path / "ev.jsonl").read_text(),
        "state": "".join(p.read_text() for p in (tmp_path / ".planrun" / "state").glob("*")),
    }
    report = run("report", "p.yaml", "-o", "report.html")
    assert report.code == 0, report
    kept["report"] = (tmp_path / "report.html").read_text()
    for where, text in kept.items():
        assert len(text) < 200_000, f"{where}: {len(text)} characters"


def test_tools_and_check_tools_mask_the_plan_s_secrets(run, write, tmp_path):
    """A secret that reaches a server entry (a URL's query, a server's environment) is masked
    in what `planrun tools` and `validate --check-tools` print, as a run masks it."""
    server = tmp_path / "telling_server.py"
    server.write_text(
        "import os\n"
        "from mcp.server.mcpserver import MCPServer\n"
        "s = MCPServer('t', log_level='WARNING')\n"
        "def peek() -> str:\n"
        "    return 'x'\n"
        "s.add_tool(peek, description='uses token ' + os.environ['TOKEN'])\n"
        "s.run()\n"
    )
    secret = "s3cr3t-d0-not-show"
    write(
        "p.yaml",
        f"""
        variables: {{token: {secret}}}
        secrets: [token]
        servers:
          tell: {{command: "{sys.executable}", args: ["{server}"], env: {{TOKEN: "${{token}}"}}}}
        steps:
          - {{id: a, tool: tell.peek}}
    """,
    )
    write(
        "down.yaml",
        f"""
        variables: {{token: {secret}}}
        secrets: [token]
        servers:
          web: {{url: "http://127.0.0.1:1/mcp?key=${{token}}"}}
        steps:
          - {{id: a, tool: web.peek}}
    """,
    )
    listed = run("tools", "p.yaml", "--output", "json")
    assert listed.code == 0, listed
    described = {t["name"]: t["description"] for t in listed.json}
    assert described["tell.peek"] == "uses token ***"
    for args in (
        ("tools", "p.yaml"),
        ("tools", "down.yaml"),
        ("tools", "down.yaml", "--output", "json"),
        ("validate", "down.yaml", "--check-tools"),
        ("validate", "down.yaml", "--check-tools", "--format", "json"),
    ):
        r = run(*args)
        assert secret not in r.out + r.err, r
        assert "***" in r.out + r.err, r
        assert_no_traceback(r)
