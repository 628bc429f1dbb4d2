"""The run path's shape: one way through for every run, parts that talk through public names."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PKG = Path(__file__).resolve().parent.parent / "planrun"


def _source(name: str) -> str:
    return (PKG / name).read_text(encoding="utf-8")


def test_foreach_reaches_the_scheduler_through_public_names_only() -> None:
    tree = ast.parse(_source("foreach_run.py"))
    private = sorted(
        {
            node.attr
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute)
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
            and isinstance(node.value, ast.Attribute | ast.Name)
            and "host" in ast.unparse(node.value)
        }
    )
    declared = [
        n.name
        for n in ast.walk(tree)
        if isinstance(n, ast.ClassDef) and n.name == "Host"
        for n in n.body
        if isinstance(n, ast.FunctionDef) and n.name.startswith("_")
    ]
    assert private == [] and declared == []


def test_the_scheduler_and_cache_are_built_complete_and_the_graph_is_passed() -> None:
    launch = _source("launch.py")
    patched = re.findall(r"^\s*(?:sched|cache|masker)\.\w+\s*=", launch, re.M)
    assert patched == []
    graph = ast.parse(_source("graph.py"))
    memo = [  # a process-global the graph remembers itself in: an empty list or dict to fill
        ast.unparse(n)
        for n in graph.body
        if isinstance(n, ast.Assign | ast.AnnAssign)
        and isinstance(n.value, ast.List | ast.Dict)
        and not (n.value.elts if isinstance(n.value, ast.List) else n.value.keys)
    ]
    assert memo == []


def test_the_cache_wiring_reads_typed_cache_options_and_leaves_the_console_alone() -> None:
    wiring = ast.parse(_source("cache/wiring.py"))
    untyped = sorted(
        f"{f.name}({a.arg})"
        for f in ast.walk(wiring)
        if isinstance(f, ast.FunctionDef)
        for a in f.args.args
        if a.arg in ("req", "prep", "console")
        and (a.annotation is None or ast.unparse(a.annotation) in ("Any", "Any | None"))
    )
    assert untyped == []
    assert "console." not in _source("cache/wiring.py")


def test_one_run_path_asks_its_context_never_whether_it_is_a_sub_plan() -> None:
    """A top-level run and a sub-plan get their context from a factory (planrun.context);
    the run path reads it and does not branch on which it is."""
    for name in ("runner.py", "launch.py"):
        text = _source(name)
        assert re.findall(r"\bcall\b|SubPlanCall|(?<!planrun)\.parent\b", text) == [], name
    from planrun.context import RootContext, child_context, root_context
    from planrun.parent import MaskChain, ParentContext
    from planrun.plan import Policy
    from planrun.request import RunRequest

    top = root_context(RunRequest(plan="p.yaml", cwd="/w", yes=True, force=["a"]))
    assert isinstance(top, RootContext) and top.prefix == "" and top.yes
    assert top.stack == ("/w/p.yaml",) and top.forced == ("a",) and top.outer_policy is None
    here = ParentContext(
        prefix="",
        plan="p",
        plan_stack=top.stack,
        cwd="/w",
        yes=True,
        ask=None,
        policy=Policy(deny=["shell"]),
        jobs=1,
        slots=None,  # type: ignore[arg-type]
        budget=None,  # type: ignore[arg-type]
        masks=MaskChain(),
        emit=print,
        executor=None,  # type: ignore[arg-type]
    )
    child = child_context(here, "deploy", "/w/sub.yaml", RunRequest(plan="sub.yaml", cwd="/w"))
    assert child.prefix == "deploy/" and child.stack == ("/w/p.yaml", "/w/sub.yaml")
    assert child.yes and not child.can_ask and child.forced == ()
    assert child.outer_policy == here.policy and child.cache_options(None) is None  # type: ignore[arg-type]
