"""A record (records.py) behaves as `dataclass(frozen=True)` would make the same class:
the same constructor, equality, hash, repr and immutability, and the dataclasses functions
work on it; only its import costs less."""

from __future__ import annotations

import copy
import dataclasses
import pickle
import types
from typing import Any

import pytest
from tenure.records import record

from tests.unit.support import make_lease


def _body() -> dict[str, Any]:
    """One class body, made twice: once a record, once a standard frozen dataclass."""
    return {
        "__annotations__": {
            "name": "str",
            "size": "int",
            "tags": "list[str]",
            "note": "str",
            "seen": "int",
        },
        "__module__": __name__,
        "size": 0,
        "tags": dataclasses.field(default_factory=list),
        "note": dataclasses.field(default="", compare=False),
        "seen": dataclasses.field(default=0, repr=False, hash=False),
    }


Rec: Any = record(type("Item", (), _body()))
Std: Any = dataclasses.dataclass(frozen=True)(type("Item", (), _body()))


@pytest.mark.parametrize(
    "args",
    [
        (("a",), {}),
        (("a", 2), {"tags": ["x"]}),
        ((), {"name": "b", "note": "n", "seen": 3}),
    ],
)
def test_a_record_is_built_compared_hashed_and_printed_as_a_frozen_dataclass(args: Any) -> None:
    positional, named = args
    rec, std = Rec(*positional, **named), Std(*positional, **named)
    assert dataclasses.asdict(rec) == dataclasses.asdict(std)
    assert repr(rec) == repr(std)
    assert rec == Rec(*positional, **named) and std == Std(*positional, **named)
    # `note` is not compared: as the standard method leaves it out.
    other = {**named, "note": "other"}
    assert (rec == Rec(*positional, **other)) is (std == Std(*positional, **other)) is True
    assert (rec == Rec("z")) is (std == Std("z")) is False
    assert [f.name for f in dataclasses.fields(Rec)] == [f.name for f in dataclasses.fields(Std)]
    assert Rec.__match_args__ == Std.__match_args__


def test_a_record_hashes_as_the_standard_method_does() -> None:
    rec, std = Rec("a", 2, ("x",)), Std("a", 2, ("x",))  # a hashable tags value
    assert hash(rec) == hash(std) == hash(("a", 2, ("x",)))
    assert {rec: 1}[Rec("a", 2, ("x",), note="other")] == 1
    # `seen` is compared but not hashed: a different value, the same hash, not equal.
    assert hash(Rec("a", 2, ("x",), seen=5)) == hash(rec) != hash(Rec("a", 3, ("x",)))
    assert Rec("a", 2, ("x",), seen=5) != rec
    with pytest.raises(TypeError):  # an unhashable field: as unhashable as the standard one
        hash(Rec("a"))
    with pytest.raises(TypeError):
        hash(Std("a"))


def test_a_record_equals_no_other_class() -> None:
    rec = Rec("a")
    assert rec != Std("a")
    assert rec.__eq__(Std("a")) is NotImplemented
    assert rec != ("a", 0, [], "", 0)


def test_a_record_refuses_every_assignment_and_deletion_once_built() -> None:
    rec = Rec("a")
    for name in ("name", "size", "unknown"):
        with pytest.raises(
            dataclasses.FrozenInstanceError, match=f"cannot assign to field '{name}'"
        ):
            setattr(rec, name, 1)
        with pytest.raises(dataclasses.FrozenInstanceError, match=f"cannot delete field '{name}'"):
            delattr(rec, name)
    assert rec.name == "a" and not hasattr(rec, "unknown")


def test_replace_and_copy_make_equal_records() -> None:
    rec = Rec("a", 2, ["x"], note="n", seen=1)
    changed = dataclasses.replace(rec, size=3)
    assert (changed.size, changed.name, rec.size) == (3, "a", 2)
    for again in (copy.copy(rec), copy.deepcopy(rec)):
        assert again == rec and again is not rec and again.note == "n"
        with pytest.raises(dataclasses.FrozenInstanceError):
            again.size = 9


def test_a_record_that_holds_itself_prints_as_the_standard_one_does() -> None:
    rec, std = Rec("a", tags=[]), Std("a", tags=[])
    rec.tags.append(rec)
    std.tags.append(std)
    assert repr(rec) == repr(std) == "Item(name='a', size=0, tags=[...], note='')"


def test_a_class_defining_a_method_a_record_makes_is_refused() -> None:
    for name in ("__eq__", "__hash__", "__repr__", "__setattr__", "__init__"):
        with pytest.raises(TypeError, match=name):
            record(type("Own", (), {"__annotations__": {"a": "int"}, name: lambda *_: None}))


def test_the_service_s_entities_are_records() -> None:
    lease = make_lease("lease_1")
    assert dataclasses.is_dataclass(lease)
    assert type(lease).__setattr__.__module__ == "tenure.records"
    with pytest.raises(dataclasses.FrozenInstanceError):
        lease.fence = 2  # type: ignore[misc]
    assert dataclasses.replace(lease, fence=2) != lease == dataclasses.replace(lease)
    assert pickle.loads(pickle.dumps(lease)) == lease == copy.deepcopy(lease)


def _fresh(name: str, **body: Any) -> Any:
    """A record made now, whose constructor no instance has compiled yet."""
    bases = body.pop("bases", ())
    return record(
        types.new_class(name, bases, exec_body=lambda ns: ns.update(__module__=__name__, **body))
    )


def test_a_record_s_constructor_is_compiled_by_its_first_instance_only() -> None:
    Lazy = _fresh(
        "Lazy",
        __annotations__={"a": "int", "b": "list[int]"},
        b=dataclasses.field(default_factory=list),
    )
    first = Lazy.__dict__["__init__"]
    one = Lazy(1)
    compiled = Lazy.__dict__["__init__"]
    assert compiled is not first and compiled.__qualname__ == "Lazy.__init__"
    two = Lazy(2, [3])
    assert Lazy.__dict__["__init__"] is compiled
    assert (one.a, one.b, two.b) == (1, [], [3]) and one.b is not Lazy(1).b
    with pytest.raises(TypeError):
        Lazy()  # a required field left out: refused as the standard constructor refuses it
    with pytest.raises(TypeError):
        Lazy(1, [], 3)


def test_a_record_s_constructor_keeps_post_init_init_vars_and_inherited_fields() -> None:
    seen: list[Any] = []

    def post_init(self: Any, scale: int) -> None:
        seen.append((self.a, scale))

    Base = _fresh("Base", __annotations__={"a": "int"})
    Child = _fresh(
        "Child",
        bases=(Base,),
        __annotations__={"b": "str", "scale": "dataclasses.InitVar[int]", "c": "int"},
        b="x",
        scale=1,
        c=dataclasses.field(default=0, init=False),
        __post_init__=post_init,
    )
    child = Child(5, "y", 3)
    assert (child.a, child.b, child.c, seen) == (5, "y", 0, [(5, 3)])
    assert [f.name for f in dataclasses.fields(Child)] == ["a", "b", "c"]
    assert Child(5) == dataclasses.replace(child, b="x", scale=1) and Base(5).a == 5


def test_a_generic_record_is_built_as_any_other() -> None:
    from typing import Generic, TypeVar

    T = TypeVar("T")
    Box = _fresh("Box", bases=(Generic[T],), __annotations__={"item": "T"})
    assert Box("x").item == "x" and Box("x") == Box("x")


def test_records_first_built_on_many_threads_at_once_are_built_right() -> None:
    from concurrent.futures import ThreadPoolExecutor

    Racy = _fresh("Racy", __annotations__={"a": "int", "b": "int"}, b=7)
    with ThreadPoolExecutor(8) as pool:
        built = list(pool.map(lambda n: Racy(n), range(64)))
    assert [(r.a, r.b) for r in built] == [(n, 7) for n in range(64)]
