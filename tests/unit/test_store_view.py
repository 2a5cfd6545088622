"""OneTable, the one-object view of the adapter's ports: every Store method answered by the
port that owns it, and nothing a port lacks."""

from __future__ import annotations

import dataclasses

import pytest
from tenure.app.rows import Rows, Store
from tenure.store.dynamo import OneTable


def _store_methods() -> set[str]:
    return {
        name
        for port in Store.__mro__
        if port.__module__ == Store.__module__
        for name, fn in vars(port).items()
        if callable(fn) and not name.startswith("_")
    }


def test_every_store_method_is_the_owning_ports_own() -> None:
    view = OneTable(client=None, table="t")
    ports = [getattr(view.ports, f.name) for f in dataclasses.fields(Rows)]
    for name in _store_methods():
        method = getattr(view, name)
        owners = [p for p in ports if getattr(p, name, None) is not None]
        assert owners, name
        assert method.__self__ is owners[0], name


def test_every_port_stands_on_the_views_one_table() -> None:
    view = OneTable(client=None, table="t")
    for field in dataclasses.fields(Rows):
        port = getattr(view.ports, field.name)
        assert getattr(port, "table", None) is view.rows or getattr(port, "rows", None) is view.rows


def test_a_name_no_port_has_is_refused() -> None:
    view = OneTable(client=None, table="t")
    with pytest.raises(AttributeError):
        view.drop_table  # noqa: B018 - the lookup is the test
    with pytest.raises(AttributeError):
        view.__deepcopy_hook__  # noqa: B018


def test_a_lowered_page_budget_reaches_the_paged_reads() -> None:
    view = OneTable(client=None, table="t")
    view.list_budget = 5
    view.timeline_cap = 4
    assert (view.reads.list_budget, view.reads.timeline_cap) == (5, 4)
    assert view.list_budget == 5
