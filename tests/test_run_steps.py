"""`run:` steps (a shell script, or a list of commands run one after another), through the CLI."""

from __future__ import annotations

from tests.conftest import assert_no_traceback


def _steps(r):  # type: ignore[no-untyped-def]
    return {s["id"]: s for s in r.json["steps"]}


def test_a_run_string_stops_at_its_first_failing_command(run, write, tmp_path):
    write(
        "p.yaml",
        """
        steps:
          - id: script
            run: |
              echo one
              false
              echo never > never.txt
        """,
    )
    r = run("run", "p.yaml", "--output", "json")
    assert r.code == 1, r
    step = _steps(r)["script"]
    assert step["status"] == "failed"
    assert "exited with code 1" in step["error"]
    assert not (tmp_path / "never.txt").exists()


def test_a_run_list_runs_each_command_in_order_and_names_the_one_that_failed(run, write, tmp_path):
    write(
        "p.yaml",
        """
        steps:
          - id: ok
            run: [echo a, "echo b >&2", echo c]
          - id: bad
            run: ["echo first", "exit 2", "touch never.txt"]
            depends_on: [ok]
        """,
    )
    r = run("run", "p.yaml", "--output", "json")
    assert r.code == 1, r
    steps = _steps(r)
    assert steps["ok"]["result"] == {"stdout": "a\nc\n", "stderr": "b\n", "exit_code": 0}
    assert steps["bad"]["status"] == "failed"
    assert "run[1] exited with code 2" in steps["bad"]["error"]
    assert not (tmp_path / "never.txt").exists()


def test_each_list_item_is_its_own_shell_without_errexit(run, write):
    write(
        "p.yaml",
        """
        steps:
          - id: s
            run: ["false; echo kept-going", "X=1", "echo $${X:-unset}"]
        """,
    )
    r = run("run", "p.yaml", "--output", "json")
    assert r.code == 0, r
    assert _steps(r)["s"]["result"]["stdout"] == "kept-going\nunset\n"


def test_values_in_run_are_quoted_by_context(run, write):
    write(
        "p.yaml",
        """
        variables: {v: "it's $(echo pwned) `x` \\"q\\""}
        steps:
          - id: one
            run: printf '%s|' ${v} "${v}" '${v}'
          - id: many
            run: ["printf '%s|' ${v}", "printf '%s' \\"${v}\\""]
        """,
    )
    r = run("run", "p.yaml", "--output", "json")
    assert r.code == 0, r
    v = 'it\'s $(echo pwned) `x` "q"'
    steps = _steps(r)
    assert steps["one"]["result"]["stdout"] == f"{v}|{v}|{v}|"
    assert steps["many"]["result"]["stdout"] == f"{v}|{v}"


def test_run_is_the_shell_tool_for_policy_and_dry_run(run, write):
    write(
        "p.yaml",
        """
        variables: {name: world}
        steps:
          - id: hello
            run: echo ${name}
        """,
    )
    r = run("run", "p.yaml", "--dry-run", "--output", "json")
    assert r.code == 0, r
    step = r.json["steps"][0]
    assert step["tool"] == "shell"
    assert step["args"]["run"] == "echo world"
    text = run("run", "p.yaml", "--dry-run")
    assert "echo world" in text.out, text
    write(
        "denied.yaml",
        """
        policy: {deny: [shell]}
        steps:
          - {id: hello, run: echo hi}
        """,
    )
    r = run("validate", "denied.yaml")
    assert r.code == 3 and "denied by policy" in r.out, r


def test_run_and_tool_together_are_a_validation_error_at_run(run, write):
    write(
        "p.yaml",
        """
        steps:
          - id: both
            tool: shell
            run: echo hi
          - id: empty
            run: []
          - id: neither
            title: nothing to do
          - id: typo
            rnu: echo hi
        """,
    )
    r = run("validate", "p.yaml")
    assert r.code == 3, r
    assert_no_traceback(r)
    assert "p.yaml:4:5: error: step 'both' has both 'run' and 'tool'" in r.out, r.out
    assert "p.yaml:6:10: error: step 'empty': run: an empty list" in r.out, r.out
    assert "step 'neither' needs 'tool' or 'run'" in r.out, r.out
    assert "did you mean 'run'?" in r.out, r.out


def test_an_empty_or_blank_run_is_a_validation_error_at_its_position(run, write):
    """GitHub Actions refuses an empty `run`; a `run: ""` (or a blank command in a list) ran
    nothing and the step "succeeded", which hides a template or a YAML slip."""
    write(
        "p.yaml",
        """
        steps:
          - {id: empty, run: ""}
          - {id: blank, run: "  \\n\\t "}
          - {id: one_blank, run: ["echo a", "", "echo b"]}
          - id: block
            run: |

          - {id: comment, run: "# nothing to do yet"}
        """,
    )
    r = run("validate", "p.yaml")
    assert r.code == 3, r
    assert_no_traceback(r)
    assert r.out.splitlines() == [
        "p.yaml:2:22: error: step 'empty': run: an empty command runs nothing",
        "p.yaml:3:22: error: step 'blank': run: an empty command runs nothing",
        "p.yaml:4:37: error: step 'one_blank': run[1]: an empty command runs nothing",
        "p.yaml:6:10: error: step 'block': run: an empty command runs nothing",
    ]
    assert run("run", "p.yaml", "--no-state").code == 3


def test_undefined_names_in_run_are_validation_errors(run, write):
    write(
        "p.yaml",
        """
        variables: {name: x}
        steps:
          - id: s
            run: ["echo ${name}", "echo ${nmae}"]
        """,
    )
    r = run("validate", "p.yaml")
    assert r.code == 3, r
    assert "p.yaml:4:27: error: step 's': run[1]: undefined name 'nmae'" in r.out, r.out
    assert "did you mean 'name'?" in r.out


def test_the_cache_key_covers_run(run, write, tmp_path):
    (tmp_path / "in.txt").write_text("x")
    plan = """
        steps:
          - id: s
            run: [echo {word} >> log.txt]
            sources: [in.txt]
        """
    write("p.yaml", plan.format(word="a"))
    assert run("run", "p.yaml").code == 0
    r = run("run", "p.yaml", "--output", "json")
    assert _steps(r)["s"]["status"] == "cached", r
    write("p.yaml", plan.format(word="b"))
    r = run("run", "p.yaml", "--output", "json")
    assert _steps(r)["s"]["status"] == "succeeded", r
    assert (tmp_path / "log.txt").read_text() == "a\nb\n"


def test_the_schema_knows_run(run):
    r = run("schema")
    assert r.code == 0
    import json

    step = json.loads(r.out)["$defs"]["Step"]
    assert "run" in step["properties"] and step["properties"]["run"]["description"]
    assert "tool" not in step.get("required", [])


def test_a_run_list_with_a_command_that_is_not_text_is_placed_at_that_command(run, write):
    write(
        "p.yaml",
        """
        steps:
          - id: s
            run: [echo a, 3]
        """,
    )
    r = run("validate", "p.yaml")
    assert r.code == 3, r
    assert r.out == "p.yaml:3:19: error: step 's': run[1]: expected a string, got 3\n", r.out
