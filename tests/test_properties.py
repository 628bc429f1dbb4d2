"""Property and fuzz tests: random DAGs, random cycles, random bytes and random YAML."""

from __future__ import annotations

import json
import random
import re
import string
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from planrun.errors import PlanInvalid
from planrun.plan import definition as runtime_plan
from planrun.plan.graph import MERMAID_KEYWORDS, PlanGraph, render_json, render_mermaid
from planrun.plan.loader import load_text
from planrun.plan.validate import check_document
from tests.conftest import assert_no_traceback

ROOT = Path(__file__).resolve().parent.parent
FAST = settings(max_examples=75, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# ---- random DAGs -------------------------------------------------------------------------

ID_CHARS = string.ascii_letters + string.digits + "_.-"


@st.composite
def dags(draw: st.DrawFn) -> dict[str, Any]:
    """A random DAG as a plan: ids, edges (dependent, dependency, kind) and the plan's text.

    Node k may depend only on nodes < k (so it is acyclic); the steps are then written in a
    shuffled order so that file order says nothing about the graph. An edge is written either
    as `depends_on` or as a data-flow read of the dependency's result variable, or as
    `steps.ID` in the `when` condition.
    """
    n = draw(st.integers(min_value=1, max_value=25))
    ids = draw(
        st.lists(st.text(ID_CHARS, min_size=1, max_size=6), min_size=n, max_size=n, unique=True)
    )
    edges: list[tuple[int, int, str]] = []
    for k in range(n):
        deps = draw(st.sets(st.integers(0, k - 1), max_size=3)) if k else set()
        for d in sorted(deps):
            edges.append((k, d, draw(st.sampled_from(["explicit", "data", "steps"]))))
    order = draw(st.permutations(range(n)))
    return {"ids": ids, "edges": edges, "order": order}


def plan_text(ids: list[str], edges: list[tuple[int, int, str]], order: list[int]) -> str:
    steps = []
    for k in order:
        step: dict[str, Any] = {"id": ids[k], "tool": "echo", "result_variable": f"v{k}"}
        explicit = [ids[d] for (a, d, kind) in edges if a == k and kind == "explicit"]
        reads = [f"${{v{d}}}" for (a, d, kind) in edges if a == k and kind == "data"]
        status = [
            f"steps[{json.dumps(ids[d])}].status == 'succeeded'"
            for (a, d, kind) in edges
            if a == k and kind == "steps"
        ]
        if explicit:
            step["depends_on"] = explicit
        step["args"] = {"value": reads}
        if status:
            step["when"] = "${" + " and ".join(status) + "}"
        steps.append(step)
    return yaml.safe_dump({"name": "dag", "steps": steps}, sort_keys=False, width=1000)


def check_text(text: str):  # type: ignore[no-untyped-def]
    return check_document(load_text(text, "p.yaml"))


@pytest.mark.slow  # many generated cases: the full suite runs it
@FAST
@given(dags())
def test_random_dag_validates_and_order_respects_every_edge(dag):
    ids, edges = dag["ids"], dag["edges"]
    checked = check_text(plan_text(ids, edges, dag["order"]))
    assert checked.diagnostics == [] and checked.plan is not None
    graph = PlanGraph.build(checked.plan.steps)

    expected = {(ids[d], ids[a]) for a, d, _ in edges}  # (from = dependency, to = dependent)
    assert {(e["from"], e["to"]) for e in graph.edges()} == expected
    kinds = {
        (ids[d], ids[a]): ("explicit" if kind == "explicit" else "data") for a, d, kind in edges
    }
    assert {(e["from"], e["to"]): e["kind"] for e in graph.edges()} == kinds

    for order in (
        graph.topo_order(),
        [s for wave in render_json("dag", graph)["waves"] for s in wave],
    ):
        assert sorted(order) == sorted(ids)
        position = {sid: i for i, sid in enumerate(order)}
        for src, dst in expected:
            assert position[src] < position[dst], (src, dst, order)
    # Within a wave no step depends on another.
    for wave in graph.waves():
        assert not any((a, b) in expected for a in wave for b in wave)


@pytest.mark.slow  # many generated cases: the full suite runs it
@FAST
@given(dags(), st.data())
def test_random_dag_plus_back_edge_is_a_cycle_of_real_edges(dag, data):
    ids, edges = dag["ids"], list(dag["edges"])
    n = len(ids)
    deps: dict[int, set[int]] = {k: set() for k in range(n)}
    for a, d, _ in edges:
        deps[a].add(d)
    # Pick x and a y that (transitively) depends on x; making x depend on y closes a cycle.
    reach: dict[int, set[int]] = {}
    for k in range(n):  # nodes only depend on smaller ones: ancestors are known in order
        reach[k] = set(deps[k]).union(*(reach[d] for d in deps[k]))
    candidates = [(x, y) for y in range(n) for x in reach[y]]
    assume(candidates)
    x, y = data.draw(st.sampled_from(candidates))
    kind = data.draw(st.sampled_from(["explicit", "data", "steps"]))
    edges.append((x, y, kind))
    text = plan_text(ids, edges, dag["order"])
    checked = check_text(text)

    errors = [d for d in checked.diagnostics if d.severity == "error"]
    assert len(errors) == 1, [d.render() for d in checked.diagnostics]
    match = re.fullmatch(r"dependency cycle: (.+)", errors[0].message)
    assert match, errors[0].message
    path = match.group(1).split(" -> ")
    assert len(path) >= 3 and path[0] == path[-1]
    assert len(set(path[:-1])) == len(path) - 1  # a simple cycle
    real = {(ids[a], ids[d]) for a, d, _ in edges}  # (dependent, dependency)
    for step, nxt in zip(path, path[1:], strict=False):
        assert (step, nxt) in real, (step, nxt, path)
    # The error sits inside the first step of the printed cycle.
    lines = text.splitlines()
    line = lines[errors[0].line - 1]
    start = max(i for i in range(errors[0].line) if lines[i].startswith("- id:"))
    assert yaml.safe_load(lines[start][2:])["id"] == path[0], (line, path)


@pytest.mark.slow  # many generated cases: the full suite runs it
@FAST
@given(dags())
def test_mermaid_node_ids_are_unique_safe_and_carry_every_edge(dag):
    checked = check_text(plan_text(dag["ids"], dag["edges"], dag["order"]))
    text = render_mermaid(PlanGraph.build(checked.plan.steps))
    nodes = re.findall(r'^    (\S+)\["(.*?)<br/>', text, re.M)
    node_ids = [nid for nid, _ in nodes]
    assert len(set(node_ids)) == len(node_ids) == len(dag["ids"])
    keywords = MERMAID_KEYWORDS
    for nid in node_ids:
        # What mermaid 11 accepts as a node id (checked by hand with its parser).
        assert re.fullmatch(r"[A-Za-z0-9_]+(?:[.-][A-Za-z0-9_]+)*", nid), nid
        assert re.split(r"[.-]", nid)[0] not in keywords, nid
    alias = {label.split(": ")[0]: nid for nid, label in nodes}
    assert set(alias) == set(dag["ids"])
    edges = set(re.findall(r"^    (\S+) (?:-->|-\.->\|data\|) (\S+)$", text, re.M))
    assert edges == {(alias[dag["ids"][d]], alias[dag["ids"][a]]) for a, d, _ in dag["edges"]}


@FAST
@given(st.integers(min_value=2, max_value=30))
def test_one_long_ring_is_printed_whole(n):
    ids = [f"s{k}" for k in range(n)]
    edges = [(k, k - 1, "explicit") for k in range(1, n)] + [(0, n - 1, "data")]
    checked = check_text(plan_text(ids, edges, list(range(n))))
    (err,) = checked.diagnostics
    assert err.message == "dependency cycle: " + " -> ".join(["s0", *reversed(ids[1:]), "s0"])


# ---- fuzz: nothing crashes ---------------------------------------------------------------


def _keys(cls: type) -> list[str]:
    """The keys a plan file may hold for `cls`, from the one definition of the format (so a key
    added there is fuzzed from then on), plus the aliases mcp-cli's plans use."""
    from planrun.plan.data import rows

    return [row[1] for row in rows(cls)]


PLAN_KEYS = [*_keys(runtime_plan.Plan), "id"]
STEP_KEYS = [*_keys(runtime_plan.Step), "index"]
TEXTS = st.one_of(
    st.text(max_size=12),
    st.sampled_from(
        [
            "${x}",
            "${",
            "${a.b[0]}",
            "${steps.a.result}",
            "${1 +}",
            "$${x}",
            "5s",
            "abort",
            "echo",
            "shell",
            "fs.read",
            "1h",
            "-1",
            "${x | default('y')}",
            "${ {'a': 1} }",
            "${[1, 2] | sum}",
            "${a.__class__}",
            "${env.HOME}",
        ]
    ),
)
SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 10**12), st.floats(allow_nan=True), TEXTS
)


def _values(depth: int = 3) -> st.SearchStrategy[Any]:
    return st.recursive(
        SCALARS,
        lambda inner: st.one_of(
            st.lists(inner, max_size=4),
            st.dictionaries(
                st.one_of(st.sampled_from(PLAN_KEYS + STEP_KEYS), st.text(max_size=6)),
                inner,
                max_size=4,
            ),
        ),
        max_leaves=12,
    )


STEPS = st.lists(
    st.one_of(
        st.fixed_dictionaries(
            {
                "id": st.one_of(st.sampled_from(["a", "b", "c"]), st.integers(0, 3), TEXTS),
                "tool": st.sampled_from(["echo", "shell", "ech", "fs.read", "plan", ""]),
            },
            optional={k: _values() for k in STEP_KEYS if k not in ("id", "tool")},
        ),
        _values(),
    ),
    max_size=5,
)
PLANS = st.fixed_dictionaries(
    {"steps": STEPS}, optional={k: _values() for k in PLAN_KEYS if k != "steps"}
)


def validate_bytes(raw: bytes, name: str) -> list[Any]:
    """What `planrun validate` does with a file's bytes; only PlanInvalid may escape the loader."""
    fmt = "json" if name.endswith(".json") else "yaml"
    try:
        return check_document(load_text(raw, name, fmt)).diagnostics  # type: ignore[arg-type]
    except PlanInvalid as exc:
        assert exc.diagnostics
        return exc.diagnostics


def _assert_sane(diags: list[Any], name: str) -> None:
    for d in diags:
        assert d.file == name and d.line >= 1 and d.col >= 1 and d.severity in ("error", "warning")
        assert d.message


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300), st.sampled_from(["p.yaml", "p.json"]))
def test_fuzz_random_bytes(raw, name):
    _assert_sane(validate_bytes(raw, name), name)


@pytest.mark.slow  # many generated cases: the full suite runs it
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(PLANS, st.sampled_from(["yaml", "json", "flow"]))
def test_fuzz_random_plan_documents(plan, style):
    if style == "json":
        text, name = json.dumps(plan, default=str), "p.json"
    else:
        text = yaml.safe_dump(plan, default_flow_style=style == "flow", allow_unicode=True)
        name = "p.yaml"
    _assert_sane(validate_bytes(text.encode(), name), name)


@pytest.mark.slow  # many generated cases: the full suite runs it
@settings(max_examples=200, deadline=None)
@given(st.data())
def test_fuzz_mutated_examples(data):
    files = sorted((ROOT / "examples").rglob("*.yaml"))
    src = data.draw(st.sampled_from(files)).read_bytes()
    ops = data.draw(
        st.lists(
            st.tuples(
                st.sampled_from(["del", "ins", "swap"]),
                st.integers(0, max(0, len(src) - 1)),
                st.binary(min_size=1, max_size=3),
            ),
            min_size=1,
            max_size=4,
        )
    )
    for op, at, chunk in ops:
        at = min(at, len(src))
        if op == "del":
            src = src[:at] + src[at + len(chunk) :]
        elif op == "ins":
            src = src[:at] + chunk + src[at:]
        else:
            src = src[:at] + chunk + src[at + len(chunk) :]
    _assert_sane(validate_bytes(src, "m.yaml"), "m.yaml")


@pytest.mark.slow  # many generated cases: the full suite runs it
def test_fuzz_through_the_cli(run, tmp_path):
    """A handful of random files through the real command: exit 0 or 3, never a traceback."""
    rng = random.Random(20261126)
    names = []
    for k in range(12):
        raw = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 200)))
        name = f"bytes{k}.{'json' if k % 3 == 0 else 'yaml'}"
        (tmp_path / name).write_bytes(raw)
        names.append(name)
    for k in range(12):
        plan = _random_plan(rng)
        name = f"doc{k}.{'json' if k % 2 else 'yaml'}"
        text = json.dumps(plan) if k % 2 else yaml.safe_dump(plan, allow_unicode=True)
        (tmp_path / name).write_text(text)
        names.append(name)
    for fmt in ("text", "json", "github"):
        r = run("validate", *names, "--format", fmt)
        assert r.code in (0, 3), r
        assert_no_traceback(r)
        assert "internal error" not in r.err, r
        if fmt == "json":
            assert r.json["valid"] is (r.code == 0)
    for name in names[::4]:
        r = run("validate", name)
        assert r.code in (0, 3), r
        assert_no_traceback(r)
        r = run("graph", name, "--format", "json")
        assert r.code in (0, 3), r
        assert_no_traceback(r)


def _random_plan(rng: random.Random) -> dict[str, Any]:
    def value(depth: int) -> Any:
        pick = rng.randrange(8 if depth < 3 else 5)
        if pick == 0:
            return None
        if pick == 1:
            return rng.choice([True, False, 0, -1, 3.5, 10**15])
        if pick in (2, 3, 4):
            return rng.choice(
                ["${x}", "${", "5s", "echo", "a", "${steps.a.status}", "ü", "", "${1+}"]
            )
        if pick in (5, 6):
            return {
                rng.choice(PLAN_KEYS + STEP_KEYS + ["zz"]): value(depth + 1)
                for _ in range(rng.randrange(4))
            }
        return [value(depth + 1) for _ in range(rng.randrange(4))]

    steps = [
        {
            "id": rng.choice(["a", "b", 1, "c d"]),
            "tool": rng.choice(["echo", "shel", "x.y"]),
            **{rng.choice(STEP_KEYS): value(1) for _ in range(rng.randrange(4))},
        }
        for _ in range(rng.randrange(5))
    ]
    return {"steps": steps, **{rng.choice(PLAN_KEYS): value(1) for _ in range(rng.randrange(4))}}
