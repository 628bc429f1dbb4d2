"""The HTML run report: `planrun report` and `run --report FILE`, checked as files and in Chromium."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from planrun.report.model import PlanInfo, build_report, critical_path
from planrun.state import RunState, StepState
from tests.conftest import (
    assert_no_traceback,
    spawn_planrun,
    unique_sleep,
    wait_for_command,
)

PIPELINE = """
    title: A small pipeline
    variables: {token: "tok-SECRET-123"}
    secrets: [token]
    steps:
      - {id: setup, tool: shell, args: {cmd: "sleep 0.2; echo ready"}}
      - id: slow
        title: The slow one
        tool: shell
        depends_on: [setup]
        args: {cmd: "sleep 0.8; echo slow done"}
      - id: quick
        tool: shell
        depends_on: [setup]
        args: {cmd: "echo quick with ${token}"}
      - id: broken
        tool: shell
        depends_on: [setup]
        on_failure: continue
        args: {cmd: "for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35; do echo line $i; done; echo 'it broke' >&2; exit 2"}
      - {id: after_broken, tool: echo, depends_on: [broken], args: {value: 1}}
      - {id: last, tool: shell, depends_on: [slow, quick], args: {cmd: "sleep 0.1; echo last"}}
"""


class Bars(HTMLParser):
    """The timeline's rows (`<a class="step" data-...>`) and all tags and URLs in the page."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: dict[str, dict[str, str]] = {}
        self.tags: set[str] = set()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        a = {k: v or "" for k, v in attrs}
        if tag == "a" and a.get("class") == "step":
            self.rows[a["data-step"]] = a
        for key in ("src", "href"):
            if key in a:
                self.urls.append(a[key])


def parse(path: Path) -> tuple[str, Bars]:
    text = path.read_text()
    bars = Bars()
    bars.feed(text)
    return text, bars


def assert_self_contained(text: str, bars: Bars, *, no_urls_in_text: bool = True) -> None:
    assert all(u.startswith("#") for u in bars.urls), bars.urls  # in-page links only
    assert not {"script", "link", "img", "iframe", "object"} & bars.tags
    assert "@import" not in text and "url(http" not in text
    # the only absolute URL is the SVG namespace name, which is never fetched
    if no_urls_in_text:
        assert set(re.findall(r"https?://[^\s\"'<>]+", text)) <= {"http://www.w3.org/2000/svg"}


def test_run_report_after_a_failure(run, write, tmp_path):
    write("p.yaml", PIPELINE)
    r = run("run", "p.yaml", "-j", "3", "--report", "out/report.html")
    assert r.code == 2 and "no such directory" in r.err, r  # checked before anything runs
    assert not (tmp_path / ".planrun").exists()
    r = run("run", "p.yaml", "-j", "3", "--report", "report.html")
    assert r.code == 1, r
    text, bars = parse(tmp_path / "report.html")
    assert_self_contained(text, bars)
    assert list(bars.rows) == ["setup", "slow", "quick", "broken", "after_broken", "last"]
    status = {sid: row["data-status"] for sid, row in bars.rows.items()}
    assert status == {
        "setup": "succeeded",
        "slow": "succeeded",
        "quick": "succeeded",
        "broken": "failed",
        "after_broken": "skipped",
        "last": "succeeded",
    }
    assert "data-bar" not in bars.rows["after_broken"]  # never ran: no bar
    # bars start where their step started: after setup, slow and quick side by side
    x = {
        sid: float(row["data-bar"].split(",")[0])
        for sid, row in bars.rows.items()
        if "data-bar" in row
    }
    w = {
        sid: float(row["data-bar"].split(",")[1])
        for sid, row in bars.rows.items()
        if "data-bar" in row
    }
    assert x["setup"] < x["slow"] and x["setup"] < x["quick"]
    assert x["last"] >= x["slow"] + w["slow"] - 1
    # Wider, not "3 times wider": both start with setup's end, and a loaded machine can take
    # far longer than `echo` needs to start quick's shell; slow sleeps 0.8 s more whatever.
    assert w["slow"] > w["quick"]
    critical = {sid for sid, row in bars.rows.items() if row.get("data-critical")}
    assert critical == {"setup", "slow", "last"}
    assert "The slow one" in text
    assert "failed" in text and "step_failed" in text and "-j <b>3</b>" in text
    assert "it broke" in text and "line 35" in text and "line 1\n" not in text  # the tail
    assert "tok-SECRET-123" not in text and "quick with ***" in text
    assert_no_traceback(r)


@pytest.mark.slow  # a real process per command
@pytest.mark.e2e  # a real `python -m planrun` process
def test_report_command_reads_the_state(run, write, tmp_path):
    write("planrun.yaml", "steps: [{id: a, title: First, tool: echo, args: {value: 1}}]\n")
    r = run("report")
    assert r.code == 4 and "no state" in r.err, r
    assert run("run").code == 0
    r = run("report")
    assert r.code == 0, r
    text, bars = parse(tmp_path / "planrun-report.html")
    assert list(bars.rows) == ["a"] and "First" in text and "succeeded" in text
    r = run("report", "planrun.yaml", "-o", "custom.html")
    assert r.code == 0 and (tmp_path / "custom.html").exists(), r
    r = run("report", "-o", str(tmp_path))
    assert r.code == 2 and "directory" in r.err, r


def test_report_needs_state(run, write):
    write("p.yaml", "steps: [{id: a, tool: echo, args: {value: 1}}]\n")
    r = run("run", "p.yaml", "--no-state", "--report", "r.html")
    assert r.code == 2 and "--no-state" in r.err, r


def test_a_run_blocked_before_its_first_step_writes_a_report_an_invalid_one_none(
    run, write, tmp_path
):
    write("p.yaml", "steps: [{id: gated, tool: echo, args: {value: 1}, approval: true}]\n")
    r = run("run", "p.yaml", "--report", "r.html")
    assert r.code == 5, r  # no --yes, no terminal: blocked
    text, bars = parse(tmp_path / "r.html")
    assert (
        "blocked" in text and "approval_required" in text and "approval required for: gated" in text
    )
    assert list(bars.rows) == ["gated"] and "pending" in text
    write("bad.yaml", "steps: [{id: a, tool: nope}]\n")
    r = run("run", "bad.yaml", "--report", "bad.html")
    assert r.code == 3 and not (tmp_path / "bad.html").exists(), r


@pytest.mark.slow
def test_report_written_after_ctrl_c(write, tmp_path):
    hanging = unique_sleep(600)
    write(
        "p.yaml",
        f"""
        steps:
          - {{id: first, tool: shell, args: {{cmd: "echo one"}}}}
          - {{id: hang, tool: shell, depends_on: [first], args: {{cmd: "{hanging}"}}}}
        """,
    )
    proc = spawn_planrun(
        "run", "p.yaml", "--report", "r.html", cwd=tmp_path, stderr=subprocess.PIPE
    )
    try:
        # The sleep itself, exec'd: a Ctrl-C before that can be lost in the shell's fork, and
        # the run would then end only with the 10 s grace period.
        wait_for_command(hanging)
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)  # a bound: the step would sleep 600 s
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130
    text, bars = parse(tmp_path / "r.html")
    assert bars.rows["first"]["data-status"] == "succeeded"
    assert bars.rows["hang"]["data-status"] == "interrupted"
    assert "interrupted" in text


def test_report_marks_steps_kept_from_an_earlier_run(run, write, tmp_path):
    write(
        "p.yaml",
        """
        steps:
          - {id: a, tool: echo, args: {value: 1}}
          - {id: b, tool: shell, depends_on: [a], args: {cmd: "test -e ok"}}
        """,
    )
    assert run("run", "p.yaml").code == 1
    (tmp_path / "ok").write_text("")
    r = run("resume", "p.yaml", "--report", "r.html")
    assert r.code == 0, r
    text, bars = parse(tmp_path / "r.html")
    assert bars.rows["a"].get("data-kept") == "true" and "data-bar" not in bars.rows["a"]
    assert bars.rows["b"]["data-status"] == "succeeded" and "data-bar" in bars.rows["b"]
    assert "kept from an earlier run" in text


def _state(steps: dict[str, tuple[float, float, str]]) -> RunState:
    def iso(t: float) -> str:
        return f"2026-11-26T08:00:{t:06.3f}Z"

    return RunState(
        plan="p",
        status="succeeded",
        started_at=iso(0),
        ended_at=iso(max(e for _, e, _ in steps.values())),
        steps={
            sid: StepState(status=st, attempts=1, started_at=iso(s), ended_at=iso(e))
            for sid, (s, e, st) in steps.items()
        },
    )


def test_foreach_instances_are_bars_under_their_step_and_carry_the_critical_path():
    # as the state lists them: the plan's steps, then instances as they appeared
    state = _state(
        {
            "gen": (0, 1, "succeeded"),
            "lint": (1, 5, "failed"),
            "done": (5, 6, "succeeded"),
            "lint[1]": (1, 5, "succeeded"),
            "lint[0]": (1, 2, "succeeded"),
            "lint[2]": (1, 3, "failed"),
        }
    )
    info = PlanInfo(
        titles={"lint": "Lint a package"},
        tools={"lint": "shell"},
        deps={"gen": [], "lint": ["gen"], "done": ["lint"]},
    )
    report = build_report(state, info, now=0)
    rows = {r.id: r for r in report.steps}
    assert [r.id for r in report.steps] == ["gen", "lint", "lint[0]", "lint[1]", "lint[2]", "done"]
    assert {r.id for r in report.steps if r.critical} == {"gen", "lint", "lint[1]", "done"}
    assert report.critical_s == 6
    assert rows["lint"].group and not rows["lint"].instance
    assert rows["lint[1]"].instance and rows["lint[1]"].title == "Lint a package"
    assert rows["lint[1]"].tool == "shell"
    assert (rows["lint[1]"].start_s, rows["lint[1]"].end_s) == (1, 5)


def test_critical_path_follows_what_each_step_waited_for():
    times = {"a": (0.0, 1.0), "b": (1.0, 4.0), "c": (1.0, 2.0), "d": (4.0, 5.0)}
    deps = {"a": [], "b": ["a"], "c": ["a"], "d": ["b", "c"]}
    assert critical_path(times, deps) == {"a", "b", "d"}
    assert critical_path({}, {}) == set()


def test_template_ships_as_package_data():
    import tomllib

    root = Path(__file__).resolve().parent.parent
    config = tomllib.loads((root / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["planrun.report"]
    templates = root / "planrun" / "report"
    assert any(templates.glob(p) for p in patterns)
    assert (templates / "templates" / "report.html.j2") in {
        f for p in patterns for f in templates.glob(p)
    }


# ---- in a real browser ------------------------------------------------------------------------

CHROMIUM = (
    shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
)
browser = pytest.mark.skipif(
    CHROMIUM is None, reason="Chromium is not installed (Debian: apt-get install chromium)"
)


def _chromium(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    return subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--enable-logging=stderr",
            "--v=0",
            f"--user-data-dir={cwd / 'chromium-profile'}",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
    )


def _console_messages(stderr: str) -> list[str]:
    """What the page logged to the console (errors, CSP refusals): Chromium's CONSOLE lines."""
    return [
        line
        for line in stderr.splitlines()
        if "CONSOLE" in line or "Refused to" in line or "Uncaught" in line
    ]


@pytest.mark.slow  # a headless browser
@pytest.mark.browser
@browser
def test_report_loads_in_chromium_without_console_errors(run, write, tmp_path):
    write("p.yaml", PIPELINE)
    assert run("run", "p.yaml", "--report", "report.html").code == 1
    page = (tmp_path / "report.html").resolve()
    done = _chromium("--dump-dom", page.as_uri(), cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert _console_messages(done.stderr) == [], done.stderr[-4000:]
    dom = done.stdout
    assert "<svg" in dom and 'data-step="slow"' in dom and "The slow one" in dom
    shot = tmp_path / "shot.png"
    done = _chromium(
        "--screenshot=" + str(shot), "--window-size=1280,900", page.as_uri(), cwd=tmp_path
    )
    assert shot.exists() and shot.stat().st_size > 10_000, done.stderr[-2000:]
    assert _console_messages(done.stderr) == []


def test_cached_steps_are_marked(run, write, tmp_path):
    write(
        "p.yaml",
        """
        steps:
          - {id: gen, tool: shell, cache: true, args: {cmd: "echo generated"}}
          - {id: use, tool: shell, depends_on: [gen], args: {cmd: "echo used"}}
        """,
    )
    assert run("run", "p.yaml").code == 0
    r = run("run", "p.yaml", "--report", "r.html")
    assert r.code == 0, r
    _, bars = parse(tmp_path / "r.html")
    if bars.rows["gen"]["data-status"] != "cached":
        pytest.skip("the scheduler does not take results from the cache yet")
    assert bars.rows["gen"].get("data-cached") == "true" and "data-bar" in bars.rows["gen"]
    assert "data-cached" not in bars.rows["use"]


def test_cached_status_in_the_page(tmp_path):
    from planrun.report import render_report

    state = _state({"gen": (0, 0, "cached"), "use": (0, 1, "succeeded")})
    page = tmp_path / "r.html"
    page.write_text(render_report(state, PlanInfo(deps={"use": ["gen"]})))
    _, bars = parse(page)
    assert bars.rows["gen"].get("data-cached") == "true" and "data-bar" in bars.rows["gen"]
    assert float(bars.rows["gen"]["data-bar"].split(",")[1]) >= 6  # visible, however short
    assert "data-cached" not in bars.rows["use"]


def test_hostile_text_stays_text(run, write, tmp_path):
    write(
        "p.yaml",
        """
        steps:
          - id: x
            title: "<script>alert(1)</script> & <img src=http://e.invalid/a.png>"
            tool: shell
            on_failure: continue
            args: {cmd: "echo '</pre><script>alert(2)</script>' >&2; exit 1"}
        """,
    )
    assert run("run", "p.yaml", "--report", "r.html").code == 1
    text, bars = parse(tmp_path / "r.html")
    assert_self_contained(text, bars, no_urls_in_text=False)  # a URL in a title is only text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert "&lt;/pre&gt;&lt;script&gt;alert(2)" in text


def test_report_never_replaces_a_device_fifo_or_symlink(run, write, tmp_path):
    write("planrun.yaml", "steps: [{id: a, tool: echo, args: {value: 1}}]\n")
    assert run("run").code == 0
    os.mkfifo(tmp_path / "fifo.html")
    (tmp_path / "target.html").write_text("keep me")
    os.symlink(tmp_path / "target.html", tmp_path / "link.html")
    for name in ("fifo.html", "link.html"):
        r = run("report", "-o", name)
        assert r.code == 2 and "not replacing it" in r.err, r
        r = run("run", "--report", name)
        assert r.code == 2 and "not replacing it" in r.err, r
    assert (tmp_path / "target.html").read_text() == "keep me"
    assert (tmp_path / "link.html").is_symlink()


def test_foreach_instances_in_a_real_run(run, write, tmp_path):
    write(
        "p.yaml",
        """
        steps:
          - id: lint
            title: "Lint ${pkg}"
            tool: shell
            foreach: [alpha, beta, gamma]
            as: pkg
            args: {cmd: "echo ${pkg}"}
          - {id: done, tool: echo, depends_on: [lint], args: {value: 1}}
        """,
    )
    r = run("run", "p.yaml", "-j", "2", "--report", "r.html")
    if r.code == 3 and "foreach" in r.out:
        pytest.skip("this planrun has no foreach yet")
    assert r.code == 0, r
    text, bars = parse(tmp_path / "r.html")
    assert list(bars.rows) == ["lint", "lint[0]", "lint[1]", "lint[2]", "done"]
    assert all("data-bar" in row for row in bars.rows.values())
    assert "Lint beta" in text
    assert bars.rows["done"].get("data-critical") == "true"


def test_critical_path_starts_at_a_step_ending_with_its_dependency() -> None:
    # An instant last step ends on the same clock tick as the step it waited for: the path
    # still starts at it (it is downstream), not at the dependency that started earlier.
    times = {"lint": (0.0, 1.0), "build": (0.0, 0.5), "done": (1.0, 1.0)}
    deps = {"done": ["lint", "build"], "lint": [], "build": []}
    assert critical_path(times, deps) == {"done", "lint"}


# ---- what reaches the page --------------------------------------------------------------------

# Every C0 control but tab and line feed, DEL and every C1 control: none may reach the page.
NOT_IN_HTML = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
NOISY = (
    "\x1b[31mred\x1b[0m \x1b[1;32mbold green\x1b[0m \x1b]0;window title\x07after-osc\n"
    + "".join(chr(c) for c in range(0x20) if c not in (0x09, 0x0A))
    + " del\x7f csi8\x9b1mend\r\n"
    + "progress 10%\rprogress 100%\n"
    # C1 holds string introducers (DCS, OSC...) that run to the next ESC, as at a terminal
    + "".join(chr(c) for c in range(0x80, 0xA0))
    + "\x1b[0m c1 done\n"
)


class PageText(HTMLParser):
    """Everything the browser reads as text or attribute values, character references decoded."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.parts.extend(v or "" for _, v in attrs)

    def handle_data(self, data: str) -> None:
        self.parts.append(data)


def assert_no_control_characters(html: str) -> str:
    """The page's text (as parsed); fails on a control character in the file or in the text."""
    assert not NOT_IN_HTML.findall(html), sorted(set(NOT_IN_HTML.findall(html)))
    page = PageText()
    page.feed(html)
    page.close()
    text = "".join(page.parts)
    assert not NOT_IN_HTML.findall(text), sorted(set(NOT_IN_HTML.findall(text)))
    return text


def test_control_characters_never_reach_the_page_on_any_path(run, write, tmp_path):
    (tmp_path / "noisy.txt").write_bytes(NOISY.encode())
    write(
        "p.yaml",
        r"""
        name: noisy
        steps:
          - id: colours
            title: "tinted \e[31mtitle\e[0m bell\a"
            tool: shell
            on_failure: continue
            args: {cmd: "cat noisy.txt; cat noisy.txt >&2; exit 3"}
        """,
    )
    written = run("run", "p.yaml", "--report", "run.html")
    assert written.code == 1, written
    assert run("report", "p.yaml", "-o", "report.html").code == 0
    to_stdout = run("report", "p.yaml", "-o", "-")
    assert to_stdout.code == 0, to_stdout
    pages = {
        "run --report": (tmp_path / "run.html").read_text("utf-8"),
        "report -o FILE": (tmp_path / "report.html").read_text("utf-8"),
        "report -o -": to_stdout.out,
    }
    for path, html in pages.items():
        text = assert_no_control_characters(html)
        # colours become plain text: the words stay, the codes go
        assert "red bold green" in text and "[31m" not in text and "[1;32m" not in text, path
        assert "after-osc" in text and "window title" not in text, path
        assert "tinted title bell" in text, path  # the title, tooltip included
        assert "csi8end" in text and "progress 100%" in text and "c1 done" in text, path


def test_a_failed_step_without_output_shows_its_error_and_detail(run, write, tmp_path):
    write("p.yaml", 'steps: [{id: quiet, tool: shell, args: {cmd: "exit 3"}}]\n')
    assert run("run", "p.yaml", "--report", "r.html").code == 1
    text = (tmp_path / "r.html").read_text()
    row = text[text.index('<tr id="step-0">') :]
    row = row[: row.index("</tr>")]
    assert "command exited with code 3" in row
    assert "$ exit 3" in row and "<details open>" in row  # what the console shows under it


# ---- legibility: contrast and width ------------------------------------------------------------

HEX = re.compile(r"#(?:[0-9a-fA-F]{6}|[0-9a-fA-F]{3})\b")
NOT_TEXT = {".legend span.sw"}  # colour swatches: no text on them


def _luminance(colour: str) -> float:
    """WCAG 2 relative luminance of `#rgb` / `#rrggbb`."""
    digits = colour.lstrip("#")
    if len(digits) == 3:
        digits = "".join(d * 2 for d in digits)
    channels = []
    for i in (0, 2, 4):
        c = int(digits[i : i + 2], 16) / 255
        channels.append(c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4)
    r, g, b = channels
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(a: str, b: str) -> float:
    """WCAG 2 contrast ratio, 1 to 21."""
    light, dark = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def test_contrast_formula():
    assert contrast("#000", "#fff") == pytest.approx(21)
    assert contrast("#777777", "#ffffff") == pytest.approx(4.48, abs=0.01)


def _css_rules(html: str) -> list[tuple[str, dict[str, str]]]:
    """The page's `<style>` rules as (selector, {property: colour}), `var(--x)` resolved."""
    css = html[html.index("<style>") + 7 : html.index("</style>")]
    rules = [
        (sel.strip(), dict(d.split(":", 1) for d in body.split(";") if ":" in d))
        for sel, body in re.findall(r"([^{}]+)\{([^}]*)\}", css)
    ]
    rules = [(sel, {k.strip(): v.strip() for k, v in decls.items()}) for sel, decls in rules]
    variables = {k: v for sel, decls in rules if sel == ":root" for k, v in decls.items()}
    out = []
    for sel, decls in rules:
        colours = {}
        for prop in ("color", "background", "background-color", "fill"):
            if prop in decls:
                value = re.sub(r"var\((--[\w-]+)\)", lambda m: variables[m.group(1)], decls[prop])
                found = HEX.findall(value)
                assert found, f"{sel} {{{prop}: {value}}}: not a colour this test can read"
                colours["background" if prop.startswith("background") else prop] = found[0]
        out.append((sel, colours))
    return out


def _inline(html: str, pattern: str) -> list[str]:
    return list(re.findall(pattern, html))


def test_every_text_colour_pair_reaches_wcag_aa(tmp_path):
    """4.5:1 for every text colour on every background it can sit on (the 13 px table text,
    the badge, tags, the timeline's labels), the status colours included."""
    from planrun.report import render_report

    statuses = ["succeeded", "cached", "failed", "ignored", "interrupted", "running", "skipped"]
    state = _state({s: (0, 1, s) for s in statuses})
    state.steps["never"] = StepState(status="pending")
    for status in ("succeeded", "failed", "interrupted", "pending"):
        state.status = status  # the badge's colours
        html = render_report(state, PlanInfo(title="t"))
        rules = _css_rules(html)
        body = next(c for sel, c in rules if sel == "body")
        # backgrounds text sits on: the page, backgrounds of rules that keep the text colour
        # (table head, output, the highlighted row, the error box), the timeline's rows
        surfaces = {body["background"]}
        surfaces |= {
            c["background"]
            for sel, c in rules
            if "background" in c and "color" not in c and sel not in NOT_TEXT
        }
        surfaces |= {c["fill"] for sel, c in rules if "rect" in sel and "fill" in c}
        surfaces |= set(_inline(html, r'<rect class="row"[^>]* fill="(#\w+)" fill-opacity="1"'))
        pairs: set[tuple[str, str, str]] = set()
        for sel, c in rules:
            text = c.get("color") or (c.get("fill") if "rect" not in sel else None)
            if text is None or sel == ".badge":  # the badge's background is the run status's
                continue
            for bg in [c["background"]] if "background" in c else surfaces:
                pairs.add((sel, text, bg))
        for colour in _inline(html, r'style="color: (#\w+)"'):  # the status column
            pairs |= {("status text", colour, bg) for bg in surfaces}
        badge = next(c["color"] for sel, c in rules if sel == ".badge")
        for colour in _inline(html, r'class="badge" style="background: (#\w+)"'):
            pairs.add((f"badge ({state.status})", badge, colour))
        assert len({p[1] for p in pairs if p[0] == "status text"}) >= 7
        low = [
            f"{where}: {text} on {bg} {contrast(text, bg):.2f}:1"
            for where, text, bg in sorted(pairs)
            if contrast(text, bg) < 4.5
        ]
        assert low == []


def _page_width(page: Path, tmp_path: Path) -> int:
    """document.documentElement.scrollWidth of the page in a 1280 px wide window: a copy of it
    with a script (which the page's own Content-Security-Policy would refuse) that writes it."""
    html = page.read_text()
    html = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", html)
    probe = (
        "<script>document.body.setAttribute('data-width', "
        "document.documentElement.scrollWidth + ',' + window.innerWidth)</script>"
    )
    measured = tmp_path / "measured.html"
    measured.write_text(html.replace("</body>", probe + "</body>"))
    done = _chromium("--window-size=1280,900", "--dump-dom", measured.as_uri(), cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    found = re.search(r'data-width="(\d+),(\d+)"', done.stdout)
    assert found, done.stdout[-2000:]
    assert int(found.group(2)) == 1280  # the window the page was laid out in
    return int(found.group(1))


@pytest.mark.slow  # a headless browser
@pytest.mark.browser
@browser
def test_long_unbroken_words_wrap_instead_of_widening_the_page(run, write, tmp_path):
    word = "x" * 200
    write(
        "p.yaml",
        f"""
        title: {word}
        steps:
          - id: {"s" * 120}
            title: {word}
            tool: shell
            on_failure: continue
            args: {{cmd: "echo {word}; echo {word} >&2; exit 3"}}
        """,
    )
    assert run("run", "p.yaml", "--report", "r.html").code == 1
    assert word in (tmp_path / "r.html").read_text()
    assert _page_width(tmp_path / "r.html", tmp_path) <= 1280


# ---- the run report ----------------------------------------------------------------------


def test_report_page_holds_the_runs_facts_and_each_steps_row(run, write, tmp_path):
    write(
        "p.yaml",
        """
        steps:
          - id: flaky
            tool: shell
            retries: 1
            retry_delay: 0.01
            on_failure: continue
            args: {cmd: "echo out-tail; echo err-tail >&2; exit 4"}
          - {id: fan, tool: echo, foreach: [1, 2], args: {value: "${item}"}}
        """,
    )
    r = run("run", "p.yaml", "--report", "r.html")
    assert r.code == 1, r
    text = (tmp_path / "r.html").read_text()
    for header in ("status", "attempts", "duration", "error"):
        assert f"<th>{header}" in text
    assert "step_failed" in text and "duration" in text and "failed" in text
    assert "out-tail" in text and "err-tail" in text and "command exited with code 4" in text
    assert 'data-step="fan[1]"' in text
    # bars are coloured by status: a failed step's bar is not a succeeded one's colour
    bars = {
        m[0]: m[1]
        for m in re.findall(
            r'data-step="([^"]+)".*?<rect x="[^"]*" [^>]*fill="([^"]+)"', text, re.S
        )
    }
    assert bars["fan[1]"] != bars["flaky"], bars


def test_run_report_is_written_when_the_run_is_blocked(run, write, tmp_path):
    write("p.yaml", "steps: [{id: gated, tool: echo, approval: true, args: {value: 1}}]\n")
    r = run("run", "p.yaml", "--report", "r.html")
    assert r.code == 5, r
    text = (tmp_path / "r.html").read_text()
    assert "blocked" in text and "approval_required" in text


def test_report_of_a_plan_that_no_longer_parses_says_why_it_finds_no_state(run, write):
    """As `status`: the state is kept under the name the file gave; when the file no longer
    parses, the report says so instead of asking for a run of a plan that cannot run."""
    write("p.yaml", "name: m\nsteps:\n  - {id: a, tool: echo, args: {value: 1}}\n")
    assert run("run", "p.yaml").code == 0
    write("p.yaml", "name: m\nsteps: [\n")
    r = run("report", "p.yaml", "-o", "r.html")
    assert r.code == 4, r
    assert "no state for plan 'p'" in r.err, r
    assert "p.yaml does not parse (p.yaml:" in r.err, r
    assert "run it first" not in r.err, r
