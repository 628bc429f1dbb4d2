"""An auditor's pass over secrets: a value bound as a secret by a step's result (directly, or
through a foreach step, a sub-plan or a cache hit), a secret among a foreach step's elements,
short secrets against planrun's own names and counts, `--stream`, kill -9 and resume, error
messages that quote a value (plan variables, a malformed --var), results keyed by a secret.

Each test checks the two promises together: the value never shows in clear in anything planrun
prints or writes, and the steps that read it get the real value, also after `resume`.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.conftest import assert_no_traceback, spawn_planrun, wait_for_file

# Split in the plans (`A""B` in sh, `${'B'}` in an expression) so the plan text never holds
# the value: only what planrun makes of it can.
TOKEN = "ResultToken-q7w3"


def written_by_planrun(tmp_path: Path, *outputs: str) -> str:
    """Everything under `.planrun/` and the report files, with the given outputs."""
    texts = list(outputs)
    for f in sorted(tmp_path.rglob("*")):
        if f.is_file() and (".planrun" in f.parts or f.suffix in (".jsonl", ".xml", ".html")):
            texts.append(f.read_text(errors="replace"))
    return "\n".join(texts)


def shown_and_stored(run, tmp_path: Path, *results) -> str:  # type: ignore[no-untyped-def]
    outs = [text for r in results for text in (r.out, r.err)]
    for fmt in ("text", "json"):
        s = run("status", "p.yaml", "--output", fmt)
        outs += [s.out, s.err]
    return written_by_planrun(tmp_path, *outs)


REPORTS = ("--output", "json", "--events", "ev.jsonl", "--junit", "junit.xml", "--report", "r.html")


def go_and_resume(run, tmp_path: Path, *args: str):  # type: ignore[no-untyped-def]
    """Let the step that waits for a file `go` pass, then resume the plan: it must succeed."""
    (tmp_path / "go").write_text("")
    again = run("resume", "p.yaml", *args)
    assert again.code == 0, str(again)
    return again


def test_a_step_result_bound_as_a_secret_is_masked_and_real_after_resume(run, write, tmp_path):
    write(
        "p.yaml",
        """
        secrets: [token]
        steps:
          - id: login
            tool: echo
            args: {value: "ResultToken-${'q7w3'}"}
            result_variable: token
          - id: use
            tool: shell
            args:
              cmd: |
                test -e go || exit 1
                test '${token}' = ResultToken-""q7w3 && echo received-real-value
        """,
    )
    first = run("run", "p.yaml", *REPORTS)
    assert first.code == 1, str(first)
    state = json.loads((tmp_path / ".planrun/state/p.json").read_text())
    # The recorded result is not the value: resume must run `login` again, not restore `***`.
    assert state["steps"]["login"]["result_masked"] is True
    again = go_and_resume(run, tmp_path, *REPORTS)
    assert "received-real-value" in again.err
    assert "result held a secret" in again.err
    assert TOKEN not in shown_and_stored(run, tmp_path, first, again)


def test_a_step_result_bound_as_a_secret_is_never_stored_in_the_cache(run, write, tmp_path):
    write(
        "p.yaml",
        """
        secrets: [token]
        steps:
          - id: login
            tool: echo
            args: {value: "ResultToken-${'q7w3'}"}
            result_variable: token
            cache: true
          - id: use
            tool: shell
            args: {cmd: "test '${token}' = ResultToken-''q7w3 && echo received-real-value"}
        """,
    )
    first = run("run", "p.yaml", *REPORTS)
    second = run("run", "p.yaml", "--explain")
    for r in (first, second):
        assert r.code == 0, str(r)
        assert "received-real-value" in r.err
        assert "result held a secret: not stored in the cache" in r.err
    assert TOKEN not in shown_and_stored(run, tmp_path, first, second)


def test_a_foreach_result_bound_as_a_secret_is_masked_and_real_after_resume(run, write, tmp_path):
    write(
        "p.yaml",
        """
        secrets: [tokens]
        steps:
          - id: mint
            tool: echo
            foreach: [a, b]
            args: {value: "ResultToken-${'q7w3'}-${item}"}
            result_variable: tokens
          - id: use
            tool: shell
            args:
              cmd: |
                test -e go || exit 1
                test '${tokens[1]}' = ResultToken-""q7w3-b && echo received-real-value
        """,
    )
    first = run("run", "p.yaml", *REPORTS)
    assert first.code == 1, str(first)
    again = go_and_resume(run, tmp_path, *REPORTS)
    assert "received-real-value" in again.err
    assert TOKEN not in shown_and_stored(run, tmp_path, first, again)


def test_a_foreach_over_a_secret_gives_the_real_value_after_resume(run, write, tmp_path):
    write(
        "p.yaml",
        """
        secrets: [token]
        steps:
          - id: each
            tool: echo
            foreach: ["${token}", plain]
            args: {value: "${item}"}
            result_variable: values
          - id: use
            tool: shell
            args:
              cmd: |
                test -e go || exit 1
                test '${values[0]}' = ResultToken-""q7w3 && echo received-real-value
        """,
    )
    var = ("--var", f"token={TOKEN}")
    first = run("run", "p.yaml", *var, *REPORTS)
    assert first.code == 1, str(first)
    again = go_and_resume(run, tmp_path, *var, *REPORTS)
    assert "received-real-value" in again.err
    # Resumed twice: what the first resume recorded must still say the result was masked.
    # (`use` is changed so that it runs again: a kept step would not read the result.)
    plan = tmp_path / "p.yaml"
    plan.write_text(plan.read_text().replace("test -e go", ": again; test -e go"))
    (tmp_path / "go").unlink()
    run("resume", "p.yaml", *var)
    (tmp_path / "go").write_text("")
    third = run("resume", "p.yaml", *var)
    assert third.code == 0 and "received-real-value" in third.err, str(third)
    assert TOKEN not in shown_and_stored(run, tmp_path, first, again, third)


def test_masking_never_changes_fingerprints_so_resume_keeps_what_it_should(run, write, tmp_path):
    # A one-character secret masks every `7` in what is shown (documented: best long). The
    # fingerprints the state keeps are digests, not text about the secret: masking them broke
    # resume, which then ran every step whose digest held a `7` again.
    steps = "\n".join(
        f"""
          - id: s{n}
            tool: echo
            args: {{value: "step {n}"}}"""
        for n in range(12)
    )
    write(
        "p.yaml",
        f"""
        secrets: [pin]
        variables: {{pin: 7}}
        steps:{steps}
          - id: last
            tool: shell
            args: {{cmd: "test -e go"}}
        """,
    )
    first = run("run", "p.yaml")
    assert first.code == 1, str(first)
    again = go_and_resume(run, tmp_path)
    assert "its tool or arguments changed" not in again.err, str(again)
    assert again.err.count("kept from the previous run") >= 12, str(again)


def test_stream_does_not_show_the_output_of_a_step_that_binds_a_secret(run, write, tmp_path):
    write(
        "p.yaml",
        """
        secrets: [token]
        steps:
          - id: login
            tool: shell
            args: {cmd: "printf '%s\\\\n' ResultToken-''q7w3"}
            result_variable: token
          - id: use
            tool: shell
            args: {cmd: "test '${token.stdout | trim}' = ResultToken-''q7w3 && echo received-real-value"}
        """,
    )
    r = run("run", "p.yaml", "--stream", *REPORTS)
    assert r.code == 0, str(r)
    assert_no_traceback(r)
    assert "received-real-value" in r.err
    # Not streamed (the value is known only at the step's end): shown with its end, masked.
    assert "[login]" not in r.err
    assert "login succeeded" in r.err and "│ ***" in r.err.split("login succeeded")[1]
    assert "[use] received-real-value" in r.err  # the other steps still stream
    assert TOKEN not in shown_and_stored(run, tmp_path, r)


def test_a_shell_result_bound_as_a_secret_masks_its_output_not_every_zero(run, write, tmp_path):
    # `token` is the whole {stdout, stderr, exit_code}: its exit code 0 is no secret, and
    # masking it hid every `0` of every output and marked unrelated results as masked.
    write(
        "p.yaml",
        """
        secrets: [token]
        steps:
          - id: login
            tool: shell
            args: {cmd: "printf '%s\\\\n' ResultToken-''q7w3"}
            result_variable: token
          - id: build
            tool: shell
            args: {cmd: "echo built 2010 files"}
            depends_on: [login]
        """,
    )
    r = run("run", "p.yaml", *REPORTS)
    assert r.code == 0, str(r)
    doc = r.json
    steps = {s["id"]: s for s in doc["steps"]}
    assert steps["login"]["result"] == {"stdout": "***", "stderr": "", "exit_code": 0}
    assert steps["build"]["result"]["stdout"] == "built 2010 files\n"
    state = json.loads((tmp_path / ".planrun/state/p.json").read_text())
    assert state["steps"]["build"]["result_masked"] is False
    assert TOKEN not in shown_and_stored(run, tmp_path, r)


def test_a_secret_with_a_trailing_newline_is_masked_once_trimmed(run, write, tmp_path):
    # A command's stdout ends with a newline; `| trim` is how a plan reads it (and a vars file's
    # block scalar ends with one too). The trimmed text is the secret as much as the raw one.
    write("vars.yaml", "pem: |\n  VarsToken-k2m9\n")
    write(
        "p.yaml",
        """
        secrets: [token, pem]
        variables: {pem: none}
        steps:
          - id: login
            tool: shell
            args: {cmd: "printf '%s\\\\n' ResultToken-''q7w3"}
            result_variable: token
          - id: use
            tool: shell
            args: {cmd: "echo '${token.stdout | trim}' '${pem | trim}' >&2; exit 1"}
        """,
    )
    r = run("run", "p.yaml", "--vars-file", "vars.yaml", *REPORTS)
    assert r.code == 1, str(r)
    assert "$ echo *** *** >&2; exit 1" in r.err
    text = shown_and_stored(run, tmp_path, r)
    assert TOKEN not in text and "VarsToken-k2m9" not in text


def test_after_kill_9_a_resumed_step_gets_the_real_secrets(run, write, tmp_path):
    # The journal is all a killed run leaves: what it says about the bound secret must make
    # resume produce it again, and the --var secret is given again.
    write(
        "p.yaml",
        """
        secrets: [token, pin]
        steps:
          - id: login
            tool: echo
            args: {value: "ResultToken-${'q7w3'}"}
            result_variable: token
          - id: deploy
            tool: shell
            args:
              cmd: |
                touch started
                while [ ! -e go ]; do sleep 0.05; done
                test '${token}' = ResultToken-""q7w3 && test '${pin}' = Pin-""x8 && echo received-real-value
            depends_on: [login]
        """,
    )
    var = ("--var", "pin=Pin-x8")
    proc = spawn_planrun(
        "run", "p.yaml", *var, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        wait_for_file(tmp_path / "started")
    finally:
        proc.kill()
        proc.wait()
    again = go_and_resume(
        run, tmp_path, *var, *REPORTS
    )  # the orphaned command ends (resume stops it too)
    assert "received-real-value" in again.err
    assert "running 'login' again: result held a secret" in again.err
    text = shown_and_stored(run, tmp_path, again)
    assert TOKEN not in text and "Pin-x8" not in text


def test_a_sub_plans_secret_is_real_after_resume_when_the_parent_has_none(run, write, tmp_path):
    # The parent declares no secrets: its record of the `plan` step must still say that the
    # sub-plan's secret was masked in the result, or resume hands `***` on.
    write(
        "sub.yaml",
        """
        secrets: [token]
        steps:
          - id: login
            tool: echo
            args: {value: "ResultToken-${'q7w3'}"}
            result_variable: token
        """,
    )
    write(
        "p.yaml",
        """
        steps:
          - id: sub
            tool: plan
            args: {path: sub.yaml}
            result_variable: sub_vars
          - id: use
            tool: shell
            args:
              cmd: |
                test -e go || exit 1
                test '${sub_vars.token}' = ResultToken-""q7w3 && echo received-real-value
        """,
    )
    first = run("run", "p.yaml", *REPORTS)
    assert first.code == 1, str(first)
    again = go_and_resume(run, tmp_path, *REPORTS)
    assert "received-real-value" in again.err
    assert "running 'sub' again: result held a secret" in again.err
    assert TOKEN not in shown_and_stored(run, tmp_path, first, again)


def test_a_short_secret_inside_step_ids_never_changes_the_plan_as_recorded(run, write, tmp_path):
    # A 4-digit secret that is also part of step ids and a result variable's name: masking
    # the ids recorded phantom steps (`release-***`, pending forever) and a variable `***_out`.
    write(
        "p.yaml",
        """
        secrets: [pin]
        steps:
          - id: release-2024
            tool: echo
            foreach: [a, b]
            args: {value: "${item}"}
            result_variable: out_2024
          - id: check-2024
            tool: shell
            args: {cmd: "test -e go && echo ${out_2024[1]}"}
        """,
    )
    first = run("run", "p.yaml", "--var", "pin=2024", *REPORTS)
    assert first.code == 1, str(first)
    state = json.loads((tmp_path / ".planrun/state/p.json").read_text())
    ids = ["release-2024", "check-2024", "release-2024[0]", "release-2024[1]"]
    assert sorted(state["steps"]) == sorted(ids)
    assert state["steps"]["release-2024"]["result_variable"] == "out_2024"
    assert "pending" not in first.err
    again = go_and_resume(run, tmp_path, "--var", "pin=2024", *REPORTS)
    assert [s["id"] for s in again.json["steps"]] == [ids[0], ids[2], ids[3], ids[1]]
    status = run("status", "p.yaml", "--output", "json")
    assert {s["id"]: s["status"] for s in status.json["steps"]} == {
        ids[0]: "succeeded",
        ids[1]: "succeeded",
        ids[2]: "succeeded",
        ids[3]: "succeeded",
    }


@pytest.mark.parametrize("pin", ["1", "ed", "0.5"])
def test_a_tiny_secret_never_breaks_what_planrun_records(run, write, tmp_path, pin):
    # A 1-2 character secret masks every occurrence of its text (documented: a secret is best
    # long), but never in what planrun itself records: attempt counts (`attempt: ***` crashed
    # the console), statuses (`succe***` made the state unreadable), durations, reasons.
    write(
        "p.yaml",
        """
        secrets: [pin]
        steps:
          - id: a
            tool: echo
            args: {value: x}
          - id: b
            tool: shell
            args: {cmd: "test -e go"}
            depends_on: [a]
        """,
    )
    first = run("run", "p.yaml", "--var", f"pin={pin}", *REPORTS)
    assert_no_traceback(first)
    assert first.code == 1, str(first)
    assert "internal error" not in first.err
    again = go_and_resume(run, tmp_path, "--var", f"pin={pin}", *REPORTS)
    doc = again.json
    assert (doc["status"], doc["reason"]) == ("succeeded", "completed")
    assert [(s["status"], s["attempts"]) for s in doc["steps"]] == [("succeeded", 1)] * 2
    status = run("status", "p.yaml", "--output", "json")
    assert status.code == 0, str(status)
    assert [s["status"] for s in status.json["steps"]] == ["succeeded", "succeeded"]


def test_a_cache_hit_that_holds_a_secret_is_produced_again_on_resume(run, write, tmp_path):
    # The entry was made before `token` was declared a secret, by a step whose key the secret
    # is not part of (it reads the token from a file: a step that reads the secret itself is
    # keyed anew once it is one). The hit is shown masked; its record must say so, or resume
    # hands `***` on.
    plan = """
        {secrets}
        steps:
          - id: login
            tool: shell
            args: {{cmd: "cat tok"}}
            sources: [tok]
            result_variable: got
          - id: use
            tool: shell
            args:
              cmd: |
                test -e go || exit 1
                test '${{got.stdout | trim}}' = ResultToken-""q7w3 && echo received-real-value
        """
    (tmp_path / "tok").write_text(TOKEN + "\n")
    var = ("--var", f"token={TOKEN}")
    write("p.yaml", plan.format(secrets=""))
    assert run("run", "p.yaml", *var).code == 1
    write("p.yaml", plan.format(secrets="secrets: [token]"))
    (tmp_path / ".planrun/state/p.json").unlink()
    first = run("run", "p.yaml", *var, *REPORTS)
    assert first.code == 1, str(first)
    assert "login cached" in first.err
    state = json.loads((tmp_path / ".planrun/state/p.json").read_text())
    assert state["steps"]["login"]["result_masked"] is True
    again = go_and_resume(run, tmp_path, *var, *REPORTS)
    assert "received-real-value" in again.err
    for r in (first, again):
        assert TOKEN not in r.out + r.err


def test_a_plan_variable_that_fails_on_a_secret_does_not_quote_it(run, write, tmp_path):
    # Plan variables are evaluated before the run (no event, no mask on the way): the error
    # of `lookup[token]` names the missing key, which is the secret.
    write(
        "p.yaml",
        """
        secrets: [token, from_env]
        variables:
          lookup: {a: 1}
          from_env: "${env.REVIEW_TOKEN}"
          derived: "${ lookup[token] ~ lookup[from_env] }"
        steps:
          - id: a
            tool: echo
            args: {value: "${derived}"}
        """,
    )
    env = {"REVIEW_TOKEN": "EnvToken-z5v1"}
    for extra in ((), ("--dry-run",), ("--output", "json")):
        r = run("run", "p.yaml", "--var", f"token={TOKEN}", *extra, env=env)
        assert r.code == 3, str(r)
        assert "variable 'derived'" in r.out + r.err
        assert TOKEN not in r.out + r.err, str(r)
    write("p.yaml", (tmp_path / "p.yaml").read_text().replace("lookup[token] ~ ", ""))
    r = run("run", "p.yaml", "--var", f"token={TOKEN}", env=env)
    assert r.code == 3, str(r)
    assert "variable 'derived'" in r.out + r.err
    assert "EnvToken-z5v1" not in r.out + r.err, str(r)


def test_a_malformed_var_does_not_echo_what_may_be_a_secret(run, write, tmp_path):
    # `--var "$TOKEN"` (the name forgotten) or `--var "=$TOKEN"`: the error says what is wrong
    # without printing the value to a CI log.
    write("p.yaml", "steps: []\n")
    for bad in (TOKEN, f"={TOKEN}", f" ={TOKEN}"):
        r = run("run", "p.yaml", "--var", bad)
        assert r.code == 2, str(r)
        assert "--var expects KEY=VALUE" in r.err
        assert TOKEN not in r.out + r.err, str(r)


def test_a_secret_used_as_a_key_of_a_result_is_masked(run, write, tmp_path):
    # A tool's result may be keyed by a value (a JSON answer keyed by token, a python step
    # building a mapping): keys are shown and stored like values.
    write("keyed.py", "def by_token(token):\n    return {token: 'granted', 'other': token}\n")
    write(
        "p.yaml",
        """
        secrets: [token]
        steps:
          - id: keyed
            tool: python
            args: {function: "keyed:by_token", kwargs: {token: "${token}"}}
            result_variable: grants
          - id: use
            tool: shell
            args: {cmd: "test '${grants[token]}' = granted && echo received-real-value"}
        """,
    )
    r = run("run", "p.yaml", "--var", f"token={TOKEN}", *REPORTS)
    assert r.code == 0, str(r)
    assert "received-real-value" in r.err
    assert {s["id"]: s["result"] for s in r.json["steps"]}["keyed"] == {
        "***": "granted",
        "other": "***",
    }
    assert TOKEN not in shown_and_stored(run, tmp_path, r)


def test_the_log_of_a_cut_output_masks_the_secrets(run, write, tmp_path):
    # Past PLANRUN_MAX_OUTPUT the whole output goes to .planrun/logs/: a file planrun writes,
    # so a secret in it is masked too, also where it straddles two reads of the pipe.
    write(
        "p.yaml",
        """
        secrets: [token]
        steps:
          - id: big
            tool: shell
            args:
              cmd: |
                i=0
                while [ $i -lt 3000 ]; do
                  printf 'line %05d %s|' $i '${token}'
                  i=$((i+1))
                done
        """,
    )
    r = run("run", "p.yaml", "--var", f"token={TOKEN}", env={"PLANRUN_MAX_OUTPUT": "1K"})
    assert r.code == 0, str(r)
    log = (tmp_path / ".planrun/logs/p/big.stdout.log").read_text()
    assert TOKEN not in log
    assert log.count("|") == 3000 and log.count("***|") == 3000
    assert log.startswith("line 00000 ***|") and log.endswith("line 02999 ***|")
    assert TOKEN not in shown_and_stored(run, tmp_path, r)


def test_the_log_redactor_masks_a_secret_however_the_stream_is_split():
    from planrun.tools.redact import Redactor

    text = b"a-sekrit-b sekrit-long-one|sek sekri sekrit"
    want = b"a-***-b ***|sek sekri ***"
    for size in range(1, len(text) + 1):
        redactor = Redactor(["sekrit", "sekrit-long-one", ""])
        chunks = [text[i : i + size] for i in range(0, len(text), size)]
        out = b"".join(redactor.feed(c) for c in chunks) + redactor.close()
        assert out == want, size
    assert Redactor([]).feed(b"as is") == b"as is"


def test_a_secret_that_is_both_a_variable_and_a_dotenv_value_is_masked_as_both(
    run, write, tmp_path
):
    # `--var API_KEY=...` does not change the environment steps get from the dotenv file:
    # both values reach steps, both are the secret.
    write(".env", "API_KEY=DotenvToken-h4k8\n")
    write(
        "p.yaml",
        """
        dotenv: [.env]
        secrets: [API_KEY]
        variables: {API_KEY: none}
        steps:
          - id: both
            tool: shell
            args: {cmd: "echo \\"$API_KEY\\" '${API_KEY}'"}
        """,
    )
    r = run("run", "p.yaml", "--var", f"API_KEY={TOKEN}", *REPORTS)
    assert r.code == 0, str(r)
    assert "*** ***" in r.err
    text = shown_and_stored(run, tmp_path, r)
    assert TOKEN not in text and "DotenvToken-h4k8" not in text
