"""The reference as the code has it: docs/reference.md's and the README's synopses name every
option of every command and no option that is gone; every exit-code table in the docs, and
`planrun --help`, lists exactly the codes of `planrun.errors.ExitCode`; the reference's key
tables name every key of the plan format (`planrun schema`), and no key that is gone; the tool
table every argument of every built-in tool; and every `planrun …` command a page shows takes
the options it is shown with."""

from __future__ import annotations

import json
import re

import click
import pytest

from planrun.cli.commands import main
from planrun.errors import ExitCode
from tests.conftest import ROOT, planrun

SYNOPSES = {"docs/reference.md": "## 5. Command line", "README.md": "## Commands"}
OPTION = re.compile(r"(?<![\w-])--?[A-Za-z][\w-]*")


def commands() -> dict[str, set[str]]:
    """Each command ('run', 'cache info', '' for planrun itself) and its option names."""
    found: dict[str, set[str]] = {}

    def walk(path: str, command: click.Command) -> None:
        ctx = click.Context(command)
        names = {n for p in command.get_params(ctx) for n in [*p.opts, *p.secondary_opts]}
        found[path] = {n for n in names if n.startswith("-")} - {"-h", "--help"}
        if isinstance(command, click.Group):
            for sub in command.list_commands(ctx):
                sub_command = command.get_command(ctx, sub)
                assert sub_command is not None
                walk(f"{path} {sub}".strip(), sub_command)

    walk("", main)
    return found


def synopsis(page: str) -> dict[str, set[str]]:
    """The options the page's synopsis block gives each command (continuation lines included)."""
    text = (ROOT / page).read_text()
    block = text[text.index(SYNOPSES[page]) :].split("```", 2)[1]
    documented: dict[str, set[str]] = {}
    names: list[str] = []
    for line in block.splitlines():
        if line.startswith("planrun "):
            words = line.split()[1:]
            if words[0].startswith("-"):  # planrun -C DIR COMMAND ...
                names = [""]
            elif is_group(words[0]):  # cache info|clean|prune
                names = [f"{words[0]} {sub}" for sub in words[1].split("|")]
            else:
                names = [words[0]]
            for name in names:
                documented.setdefault(name, set())
        for name in names:
            documented[name] |= {o.split("=")[0] for o in OPTION.findall(line)}
    return documented


def is_group(name: str) -> bool:
    return isinstance(main.get_command(click.Context(main), name), click.Group)


@pytest.mark.parametrize("page", sorted(SYNOPSES))
def test_the_synopsis_names_every_command_and_option_and_nothing_that_is_gone(page):
    real = commands()
    documented = synopsis(page)
    if "resume" in documented and not documented["resume"]:  # [same options]
        documented["resume"] = documented["run"]
    documented.setdefault("", set()).add("--version")  # `planrun --version`: in its own line
    assert sorted(set(real) - set(documented) - {"cache"}) == [], f"{page}: commands missing"
    assert sorted(set(documented) - set(real)) == [], f"{page}: commands that are gone"
    problems = []
    for command, options in real.items():
        said = documented.get(command, set())
        # An option is documented by any of its names (`-j N` for `-j, --jobs`)...
        missing = sorted(o for o in options if not said & aliases(command, o))
        if missing:
            problems.append(f"`planrun {command}` does not document {missing}")
        # ...and every name the page gives is one the command takes.
        if gone := sorted(said - options):
            problems.append(f"`planrun {command}` has no option {gone}")
    assert not problems, f"{page}:\n" + "\n".join(problems)


def aliases(command: str, option: str) -> set[str]:
    """Every name of the option that has the name OPTION (`-j` -> {-j, --jobs})."""
    cmd: click.Command = main
    ctx = click.Context(main)
    for word in command.split():
        assert isinstance(cmd, click.Group)
        sub = cmd.get_command(ctx, word)
        assert sub is not None
        cmd = sub
    for param in cmd.get_params(click.Context(cmd)):
        names = {*param.opts, *param.secondary_opts}
        if option in names:
            return names
    return {option}


def exit_code_tables() -> list[tuple[str, dict[int, str]]]:
    """Each table whose first column is headed `code` or `exit`, per page."""
    tables = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        lines = page.read_text().splitlines()
        for i, line in enumerate(lines):
            if re.match(r"\|\s*(code|exit)\s*\|", line):
                rows = {}
                for row in lines[i + 2 :]:
                    cells = [c.strip() for c in row.strip().strip("|").split("|")]
                    if not row.startswith("|") or not cells[0].isdigit():
                        break
                    rows[int(cells[0])] = cells[1]
                tables.append((str(page.relative_to(ROOT)), rows))
    return tables


def test_every_exit_code_table_lists_the_codes_planrun_exits_with():
    tables = exit_code_tables()
    assert {page for page, _ in tables} >= {"README.md", "docs/reference.md"}
    for page, rows in tables:
        assert sorted(rows) == sorted(int(c) for c in ExitCode), page


def test_help_lists_the_codes_planrun_exits_with(tmp_path):
    r = planrun("--help", cwd=tmp_path)
    table = r.out[r.out.index("Exit codes:") :].splitlines()[1:]
    listed = [int(line.split()[0]) for line in table if line.strip()[:1].isdigit()]
    assert listed == sorted(int(c) for c in ExitCode)


def key_table(heading: str, first_row: str) -> set[str]:
    """The keys in the first column of the table under HEADING that starts with FIRST_ROW."""
    text = (ROOT / "docs/reference.md").read_text()
    section = text[text.index(heading) :]
    lines = section[section.index(first_row) :].splitlines()
    rows = [line for line in lines[: next(i for i, ln in enumerate(lines) if not ln)]]
    return {key for row in rows for key in re.findall(r"`(\w+)`", row.split("|")[1])}


def test_the_key_tables_name_every_key_of_the_plan_format(tmp_path):
    schema = json.loads(planrun("schema", cwd=tmp_path).out)
    plan_keys = key_table("## 1. Plan files", "| `version` |")
    step_keys = key_table("## 1. Plan files", "| `id` (alias `index`")
    assert plan_keys == set(schema["properties"])
    assert step_keys == set(schema["$defs"]["Step"]["properties"])


def test_the_tool_table_names_every_argument_of_every_built_in_tool(tmp_path):
    tools = {
        t["name"]: set(t["input_schema"]["properties"])
        for t in json.loads(planrun("tools", "--output", "json", cwd=tmp_path).out)
    }
    text = (ROOT / "docs/reference.md").read_text()
    section = text[text.index("## 4. Built-in tools") :]
    section = section[section.index("| tool |") :]
    table = section[: section.index("\n\n")].splitlines()[2:]
    documented = {}
    for row in table:
        cells = row.split("|")
        name = cells[1].strip().strip("`")
        if name != "SERVER.TOOL":
            documented[name] = set(re.findall(r"`(\w+)`", cells[2]))
    assert documented == tools


def command_lines() -> list[tuple[str, str]]:
    """Each planrun command a page shows: a code span that starts with `planrun `, and each
    line of a shell or output block that runs one (`planrun …`, `$ planrun …`, `&& planrun …`)."""
    fence = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.S | re.M)
    found = []
    for page in [
        ROOT / "README.md",
        ROOT / "CONTRIBUTING.md",
        *sorted((ROOT / "docs").glob("*.md")),
    ]:
        text = page.read_text()
        name = str(page.relative_to(ROOT))
        spans = re.findall(r"`([^`\n]+)`", fence.sub("", text))
        found += [(name, s) for s in spans if s.startswith("planrun ")]
        for lang, block in fence.findall(text):
            if lang in ("", "sh", "console"):
                for line in block.splitlines():
                    for m in re.finditer(r"(?:^\s*|^\$ |&& |\$\()(planrun [^|;&)`\"#]*)", line):
                        found.append((name, m.group(1)))
    return found


def test_every_command_a_page_shows_takes_the_options_it_is_shown_with():
    ctx = click.Context(main)
    top = {n for p in main.get_params(ctx) for n in [*p.opts, *p.secondary_opts]}
    top |= {"-h", "--help"}
    wrong: list[str] = []
    for page, line in command_lines():
        words = line.split()[1:]
        while words[:1] == ["-C"]:
            words = words[2:]
        if not words or not re.fullmatch(r"[a-z]+|-.*", words[0]):
            continue  # `planrun -C DIR COMMAND ...`, or planrun's own output (`planrun mcp: …`)
        if words[0].startswith("-"):  # planrun's own options: --help, --version
            wrong += [f"{page}: `{line}`: no option {w}" for w in words if w not in top]
            continue
        command = main.get_command(ctx, words[0])
        if command is None:
            wrong.append(f"{page}: `{line}`: no such command")
            continue
        words = words[1:]
        if isinstance(command, click.Group) and words:
            sub = command.get_command(ctx, words[0].split("|")[0])
            if sub is not None:
                command, words = sub, words[1:]
        names = top | {n for p in command.get_params(ctx) for n in [*p.opts, *p.secondary_opts]}
        for word in words:
            if word == "--":  # what follows is the steps' (cli_args)
                break
            if word.startswith("-") and word.split("=")[0] not in names:
                wrong.append(f"{page}: `{line}`: no option {word}")
    assert not wrong, "\n".join(wrong)
