"""The `resume with: ...` line of a failed or interrupted run: copied as it is, it resumes the
same kind of run (how many steps at once, where they run, how long an interrupt waits), it
never shows a password, and every value in it reads back, for the shell, as it was given."""

from __future__ import annotations

import json
import re
import shlex
import subprocess

from planrun.plan.params import GivenText
from planrun.run.request import RunRequest
from planrun.run.resumehint import resume_hint

FLAKY = """
    steps:
      - {id: build, run: "echo x >> build.log", cache: true}
      - {id: test, run: "test -f fixed", depends_on: [build]}
"""


def _hint(r) -> str:  # type: ignore[no-untyped-def]
    line = next(line for line in r.err.splitlines() if line.startswith("resume with: "))
    return line.removeprefix("resume with: ")


def _words(r) -> list[str]:  # type: ignore[no-untyped-def]
    return shlex.split(_hint(r), comments=True)


def _option(words: list[str], name: str) -> str:
    return words[words.index(name) + 1]


def test_the_hint_repeats_how_many_steps_run_at_once_where_and_the_grace(run, write, tmp_path):
    write("planrun.yaml", FLAKY)
    r = run("run", "-j", "1", "--executor", "local", "--grace", "1m30s")
    assert r.code == 1, r
    words = _words(r)
    assert _option(words, "--jobs") == "1", words
    assert _option(words, "--executor") == "local", words
    assert _option(words, "--grace") == "90s", words
    (tmp_path / "fixed").touch()
    again = run(*words[1:], "--events", "ev.jsonl")
    assert again.code == 0, again
    events = [json.loads(line) for line in (tmp_path / "ev.jsonl").read_text().splitlines()]
    started = next(e for e in events if e["event"] == "run.started")
    assert started["resumed"] is True and started["jobs"] == 1, started


def test_a_grace_reads_back_as_the_same_number_of_seconds():
    for given, shown in ((0.25, "0.25s"), (1e-05, "0.00001s"), (3.0, "3s"), (0.0, "0s")):
        hint = resume_hint(RunRequest(plan="p.yaml", grace=given), None, ())
        assert hint == f"planrun resume p.yaml --grace {shown}", hint


def test_the_hint_names_the_dask_scheduler_but_never_its_password():
    plain = resume_hint(
        RunRequest(plan="p.yaml", executor="dask", address="tcp://10.0.0.5:8786"), None, ()
    )
    assert plain == "planrun resume p.yaml --executor dask --address tcp://10.0.0.5:8786", plain
    secret = resume_hint(
        RunRequest(plan="p.yaml", executor="dask", address="tls://ci:pa55@10.0.0.5:8786"), None, ()
    )
    assert "pa55" not in secret and "--address" not in secret.partition("#")[0], secret
    assert secret.endswith("# and --address ADDRESS: its password is not repeated"), secret


def test_the_hint_leaves_out_force_and_yes(run, write, tmp_path):
    """A forced step is never kept by a resume, so repeating `--force` would run again what the
    run already did; an approval is given again, not carried by a copied line."""
    write(
        "planrun.yaml",
        """
        steps:
          - {id: build, run: "echo x >> build.log", cache: true}
          - {id: test, run: "test -f fixed", depends_on: [build], approval: true}
        """,
    )
    assert run("run", "build").code == 0  # an entry for build: --force is what runs it again
    r = run("run", "--force", "--yes")
    assert r.code == 1, r
    assert (tmp_path / "build.log").read_text() == "x\nx\n"
    words = _words(r)
    assert not any(w.startswith("--force") for w in words) and "--yes" not in words, words
    (tmp_path / "fixed").touch()
    again = run(*words[1:], "--yes", "--output", "json")
    assert again.code == 0, again
    assert (tmp_path / "build.log").read_text() == "x\nx\n"  # kept, not forced again


HOSTILE = [
    "a b",
    "it's",
    '"double"',
    "$(touch pwned)",
    "`touch pwned`",
    "${HOME}",
    "tab\there",
    "line1\nline2",
    "\x1b]0;title\x07\x1b[31mred",
    "c1 \x9b31m",
    "back\\slash",
    "ünïcode ☃",
    "",
    "-x",
]


def _as_bash_reads(command: str, cwd) -> list[str]:  # type: ignore[no-untyped-def]
    """The words bash passes to `planrun` for `command`, as planrun would read them."""
    script = "planrun() { printf '%s\\0' \"$@\"; }\n" + command + "\n"
    out = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", script],
        cwd=cwd,
        capture_output=True,
        check=True,
        env={"LC_ALL": "C.UTF-8", "HOME": "/nonexistent"},
    ).stdout
    return [w.decode("utf-8", "surrogateescape") for w in out.split(b"\0")[:-1]]


def test_every_value_in_the_hint_is_one_shell_word_as_given(tmp_path):
    """Vars, targets, the plan path and the words after `--`: quoted so that the line, copied
    into a shell, passes each back as it was (nothing expanded, nothing run); a value with a
    line break or a control character is written with escapes (`$'…'`, as bash's `printf %q`
    writes it), so the hint stays one line and never writes a control character."""
    variables: dict[str, object] = {f"v{i}": GivenText(v) for i, v in enumerate(HOSTILE)}
    variables["cli_args"] = [*HOSTILE, "--"]
    req = RunRequest(plan="my\nplan $(x).yaml", variables=variables, only=["a b", "-t"])
    hint = resume_hint(req, None, ())
    assert "\n" not in hint and not re.search(r"[\x00-\x1f\x7f-\x9f]", hint), hint
    words = _as_bash_reads(hint, tmp_path)
    assert words[:4] == ["resume", "my\nplan $(x).yaml", "a b", "--only=-t"], words
    given = [words[i + 1] for i, w in enumerate(words) if w == "--var"]
    assert given == [f"v{i}={value}" for i, value in enumerate(HOSTILE)], given
    assert words[words.index("--") + 1 :] == [*HOSTILE, "--"], words
    assert not (tmp_path / "pwned").exists()


def test_a_secret_named_in_the_comment_cannot_end_the_line(tmp_path):
    name = "a b\n$(touch pwned)"
    hint = resume_hint(RunRequest(plan="p.yaml", variables={name: "s3"}), None, [name])
    assert "\n" not in hint and "s3" not in hint, hint
    assert _as_bash_reads(hint, tmp_path) == ["resume", "p.yaml"]
    assert not (tmp_path / "pwned").exists()


def test_the_hint_repeats_the_directories_planrun_was_told_to_start_in(run, write, tmp_path):
    """`planrun -C DIR run` fails: its hint, copied where it was typed, resumes that run, not
    a plan of the same name in the directory the user is in."""
    write("ci tree/sub/planrun.yaml", FLAKY)
    write("planrun.yaml", "steps:\n  - {id: other, run: 'touch wrong'}\n")
    r = run("-C", "ci tree", "-C", "sub", "run")
    assert r.code == 1, r
    words = _words(r)
    assert words[:6] == ["planrun", "-C", "ci tree", "-C", "sub", "resume"], words
    (tmp_path / "ci tree/sub/fixed").touch()
    again = run(*words[1:], "--output", "json")
    assert again.code == 0, again
    assert [s["status"] for s in again.json["steps"]] == ["succeeded", "succeeded"], again
    assert not (tmp_path / "wrong").exists()
