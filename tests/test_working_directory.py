"""`-C DIR`: every relative path a plan or the command line names is relative to it."""

from __future__ import annotations

from tests.testkit import steps_by_id

# ---- paths ---------------------------------------------------------------------------------------


def test_every_relative_path_is_relative_to_the_dash_c_directory(run, write, tmp_path):
    # The plan lives in plans/; every relative path it or the command line names is resolved
    # in the -C directory, never next to the plan file nor in the caller's directory.
    write("w/vars.yaml", "who: from-vars-file\n")
    write("w/child.yaml", "steps: [{id: x, tool: echo, args: {value: child-in-cwd}}]\n")
    write("w/plans/child.yaml", "steps: [{id: x, tool: echo, args: {value: child-by-plan}}]\n")
    write("w/sub/.keep", "")
    write(
        "w/planner.py",
        """
        import json, sys
        json.load(sys.stdin)
        print(json.dumps([{"id": "fixed", "tool": "echo", "args": {"value": "planned"}}]))
        """,
    )
    write(
        "w/plans/p.yaml",
        """
        name: paths
        replan: {command: ["python3", "planner.py"]}
        steps:
          - {id: pwd, tool: shell, args: {cmd: pwd}}
          - {id: cwd, tool: shell, args: {cmd: pwd, cwd: sub}}
          - {id: wf, tool: write_file, args: {path: out.txt, content: "${who}"}}
          - {id: rf, tool: read_file, args: {path: out.txt}, depends_on: [wf]}
          - {id: sp, tool: plan, args: {path: child.yaml}}
          - id: bad
            tool: shell
            args: {cmd: "exit 1"}
            on_failure: replan
            depends_on: [pwd, cwd, rf, sp]
        """,
    )
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    r = run(
        "-C",
        str(tmp_path / "w"),
        "run",
        "plans/p.yaml",
        "--vars-file",
        "vars.yaml",
        "--state",
        "st/p.json",
        "--events",
        "ev.jsonl",
        "--junit",
        "junit.xml",
        "--output",
        "json",
        cwd=outside,
    )
    assert r.code == 0, r
    w = (tmp_path / "w").resolve()
    steps = steps_by_id(r.json)
    assert steps["pwd"]["result"]["stdout"] == f"{w}\n"
    assert steps["cwd"]["result"]["stdout"] == f"{w / 'sub'}\n"
    assert (w / "out.txt").read_text() == "from-vars-file"
    assert steps["rf"]["result"] == "from-vars-file"
    assert steps["sp/x"]["result"] == "child-in-cwd"
    assert steps["fixed"]["result"] == "planned"
    for name in ("st/p.json", "ev.jsonl", "junit.xml"):
        assert (w / name).is_file(), name
    assert not list(outside.iterdir())
    # the default state and `status` look under the -C directory too
    r = run("-C", str(w), "run", "plans/p.yaml", "--vars-file", "vars.yaml", "-q", cwd=outside)
    assert r.code == 0, r
    assert (w / ".planrun/state/paths.json").is_file()
    s = run("-C", str(w), "status", "plans/p.yaml", "--output", "json", cwd=outside)
    assert s.code == 0 and s.json["status"] == "succeeded", s
    assert not list(outside.iterdir())


def test_several_dash_c_are_each_relative_to_the_one_before(run, write, tmp_path):
    # as with make and git: `-C a -C b` is `-C a/b`
    write("a/b/p.yaml", "steps: [{id: s, tool: shell, args: {cmd: pwd}}]\n")
    r = run("-C", "a", "-C", "b", "run", "p.yaml", "--output", "json")
    assert r.code == 0, r
    assert r.json["steps"][0]["result"]["stdout"] == f"{(tmp_path / 'a/b').resolve()}\n"
    r = run("-C", "a", "-C", "nope", "run", "p.yaml")
    assert r.code == 2 and "cannot change to directory nope" in r.err, r
