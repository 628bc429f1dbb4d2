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
from typing import Any, NoReturn

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
_NO_PART_RE = r"has no (?:attribute '([^']*)'|element '?(.*?)'?)$"


def _missing_reference(source: str, scope: Mapping[str, Any], message: str) -> str | None:
    """The reference (`r.x.nope`, `l[3]`) whose last part is missing, for Jinja2's
    "'dict object' has no attribute 'nope'" inside a larger expression: each reference the
    expression reads through literal keys and indexes is walked over `scope` as a plain one
    is (Expr.evaluate), and the first whose walk stops at the part Jinja2 names is it. None
    when no reference explains the message (an attribute a filter looked up)."""
    from jinja2 import nodes
    from jinja2.parser import Parser

    found = re.search(_NO_PART_RE, message)
    if found is None:
        return None
    part = found.group(1) if found.group(1) is not None else found.group(2)
    node = Parser(_environment(), source, state="variable").parse_expression()
    for sub in (node, *node.find_all(nodes.Node)):  # outermost first: r.x.z before r.x
        chain = _reference(sub, nodes)
        if chain is None or chain[0] not in scope:
            continue
        missing = _walk(scope[chain[0]], chain)
        if missing is not None and str(missing[1]) == part:
            return missing[0]
    return None


def _walk(value: Any, chain: list[Any]) -> tuple[str, Any] | None:
    """(the reference up to its first missing part, that part), or None when all is there."""
    walked = chain[0]
    for acc in chain[1:]:
        walked = f"{walked}[{acc}]" if isinstance(acc, int) else f"{walked}.{acc}"
        try:
            value = value[acc]
        except (KeyError, IndexError, TypeError):
            return walked, acc
    return None


def _reference(node: Any, nodes: Any) -> list[Any] | None:
    """[root, key or index, ...] for `a.b['c'][0]` read with literals; None for anything else."""
    accessors: list[Any] = []
    while isinstance(node, nodes.Getattr | nodes.Getitem):
        if isinstance(node, nodes.Getattr):
            accessors.append(node.attr)
        elif isinstance(node.arg, nodes.Const) and isinstance(node.arg.value, str | int):
            accessors.append(node.arg.value)
        else:
            return None
        node = node.node
    if not accessors or not isinstance(node, nodes.Name):
        return None
    return [node.name, *reversed(accessors)]


class _NotFinite(Exception):
    """An expression gave infinity or NaN, which JSON has no number for."""


class _NotJson(Exception):
    """An expression gave a value JSON has no form for (a function, a cycler); the message is
    its type's name."""


_SCALARS = (str, int, float, bool, type(None))


def _json_value(value: Any, undefined: type) -> Any:
    """`value` as the JSON value it stands for: a range, a mapping's keys or items and a
    filter's generator (`map`, `reverse`) are lists, so no Python repr (`range(0, 3)`, an
    object's address) reaches a result or a template. Raise the UndefinedError of the first
    undefined value anywhere in it, _NotFinite for infinity or NaN, _NotJson for a value JSON
    has no form for.

    A filter such as `map(attribute='a')` over a list holding null yields undefined values
    inside a list; they must fail the expression here, not later when the value is used.
    Infinity and NaN (`1e308 * 10`) would be written into the run's documents as `Infinity`
    and `NaN`, which no JSON reader takes.
    """
    stack = [value]
    while stack:  # the usual case: JSON already, checked without a copy
        item = stack.pop()
        if isinstance(item, undefined):
            _undefined(item)
        elif isinstance(item, float) and not math.isfinite(item):
            raise _NotFinite("NaN" if math.isnan(item) else "infinity")
        elif type(item) is dict:
            if not all(isinstance(k, _SCALARS) for k in item):
                return _converted(value, undefined)
            stack.extend(item.values())
        elif type(item) is list or type(item) is tuple:
            stack.extend(item)
        elif type(item) not in _SCALARS:
            return _converted(value, undefined)
    return value


def _undefined(value: Any) -> NoReturn:
    """Raise the UndefinedError of an undefined value: the expressions' StrictUndefined raises
    it, with its own message, as soon as it is read as text (Jinja's public behaviour)."""
    from jinja2.exceptions import UndefinedError

    str(value)
    raise UndefinedError(f"{value!r} is undefined")


def _converted(value: Any, undefined: type) -> Any:
    """`value` made of dicts, lists and scalars (_json_value)."""
    if isinstance(value, undefined):
        _undefined(value)
    if isinstance(value, float) and not math.isfinite(value):
        raise _NotFinite("NaN" if math.isnan(value) else "infinity")
    if isinstance(value, bool):
        return value
    for kind in (str, int, float):  # a subclass (Markup) as its plain value
        if isinstance(value, kind):
            return value if type(value) is kind else kind(value)
    if value is None:
        return None
    if isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            if not isinstance(k, _SCALARS):
                raise _NotJson(f"mapping with a {type(k).__name__} key")
            out[_converted(k, undefined)] = _json_value(v, undefined)
        return out
    if isinstance(value, list | tuple | range | Iterator | KeysView | ValuesView | ItemsView):
        # (each item checked without recursion first: only what is not JSON yet recurses,
        # so a deep result inside a filter's items is not a RecursionError)
        return [_json_value(v, undefined) for v in value]
    raise _NotJson(type(value).__name__)


def _evaluate_jinja(source: str, scope: Mapping[str, Any]) -> Any:
    from jinja2 import Undefined
    from jinja2.exceptions import SecurityError, TemplateError, UndefinedError

    from planrun.plan.sandbox import TooLarge

    try:
        return _json_value(_compiled(source)(**scope), Undefined)
    except UndefinedError as exc:
        m = re.match(_UNDEFINED_RE, str(exc.message))
        missing = m.group(1) if m else _missing_reference(source, scope, str(exc.message))
        if missing:
            raise ExpressionError(f"undefined name '{missing}'", name=missing) from None
        raise ExpressionError(f"in '${{{source}}}': {exc.message}") from None
    except TooLarge as exc:
        raise ExpressionError(f"in '${{{source}}}': {exc}") from None
    except _NotFinite as exc:
        raise ExpressionError(
            f"in '${{{source}}}': the value is {exc}, which JSON has no number for"
        ) from None
    except _NotJson as exc:
        raise ExpressionError(
            f"in '${{{source}}}': the value is a {exc}, which is not JSON"
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
    value: Any, path: tuple[str | int, ...] = (), *, keys: bool = False
) -> list[tuple[tuple[str | int, ...], str]]:
    """Every string holding `${` inside a JSON-like value, with its path; with `keys`, the
    mapping keys holding one too (a step's `args` and `env`: see render_value), each with the
    path of its value."""
    found: list[tuple[tuple[str | int, ...], str]] = []
    stack: list[tuple[tuple[str | int, ...], Any]] = [(path, value)]
    while stack:  # a loop, not recursive generators: this runs over every value of a plan
        where, item = stack.pop()
        if isinstance(item, str):
            if "${" in item:
                found.append((where, item))
            continue
        if isinstance(item, dict):
            if keys:
                found.extend(((*where, k), k) for k in item if isinstance(k, str) and "${" in k)
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


def render_value(
    value: Any, evaluate: Evaluate, path: tuple[str | int, ...] = (), *, keys: bool = False
) -> Any:
    """`value` with every template rendered, each expression's value given by `evaluate`.
    ExpressionError messages gain the value's path. With `keys` (a step's `args` and `env`,
    where every string is a template), mapping keys are rendered too, always to text."""
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
        if keys and any(isinstance(k, str) and "${" in k for k in value):
            return _render_mapping(value, evaluate, path)
        return {k: render_value(v, evaluate, (*path, k), keys=keys) for k, v in value.items()}
    if isinstance(value, list):
        return [render_value(v, evaluate, (*path, i), keys=keys) for i, v in enumerate(value)]
    return value


def _render_mapping(
    value: dict[str, Any], evaluate: Evaluate, path: tuple[str | int, ...]
) -> dict[str, Any]:
    """A mapping whose keys hold `${...}`: each key rendered as text (a key that is one
    expression of another type reads as JSON, `${1 + 1}` as `2`). Two keys that render alike
    are an error: one value would silently replace the other."""
    out: dict[str, Any] = {}
    for k, v in value.items():
        name = to_text(render_value(k, evaluate, (*path, k))) if isinstance(k, str) else k
        if name in out:
            where = format_path(path)
            message = f"two keys render as {name!r}"
            raise ExpressionError(f"{where}: {message}" if where else message)
        out[name] = render_value(v, evaluate, (*path, k), keys=True)
    return out


def render_args(args: dict[str, Any], evaluate: Evaluate) -> dict[str, Any]:
    """A tool's arguments rendered plainly: how a tool without its own rendering gets them
    (planrun.tools.base.ToolSpec.render)."""
    rendered: dict[str, Any] = render_value(args, evaluate, ("args",), keys=True)
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
