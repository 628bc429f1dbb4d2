"""Shell completion, driven the way bash drives it: COMP_WORDS / COMP_CWORD and _PLANRUN_COMPLETE."""

from __future__ import annotations

import os
import pty
import select
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import assert_no_traceback, planrun, planrun_process

PLAN = """
steps:
  - {id: build, tool: echo, args: {value: 1}}
  - {id: bench, tool: echo, args: {value: 1}}
  - {id: test, tool: echo, args: {value: 1}}
"""


def complete(cwd, line: str) -> list[str]:
    """What `planrun LINE<TAB>` offers (the last word is the one being completed)."""
    words = ["planrun", *line.split(" ")]
    r = planrun(
        cwd=cwd,
        env={
            "_PLANRUN_COMPLETE": "bash_complete",
            "COMP_WORDS": " ".join(words),
            "COMP_CWORD": str(len(words) - 1),
        },
    )
    assert r.code == 0, r
    return [line.split(",", 1)[1] for line in r.out.splitlines() if "," in line]


def test_commands_and_options(tmp_path):
    assert {"run", "resume", "report", "completion", "init", "list"} <= set(complete(tmp_path, ""))
    assert {"--only", "--report", "--dry-run"} <= set(complete(tmp_path, "run --"))


def test_zsh_describes_each_command_with_its_line_from_help(tmp_path):
    """zsh and fish show a description beside each command: the same whole line as
    `planrun --help` (the group's table), never one cut short."""
    env = {"_PLANRUN_COMPLETE": "zsh_complete", "COMP_WORDS": "planrun ", "COMP_CWORD": "1"}
    r = planrun(cwd=tmp_path, env=env)
    assert r.code == 0, r
    lines = r.out.splitlines()  # type, value, description: three lines a command
    described = {lines[i + 1]: lines[i + 2] for i in range(0, len(lines) - 2, 3)}
    listed = planrun("--help", cwd=tmp_path, env={"COLUMNS": "200"}).out
    rows = listed.split("Commands:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    from_help = dict(row.strip().split(None, 1) for row in rows)
    assert described == from_help
    assert described["cache"] == "Inspect, empty or trim the cache of step results and outputs."


def test_step_ids_of_the_default_plan_as_targets_and_after_only(tmp_path):
    (tmp_path / "planrun.yaml").write_text(PLAN)
    assert complete(tmp_path, "run b") == ["build", "bench"]
    assert complete(tmp_path, "run --only t") == ["test"]
    assert complete(tmp_path, "run build t") == ["test"]


def test_run_offers_step_ids_not_directories_until_the_word_looks_like_a_path(tmp_path):
    (tmp_path / "planrun.yaml").write_text(PLAN)
    (tmp_path / "ci.yaml").write_text("steps: []\n")
    (tmp_path / "src").mkdir()
    (tmp_path / "build-logs").mkdir()
    assert complete(tmp_path, "run ") == ["build", "bench", "test"]
    assert complete(tmp_path, "run b") == ["build", "bench"]
    assert complete(tmp_path, "run ./") == [
        "./build-logs/",
        "./ci.yaml",
        "./planrun.yaml",
        "./src/",
    ]
    assert complete(tmp_path, "run src/") == []
    assert complete(tmp_path, "run ci") == ["ci.yaml"]  # no step id starts so: plan files


def test_run_in_a_subdirectory_offers_the_step_ids_of_the_plan_above(tmp_path):
    (tmp_path / "planrun.yaml").write_text(PLAN)
    (tmp_path / "a" / "b").mkdir(parents=True)
    assert complete(tmp_path / "a" / "b", "run ") == ["build", "bench", "test"]
    assert complete(tmp_path / "a" / "b", "run --only t") == ["test"]


def test_step_ids_of_the_plan_on_the_command_line(tmp_path):
    (tmp_path / "ci.yaml").write_text("steps: [{id: deploy, tool: echo, args: {value: 1}}]\n")
    (tmp_path / "planrun.yaml").write_text(PLAN)
    assert complete(tmp_path, "run ci.yaml ") == ["deploy"]
    assert complete(tmp_path, "run ci.yaml --only d") == ["deploy"]
    assert complete(tmp_path, "-C sub run ") == []  # no plan in sub/ (no such dir): nothing


def test_plan_files(tmp_path):
    (tmp_path / "ci.yaml").write_text("steps: []\n")
    (tmp_path / "notes.txt").write_text("")
    (tmp_path / "plans").mkdir()
    (tmp_path / "plans" / "nightly.yml").write_text("steps: []\n")
    assert complete(tmp_path, "validate ") == ["ci.yaml", "plans/"]
    assert complete(tmp_path, "graph plans/") == ["plans/nightly.yml"]
    assert complete(tmp_path, "run c") == ["ci.yaml"]


def test_a_broken_plan_completes_nothing_and_never_fails(tmp_path):
    (tmp_path / "planrun.yaml").write_text("steps: [{id: a\n")
    assert complete(tmp_path, "run --only ") == []


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_scripts(tmp_path, shell):
    r = planrun("completion", shell, cwd=tmp_path)
    assert r.code == 0 and "_PLANRUN_COMPLETE" in r.out, r
    assert planrun("completion", "tcsh", cwd=tmp_path).code == 2


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_bash_script_loads_and_completes_in_bash(tmp_path):
    """The printed script, sourced in a real bash, fills COMPREPLY with step ids."""
    (tmp_path / "planrun.yaml").write_text(PLAN)
    script = planrun("completion", "bash", cwd=tmp_path).out
    (tmp_path / "planrun-completion.bash").write_text(script)
    import sys

    shim = tmp_path / "bin" / "planrun"
    shim.parent.mkdir()
    shim.write_text(f'#!/bin/sh\nexec {sys.executable} -m planrun "$@"\n')
    shim.chmod(0o755)
    test = (
        "source ./planrun-completion.bash\n"
        "COMP_WORDS=(planrun run --only b); COMP_CWORD=3\n"
        "_planrun_completion planrun\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    import os

    env = {**os.environ, "PATH": f"{shim.parent}:{os.environ['PATH']}"}
    done = subprocess.run(
        ["bash", "-c", test], cwd=tmp_path, capture_output=True, text=True, timeout=60, env=env
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["build", "bench"]


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_bash_completes_run_targets_without_directories(tmp_path):
    """In a real bash, `planrun run <TAB>` in a subdirectory: the step ids of the plan above."""
    import os
    import sys

    (tmp_path / "planrun.yaml").write_text(PLAN)
    here = tmp_path / "pkg"
    (here / "src").mkdir(parents=True)
    (here / "planrun-completion.bash").write_text(planrun("completion", "bash", cwd=here).out)
    shim = tmp_path / "bin" / "planrun"
    shim.parent.mkdir()
    shim.write_text(f'#!/bin/sh\nexec {sys.executable} -m planrun "$@"\n')
    shim.chmod(0o755)
    test = (
        "source ./planrun-completion.bash\n"
        "COMP_WORDS=(planrun run ''); COMP_CWORD=2\n"
        "_planrun_completion planrun\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    env = {**os.environ, "PATH": f"{shim.parent}:{os.environ['PATH']}"}
    done = subprocess.run(
        ["bash", "-c", test], cwd=here, capture_output=True, text=True, timeout=60, env=env
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["build", "bench", "test"]


def test_completion_offers_step_ids_after_force(tmp_path: Path) -> None:

    (tmp_path / "planrun.yaml").write_text(PLAN)
    assert complete(tmp_path, "run --force b") == ["build", "bench"]
    assert complete(tmp_path, "run planrun.yaml --force t") == ["test"]


# ---- shell completion in the real shells -------------------------------------------------

THREE_STEP_PLAN = "steps: [{id: build, tool: echo, args: {value: 1}}, {id: bench, tool: echo, args: {value: 1}}, {id: test, tool: echo, args: {value: 1}}]\n"


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


def test_the_bash_complete_protocol_lists_step_ids_after_force(tmp_path):
    (tmp_path / "planrun.yaml").write_text(THREE_STEP_PLAN)
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
    (tmp_path / HOSTILE).write_text(THREE_STEP_PLAN)
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
        end = time.monotonic() + 120  # a bound: an interactive zsh's compinit is slow under load
        while token not in seen and time.monotonic() < end:
            ready, _, _ = select.select([fd], [], [], 0.5)
            if ready:
                try:
                    seen += os.read(fd, 4096)
                except OSError:
                    break

    try:
        # zsh's completion system first: the script registers itself with its compdef. Its
        # dump file (in the test's directory) spares the later shells compinit's scan (~0.5 s).
        dump = shlex.quote(str(Path(cwd) / ".zcompdump"))
        init = f"autoload -U compinit; compinit -u -d {dump}; " if shell == "zsh" else ""
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
        (tmp_path / name).write_text(THREE_STEP_PLAN)
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
        (tmp_path / name).write_text(THREE_STEP_PLAN)
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
    (tmp_path / "planrun.yaml").write_text(THREE_STEP_PLAN)
    (tmp_path / HOSTILE).write_text(THREE_STEP_PLAN)
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
    (tmp_path / "planrun.yaml").write_text(THREE_STEP_PLAN)
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
    (tmp_path / HOSTILE).write_text(THREE_STEP_PLAN)
    done = _fish_complete(tmp_path, "planrun run --only ")
    assert done.stdout.split() == ["trapstep"], done
    done = _fish_complete(tmp_path, "planrun run '$(touch pwned).yaml' --only t")
    assert done.stdout.split() == ["test"], done
    done = _fish_complete(tmp_path, "planrun run '$(to")
    assert HOSTILE in done.stdout.splitlines(), done
    assert not (tmp_path / "ran-trapstep").exists() and not (tmp_path / "pwned").exists()


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
