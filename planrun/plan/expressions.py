"""`${EXPR}` strings: parsing, the names they read, and evaluation in Jinja2's sandbox.

Plain references (`${a.b[0]}`, the bulk of real plans) are parsed and evaluated here without
Jinja2; anything else is compiled once by planrun's bounded, immutable Jinja2 sandbox
(planrun/plan/sandbox.py) and cached.
"""

from __future__ import annotations

# Lazy imports (inside functions), for start-up time: jinja2, the sandbox and the loader only
# for the expressions that need them.
import json
import math
import re
from collections.abc import Callable, ItemsView, Iterable, Iterator, KeysView, Mapping, ValuesView
from functools import lru_cache
from typing import Any

from planrun.errors import PlanInvalid
from planrun.records import record

_CONSTANTS = {"true", "false", "none", "True", "False", "None"}
# Patterns are compiled on first use (re's own cache), not at import: start-up time.
_REF_RE = r"""^\s*([A-Za-z_]\w*)((?:\.[A-Za-z_]\w*|\[\d+\]|\['[^'\\\]]*'\]|\["[^"\\\]]*"\])*)\s*$"""
_ACCESSOR_RE = r"""\.([A-Za-z_]\w*)|\[(\d+)\]|\['([^'\\\]]*)'\]|\["([^"\\\]]*)"\]"""
_OPEN = {"{": "}", "[": "]", "(": ")"}


class ExpressionError(Exception):
    """An expression that does not parse, or that cannot be evaluated in the current scope."""

    def __init__(self, message: str, *, name: str | None = None, at: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.name = name
        self.at = at  # the top-level argument it is about, when a tool's rendering says so


@record(frozen=True)
class Expr:
    """One `${...}` expression: its source and the root names it reads."""

    source: str
    names: frozenset[str]
    step_refs: frozenset[str]  # ids X read as steps.X / steps['X']
    ref: tuple[str, tuple[str | int, ...]] | None  # (root, accessors) for plain references
    # `steps` read other than as steps.ID / steps['ID'] (`steps[x]`, `steps | length`): such a
    # read names no step, so it can order nothing and would see steps still pending.
    steps_dynamic: bool = False

    def evaluate(self, scope: Mapping[str, Any]) -> Any:
        if self.ref is not None:
            root, accessors = self.ref
            if root not in scope:
                raise ExpressionError(f"undefined name '{root}'", name=root)
            value = scope[root]
            walked = root
            for acc in accessors:
                walked = f"{walked}[{acc}]" if isinstance(acc, int) else f"{walked}.{acc}"
                try:
                    value = value[acc]
                except (KeyError, IndexError, TypeError):
                    raise ExpressionError(f"undefined name '{walked}'", name=walked) from None
            return value
        # Only the names it reads: the scope may hold thousands of result variables.
        return _evaluate_jinja(self.source, {n: scope[n] for n in self.names if n in scope})


@record(frozen=True)
class Template:
    """A string holding `${...}` parts. `whole` is set when the string is exactly one expression."""

    parts: tuple[str | Expr, ...]

    @property
    def whole(self) -> Expr | None:
        if len(self.parts) == 1 and isinstance(self.parts[0], Expr):
            return self.parts[0]
        return None

    @property
    def exprs(self) -> Iterator[Expr]:
        return (p for p in self.parts if isinstance(p, Expr))

    def render(self, evaluate: Evaluate) -> Any:
        """The template's value, each expression's value given by `evaluate`: the value itself
        for a whole expression, else text."""
        whole = self.whole
        if whole is not None:
            return detached(evaluate(whole))
        return "".join([p if isinstance(p, str) else to_text(evaluate(p)) for p in self.parts])


Evaluate = Callable[[Expr], Any]
"""How a rendering gets each expression's value: from a scope (`evaluator`), from values
already evaluated (with secrets masked), or as placeholders (the dry run: `Unknown`)."""


def evaluator(scope: Mapping[str, Any]) -> Evaluate:
    """Each expression evaluated in `scope`."""
    return lambda expr: expr.evaluate(scope)


class Unknown(str):
    """A placeholder for a value not known yet (the dry run's `<build result>`): a rendering
    that treats values by what they hold (shell quoting) treats it as any value."""


def detached(value: Any) -> Any:
    """A copy of a mapping or list taken from the scope, so that a tool changing its arguments
    (a python function updating a dict it was given) cannot change a variable, a result or the
    environment later steps get. Scalars are immutable and returned as they are.

    Copied without recursion: a result may be nested as deep as its JSON allows."""
    if not isinstance(value, Mapping | list | tuple):
        return value
    top: list[Any] = [None]
    stack: list[tuple[Any, Any, Any]] = [(top, 0, value)]
    while stack:
        into, at, item = stack.pop()
        copy: dict[Any, Any] | list[Any]
        if isinstance(item, Mapping):
            copy = dict(item)
            pairs: Iterable[tuple[Any, Any]] = copy.items()
        else:
            copy = list(item)
            pairs = enumerate(copy)
        into[at] = copy
        stack.extend((copy, k, v) for k, v in pairs if isinstance(v, Mapping | list | tuple))
    return top[0]


def to_text(value: Any) -> str:
    """How a value reads inside a template: strings as they are, everything else as JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


def _scan_end(text: str, start: int) -> int:
    """Index of the `}` closing the expression that starts at `start` (after `${`)."""
    depth: list[str] = []
    quote: str | None = None
    i = start
    n = len(text)
    while i < n:
        c = text[i]
        if quote:
            if c == "\\":
                i += 1
            elif c == quote:
                quote = None
        elif c in "'\"":
            quote = c
        elif c in _OPEN:
            depth.append(_OPEN[c])
        elif depth and c == depth[-1]:
            depth.pop()
        elif c == "}" and not depth:
            return i
        i += 1
    raise ExpressionError("unterminated '${': missing '}'")


@lru_cache(maxsize=65536)
def parse_template(text: str) -> Template | None:
    """The template in `text`, or None when it holds no `${`. Raises ExpressionError."""
    if "${" not in text:
        return None
    parts: list[str | Expr] = []
    buf: list[str] = []
    i = 0
    while True:
        j = text.find("${", i)
        if j < 0:
            buf.append(text[i:])
            break
        if j > 0 and text[j - 1] == "$":
            buf.append(text[i : j - 1] + "${")
            i = j + 2
            continue
        buf.append(text[i:j])
        end = _scan_end(text, j + 2)
        literal = "".join(buf)
        if literal:
            parts.append(literal)
        buf = []
        parts.append(parse_expr(text[j + 2 : end]))
        i = end + 1
    literal = "".join(buf)
    if literal:
        parts.append(literal)
    return Template(tuple(parts))  # never empty: it holds an expression or a `$${` made `${`


PLAIN_REFERENCES = True
"""Whether plain references are parsed and evaluated here (False: through Jinja2, as every
other expression; for bench/bench_expressions.py). See docs/architecture.md for its figure."""


@lru_cache(maxsize=65536)
def parse_expr(source: str) -> Expr:
    """Parse one expression; plain references need no Jinja2."""
    if not source.strip():
        raise ExpressionError("empty expression '${}'")
    m = re.match(_REF_RE, source) if PLAIN_REFERENCES else None
    if m and m.group(1) not in _CONSTANTS:
        root = m.group(1)
        accessors: list[str | int] = [
            int(idx) if idx else a or sq or dq
            for a, idx, sq, dq in re.findall(_ACCESSOR_RE, m.group(2))
        ]
        step_refs: frozenset[str] = frozenset()
        if root == "steps" and accessors and isinstance(accessors[0], str):
            step_refs = frozenset([accessors[0]])
        dynamic = root == "steps" and not step_refs
        return Expr(source, frozenset([root]), step_refs, (root, tuple(accessors)), dynamic)
    return jinja_expr(source)


def jinja_expr(source: str) -> Expr:
    """`source` parsed by Jinja2 and evaluated in its sandbox, plain reference or not: the
    reference the plain path agrees with (tests/test_expr_paths.py)."""
    names, step_refs, dynamic = _jinja_names(source)
    return Expr(source, names, step_refs, None, dynamic)


def _environment() -> Any:
    global _ENV
    if _ENV is None:
        from jinja2 import StrictUndefined

        from planrun.plan.sandbox import BoundedEnvironment

        _ENV = BoundedEnvironment(undefined=StrictUndefined)
    return _ENV


_ENV: Any = None


def _jinja_names(source: str) -> tuple[frozenset[str], frozenset[str], bool]:
    """(root names read, step ids read as steps.ID, whether `steps` is read any other way)."""
    from jinja2 import TemplateSyntaxError, nodes
    from jinja2.parser import Parser

    from planrun.plan.sandbox import TooLarge, check_literal

    env = _environment()
    try:
        parser = Parser(env, source, state="variable")
        node = parser.parse_expression()
        if not parser.stream.eos:
            raise TemplateSyntaxError(
                f"unexpected '{parser.stream.current.value}' after the expression",
                parser.stream.current.lineno,
            )
        check_literal(node)
        everything = [node, *node.find_all(nodes.Node)]  # find_all skips the root itself
    except TemplateSyntaxError as exc:
        raise ExpressionError(f"bad expression '${{{source}}}': {exc.message}") from None
    except TooLarge as exc:
        raise ExpressionError(f"bad expression '${{{source}}}': {exc}") from None
    except RecursionError:
        raise ExpressionError(f"bad expression '${{{source[:40]}…}}': nested too deeply") from None
    for f in (n for n in everything if isinstance(n, nodes.Filter)):
        if f.name not in env.filters:
            raise ExpressionError(f"bad expression '${{{source}}}': unknown filter '{f.name}'")
    for t in (n for n in everything if isinstance(n, nodes.Test)):
        if t.name not in env.tests:
            raise ExpressionError(f"bad expression '${{{source}}}': unknown test '{t.name}'")
    names = {n.name for n in everything if isinstance(n, nodes.Name) and n.ctx == "load"}
    names -= set(env.globals)
    step_refs: set[str] = set()
    literal_reads = 0
    for found in (n for n in everything if isinstance(n, nodes.Getattr | nodes.Getitem)):
        sub: Any = found
        target = sub.node
        if isinstance(target, nodes.Name) and target.name == "steps":
            if isinstance(sub, nodes.Getattr):
                step_refs.add(sub.attr)
                literal_reads += 1
            elif isinstance(sub.arg, nodes.Const) and isinstance(sub.arg.value, str):
                step_refs.add(sub.arg.value)
                literal_reads += 1
    steps_reads = sum(
        1 for n in everything if isinstance(n, nodes.Name) and n.name == "steps" and n.ctx == "load"
    )
    return frozenset(names), frozenset(step_refs), steps_reads > literal_reads


@lru_cache(maxsize=4096)
def keys_read(source: str, root: str) -> frozenset[str]:
    """The keys an expression reads off the name `root` with a literal (`root.X`,
    `root['X']`; not a method it calls, `root.get(...)`): a matrix step's `${matrix.py}` reads
    'py'. `source` parses (it was checked)."""
    from jinja2 import nodes
    from jinja2.parser import Parser

    node = Parser(_environment(), source, state="variable").parse_expression()
    keys: set[str] = set()
    everything = (node, *node.find_all(nodes.Node))  # find_all skips the root itself
    called = {id(n.node) for n in everything if isinstance(n, nodes.Call)}  # root.get(...)
    for sub in everything:
        if not isinstance(sub, nodes.Getattr | nodes.Getitem) or id(sub) in called:
            continue
        if not (isinstance(sub.node, nodes.Name) and sub.node.name == root):
            continue
        if isinstance(sub, nodes.Getattr):
            keys.add(sub.attr)
        elif isinstance(sub.arg, nodes.Const) and isinstance(sub.arg.value, str):
            keys.add(sub.arg.value)
    return frozenset(keys)


@lru_cache(maxsize=4096)
def _compiled(source: str) -> Any:
    return _environment().compile_expression(source, undefined_to_none=False)


_UNDEFINED_RE = r"^'([^']+)' is undefined$"


class _NotFinite(Exception):
    """An expression gave infinity or NaN, which JSON has no number for."""


_ONE_BY_ONE = (Iterator, range, set, frozenset, KeysView, ValuesView, ItemsView, tuple)
"""What an expression may give item by item: a filter's generator (`map`, `select`,
`reverse`, `unique`), `range(n)`, a mapping's `keys()`/`values()`/`items()`; and a tuple."""


def _as_lists(value: Any) -> Any:
    """`value` with every sequence given item by item made a list (tuples too, so that a
    value is JSON's), anywhere in it: a whole `${...}` keeps its type as a list, and a
    template shows it as JSON, never as a Python repr (`range(0, 3)`, `<generator ...>`).
    Lists and mappings holding none are returned as they are (no copy)."""
    if not _holds_one_by_one(value):
        return value  # values from the scope (JSON, however deep) end here
    if isinstance(value, _ONE_BY_ONE):
        return [_as_lists(v) for v in value]
    if isinstance(value, list):
        items = [_as_lists(v) for v in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    if isinstance(value, dict):
        pairs = {k: _as_lists(v) for k, v in value.items()}
        return value if all(pairs[k] is v for k, v in value.items()) else pairs
    return value


def _holds_one_by_one(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, _ONE_BY_ONE):
            return True
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _reject_undefined(value: Any, undefined: type) -> None:
    """Raise the UndefinedError of the first undefined value anywhere in `value`, or
    _NotFinite for infinity or NaN.

    A filter such as `map(attribute='a')` over a list holding null yields undefined values
    inside a list; they must fail the expression here, not later when the value is used.
    Infinity and NaN (`1e308 * 10`) would be written into the run's documents as `Infinity`
    and `NaN`, which no JSON reader takes.
    """
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, undefined):
            item._fail_with_undefined_error()  # type: ignore[attr-defined]
        elif isinstance(item, float) and not math.isfinite(item):
            raise _NotFinite("NaN" if math.isnan(item) else "infinity")
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)


def _evaluate_jinja(source: str, scope: Mapping[str, Any]) -> Any:
    from jinja2 import Undefined
    from jinja2.exceptions import SecurityError, TemplateError, UndefinedError

    from planrun.plan.sandbox import TooLarge

    try:
        value = _as_lists(_compiled(source)(**scope))
        _reject_undefined(value, Undefined)
        return value
    except UndefinedError as exc:
        m = re.match(_UNDEFINED_RE, str(exc.message))
        if m:
            raise ExpressionError(f"undefined name '{m.group(1)}'", name=m.group(1)) from None
        raise ExpressionError(f"in '${{{source}}}': {exc.message}") from None
    except TooLarge as exc:
        raise ExpressionError(f"in '${{{source}}}': {exc}") from None
    except _NotFinite as exc:
        raise ExpressionError(
            f"in '${{{source}}}': the value is {exc}, which JSON has no number for"
        ) from None
    except SecurityError as exc:
        raise ExpressionError(f"in '${{{source}}}': not allowed: {exc}") from None
    except TemplateError as exc:
        raise ExpressionError(f"in '${{{source}}}': {exc.message}") from None
    except Exception as exc:  # an expression's own error (1/0, bad filter input): one line
        raise ExpressionError(f"in '${{{source}}}': {type(exc).__name__}: {exc}") from None


def has_template(value: Any) -> bool:
    """A value holding `${...}` somewhere (a string, or inside a list or mapping): known only
    when the step runs."""
    if isinstance(value, str):
        return "${" in value
    if isinstance(value, dict):
        return any(has_template(v) for v in value.values())
    if isinstance(value, list):
        return any(has_template(v) for v in value)
    return False


def template_strings(
    value: Any, path: tuple[str | int, ...] = ()
) -> list[tuple[tuple[str | int, ...], str]]:
    """Every string holding `${` inside a JSON-like value, with its path (keys are not templated)."""
    found: list[tuple[tuple[str | int, ...], str]] = []
    stack: list[tuple[tuple[str | int, ...], Any]] = [(path, value)]
    while stack:  # a loop, not recursive generators: this runs over every value of a plan
        where, item = stack.pop()
        if isinstance(item, str):
            if "${" in item:
                found.append((where, item))
            continue
        if isinstance(item, dict):
            children: Iterable[tuple[str | int, Any]] = reversed(item.items())
        elif isinstance(item, list):
            children = reversed(list(enumerate(item)))
        else:
            continue
        # Only what can hold a template gets a path: most strings hold none.
        for k, v in children:
            if isinstance(v, str):
                if "${" in v:
                    stack.append(((*where, k), v))
            elif isinstance(v, dict | list):
                stack.append(((*where, k), v))
    return found


def resolve(
    value: Any,
    scope: Mapping[str, Any],
    *,
    path: tuple[str | int, ...] = (),
) -> Any:
    """`value` with every template evaluated. ExpressionError messages gain the value's path."""
    return render_value(value, evaluator(scope), path)


def render_value(value: Any, evaluate: Evaluate, path: tuple[str | int, ...] = ()) -> Any:
    """`value` with every template rendered, each expression's value given by `evaluate`.
    ExpressionError messages gain the value's path."""
    if isinstance(value, str):
        tpl = parse_template(value)
        if tpl is None:
            return value.replace("$${", "${") if "$${" in value else value
        try:
            return tpl.render(evaluate)
        except ExpressionError as exc:
            where = format_path(path)
            raise ExpressionError(
                f"{where}: {exc.message}" if where else exc.message, name=exc.name
            ) from None
    if isinstance(value, dict):
        return {k: render_value(v, evaluate, (*path, k)) for k, v in value.items()}
    if isinstance(value, list):
        return [render_value(v, evaluate, (*path, i)) for i, v in enumerate(value)]
    return value


def render_args(args: dict[str, Any], evaluate: Evaluate) -> dict[str, Any]:
    """A tool's arguments rendered plainly: how a tool without its own rendering gets them
    (planrun.tools.base.ToolSpec.render)."""
    rendered: dict[str, Any] = render_value(args, evaluate, ("args",))
    return rendered


class Words(list[str]):
    """A list of words (`cli_args`): a tool that renders values into a command line (the
    shell tool) makes each word a value of its own; rendered plainly, a list."""


def format_path(path: tuple[str | int, ...]) -> str:
    """`args.cmd[0]` style."""
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


def parse_cli_value(text: str) -> Any:
    """`--var K=V`: V as a YAML scalar or flow value (`3` int, `[1,2]` list, `'3'` string).

    Read by the plan loader, so it yields what the same text in a plan file would: JSON
    types only (`yes` and `2026-11-26` stay strings). Text that is not YAML stays as typed;
    YAML's infinity or NaN (`.nan`, `[1, .inf]`) is a ValueError (no document of a run could
    carry it as JSON), its message the loader's.
    """
    from planrun.plan.loader import NotJsonNumber, load_text

    if not text.strip() or "\n" in text:
        return text
    try:
        return load_text(f"v: {text}", "--var", "yaml").data["v"]
    except NotJsonNumber as exc:
        raise ValueError(exc.diagnostics[0].message) from None
    except (PlanInvalid, KeyError, TypeError):
        return text
