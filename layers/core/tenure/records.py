"""Frozen records: what `dataclass(frozen=True)` makes of a class, for less CPU at import.

The standard decorator writes six methods of every class as source text and compiles each
(`__init__`, `__repr__`, `__eq__`, `__hash__`, `__setattr__`, `__delattr__`): about 0.3 ms of
CPU a class on CPython 3.11, and a function's cold start imports over a hundred of the
service's classes (`tenure bench coldstart`), most of which no request of that function ever
builds. `record` gives the class five of them as functions over its fields, made without
compiling anything, and has the standard decorator compile the constructor when the class's
first instance is built (a class never built never compiles one). They behave as the standard
ones do: equal when of the same class with equal compared fields, the hash of those fields, the
same repr, and FrozenInstanceError on any assignment or deletion once the constructor has set
each field (it sets each once, through `__setattr__`). `dataclasses.fields`, `replace` and
`asdict` work on a record as on any dataclass; its `__dataclass_params__` read init, frozen, eq
and repr False, as the standard decorator made none of these methods. A class that needs
ordering, or defines one of these methods itself, uses `dataclass(frozen=True)`."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from operator import attrgetter
from reprlib import recursive_repr
from typing import Any, Generic, TypeVar, dataclass_transform

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
    # The fields as the class declares them: the standard decorator replaces a `field(...)`
    # on the class with its default, and the constructor is made from these, later.
    body = cls.__dict__
    declared = {name: body[name] for name in body.get("__annotations__", {}) if name in body}
    described = bool(cls.__doc__)
    if not described:
        cls.__doc__ = cls.__name__  # for now: the standard decorator would inspect a signature
    made = dataclasses.dataclass(init=False, eq=False, repr=False)(cls)
    fields = dataclasses.fields(made)  # type: ignore[arg-type]
    if not described:
        made.__doc__ = f"{made.__name__}({', '.join(f'{f.name}: {f.type}' for f in fields)})"
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

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        # The first instance compiles the constructor, as the standard decorator would have
        # at the class's creation, and puts it in this one's place for every later instance.
        made_init = made.__dict__["__init__"]
        if made_init is __init__:
            made_init = _constructor(made, declared)
            type.__setattr__(made, "__init__", made_init)
        made_init(self, *args, **kwargs)

    for method in (__init__, __eq__, __hash__, __repr__, __setattr__, __delattr__):
        method.__qualname__ = f"{made.__qualname__}.{method.__name__}"
        setattr(made, method.__name__, method)
    return made


def _constructor(cls: type, declared: dict[str, Any]) -> Callable[..., None]:
    """The constructor `dataclass` makes for `cls`, made on a stand-in of the same name,
    module, bases, fields and `__post_init__` (the class itself no longer holds its fields'
    `field(...)` declarations)."""
    body: dict[str, Any] = {
        **declared,
        "__annotations__": inspect.get_annotations(cls),
        "__module__": cls.__module__,
        "__qualname__": cls.__qualname__,
        "__doc__": cls.__doc__,
    }
    if "__post_init__" in cls.__dict__:
        body["__post_init__"] = cls.__dict__["__post_init__"]
    # A generic record's Generic base is for its type checker: the stand-in needs none.
    bases = tuple(base for base in cls.__bases__ if base is not Generic) or (object,)
    stand_in: Any = dataclasses.dataclass(eq=False, repr=False)(type(cls.__name__, bases, body))
    init: Callable[..., None] = stand_in.__init__
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    return init


def _values(names: list[str]) -> Callable[[Any], tuple[Any, ...]]:
    """The tuple of these attributes of an object, in this order."""
    if not names:
        return lambda _: ()
    if len(names) == 1:
        (name,) = names
        return lambda obj: (getattr(obj, name),)
    return attrgetter(*names)
