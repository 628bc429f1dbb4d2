"""The approval question at a real terminal: the step's title and command, or the plan's own
words (`approval: "TEXT"`, rendered with the variables), and `y` runs the step."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import answer_at_tty, planrun, planrun_at_tty, wait_until

# The questions are asked of a real process at a pseudo-terminal (answer_at_tty); what planrun
# decides without one (validation, no terminal) runs in-process unless marked `e2e`.


def test_approval_true_asks_with_the_title_and_the_command(tmp_path: Path) -> None:
    (tmp_path / "plan.yaml").write_text(
        """
variables: {version: "1.4.2", token: "tok-SECRET-9"}
secrets: [token]
steps:
  - id: publish
    title: Publish ${version}
    tool: shell
    args: {cmd: "echo uploading ${version} with ${token} > published.txt"}
    approval: true
""".lstrip()
    )
    code, _, seen = answer_at_tty(tmp_path, ["run", "plan.yaml"], ["y"])
    assert code == 0, seen
    question = seen[: seen.index("[y/N]")]
    assert "publish" in question and "Publish 1.4.2" in question
    assert "echo uploading 1.4.2 with *** > published.txt" in question
    assert "tok-SECRET-9" not in seen
    assert (tmp_path / "published.txt").read_text().startswith("uploading 1.4.2")


def test_approval_true_of_a_run_step_shows_its_script_or_each_of_its_scripts(
    tmp_path: Path,
) -> None:
    (tmp_path / "plan.yaml").write_text(
        """
variables: {version: "1.4.2"}
steps:
  - id: one
    title: Release ${version}
    run: echo one ${version} > one.txt
    approval: true
  - id: many
    run:
      - echo first ${version}
      - echo second > many.txt
    approval: true
    depends_on: [one]
""".lstrip()
    )
    code, _, seen = answer_at_tty(tmp_path, ["run", "plan.yaml"], ["y", "y"])
    assert code == 0, seen
    first, second = seen.split("[y/N]")[:2]
    assert "one" in first and "Release 1.4.2" in first, first
    assert "$ echo one 1.4.2 > one.txt" in first, first
    assert "$ echo first 1.4.2" in second and "$ echo second > many.txt" in second, second


def test_approval_text_is_the_question_rendered_with_the_variables(tmp_path: Path) -> None:
    (tmp_path / "plan.yaml").write_text(
        """
variables: {version: "1.4.2", target: staging}
steps:
  - id: deploy
    tool: shell
    args: {cmd: "echo deployed > deployed.txt"}
    approval: "Deploy ${version} to ${target}?"
""".lstrip()
    )
    code, _, seen = answer_at_tty(tmp_path, ["run", "plan.yaml", "--var", "target=prod"], ["y"])
    assert code == 0, seen
    assert "Deploy 1.4.2 to prod? [y/N]" in seen
    assert (tmp_path / "deployed.txt").exists()
    code, _, seen = answer_at_tty(tmp_path, ["run", "plan.yaml"], ["n"])
    assert code != 0 and "Deploy 1.4.2 to staging? [y/N]" in seen


@pytest.mark.e2e  # a real process whose stdin is no terminal
def test_a_text_approval_without_a_terminal_blocks_the_run_and_the_dry_run_marks_it(
    tmp_path: Path,
) -> None:
    (tmp_path / "plan.yaml").write_text(
        'steps:\n  - {id: deploy, tool: echo, args: {value: 1}, approval: "Deploy it now?"}\n'
    )
    r = planrun("run", "plan.yaml", cwd=tmp_path)
    assert r.code == 5, r
    r = planrun("run", "plan.yaml", "--dry-run", "--output", "json", cwd=tmp_path)
    assert r.json["steps"][0]["approval"] is True


@pytest.mark.parametrize("value", ['""', '"  "', "yes", "No", '"Deploy?"', "1"])
def test_an_approval_that_is_no_question_is_refused(tmp_path: Path, value: str) -> None:
    (tmp_path / "plan.yaml").write_text(f"steps:\n  - {{id: a, tool: echo, approval: {value}}}\n")
    r = planrun("validate", "plan.yaml", cwd=tmp_path)
    assert r.code == 3, r
    assert "step 'a': approval: expected true, false or a question" in r.out, r


def test_the_question_is_checked_like_any_template(tmp_path: Path) -> None:
    (tmp_path / "plan.yaml").write_text(
        'variables: {v: 1}\nsteps:\n  - {id: a, tool: echo, approval: "Deploy ${nope} now?"}\n'
    )
    r = planrun("validate", "plan.yaml", cwd=tmp_path)
    assert r.code == 3 and "step 'a': approval: undefined name 'nope'" in r.out, r


def test_a_yes_piped_to_stdin_is_no_answer_even_with_a_terminal(tmp_path: Path) -> None:
    """`yes | planrun run` approves nothing: the answer must come from the terminal."""
    (tmp_path / "plan.yaml").write_text(
        "steps:\n  - {id: deploy, run: touch deployed, approval: true}\n"
    )
    leader, follower = pty.openpty()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "planrun", "run", "plan.yaml"],
            cwd=tmp_path,
            input=b"y\ny\n",
            stdout=subprocess.PIPE,
            stderr=follower,
            timeout=60,
        )
    finally:
        os.close(follower)
        os.close(leader)
    assert proc.returncode == 5
    assert not (tmp_path / "deployed").exists()


def _answer_first_question(
    tmp_path: Path,
    args: list[str],
    answer: bytes,
    meanwhile: Callable[[], None] | None = None,
) -> tuple[int, str]:
    """Run planrun at a pseudo-terminal, wait for its first question, do `meanwhile`, then type
    `answer`: (exit code, what the terminal showed)."""
    proc, leader = planrun_at_tty(tmp_path, args)
    seen = b""
    try:
        while b"[y/N]" not in seen:
            seen += os.read(leader, 4096)
        if meanwhile is not None:
            meanwhile()
        os.write(leader, answer)
        proc.communicate(timeout=60)
        while chunk := os.read(leader, 4096):
            seen += chunk
    except OSError:  # EIO: every process holding the terminal is gone
        pass
    finally:
        os.close(leader)
    return proc.wait(timeout=60), seen.decode(errors="replace")


def test_end_of_input_at_the_question_is_a_no_and_leaves_the_question_on_screen(
    tmp_path: Path,
) -> None:
    """Ctrl-D answers nothing: the run is blocked, and the question is not overdrawn by what
    comes next (the console's next line starts on a line of its own)."""
    (tmp_path / "plan.yaml").write_text(
        'steps:\n  - {id: deploy, run: touch deployed, approval: "Deploy it now?"}\n'
    )
    # the terminal's end of input (Ctrl-D), echoed as nothing
    code, seen = _answer_first_question(tmp_path, ["run", "plan.yaml"], b"\x04")
    assert code == 5, seen
    assert not (tmp_path / "deployed").exists()
    after = seen.split("Deploy it now? [y/N] ", 1)[1]
    assert after.startswith(("\n", "\r\n")), repr(seen)


def test_progress_lines_wait_while_the_question_is_open(tmp_path: Path) -> None:
    """A step that ends while the question waits for its answer does not print into the
    question's line: its lines come once the question is answered."""
    (tmp_path / "plan.yaml").write_text(
        """
name: p
steps:
  - id: slow
    run: "while [ ! -e go ]; do sleep 0.02; done; echo finished"
  - id: deploy
    run: touch deployed
    approval: "Deploy it now?"
""".lstrip()
    )
    state = tmp_path / ".planrun" / "state" / "p.json"

    def slow_succeeded() -> bool:
        try:
            return json.loads(state.read_text())["steps"]["slow"]["status"] == "succeeded"
        except (OSError, ValueError, KeyError):
            return False

    def slow_ends() -> None:
        (tmp_path / "go").touch()
        wait_until(slow_succeeded, timeout=60, what="slow to succeed")

    code, shown = _answer_first_question(
        tmp_path, ["run", "plan.yaml", "-j", "2"], b"y\n", slow_ends
    )
    assert code == 0, shown
    assert "Deploy it now? [y/N] y" in shown, repr(shown)
    assert "slow succeeded" in shown.split("[y/N] y", 1)[1], repr(shown)
