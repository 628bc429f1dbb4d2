"""An outside checker's reading of the contract's fan-out (`foreach`) and everyday conveniences
(default plan, targets, `list PLAN_FILE`, completion in real shells, `init`, the run report):
black-box, through the command line, real files and real bash/zsh/fish where installed. Each test
checks a rule that other test files leave out or check only loosely."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.conftest import assert_no_traceback, planrun, planrun_process


def steps_of(doc: dict) -> dict[str, dict]:
    return {s["id"]: s for s in doc["steps"]}


STEP_KEYS = {"id", "status", "attempts", "duration_s", "result", "error"}

# ---- §11 foreach -----------------------------------------------------------------------------


def test_instances_have_the_step_shape_and_odd_step_ids_keep_their_form(run, write):
    # The mcp-cli `index` alias (an int) and ids with dots and dashes give ID[N] as written.
    write(
        "p.yaml",
        """
        steps:
          - {id: a.b-c, tool: echo, foreach: [x, y], args: {value: "${index}:${item}"}}
          - {index: 7, tool: echo, foreach: [z], args: {value: "${item}"}}
        """,
    )
    r = run("run", "p.yaml", "--output", "json", "--no-state")
    assert r.code == 0, r
    assert [s["id"] for s in r.json["steps"]] == ["a.b-c", "a.b-c[0]", "a.b-c[1]", "7", "7[0]"]
    for entry in r.json["steps"]:
        assert set(entry) == STEP_KEYS, entry
    s = steps_of(r.json)
    assert s["a.b-c[1]"]["result"] == "1:y" and s["a.b-c"]["result"] == ["0:x", "1:y"]
    assert s["7"]["result"] == ["z"] and s["7[0]"]["status"] == "succeeded"


def test_index_is_bound_in_when_and_title(run, write):
    write(
        "p.yaml",
        """
        steps:
          - id: fan
            title: "part ${index} of ${item}"
            tool: echo
            foreach: [a, b, c]
            when: "${index != 1}"
            args: {value: "${index}"}
        """,
    )
    r = run("run", "p.yaml", "--output", "json", "--no-state")
    assert r.code == 0, r
    s = steps_of(r.json)
    assert [s[f"fan[{n}]"]["status"] for n in range(3)] == ["succeeded", "skipped", "succeeded"]
    assert s["fan"]["result"] == [0, None, 2]
    assert "part 2 of c" in r.err


def test_mappings_give_key_value_in_order_from_a_var_a_result_and_empty(run, write):
    write(
        "p.yaml",
        """
        variables: {m: {}}
        steps:
          - {id: none, tool: echo, foreach: {}, args: {value: "${item}"}, result_variable: a}
          - {id: none2, tool: echo, foreach: "${m}", args: {value: "${item}"}, result_variable: b}
          - {id: src, tool: echo, args: {value: {zeta: 1, alpha: 2, mid: 3}}, result_variable: got}
          - id: dyn
            tool: echo
            foreach: "${got}"
            as: kv
            args: {value: "${kv.key}=${kv.value}"}
        """,
    )
    r = run("run", "p.yaml", "--output", "json", "--no-state", "--var", "m={b: 1, a: 2}")
    assert r.code == 0, r
    s = steps_of(r.json)
    assert s["none"]["result"] == [] and "none[0]" not in s
    assert s["none2"]["result"] == [{"key": "b", "value": 1}, {"key": "a", "value": 2}]
    assert s["dyn"]["result"] == ["zeta=1", "alpha=2", "mid=3"]
    r = run("run", "p.yaml", "--output", "json", "--no-state")
    assert steps_of(r.json)["none2"]["result"] == [], r


def test_abort_leaves_instances_that_never_started_pending(run, write, tmp_path):
    write(
        "p.yaml",
        """
        steps:
          - id: fan
            tool: shell
            foreach: [fail, a, b]
            args: {cmd: "if [ ${item} = fail ]; then exit 3; fi; touch ran-${item}"}
        """,
    )
    r = run("run", "p.yaml", "--output", "json", "-j", "1", "--junit", "j.xml")
    assert r.code == 1, r
    s = steps_of(r.json)
    assert [s[f"fan[{n}]"]["status"] for n in range(3)] == ["failed", "pending", "pending"]
    assert s["fan"]["status"] == "failed" and not list(tmp_path.glob("ran-*"))
    # the console's closing line counts every instance of the step, not just those that started
    assert "3 foreach instances (1 failed, 2 pending)" in r.err, r.err
    # state, status and JUnit list them too, as --output json does
    state = json.loads((tmp_path / ".planrun/state/p.json").read_text())
    assert state["steps"]["fan[1]"]["status"] == "pending"
    status = run("status", "p.yaml", "--output", "json")
    assert [(x["id"], x["status"]) for x in status.json["steps"]] == [
        (x["id"], x["status"]) for x in r.json["steps"]
    ]
    cases = ET.parse(tmp_path / "j.xml").getroot().iter("testcase")
    assert [c.get("name") for c in cases] == ["fan", "fan[0]", "fan[1]", "fan[2]"]


def test_the_state_file_holds_each_instance_under_its_id(run, write, tmp_path):
    write(
        "p.yaml",
        """
        steps:
          - {id: fan, tool: echo, foreach: [x, y], args: {value: "${item}!"}}
        """,
    )
    assert run("run", "p.yaml").code == 0
    state = json.loads((tmp_path / ".planrun/state/p.json").read_text())
    assert {"fan", "fan[0]", "fan[1]"} <= set(state["steps"])
    assert state["steps"]["fan[1]"]["status"] == "succeeded"
    assert state["steps"]["fan[1]"]["result"] == "y!"
    assert state["steps"]["fan"]["result"] == ["x!", "y!"]


def test_an_instance_skipped_by_when_is_a_step_skipped_event(run, write, tmp_path):
    write(
        "p.yaml",
        """
        steps:
          - {id: fan, tool: echo, foreach: [1, 2], when: "${item > 1}", args: {value: 1}}
        """,
    )
    assert run("run", "p.yaml", "--no-state", "--events", "e.jsonl").code == 0
    events = [json.loads(x) for x in (tmp_path / "e.jsonl").read_text().splitlines()]
    seen = [(e["event"], e.get("step")) for e in events]
    assert ("step.skipped", "fan[0]") in seen and ("step.succeeded", "fan[1]") in seen
    assert ("step.started", "fan[0]") not in seen
    assert seen[-1] == ("run.finished", None)


@pytest.mark.parametrize(("value", "word"), [('"abc"', "a string"), ("42", "a number")])
def test_a_result_that_is_not_a_list_fails_the_step_clearly(run, write, value, word):
    write(
        "p.yaml",
        f"""
        steps:
          - {{id: src, tool: echo, args: {{value: {value}}}, result_variable: out}}
          - {{id: fan, tool: shell, foreach: "${{out}}", args: {{cmd: "true"}}}}
          - {{id: after, tool: echo, depends_on: [fan], args: {{value: 1}}}}
        """,
    )
    r = run("run", "p.yaml", "--output", "json", "--no-state")
    assert_no_traceback(r)
    assert r.code == 1, r
    s = steps_of(r.json)
    assert s["fan"]["status"] == "failed" and "fan[0]" not in s
    assert f"foreach gave {word}" in s["fan"]["error"]
    assert "not a list or a mapping" in s["fan"]["error"]
    assert s["after"]["status"] == "pending"


def test_targets_select_all_of_a_steps_instances(run, write):
    write(
        "p.yaml",
        """
        steps:
          - {id: fan, tool: echo, foreach: [a, b], args: {value: "${item}"}}
          - {id: other, tool: echo, args: {value: 1}}
        """,
    )
    r = run("run", "p.yaml", "fan", "--output", "json", "--no-state")
    assert r.code == 0, r
    assert [s["id"] for s in r.json["steps"]] == ["fan", "fan[0]", "fan[1]"]
    # an instance is no target of its own (docs/foreach.md): exit 2, pointing at its step
    r = run("run", "p.yaml", "fan[1]", "--no-state")
    assert r.code == 2 and "no step 'fan[1]'" in r.err and "did you mean 'fan'?" in r.err, r


def test_hostile_elements_reach_each_instance_verbatim(run, write, tmp_path):
    elements = ["$(touch pwned)", "`touch pwned2`", 'it\'s "q"', "a\nb", "ünï 🎉", "$HOME", ""]
    write(
        "p.yaml",
        'steps:\n  - {id: fan, tool: shell, foreach: "${xs}", args: {cmd: "printf %s ${item}"}}\n',
    )
    (tmp_path / "v.json").write_text(json.dumps({"xs": elements + [{"k": [1, None]}]}))
    r = run("run", "p.yaml", "--output", "json", "--no-state", "--vars-file", "v.json")
    assert r.code == 0, r
    outs = [x["stdout"] for x in steps_of(r.json)["fan"]["result"]]
    assert outs == elements + ['{"k": [1, null]}']
    assert not (tmp_path / "pwned").exists() and not (tmp_path / "pwned2").exists()


def test_a_huge_list_fails_the_step_in_one_line_before_any_instance(run, write, tmp_path):
    write(
        "p.yaml",
        """
        variables: {xs: []}
        steps:
          - {id: fan, tool: shell, foreach: "${xs}", args: {cmd: "touch ran"}}
        """,
    )
    (tmp_path / "v.json").write_text(json.dumps({"xs": list(range(1_000_000))}))
    started = time.monotonic()
    r = run("run", "p.yaml", "--output", "json", "--no-state", "--vars-file", "v.json")
    assert time.monotonic() - started < 30
    assert_no_traceback(r)
    assert r.code == 1, r
    error = steps_of(r.json)["fan"]["error"]
    assert "\n" not in error and "1,000,000 items" in error and "100,000" in error
    assert not (tmp_path / "ran").exists()


def test_dry_run_of_an_unknown_list_is_one_line_with_the_placeholder(run, write):
    write(
        "p.yaml",
        """
        steps:
          - {id: src, tool: shell, args: {cmd: "ls"}, result_variable: listing}
          - {id: each, tool: echo, foreach: "${listing.stdout.split()}", args: {value: "${item}"}}
        """,
    )
    r = run("run", "p.yaml", "--dry-run")
    assert r.code == 0, r
    heads = [x.strip() for x in r.out.splitlines() if x.lstrip("•∥ ").startswith("each")]
    assert len(heads) == 1 and "each[*]" in heads[0], r.out
    assert "<foreach over <src result>>" in r.out


# ---- §12 the default plan and targets ---------------------------------------------------------

YML = "name: from-yml\nsteps: [{id: y, tool: echo, args: {value: 1}}]\n"
JSON_PLAN = json.dumps(
    {"name": "from-json", "steps": [{"id": "j", "tool": "echo", "args": {"value": 1}}]}
)


@pytest.mark.parametrize("command", ["validate", "graph", "status", "report", "resume"])
def test_every_command_takes_planrun_yml_before_planrun_json(run, write, tmp_path, command):
    write("planrun.yml", YML)
    write("planrun.json", JSON_PLAN)
    assert run("run").code == 0
    (tmp_path / ".planrun/state/from-json.json").unlink(missing_ok=True)
    r = run(
        command, *{"graph": ["--format", "json"], "status": ["--output", "json"]}.get(command, [])
    )
    assert r.code == 0, r
    if command == "graph":
        assert [n["id"] for n in r.json["nodes"]] == ["y"]
    elif command == "status":
        assert r.json["plan"] == "from-yml"
    elif command == "report":
        assert "from-yml" in (tmp_path / "planrun-report.html").read_text()
    elif command == "resume":
        assert "y kept from the previous run" in r.err, r
    # planrun.yaml, once it exists, comes first
    write("planrun.yaml", "name: from-yaml\nsteps: [{id: a, tool: nope}]\n")
    r = run("validate")
    assert r.code == 3 and r.out.startswith("planrun.yaml:"), r


def test_a_target_without_any_default_plan_exits_2_naming_the_files(run, tmp_path):
    r = run("run", "build")
    assert r.code == 2, r
    assert "planrun.yaml, planrun.yml or planrun.json" in r.err and len(r.err.splitlines()) == 1
    assert not (tmp_path / ".planrun").exists()


def test_an_existing_file_without_a_plan_extension_is_the_plan(run, write, tmp_path):
    write("planrun.yaml", "steps: [{id: tasks, tool: shell, args: {cmd: 'touch from-default'}}]\n")
    write("tasks", "steps: [{id: other, tool: shell, args: {cmd: 'touch from-tasks'}}]\n")
    r = run("run", "tasks", "--no-state")
    assert r.code == 0, r
    assert (tmp_path / "from-tasks").exists() and not (tmp_path / "from-default").exists()


@pytest.mark.parametrize("name", ["other.yml", "other.json", "sub/other.yaml"])
def test_a_missing_plan_by_its_extension_is_a_usage_error(run, write, name):
    write("planrun.yaml", "steps: [{id: a, tool: echo, args: {value: 1}}]\n")
    r = run("run", name)
    assert r.code == 2 and f"plan file not found: {name}" in r.err, r


def test_targets_add_to_only_and_one_unknown_target_runs_nothing(run, write, tmp_path):
    write(
        "ci.yaml",
        """
        steps:
          - {id: build, tool: shell, args: {cmd: "touch built"}}
          - {id: docs, tool: shell, args: {cmd: "touch docs"}}
          - {id: test, tool: shell, args: {cmd: "touch tested"}}
        """,
    )
    r = run("run", "ci.yaml", "docs", "--only", "build", "--output", "json", "--no-state")
    assert r.code == 0, r
    assert [s["id"] for s in r.json["steps"]] == ["build", "docs"]
    for f in ("built", "docs"):
        (tmp_path / f).unlink()
    r = run("run", "ci.yaml", "docs", "tset", "--no-state")
    assert r.code == 2 and "no step 'tset'" in r.err and "did you mean 'test'?" in r.err, r
    r = run("run", "ci.yaml", "--only", "bulid", "--no-state")
    assert r.code == 2 and "no step 'bulid'" in r.err and "did you mean 'build'?" in r.err, r
    assert not any((tmp_path / f).exists() for f in ("built", "docs", "tested"))


def test_list_plan_file_json_document(run, write):
    write(
        "ci.json",
        json.dumps(
            {
                "title": "CI",
                "steps": [
                    {"id": "read", "tool": "echo", "args": {"value": 1}, "result_variable": "x"},
                    {"id": "fan", "tool": "echo", "foreach": "${[x]}", "args": {"value": 1}},
                ],
            }
        ),
    )
    r = run("list", "ci.json", "--output", "json")
    assert r.code == 0, r
    assert r.json == {
        "plan": "ci",
        "file": "ci.json",
        "title": "CI",
        "steps": [
            {"id": "read", "title": "read", "description": None, "tool": "echo", "depends_on": []},
            {
                "id": "fan",
                "title": "fan",
                "description": None,
                "tool": "echo",
                "depends_on": ["read"],
            },
        ],
    }
    text = run("list", "ci.json").out.splitlines()
    assert text[2].split() == ["fan", "[echo]", "after:", "read"], text


# ---- §12 shell completion in the real shells -------------------------------------------------

PLAN = "steps: [{id: build, tool: echo, args: {value: 1}}, {id: bench, tool: echo, args: {value: 1}}, {id: test, tool: echo, args: {value: 1}}]\n"
HOSTILE = "$(touch pwned).yaml"


def _shim(tmp_path: Path) -> dict[str, str]:
    """An environment whose PATH has a `planrun` that runs this tree's planrun."""
    shim = tmp_path / "bin" / "planrun"
    shim.parent.mkdir(exist_ok=True)
    shim.write_text(f'#!/bin/sh\nexec {sys.executable} -m planrun "$@"\n')
    shim.chmod(0o755)
    return {**os.environ, "PATH": f"{shim.parent}:{os.environ['PATH']}"}


def _shell(argv: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run a real shell (bash, zsh, fish) with `argv`, text output captured."""
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=60, env=env)


def _script(tmp_path: Path, shell: str) -> str:
    r = planrun("completion", shell, cwd=tmp_path)
    assert r.code == 0, r
    path = tmp_path / f"planrun.{shell}"
    path.write_text(r.out)
    return str(path)


def _complete_bash_words(tmp_path: Path, words: list[str]) -> list[str]:
    script = _script(tmp_path, "bash")
    quoted = " ".join("'" + w.replace("'", "'\\''") + "'" for w in words)
    test = (
        f"source {script}\nCOMP_WORDS=(planrun {quoted}); COMP_CWORD={len(words)}\n"
        '_planrun_completion planrun\nprintf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    done = _shell(["bash", "--norc", "-c", test], tmp_path, _shim(tmp_path))
    assert done.returncode == 0 and done.stderr == "", done.stderr
    return done.stdout.splitlines()


def test_completion_offers_step_ids_after_force(tmp_path):
    (tmp_path / "planrun.yaml").write_text(PLAN)
    r = planrun(
        cwd=tmp_path,
        env={
            "_PLANRUN_COMPLETE": "bash_complete",
            "COMP_WORDS": "planrun run --force b",
            "COMP_CWORD": "3",
        },
    )
    assert r.code == 0, r
    assert [x.split(",", 1)[1] for x in r.out.splitlines()] == ["build", "bench"]


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_bash_completes_a_hostile_plan_name_without_running_it(tmp_path):
    (tmp_path / HOSTILE).write_text(PLAN)
    assert _complete_bash_words(
        tmp_path,
        [
            "run",
            HOSTILE.replace("$", "\\$").replace("(", "\\(").replace(")", "\\)").replace(" ", "\\ "),
            "--force",
            "t",
        ],
    ) == ["test"]
    assert not (tmp_path / "pwned").exists()


# Ctrl-T prints the line the shell's editor holds, between @@ and ##
_SHOW_LINE = {
    "bash": 'bind -x \'"\\C-t": printf "@@%s##\\\\n" "$READLINE_LINE"\'',
    "zsh": 'show() { print -r -- "@@${BUFFER}##" }; zle -N show; bindkey "^T" show',
}


def _line_after_tab(
    cwd: Path, script: str, typed: str, env: dict[str, str], shell: str = "bash"
) -> str:
    """The command line an interactive bash or zsh (in a pseudo-terminal) holds after
    TYPED<TAB>; the line is never run (Ctrl-C)."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: an interactive shell without the user's startup files
        os.chdir(cwd)
        argv = ["bash", "--norc", "--noprofile", "-i"] if shell == "bash" else ["zsh", "-f", "-i"]
        os.execvpe(shell, argv, {**env, "PS1": "$ ", "TERM": "dumb", "INPUTRC": "/dev/null"})
    seen = b""

    def read_until(token: bytes) -> None:
        nonlocal seen
        end = time.monotonic() + 30
        while token not in seen and time.monotonic() < end:
            ready, _, _ = select.select([fd], [], [], 0.5)
            if ready:
                try:
                    seen += os.read(fd, 4096)
                except OSError:
                    break

    try:
        # zsh's completion system first: the script registers itself with its compdef
        init = "autoload -U compinit; compinit -u -D; " if shell == "zsh" else ""
        setup = f"{init}source {script}; {_SHOW_LINE[shell]}; " + 'echo SET""UP\n'
        os.write(fd, setup.encode())
        read_until(b"SETUP\r\n")
        seen = b""
        os.write(fd, typed.encode() + b"\t\x14")
        read_until(b"##\r")
        os.write(fd, b"\x03exit\n")
    finally:
        os.close(fd)
        os.waitpid(pid, 0)
    text = seen.decode(errors="replace")
    assert "@@" in text and "##" in text, text
    return text.split("@@", 1)[1].split("##", 1)[0]


def _words(line: str, env: dict[str, str], cwd: Path) -> list[str]:
    """The words bash reads from the command line `line` (its first word dropped)."""
    words = f"set -- {line.split(' ', 1)[1]}; printf '%s\\0' \"$@\""
    done = _shell(["bash", "--norc", "-c", words], cwd, env)
    assert done.returncode == 0, done.stderr
    return done.stdout.split("\0")[:-1]


ODD = 'it\'s "q" `x` \\ $y.yaml'


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
@pytest.mark.parametrize("opening", ["", "'", '"'])
def test_bash_inserts_plan_names_quoted_as_the_shell_reads_them(tmp_path, opening):
    for name in (HOSTILE, "my plan.yaml", ODD, "planrun.yaml"):
        (tmp_path / name).write_text(PLAN)
    env = _shim(tmp_path)
    script = _script(tmp_path, "bash")
    # unquoted, `$(` would start a command substitution: `$` alone is typed there
    hostile = "$(t" if opening else "$"
    for typed, name in ((hostile, HOSTILE), ("my", "my plan.yaml"), ("it", ODD)):
        line = _line_after_tab(tmp_path, script, f"planrun run {opening}{typed}", env)
        assert _words(line, env, tmp_path) == ["run", name], line
    line = _line_after_tab(tmp_path, script, "planrun run --only bu", env)
    assert line == "planrun run --only build ", line
    assert not (tmp_path / "pwned").exists()


@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is not installed")
def test_zsh_inserts_plan_names_quoted_as_the_shell_reads_them(tmp_path):
    for name in (HOSTILE, "my plan.yaml", ODD, "planrun.yaml"):
        (tmp_path / name).write_text(PLAN)
    env = _shim(tmp_path)
    script = _script(tmp_path, "zsh")
    for typed, name in (("\\$", HOSTILE), ("my", "my plan.yaml"), ("it", ODD)):
        line = _line_after_tab(tmp_path, script, f"planrun run {typed}", env, "zsh")
        assert _words(line, env, tmp_path) == ["run", name], line
    line = _line_after_tab(tmp_path, script, "planrun run --only bu", env, "zsh")
    assert line == "planrun run --only build ", line
    assert not (tmp_path / "pwned").exists()


ZSH_STUBS = (
    # compadd and _describe print what they are given (zsh without compinit has neither)
    "compdef() { :; }\n"
    'compadd() { while (( $# )); do [[ $1 == -a ]] && { shift; print -rl -- "${(@P)1}"; }; shift; done; }\n'
    "_describe() { :; }\n"
)


@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is not installed")
def test_zsh_script_completes_ids_and_plan_files_in_zsh(tmp_path):
    (tmp_path / "planrun.yaml").write_text(PLAN)
    (tmp_path / HOSTILE).write_text(PLAN)
    script = _script(tmp_path, "zsh")
    test = (
        f"{ZSH_STUBS}source {script}\n"
        "words=(planrun run --only b); CURRENT=4; _planrun_completion; print -- ---\n"
        "words=(planrun run ''); CURRENT=3; _planrun_completion; print -- ---\n"
        "words=(planrun run '\\$\\(touch\\ pwned\\).yaml' --force ''); CURRENT=5; _planrun_completion\n"
    )
    done = _shell(["zsh", "-f", "-c", test], tmp_path, _shim(tmp_path))
    assert done.returncode == 0 and done.stderr == "", done.stderr
    ids, files, hostile = done.stdout.split("---\n")
    assert ids.split("\n")[:-1] == ["build", "bench"]
    # an empty word: the default plan's step ids, no files (a path-like word offers files)
    assert set(files.splitlines()) == {"build", "bench", "test"}
    assert hostile.splitlines() == ["build", "bench", "test"]
    assert not (tmp_path / "pwned").exists()


def _fish_quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _fish_complete(tmp_path: Path, line: str) -> subprocess.CompletedProcess[str]:
    script = _script(tmp_path, "fish")
    command = f"source {script}; complete -C {_fish_quote(line)}"
    return _shell(["fish", "--no-config", "-c", command], tmp_path, _shim(tmp_path))


@pytest.mark.skipif(shutil.which("fish") is None, reason="fish is not installed")
def test_fish_script_completes_commands_ids_and_plan_files_in_fish(tmp_path):
    (tmp_path / "planrun.yaml").write_text(PLAN)
    (tmp_path / "ci.yaml").write_text("steps: [{id: deploy, tool: echo, args: {value: 1}}]\n")
    done = _fish_complete(tmp_path, "planrun run --only b")
    assert done.stderr == "" and sorted(done.stdout.split()) == ["bench", "build"], done
    done = _fish_complete(tmp_path, "planrun run ci.yaml --force ")
    assert done.stderr == "" and done.stdout.split() == ["deploy"], done
    done = _fish_complete(tmp_path, "planrun ini")
    assert done.stderr == "" and done.stdout.split() == ["init"], done
    done = _fish_complete(tmp_path, "planrun validate c")
    assert done.stderr == "" and done.stdout.split() == ["ci.yaml"], done
    done = _fish_complete(tmp_path, "planrun run --on")
    assert done.stderr == "" and done.stdout.split() == ["--only"], done


@pytest.mark.skipif(shutil.which("fish") is None, reason="fish is not installed")
def test_fish_never_runs_what_it_completes(tmp_path):
    # a step named like a command: completing it must offer it, never run it
    bindir = tmp_path / "bin"
    bindir.mkdir()
    trap = bindir / "trapstep"
    trap.write_text(f"#!/bin/sh\ntouch {tmp_path}/ran-trapstep\n")
    trap.chmod(0o755)
    (tmp_path / "planrun.yaml").write_text(
        "steps: [{id: trapstep, tool: echo, args: {value: 1}}]\n"
    )
    (tmp_path / HOSTILE).write_text(PLAN)
    done = _fish_complete(tmp_path, "planrun run --only ")
    assert done.stdout.split() == ["trapstep"], done
    done = _fish_complete(tmp_path, "planrun run '$(touch pwned).yaml' --only t")
    assert done.stdout.split() == ["test"], done
    done = _fish_complete(tmp_path, "planrun run '$(to")
    assert HOSTILE in done.stdout.splitlines(), done
    assert not (tmp_path / "ran-trapstep").exists() and not (tmp_path / "pwned").exists()


# ---- §12 init ---------------------------------------------------------------------------------


def test_init_under_dash_C_and_never_over_a_directory(run, tmp_path):
    (tmp_path / "proj").mkdir()
    r = run("-C", "proj", "init")
    assert r.code == 0, r
    first = (tmp_path / "proj/planrun.yaml").read_text().splitlines()[0]
    assert first.startswith("# yaml-language-server: $schema=")
    assert run("-C", "proj", "run", "--output", "json").code == 0
    (tmp_path / "d.yaml").mkdir()
    r = run("init", "d.yaml")
    assert r.code == 2 and len(r.err.splitlines()) == 1, r
    assert_no_traceback(r)


def test_init_without_a_name_leaves_another_default_plan_in_charge(run, write, tmp_path):
    # planrun.yaml would take the place of an existing planrun.yml as the default plan
    write("planrun.yml", YML)
    r = run("init")
    assert r.code == 2 and "planrun.yml" in r.err, r
    assert not (tmp_path / "planrun.yaml").exists()
    assert run("init", "other.yaml").code == 0


# ---- §12 the run report ----------------------------------------------------------------------


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


def test_list_takes_the_variables_a_plan_reads_as_graph_does(run, write, tmp_path):
    write("needs.yaml", "steps: [{id: build, tool: shell, args: {cmd: 'echo ${version}'}}]\n")
    r = run("list", "needs.yaml")
    assert r.code == 3 and "undefined name 'version'" in r.out, r
    r = run("list", "needs.yaml", "--var", "version=1", "--output", "json")
    assert r.code == 0 and [s["id"] for s in r.json["steps"]] == ["build"], r
    write("v.yaml", "version: 2\n")
    r = run("list", "needs.yaml", "--vars-file", "v.yaml")
    assert r.code == 0 and "build" in r.out, r


@pytest.mark.parametrize(
    ("name", "text", "where"),
    [
        ("bad.yaml", "steps: [\n", "bad.yaml:2:1: error: invalid YAML"),
        ("bad.json", '{"steps": [}', "bad.json:1:12: error: invalid JSON"),
        ("empty.yaml", "", "empty.yaml:1:1: error: plan file is empty"),
        ("text.yaml", "just text\n", "text.yaml:1:1: error: a plan must be a mapping"),
        ("tasks", "- a\n", "tasks:1:1: error: a plan must be a mapping"),
    ],
)
def test_a_plan_that_does_not_parse_is_named_as_given_by_run(run, write, name, text, where):
    # as `validate` names it (the contract's `plan.yaml:12:7: error: ...`), not by its full path
    write(name, text)
    for command in (["run", name], ["run", name, "--dry-run"], ["validate", name]):
        r = run(*command)
        assert r.code == 3, r
        assert r.out.startswith(where), (command, r.out)


def test_instances_skipped_by_when_are_not_charged_to_the_budget(run, write):
    write(
        "p.yaml",
        """
        limits: {max_steps: 2}
        steps:
          - {id: fan, tool: echo, foreach: [1, 2, 3, 4], when: "${item % 2 == 0}", args: {value: 1}}
        """,
    )
    r = run("run", "p.yaml", "--output", "json", "--no-state")
    assert r.code == 0 and r.json["reason"] == "completed", r
    write(
        "q.yaml",
        """
        limits: {max_steps: 2}
        steps:
          - {id: fan, tool: echo, foreach: [1, 2, 3], args: {value: 1}}
        """,
    )
    r = run("run", "q.yaml", "--output", "json", "--no-state", "-j", "1")
    assert r.code == 1 and r.json["reason"] == "step_budget", r
    assert "limits.max_steps is 2" in steps_of(r.json)["fan[2]"]["error"]


def test_a_gated_foreach_with_no_instance_that_can_run_does_not_block(run, write, tmp_path):
    # Approval up front counts only what can run: each instance has the step's `when` and
    # approval, so a list known at start whose every `when` is false, or an empty list, holds
    # nothing up; one instance that can run still blocks (exit 5), naming the step.
    write(
        "p.yaml",
        """
        variables: {xs: [1, 2]}
        steps:
          - {id: none, tool: echo, foreach: "${xs}", approval: true, when: "${item > 5}", args: {value: 1}}
          - {id: empty, tool: echo, foreach: [], approval: true, args: {value: 1}}
          - {id: free, tool: shell, args: {cmd: "touch ran"}}
        """,
    )
    r = run("run", "p.yaml", "--output", "json")
    assert r.code == 0, r
    s = steps_of(r.json)
    assert s["none"]["status"] == "skipped" and s["empty"]["result"] == []
    assert (tmp_path / "ran").exists()
    r = run("run", "p.yaml", "--output", "json", "--var", "xs=[1, 9]")
    assert r.code == 5 and r.json["reason"] == "approval_required", r
    assert "none" in r.err and "empty" not in r.err.split("approval required for:")[1]


@pytest.mark.parametrize(
    "env",
    [
        {"_PLANRUN_COMPLETE": "bash_complete", "COMP_WORDS": "planrun run ", "COMP_CWORD": "x"},
        {"_PLANRUN_COMPLETE": "bash_complete"},
        {"_PLANRUN_COMPLETE": "zsh_complete", "COMP_WORDS": "planrun run "},
        {"_PLANRUN_COMPLETE": "fish_complete", "COMP_WORDS": "planrun run"},
    ],
)
def test_a_malformed_completion_environment_offers_nothing_without_a_traceback(tmp_path, env):
    # e.g. _PLANRUN_COMPLETE left exported by hand: the protocol's other variables are missing
    r = planrun_process(cwd=tmp_path, env=env)
    assert_no_traceback(r)
    assert r.err == "" and r.out.strip() == "", r
