"""The Jinja2 environment expressions run in: immutable, and bounded so no expression can hog the host.

Jinja2's `ImmutableSandboxedEnvironment` already refuses Python internals and in-place changes
to lists and dicts (`d.update(...)`, `env.pop(...)`). What it does not stop is an expression
that asks for an enormous value: `10 ** (10 ** 9)` or `'x' * 10 ** 12` runs for minutes inside
one C call, with the event loop frozen (no timeout, Ctrl-C or SIGTERM gets through). So every
operation that can make its result much larger than its inputs is checked *before* it runs:

- `**` and `*` on integers: the result may have at most `MAX_INT_BITS` bits, so that it can
  always be written out (Python refuses to turn an int of more than 4300 digits into text);
- `*` on strings and lists, and the widths and counts given to filters and methods
  (`center`, `indent`, `replace`, `join`, `format`, ...): the result may hold at most
  `MAX_SIZE` items or characters, or as many as its largest input already has (a big
  variable may be passed along; it may not be multiplied);
- format strings (`'%0999999999d' % 1`, `'{:>999999999}'.format(1)`) may not ask for widths or
  precisions above `MAX_SIZE`;
- filters that yield items one by one (`map`, `select`, `batch`, ...) may yield at most
  `ITER_GROWTH` times `MAX_SIZE` items or characters in all, or times what their input
  holds: each item of
  `range(100000) | map('center', 999999)` is within bounds, all of them together are not;
- `join` counts the items of a range or of such a filter before it joins them, `tojson` its
  indentation times the nesting depth, `wordwrap` its wrapstring times the lines it makes.

A refused operation raises `TooLarge`, which fails the step (or validation, for a literal).
"""

from __future__ import annotations

import contextlib
import functools
import math
import operator
import re
import sys
from collections.abc import Callable, Iterator
from typing import Any

from jinja2 import nodes, pass_eval_context
from jinja2.compiler import CodeGenerator, Frame
from jinja2.exceptions import SecurityError
from jinja2.filters import make_attrgetter
from jinja2.sandbox import ImmutableSandboxedEnvironment

from planrun.plan.textvalues import as_text, as_text_arg, percent_format

MAX_SIZE = 1_000_000  # characters of a string, items of a list, grown by one operation
ITER_GROWTH = 8  # what filters yielding items one by one may yield in all, times their input
MAX_WRAP_WORK = 1_000_000_000  # characters textwrap may copy breaking long words (about 1 s)
MAX_INT_BITS = 14_000  # about 4,200 decimal digits: below Python's 4,300-digit limit on str(int)

_DIGITS = re.compile(r"\d+")


class TooLarge(SecurityError):
    """An operation whose result would exceed the bounds above."""


def _size(value: Any, limit: int) -> int:
    """How many characters/items `value` holds when materialised, counted up to just past `limit`."""
    if isinstance(value, str | bytes | range):
        return len(value)
    if isinstance(value, _BoundedIter):
        return value.budget
    if isinstance(value, dict):
        value = [*value.keys(), *value.values()]
    if isinstance(value, list | tuple | set | frozenset):
        total = len(value)
        for item in value:
            if total > limit:
                break
            if isinstance(item, str | bytes | list | tuple | dict | set | frozenset):
                total += _size(item, limit - total)
        return total
    return 1


def _check_growth(what: str, predicted: int, *inputs: Any) -> None:
    """Refuse a result of `predicted` size above MAX_SIZE, unless an input is already that big."""
    if predicted <= MAX_SIZE:
        return
    largest = max((_size(v, predicted) for v in inputs), default=0)
    if predicted > largest:
        raise TooLarge(
            f"{what} is too large: about {predicted:,} items or characters (limit {MAX_SIZE:,})"
        )


def _check_int_bits(what: str, bits: int) -> None:
    if bits > MAX_INT_BITS:
        raise TooLarge(f"{what} is too large: about {bits:,} bits (limit {MAX_INT_BITS:,})")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_format(text: str) -> None:
    """A format string may not ask for a width or precision above MAX_SIZE."""
    for m in _DIGITS.finditer(text):
        if len(m.group()) > 7 or int(m.group()) > MAX_SIZE:
            raise TooLarge(f"format width {m.group()[:12]} is too large (limit {MAX_SIZE:,})")


def _check_percent(fmt: str, right: Any) -> None:
    """`fmt % right`: widths in the text or given by `*`, and how often each value is repeated
    (`'%(a)s' * 100000 % {'a': big}`)."""
    _check_format(fmt)
    items = list(right.values()) if isinstance(right, dict) else right
    items = list(items) if isinstance(items, tuple | list) else [items]
    if "*" in fmt:
        for n in items:
            if _is_int(n) and abs(n) > MAX_SIZE:
                raise TooLarge(f"format width {n} is too large (limit {MAX_SIZE:,})")
    _check_repeats(fmt, fmt.count("%"), items)


def _check_repeats(fmt: str, fields: int, items: list[Any]) -> None:
    largest = max((_size(v, MAX_SIZE) for v in items), default=0)
    _check_growth("the formatted text", len(fmt) + fields * largest, fmt, *items)


def _check_format_call(fmt: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """`fmt.format(...)`: a width may come from an argument (`'{:{}}'.format(1, '999999999')`),
    and one argument may be used many times (`'{0}' * 300000`)."""
    items = [*args, *kwargs.values()]
    for item in items:
        if isinstance(item, dict):
            items.extend(item.values())
    if "{" in fmt.replace("{{", ""):
        for item in items:
            if _is_int(item) and abs(item) > MAX_SIZE:
                raise TooLarge(f"format width {item} is too large (limit {MAX_SIZE:,})")
            if isinstance(item, str) and len(item) < 64:
                _check_format(item)
    _check_repeats(fmt, fmt.count("{"), items)


def _check_binop(op: str, left: Any, right: Any) -> None:
    if op == "**" and _is_int(left) and _is_int(right) and right > 1 and abs(left) > 1:
        # bit_length - 1 underestimates log2 (by a third for 10): 10 ** 4300 would slip through
        _check_int_bits("the power", math.ceil(right * math.log2(abs(left))) + 1)
    elif op == "*":
        if _is_int(left) and _is_int(right):
            _check_int_bits("the product", left.bit_length() + right.bit_length())
        # Only a sequence times a count repeats anything; a number times a float is arithmetic.
        elif _is_int(right) and isinstance(left, str | list | tuple):
            _check_growth("the repeated value", _size(left, MAX_SIZE) * max(right, 0), left)
        elif _is_int(left) and isinstance(right, str | list | tuple):
            _check_growth("the repeated value", _size(right, MAX_SIZE) * max(left, 0), right)
    elif op == "%" and isinstance(left, str):
        _check_percent(left, right)


def _check_args(name: str, value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Widths and counts given to a filter or method; the few calls that multiply their input."""
    numbers = [a for a in (*args, *kwargs.values()) if _is_int(a)]
    for n in numbers:
        if abs(n) > MAX_SIZE:
            raise TooLarge(f"{name}: argument {n} is too large (limit {MAX_SIZE:,})")
    if not isinstance(value, str | list | tuple):
        return
    if name == "replace" and len(args) >= 2 and isinstance(args[0], str):
        old, new = args[0], str(args[1])
        count = value.count(old) if isinstance(value, str) else 0
        _check_growth(
            f"the result of {name}", len(value) + count * max(0, len(new) - len(old)), value, new
        )
    elif name == "join" and isinstance(value, str) and args and isinstance(args[0], list | tuple):
        items = args[0]  # str.join: the separator is the string the method belongs to
        _check_growth(
            f"the result of {name}", _size(items, MAX_SIZE) + len(value) * len(items), items, value
        )
    elif name == "join" and not isinstance(value, str):
        sep = args[0] if args and isinstance(args[0], str) else kwargs.get("d", "")
        _check_growth(
            f"the result of {name}", _size(value, MAX_SIZE) + len(str(sep)) * len(value), value
        )
    elif name == "indent" and isinstance(value, str):
        width = args[0] if args else kwargs.get("width", 4)
        pad = width if _is_int(width) else len(str(width))
        _check_growth(f"the result of {name}", len(value) + pad * (value.count("\n") + 1), value)
    elif name == "expandtabs" and isinstance(value, str):
        tab = args[0] if args and _is_int(args[0]) else 8
        _check_growth(f"the result of {name}", len(value) + value.count("\t") * tab, value)
    elif name == "format" and isinstance(value, str):
        _check_percent(value, kwargs or args)
    elif name == "wordwrap" and isinstance(value, str):
        width = args[0] if args else kwargs.get("width", 79)
        wrap = args[2] if len(args) > 2 else kwargs.get("wrapstring")
        width = max(width if _is_int(width) else 1, 1)
        lines = len(value) // width + 1
        _check_growth(f"the result of {name}", len(value) + lines * len(str(wrap or "")), value)
        # textwrap copies the rest of a long word for each piece it breaks off: quadratic.
        longest = max(map(len, value.split()), default=0)
        if longest * len(value) // (2 * width) > MAX_WRAP_WORK:
            raise TooLarge(
                f"wordwrap: a word of {longest:,} characters at width {width} is too large to break"
            )


def _check_tojson(value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Every line of indented JSON is indented by `indent` times its depth."""
    indent: Any = args[0] if args else kwargs.get("indent")
    if _is_int(indent) and indent > 0:
        size = _size(value, MAX_SIZE)
        _check_growth("the result of tojson", size * (1 + indent * _depth(value)), value)


def _depth(value: Any) -> int:
    """How deeply lists and mappings nest in `value` (a scalar is 0)."""
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list | tuple):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


class _BoundedIter(Iterator[Any]):
    """The items a filter yields one by one, refused once they add up to more than `budget`."""

    def __init__(self, items: Iterator[Any], budget: int) -> None:
        self.items, self.budget, self.total = items, budget, 0

    def __next__(self) -> Any:
        item = next(self.items)
        self.total += _size(item, self.budget - self.total)
        if self.total > self.budget:
            raise TooLarge(f"the filtered items are too large: over {self.budget:,} in all")
        return item


def _countable(value: Any) -> Any:
    """A range or a filter's iterator as a list, so that join can count what it joins."""
    return list(value) if isinstance(value, range | Iterator) else value


def _bounded_filter(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    passes_first = hasattr(fn, "jinja_pass_arg")  # context/environment comes before the value

    first = 1 if passes_first else 0

    @functools.wraps(fn)
    def bounded(*args: Any, **kwargs: Any) -> Any:
        if len(args) <= first:
            return fn(*args, **kwargs)
        if name == "join":
            args = (*args[:first], _countable(args[first]), *args[first + 1 :])
        value, rest = args[first], tuple(args[first + 1 :])
        _check_args(name, value, rest, kwargs)
        if name == "tojson":
            _check_tojson(value, rest, kwargs)
        result = fn(*args, **kwargs)
        if isinstance(result, Iterator) and not isinstance(result, _BoundedIter):
            # Room for items that grow a little (`map('string')` over ints), not a lot.
            size = _size(value, sys.maxsize)  # one walk over the items, no copy of the text
            return _BoundedIter(result, ITER_GROWTH * max(MAX_SIZE, size))
        return result

    return bounded


_BINOPS: dict[str, Callable[[Any, Any], Any]] = {
    "**": operator.pow,
    "*": operator.mul,
    "%": operator.mod,
}


class _TextConcat(CodeGenerator):
    """`a ~ b` joins its parts as a template shows values (JSON for all but strings), not
    with Python's str(): `{'k': True}` and `None` are reprs."""

    def visit_Concat(self, node: nodes.Concat, frame: Frame) -> None:
        self.write("environment.concat_text((")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")


def _text_join(join: Callable[..., str]) -> Callable[..., str]:
    """`join` with each item shown as a template shows it (as_text), not with str()."""

    @pass_eval_context
    def text_join(eval_ctx: Any, value: Any, d: str = "", attribute: Any = None) -> str:
        if attribute is not None:
            value = map(make_attrgetter(eval_ctx.environment, attribute), value)
        return join(eval_ctx, [as_text(v) for v in value], as_text(d))

    return text_join


class BoundedEnvironment(ImmutableSandboxedEnvironment):
    """Jinja2's immutable sandbox with the growth checks described in this module's docstring,
    showing values as text as a template does (`~`, `string`, `join`: JSON, never a repr)."""

    intercepted_binops = frozenset(_BINOPS)
    code_generator_class = _TextConcat

    def __init__(self, **kwargs: Any) -> None:
        # Not folded at compile time: Jinja2 would fold `'a' ~ none` with str() (`aNone`).
        super().__init__(**{"optimized": False, **kwargs})
        # lipsum(n) writes n paragraphs: a way to make a big string without an operator.
        self.globals.pop("lipsum", None)
        self.filters["string"] = as_text
        self.filters["join"] = _text_join(self.filters["join"])
        self.filters = {n: _bounded_filter(n, f) for n, f in self.filters.items()}

    @staticmethod
    def concat_text(parts: tuple[Any, ...]) -> str:
        return "".join([as_text(p) for p in parts])

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        _check_binop(operator, left, right)
        if operator == "%" and isinstance(left, str):
            return percent_format(left, right)  # mappings, lists, null as JSON, not reprs
        return _BINOPS[operator](left, right)

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805
        name = getattr(__obj, "__name__", "")
        owner = getattr(__obj, "__self__", None)
        if name == "join" and isinstance(owner, str) and args:
            args = (_countable(args[0]), *args[1:])
        _check_args(name, owner, args, kwargs)
        return super().call(__context, __obj, *args, **kwargs)

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        wrapped = super().wrap_str_format(value)
        if wrapped is None:
            return None
        fmt = str(value.__self__)
        _check_format(fmt)
        inner = wrapped

        def bounded(*args: Any, **kwargs: Any) -> str:
            _check_format_call(fmt, args, kwargs)
            return inner(
                *(as_text_arg(a) for a in args), **{k: as_text_arg(v) for k, v in kwargs.items()}
            )

        return bounded


def check_literal(node: Any) -> None:
    """Raise TooLarge for a literal part of an expression that is already too large to compute
    (`10 ** (10 ** 9)`), so that validation reports it before anything runs."""

    def const(n: Any) -> Any:
        if isinstance(n, nodes.Const):
            return n.value
        if isinstance(n, nodes.List | nodes.Tuple):
            return [const(i) for i in n.items]
        if isinstance(n, nodes.Neg):
            return -const(n.node)
        if isinstance(n, nodes.Pos):
            return const(n.node)
        if isinstance(n, nodes.BinExpr) and n.operator in _BINOPS:
            left, right = const(n.left), const(n.right)
            _check_binop(n.operator, left, right)
            return _BINOPS[n.operator](left, right)
        raise _NotConstant

    for found in [node, *node.find_all(nodes.BinExpr)]:  # find_all skips the root itself
        if not isinstance(found, nodes.BinExpr):
            continue
        with contextlib.suppress(_NotConstant, ArithmeticError, TypeError, ValueError):
            const(found)


class _NotConstant(Exception):
    pass
