"""The run path's parts talk through public names, and a sub-plan's context comes from one factory."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parent.parent / "planrun"


def _source(name: str) -> str:
    return (PKG / name).read_text(encoding="utf-8")


def test_foreach_reaches_the_scheduler_through_public_names_only() -> None:
    tree = ast.parse(_source("run/foreach.py"))
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


def test_a_sub_plans_context_inherits_the_answers_and_policy_but_not_force() -> None:
    """A top-level run and a sub-plan get their context from one factory (planrun.run.context): a
    sub-plan's ids are prefixed with its step, it answers as its parent does but cannot ask,
    its parent's policy bounds it, and `--force` stays with the top-level plan."""
    from planrun.plan.definition import Policy
    from planrun.run.context import RootContext, child_context, root_context
    from planrun.run.parent import MaskChain, ParentContext
    from planrun.run.request import RunRequest

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
