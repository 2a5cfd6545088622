"""Frozen records: what `dataclass(frozen=True)` makes of a class, for less CPU at import.

The standard decorator writes six methods of every class as source text and compiles each
(`__init__`, `__repr__`, `__eq__`, `__hash__`, `__setattr__`, `__delattr__`): about 0.3 ms of
CPU a class on CPython 3.11, and a function's cold start imports over a hundred of the
service's classes (`tenure bench coldstart`). `record` has the standard decorator compile the
constructor alone and gives the class the other five as functions over its fields, made
without compiling anything. They behave as the standard ones do: equal when of the same class
with equal compared fields, the hash of those fields, the same repr, and FrozenInstanceError
on any assignment or deletion once the constructor has set each field (it sets each once,
through `__setattr__`). `dataclasses.fields`, `replace` and `asdict` work on a record as on any
dataclass; its `__dataclass_params__` read frozen, eq and repr False, as the standard
decorator made only its constructor. A class that needs ordering, or defines one of these
methods itself, uses `dataclass(frozen=True)`."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from operator import attrgetter
from reprlib import recursive_repr
from typing import Any, TypeVar, dataclass_transform

T = TypeVar("T")

# What `record` gives a class: one that defines any of these itself is refused.
MADE = ("__init__", "__repr__", "__eq__", "__hash__", "__setattr__", "__delattr__")


@dataclass_transform(frozen_default=True, field_specifiers=(dataclasses.field, dataclasses.Field))
def record(cls: type[T]) -> type[T]:
    """`cls` as a frozen dataclass (its fields, constructor, equality, hash, repr and
    immutability those of `dataclass(frozen=True)`)."""
    own = [name for name in MADE if name in cls.__dict__]
    if own:
        raise TypeError(f"{cls.__qualname__} defines {', '.join(own)}: a record makes them")
    made = dataclasses.dataclass(eq=False, repr=False)(cls)
    fields = dataclasses.fields(made)  # type: ignore[arg-type]
    names = frozenset(f.name for f in fields)
    compared = _values([f.name for f in fields if f.compare])
    hashed = _values([f.name for f in fields if (f.compare if f.hash is None else f.hash)])
    shown = tuple(f.name for f in fields if f.repr)

    def __eq__(self: Any, other: Any) -> Any:
        if other.__class__ is self.__class__:
            return compared(self) == compared(other)
        return NotImplemented

    def __hash__(self: Any) -> int:
        return hash(hashed(self))

    @recursive_repr()
    def __repr__(self: Any) -> str:
        inside = ", ".join(f"{name}={getattr(self, name)!r}" for name in shown)
        return f"{self.__class__.__qualname__}({inside})"

    def __setattr__(self: Any, name: str, value: Any) -> None:
        # The constructor sets each field once, while it is not yet set: nothing else may.
        # (No field is a descriptor: its value goes in the instance's dict, as object's would.)
        values = self.__dict__
        if name in names and name not in values:
            values[name] = value
            return
        raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self: Any, name: str) -> None:
        raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")

    for method in (__eq__, __hash__, __repr__, __setattr__, __delattr__):
        method.__qualname__ = f"{made.__qualname__}.{method.__name__}"
        setattr(made, method.__name__, method)
    return made


def _values(names: list[str]) -> Callable[[Any], tuple[Any, ...]]:
    """The tuple of these attributes of an object, in this order."""
    if not names:
        return lambda _: ()
    if len(names) == 1:
        (name,) = names
        return lambda obj: (getattr(obj, name),)
    return attrgetter(*names)
