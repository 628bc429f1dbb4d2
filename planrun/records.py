"""Records: slotted dataclasses whose generated methods are compiled ahead of time, not at start-up.

`@record(frozen=..., kw_only=...)` makes a class what `@dataclass(frozen=..., slots=True,
kw_only=...)` makes it: the same fields (`dataclasses.fields`, `dataclasses.replace`), the same
`__init__`, `__repr__`, `__eq__`, `__hash__`, frozen `__setattr__`/`__delattr__`, pickling and
`__match_args__`. dataclasses writes those methods as text and compiles it each time a class is
made, 3 to 5 M instructions a class, which was most of what a one-step run's start-up spent on
its dataclasses. Here `dataclasses.dataclass` still processes the fields (`init=False,
repr=False, eq=False`), and the methods come from planrun/records_written.py, compiled once with
the rest of planrun's byte-code: `methods_source` writes their text from the class's fields and
`python -m planrun.records_write` writes every record's text into that module. A class whose
fields differ from what was written (the module not yet regenerated) compiles the same text
here, as dataclasses would; tests/test_records.py fails until the module is current.

A frozen record reads `frozen=False` in its `__dataclass_params__`: dataclasses processes it
unfrozen (asking for frozen compiles the two refusing methods again) and its own `__setattr__`
refuses. A record without a docstring gets the one dataclasses gives it (its name and `__init__`'s
signature), written too: working it out costs as much as compiling the methods.
"""

from __future__ import annotations

import dataclasses
import inspect
import threading
from collections.abc import Callable
from typing import Any, TypeVar, dataclass_transform

from planrun import records_written

__all__ = ["auto_doc", "fingerprint", "methods_source", "record", "record_key"]

T = TypeVar("T")


class _Factory:
    """The default of an `__init__` parameter whose field has a default_factory (as dataclasses)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<factory>"


FACTORY = _Factory()


def record_key(cls: type) -> str:
    """The name a record's methods are written under: its module and qualified name."""
    return f"{cls.__module__}.{cls.__qualname__}"


def fingerprint(cls: type) -> tuple[Any, ...]:
    """What a record's written methods depend on: its options and each field's name, type,
    kind of default and flags. Written beside the methods; a difference means stale text."""
    fields = tuple(
        (
            f.name,
            f.type,
            f.default is not dataclasses.MISSING,
            f.default_factory is not dataclasses.MISSING,
            f.init,
            f.repr,
            f.compare,
            f.hash,
            f.kw_only,
        )
        for f in dataclasses.fields(cls)
    )
    frozen, own_doc = cls.__record_options__  # type: ignore[attr-defined]
    return (frozen, own_doc, hasattr(cls, "__post_init__"), fields)


def methods_source(cls: type) -> str:
    """The text of a function that makes a processed record's methods, as dataclasses writes
    them: `def NAME(__rec_cls, __rec_defaults, __rec_factories, __rec_factory, __rec_frozen_error)`
    returning a dict of them (the names no field can take)."""
    frozen, _ = cls.__record_options__  # type: ignore[attr-defined]
    fields = dataclasses.fields(cls)
    for f in fields:
        if not isinstance(f.type, str):
            raise TypeError(f"{record_key(cls)}.{f.name}: annotations must be strings")
    set_field = "__object_setattr(self, {name!r}, {value})" if frozen else "self.{name} = {value}"
    positional: list[str] = []
    keyword: list[str] = []
    body: list[str] = []
    if frozen:
        body.append("__object_setattr = object.__setattr__")
    for f in fields:
        has_default = f.default is not dataclasses.MISSING
        has_factory = f.default_factory is not dataclasses.MISSING
        if f.init:
            param = f"{f.name}: {f.type!r}"
            if has_default:
                param += f" = __rec_defaults[{f.name!r}]"
            elif has_factory:
                param += " = __rec_factory"
            (keyword if f.kw_only else positional).append(param)
            if has_factory:
                value = f"__rec_factories[{f.name!r}]() if {f.name} is __rec_factory else {f.name}"
            else:
                value = f.name
        elif has_factory:
            value = f"__rec_factories[{f.name!r}]()"
        elif has_default:
            value = f"__rec_defaults[{f.name!r}]"
        else:
            continue
        body.append(set_field.format(name=f.name, value=value))
    if hasattr(cls, "__post_init__"):
        body.append("self.__post_init__()")
    params = ["self", *positional] + (["*", *keyword] if keyword else [])
    shown = ", ".join(f"{f.name}={{self.{f.name}!r}}" for f in fields if f.repr)
    compared = [f.name for f in fields if f.compare]
    mine = "".join(f"self.{n}," for n in compared)
    theirs = "".join(f"other.{n}," for n in compared)
    name = record_key(cls).replace(".", "_")
    out = [
        f"def {name}(__rec_cls, __rec_defaults, __rec_factories, __rec_factory, __rec_frozen_error):",
        f"    def __init__({', '.join(params)}) -> None:",
        *(f"        {line}" for line in body or ["pass"]),
        "    def __repr__(self):",
        f'        return self.__class__.__qualname__ + f"({shown})"',
        "    def __eq__(self, other):",
        "        if other.__class__ is self.__class__:",
        f"            return ({mine})==({theirs})",
        "        return NotImplemented",
    ]
    made = ["__init__", "__repr__", "__eq__"]
    if frozen:
        hashed = "".join(
            f"self.{f.name}," for f in fields if (f.compare if f.hash is None else f.hash)
        )
        out += ["    def __hash__(self):", f"        return hash(({hashed}))"]
        made.append("__hash__")
    out.append(f"    return {{{', '.join(f'{m!r}: {m}' for m in made)}}}")
    return "\n".join(out) + "\n"


def _compile(cls: type) -> Callable[..., dict[str, Any]]:
    """The methods' maker for a record the written module does not have (or has stale)."""
    namespace: dict[str, Any] = {}
    # dont_inherit: this module's `from __future__ import annotations` would make the
    # annotations strings of strings.
    code = compile(methods_source(cls), f"<record {record_key(cls)}>", "exec", dont_inherit=True)
    exec(code, namespace)
    return namespace[record_key(cls).replace(".", "_")]  # type: ignore[no-any-return]


def _guarded_repr(method: Callable[[Any], str]) -> Callable[[Any], str]:
    """`__repr__` that writes `...` for an object already being shown (as dataclasses does)."""
    showing: set[tuple[int, int]] = set()

    def __repr__(self: Any) -> str:
        key = (id(self), threading.get_ident())
        if key in showing:
            return "..."
        showing.add(key)
        try:
            return method(self)
        finally:
            showing.discard(key)

    __repr__.__wrapped__ = method  # type: ignore[attr-defined]
    return __repr__


def _refusing(owner: type) -> tuple[Callable[..., None], Callable[..., None]]:
    """A frozen record's `__setattr__` and `__delattr__`, as dataclasses writes them: a field, or
    any attribute of the class itself, cannot be assigned or deleted."""
    names = frozenset(f.name for f in dataclasses.fields(owner))

    def __setattr__(self: Any, name: str, value: Any) -> None:
        if self.__class__ is owner or name in names:
            raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")
        super(owner, self).__setattr__(name, value)  # type: ignore[arg-type]  # (owner: a class)

    def __delattr__(self: Any, name: str) -> None:
        if self.__class__ is owner or name in names:
            raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")
        super(owner, self).__delattr__(name)  # type: ignore[arg-type]  # (owner: a class)

    return __setattr__, __delattr__


def _getstate(self: Any) -> list[Any]:
    return [getattr(self, f.name) for f in dataclasses.fields(self)]


def _setstate(self: Any, state: list[Any]) -> None:
    for f, value in zip(dataclasses.fields(self), state, strict=False):
        object.__setattr__(self, f.name, value)


def auto_doc(cls: type) -> str:
    """The docstring dataclasses gives a class without one: its name and `__init__`'s signature."""
    return cls.__name__ + str(inspect.signature(cls)).replace(" -> None", "")


def _finish(cls: type, frozen: bool, own_doc: bool) -> None:
    """Give a processed record its methods: the written ones while they are current."""
    written: tuple[Any, ...] | None = records_written.MAKERS.get(record_key(cls))
    if written is None or written[0] != fingerprint(cls):
        written = (None, _compile(cls), None)
    maker, doc = written[1], written[2]
    fields = cls.__dataclass_fields__  # type: ignore[attr-defined]
    defaults = {n: f.default for n, f in fields.items() if f.default is not dataclasses.MISSING}
    factories = {
        n: f.default_factory
        for n, f in fields.items()
        if f.default_factory is not dataclasses.MISSING
    }
    methods = maker(cls, defaults, factories, FACTORY, dataclasses.FrozenInstanceError)
    methods["__repr__"] = _guarded_repr(methods["__repr__"])
    if frozen:
        methods["__setattr__"], methods["__delattr__"] = _refusing(cls)
    for name, method in methods.items():
        method.__qualname__ = f"{cls.__qualname__}.{name}"
        setattr(cls, name, method)
    if frozen:
        cls.__getstate__ = _getstate  # type: ignore[method-assign,assignment]
        cls.__setstate__ = _setstate  # type: ignore[attr-defined]
    else:
        cls.__hash__ = None  # type: ignore[assignment]  # mutable and compared: unhashable
    # What the class has now. `frozen` stays False: dataclasses refuses a frozen base under a
    # class it processes unfrozen, and a record refuses assignment by its own __setattr__.
    params = cls.__dataclass_params__  # type: ignore[attr-defined]
    params.init = params.repr = params.eq = True
    if not own_doc:
        cls.__doc__ = doc if doc is not None else auto_doc(cls)


@dataclass_transform(field_specifiers=(dataclasses.field, dataclasses.Field))
def record(*, frozen: bool = False, kw_only: bool = False) -> Callable[[type[T]], type[T]]:
    """`@dataclass(frozen=frozen, slots=True, kw_only=kw_only)`, its methods written ahead of time."""

    def make(cls: type[T]) -> type[T]:
        for name in ("__init__", "__repr__", "__eq__", "__hash__", "__setattr__", "__delattr__"):
            if name in cls.__dict__:
                raise TypeError(f"record {cls.__qualname__} defines {name}: use a dataclass")
        own_doc = bool(cls.__doc__)
        if not own_doc:  # dataclasses would word it from the __init__ not yet in place
            cls.__doc__ = "-"
        made = dataclasses.dataclass(
            cls, init=False, repr=False, eq=False, slots=True, kw_only=kw_only
        )
        made.__record_options__ = (frozen, own_doc)  # type: ignore[attr-defined]
        _finish(made, frozen, own_doc)
        return made

    return make
