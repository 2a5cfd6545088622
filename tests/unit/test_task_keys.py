"""A task's key (`OPS-12`) wherever a route takes a task id: every such route answers the
same with the key as with the id (table-driven over the route table, on twin worlds), and a
key is answered for only to a caller that could see its task — any other caller hears what
an unknown task answers, 404 `task_not_found`, whether or not the task exists."""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from typing import Any

import pytest
from tenure import wiring
from tenure.api.routes import ROUTES
from tenure.domain.model import Task
from tenure.domain.task_keys import task_id_of_key

from tests.unit.support import ADMIN, READER, SPACE, Rig
from tests.unit.test_authz_matrix import TABLE, Answer, Row, Scene, _caller, _request, scene

TASK_RULES = {key for key in ROUTES if re.search(r"<(task_id|some_id)>", key[1])}
TASK_ROWS = [r for r in TABLE if r.key in TASK_RULES]


@pytest.fixture(scope="module")
def base() -> Iterator[Scene]:
    rig = Rig()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(wiring, "service", lambda: rig.svc)
        s = scene(rig)
        # Inspect's row names a lease: its task gets its own row below.
        s.ids["mine_task_key"] = _key(s, s.ids["mine_task"])
        yield s


def _key(s: Scene, task_id: str) -> str:
    task = s.rig.store.get_task(task_id)
    assert task is not None
    return task.key


def _twin(base: Scene, row: Row, monkeypatch: pytest.MonkeyPatch) -> Scene:
    s = copy.deepcopy(base)
    monkeypatch.setattr(wiring, "service", lambda: s.rig.svc)
    if row.prepare is not None:
        row.prepare(s)
    return s


def _keyed(path: str, s: Scene) -> str:
    """The path with each task id in it replaced by that task's key."""
    for name, value in s.ids.items():
        if name.endswith("_task") and value in path:
            path = path.replace(value, _key(s, value))
    return path


def _same(a: Answer, b: Answer) -> None:
    assert (a.status, a.body) == (b.status, b.body)


def test_every_route_that_takes_a_task_id_is_in_the_table() -> None:
    assert {r.key for r in TASK_ROWS} == TASK_RULES and len(TASK_RULES) >= 13


@pytest.mark.parametrize("row", TASK_ROWS, ids=lambda r: f"{r.method} {r.rule}")
def test_a_key_answers_exactly_as_the_id(
    base: Scene, row: Row, monkeypatch: pytest.MonkeyPatch
) -> None:
    by_id = _twin(base, row, monkeypatch)
    path, body = _request(row, by_id)
    if "<some_id>" in row.rule:
        path = f"/inspect/{by_id.ids['mine_task']}"
    with_id = by_id.send(row.method, path, _caller(row), body)
    assert 200 <= with_id.status < 300, with_id

    by_key = _twin(base, row, monkeypatch)
    keyed = _keyed(path, by_key)
    assert keyed != path and re.search(rf"/{SPACE}-\d+", keyed)
    _same(with_id, by_key.send(row.method, keyed, _caller(row), body))


@pytest.mark.parametrize("row", TASK_ROWS, ids=lambda r: f"{r.method} {r.rule}")
def test_a_key_of_a_space_the_token_cannot_see_is_an_unknown_task(
    base: Scene, row: Row, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = _twin(base, row, monkeypatch)
    path, body = _request(row, s)
    if "<some_id>" in row.rule:
        path = f"/inspect/{s.ids['mine_task']}"
    # "elsewhere" is an admin limited to the other space: the task exists, in OPS.
    seen = s.send(row.method, _keyed(path, s), "elsewhere", body)
    missing = re.sub(rf"/{SPACE}-\d+", f"/{SPACE}-999999", _keyed(path, s))
    unknown = s.send(row.method, missing, "admin", body)
    assert (seen.status, seen.code) == (unknown.status, unknown.code) == (404, "task_not_found")
    assert s.send(row.method, missing, "elsewhere", body).code == "task_not_found"


def test_a_lease_token_hears_of_no_task_outside_its_leases_space(
    base: Scene, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = copy.deepcopy(base)
    monkeypatch.setattr(wiring, "service", lambda: s.rig.svc)
    other = s.must("POST", "/tasks", "admin", {"space": "ELSE", "title": "theirs"})["task"]
    got = s.send("GET", f"/tasks/{other['key']}/blocks", "lease")
    assert (got.status, got.code) == (404, "task_not_found")
    own = s.send("GET", f"/tasks/{s.ids['mine_task_key']}/blocks", "lease")
    assert own.status == 200


def test_a_task_filed_before_ids_came_from_keys_is_found_through_its_key_row(rig: Rig) -> None:
    task, _ = rig.task(pool=None)
    assert task.id == task_id_of_key(task.key)
    old = Task(
        id="task_0190aabbccdd0011223344", key="OPS-77", space=SPACE, title="old", created_at=1
    )
    rig.store.tasks[old.id] = old
    keys = rig.svc.task_keys
    with pytest.raises(Exception, match="OPS-77 does not exist"):
        keys.task_id(ADMIN, "OPS-77")
    rig.store.task_keys["OPS-77"] = old.id
    assert keys.task_id(READER, "OPS-77") == old.id
    assert keys.task_id(READER, task.key) == task.id
    assert keys.task_id(READER, task.id) == task.id  # an id is an id: nothing is read


def test_derived_ids_keep_a_spaces_tasks_in_filing_order_and_differ_between_spaces() -> None:
    ids = [task_id_of_key(f"OPS-{n}") for n in (1, 2, 9, 10, 11, 100)]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    assert task_id_of_key("OPS-1") != task_id_of_key("OPSX-1")
    assert re.fullmatch(r"task_0[0-9a-f]{26}", ids[0])  # as long as a random id
    # Before any lease drawn at random (those begin with the time in hex).
    assert ids[-1].removeprefix("task_") < "1"


def _tool(s: Scene, caller: str, name: str, arguments: dict[str, Any]) -> Any:
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }
    head = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    got = s.send("POST", "/mcp", caller, call, head)
    assert got.status == 200, got
    return got.body["result"]


@pytest.mark.parametrize(
    ("tool", "field", "task", "extra"),
    [
        ("task_inspect", "id", "mine_task", {}),
        ("task_approve", "task_id", "waiting_task", {}),
        ("task_recover", "task_id", "idle_task", {"note": "checked"}),
    ],
)
def test_mcp_tools_take_a_key_where_they_take_a_task_id(
    base: Scene,
    monkeypatch: pytest.MonkeyPatch,
    tool: str,
    field: str,
    task: str,
    extra: dict[str, Any],
) -> None:
    answers = []
    for use_key in (False, True):
        s = copy.deepcopy(base)
        monkeypatch.setattr(wiring, "service", lambda s=s: s.rig.svc)
        if tool == "task_recover":
            _escalate(s)
        ref = _key(s, s.ids[task]) if use_key else s.ids[task]
        answers.append(_tool(s, "admin", tool, {field: ref, **extra}))
    assert answers[0] == answers[1] and not answers[0].get("isError"), answers[0]
    s = copy.deepcopy(base)
    monkeypatch.setattr(wiring, "service", lambda: s.rig.svc)
    hidden = _tool(s, "elsewhere", tool, {field: _key(s, s.ids[task]), **extra})
    assert hidden.get("isError") and "task_not_found" in str(hidden), hidden


def _escalate(s: Scene) -> None:
    task = s.ids["idle_task"]
    s.must("POST", f"/tasks/{task}/blocks/{s.ids['block']}/clear", "admin", {})
    s.must("POST", f"/tasks/{task}/blocks", "admin", {"kind": "needs_input", "reason": "again"})
