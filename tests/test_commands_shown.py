"""A command a message tells the user to type (`run it first with 'planrun run p.yaml'`) is one
the shell reads back as given: a plan path with a space, a quote or `$(…)` is quoted, and
nothing in it is expanded or run when it is copied."""

from __future__ import annotations

import pytest

from planrun.text import command_shown, shell_word
from tests.test_resume_hint import HOSTILE, _as_bash_reads

PLAN = "it's $(touch pwned).yaml"


@pytest.mark.parametrize(
    ("command", "lead"),
    [
        (("status",), "run it first with "),
        (("report",), "run it first with "),
        (("resume",), "start it with "),
    ],
)
def test_the_command_a_missing_state_suggests_reads_back_as_given(
    run, write, tmp_path, command, lead
):
    write(PLAN, "steps:\n  - {id: a, run: 'true'}\n")
    r = run(*command, PLAN)
    assert r.code == 4, r
    shown = r.err.strip().partition(lead)[2]
    assert shown, r
    assert _as_bash_reads(shown, tmp_path) == ["run", PLAN], shown
    assert not (tmp_path / "pwned").exists()


def test_a_plain_command_keeps_its_quotes():
    assert command_shown("planrun", "run", "plans/p.yaml") == "'planrun run plans/p.yaml'"


def test_every_word_reads_back_as_given(tmp_path):
    line = " ".join(["planrun", *map(shell_word, HOSTILE)])
    assert "\n" not in line
    assert _as_bash_reads(line, tmp_path) == HOSTILE
