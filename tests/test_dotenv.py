"""Plan-level `dotenv:` files: parsing, precedence, optional files, secrets, hostile input."""

from __future__ import annotations

import os

import pytest

from tests.conftest import assert_no_traceback

PLAN = """
    dotenv: [.env, ".env.local?"]
    secrets: [API_TOKEN]
    steps:
      - id: show
        tool: shell
        args: {cmd: 'printf "%s|%s|%s|%s|%s\\n" "$PLAIN" "$QUOTED" "$SINGLE" "$WINS" "$API_TOKEN"'}
      - id: expr
        tool: echo
        args: {value: "${env.PLAIN}-${env.WINS}"}
"""

DOTENV = """\
# a comment
PLAIN=plain value   # trailing comment
export QUOTED="two\\nlines # not a comment"
SINGLE='literal $HOME \\n'
WINS=from-env-file
API_TOKEN=tok-123-secret

"""


def _env_without(*names: str) -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in names}


def test_values_reach_steps_and_expressions(run, write, tmp_path):
    write("p.yaml", PLAN)
    write(".env", DOTENV)
    r = run("run", "p.yaml", "--output", "json", "--events", "ev.jsonl", "--report", "r.html")
    assert r.code == 0, r
    steps = {s["id"]: s for s in r.json["steps"]}
    out = steps["show"]["result"]["stdout"]
    assert out == "plain value|two\nlines # not a comment|literal $HOME \\n|from-env-file|***\n"
    assert steps["expr"]["result"] == "plain value-from-env-file"
    assert "tok-123-secret" not in r.out + r.err
    for written in (".planrun/state/p.json", "ev.jsonl", "r.html"):
        text = (tmp_path / written).read_text()
        assert "tok-123-secret" not in text and "***" in text, written


def test_later_files_win_and_the_process_environment_wins_over_all(run, write):
    write("p.yaml", PLAN)
    write(".env", DOTENV)
    write(".env.local", "WINS=from-local\nPLAIN=local plain\n")
    r = run("run", "p.yaml", "--output", "json", "--no-state", env={"PLAIN": "from-process"})
    assert r.code == 0, r
    assert r.json["steps"][1]["result"] == "from-process-from-local"


def test_missing_file_is_an_error_with_its_position_unless_optional(run, write):
    write("p.yaml", PLAN)
    r = run("run", "p.yaml")
    assert r.code == 3, r
    assert "p.yaml:1:10: error: dotenv file not found: .env" in r.out + r.err
    assert run("validate", "p.yaml").code == 3
    write(".env", DOTENV)  # .env.local? stays missing: fine
    assert run("run", "p.yaml", "--no-state").code == 0
    assert run("validate", "p.yaml").code == 0


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("OK=1\nnot a pair\n", ":2:5:"),
        ("OK=1\n  BAD KEY=1\n", ":2:7:"),
        ('A="unterminated\n', ":1:3:"),
        ("A='x' trailing\n", ":1:7:"),
        ("1ABC=x\n", ":1:1:"),
        ("A=1\n\xff\xfe=2\n", ":2:1:"),
    ],
)
def test_malformed_lines_give_file_line_col_and_exit_3(run, write, tmp_path, text, where):
    write("p.yaml", "dotenv: [.env]\nsteps: [{id: a, tool: shell, args: {cmd: 'touch ran'}}]\n")
    (tmp_path / ".env").write_bytes(text.encode("latin-1"))
    r = run("run", "p.yaml")
    assert r.code == 3, r
    assert f".env{where} error: dotenv: " in r.out + r.err
    assert not (tmp_path / "ran").exists()
    assert_no_traceback(r)


@pytest.mark.parametrize(
    ("raw", "where"), [(b"A=1\nB=caf\xe9\n", ":2:6:"), (b"A=caf\xe9\n", ":1:6:")]
)
def test_a_bad_byte_after_a_bom_is_placed_as_without_it(run, write, tmp_path, raw, where):
    write("p.yaml", "dotenv: [.env]\nsteps: [{id: a, tool: shell, args: {cmd: 'touch ran'}}]\n")
    (tmp_path / ".env").write_bytes(b"\xef\xbb\xbf" + raw)
    r = run("run", "p.yaml")
    assert r.code == 3, r
    assert f".env{where} error: dotenv: not valid UTF-8" in r.out + r.err
    assert_no_traceback(r)


def test_a_bad_byte_is_placed_by_characters_as_in_a_plan_file(run, write, tmp_path):
    # "é" is two bytes and one column: the bad byte after it is at column 4, as a plan file's
    # would be, with the byte and its offset in the file
    write("p.yaml", "dotenv: [.env]\nsteps: [{id: a, tool: shell, args: {cmd: 'touch ran'}}]\n")
    (tmp_path / ".env").write_bytes(b"A=1\nB=\xc3\xa9\xe9\n")
    r = run("run", "p.yaml")
    assert r.code == 3, r
    assert ".env:2:4: error: dotenv: not valid UTF-8: byte 0xe9 at offset 8" in r.out + r.err
    assert not (tmp_path / "ran").exists()
    assert_no_traceback(r)


def test_not_a_regular_file_never_hangs(run, write, tmp_path):
    write("p.yaml", "dotenv: [.env]\nsteps: [{id: a, tool: echo, args: {value: 1}}]\n")
    os.mkfifo(tmp_path / ".env")
    r = run("run", "p.yaml")
    assert r.code == 3 and "not a regular file" in r.out + r.err, r


def test_a_file_too_large_or_a_directory_is_refused_at_its_name(run, write, tmp_path):
    write("p.yaml", "dotenv: [.env]\nsteps: [{id: a, tool: echo, args: {value: 1}}]\n")
    (tmp_path / ".env").write_text("A=" + "x" * (1 << 20) + "\n")
    r = run("validate", "p.yaml")
    assert r.code == 3 and "p.yaml:1:10: error: dotenv file .env is larger than 1 MiB" in r.out, r
    (tmp_path / ".env").unlink()
    (tmp_path / ".env").mkdir()
    r = run("validate", "p.yaml")
    assert r.code == 3 and "p.yaml:1:10: error: dotenv file .env is not a regular file" in r.out, r


def test_dotenv_must_be_a_list_of_names(run, write):
    write("p.yaml", "dotenv: .env\nsteps: [{id: a, tool: echo, args: {value: 1}}]\n")
    r = run("validate", "p.yaml")
    assert r.code == 3 and "p.yaml:1:" in r.out, r


def test_dry_run_sees_dotenv_values_masked(run, write):
    write(
        "p.yaml",
        """
        dotenv: [.env]
        secrets: [API_TOKEN]
        steps: [{id: a, tool: echo, args: {value: "${env.NAME} ${env.API_TOKEN}"}}]
        """,
    )
    write(".env", "NAME=dotenv-name\nAPI_TOKEN=hush-hush\n")
    r = run("run", "p.yaml", "--dry-run", "--output", "json", env=_env_without("NAME"))
    assert r.code == 0, r
    assert r.json["steps"][0]["args"] == {"value": "dotenv-name ***"}


@pytest.mark.slow
def test_dotenv_values_reach_steps_on_the_dask_executor(run, write, cluster):
    write(
        "p.yaml",
        """
        dotenv: [.env]
        steps: [{id: a, tool: shell, args: {cmd: 'printf %s "$FROM_DOTENV"'}}]
        """,
    )
    write(".env", "FROM_DOTENV=shipped to the worker\n")
    r = run("run", "p.yaml", "--no-state", "--address", cluster.address, "--output", "json")
    assert r.code == 0, r
    assert r.json["steps"][0]["result"]["stdout"] == "shipped to the worker"
