"""The base of the small value classes the run path passes around (a request, a step's record, a
diagnostic, an event...): compared by value, shown as `Name(field=value, ...)`, copied with
`replace`.

They are slotted classes with a written-out `__init__`, as planrun.plan's are, rather than made
with @dataclass: generating a dataclass's methods (exec of __init__, __repr__, __eq__) costs
0.3-1 ms a class, paid on every start, and a run that makes none never imports `dataclasses`.
A class lists its fields in `__slots__`, in constructor order; slots named `_x` are not fields
(not compared, not shown, not copied by `replace`).
"""

from __future__ import annotations

from reprlib import recursive_repr  # loaded by asyncio anyway
from typing import Any, ClassVar, TypeVar


class Record:
    """A mutable value, as a plain @dataclass: equal to another of its class with equal fields,
    and so unhashable."""

    __slots__ = ()
    _FIELDS: ClassVar[tuple[str, ...]] = ()
    __hash__ = None  # type: ignore[assignment]

    def __init_subclass__(cls) -> None:
        super().__init_subclass__()
        slots = cls.__dict__.get("__slots__", ())
        cls._FIELDS = cls._FIELDS + tuple(n for n in slots if not n.startswith("_"))

    def _values(self) -> tuple[Any, ...]:
        return tuple([getattr(self, n) for n in self._FIELDS])

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, Record)
        return self._values() == other._values()

    @recursive_repr()  # a record that holds itself (through others) shows as `...` there
    def __repr__(self) -> str:
        fields = ", ".join(f"{n}={getattr(self, n)!r}" for n in self._FIELDS)
        return f"{type(self).__name__}({fields})"


class FrozenRecord(Record):
    """An immutable value, as a frozen @dataclass: assigning a field raises AttributeError, and
    it hashes by its fields. The constructor sets them with `object.__setattr__`."""

    __slots__ = ()

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"cannot assign to field '{name}': {type(self).__name__} is frozen")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field '{name}': {type(self).__name__} is frozen")

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(self._values())

    def __reduce__(self) -> tuple[Any, ...]:
        # copy and pickle rebuild it through the constructor (setting slots would raise), by
        # keyword: some constructors take keywords only.
        return _rebuild, (type(self), dict(zip(self._FIELDS, self._values(), strict=True)))


def _rebuild(cls: type[FrozenRecord], values: dict[str, Any]) -> FrozenRecord:
    return cls(**values)


R = TypeVar("R", bound=Record)


def replace(obj: R, /, **changes: Any) -> R:
    """A copy of `obj` with `changes`, made through its constructor (as dataclasses.replace)."""
    values = dict(zip(obj._FIELDS, obj._values(), strict=True))
    values.update(changes)
    return type(obj)(**values)


__all__ = ["FrozenRecord", "Record", "replace"]
