"""A task's key where a request body or an MCP argument names a task (`parent_id`,
`depends_on`, `created_task_ids`, `task_cancel`'s `task_id`): the key answers exactly as the
id (table-driven, on twin worlds), the id is what is stored, and a key of a space the request
does not act in answers exactly as an unknown id does in that field, reading nothing."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from tenure import wiring

from tests.unit.support import Rig
from tests.unit.test_authz_matrix import OTHER_SPACE, Answer, Scene, scene
from tests.unit.test_task_keys import _tool

UNKNOWN_ID = "task_0ffffffffffffffff00000fffff"


@pytest.fixture(scope="module")
def base() -> Iterator[Scene]:
    rig = Rig()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(wiring, "service", lambda: rig.svc)
        s = scene(rig)
        s.ids["else_task"] = s.must(
            "POST", "/tasks", "admin", {"space": OTHER_SPACE, "title": "theirs"}
        )["task"]["id"]
        # A task filed with the `mine` lease's token: what its completion may name.
        s.ids["child_task"] = s.must("POST", "/tasks", "lease", {"title": "child"})["task"]["id"]
        yield s


def _twin(base: Scene, monkeypatch: pytest.MonkeyPatch) -> Scene:
    s = copy.deepcopy(base)
    monkeypatch.setattr(wiring, "service", lambda: s.rig.svc)
    return s


def _key(s: Scene, task_id: str) -> str:
    task = s.rig.store.get_task(task_id)
    assert task is not None
    return task.key


@dataclass(frozen=True)
class Field:
    """One body field naming a task: who sends it, and the request it makes given the
    task reference (an id or a key) to put in it."""

    name: str
    caller: str
    target: str  # the name (in Scene.ids) of the task the field names when it succeeds
    request: Callable[[Scene, str], Answer]
    stored: Callable[[Scene], Any]  # what the request stored from the field


def _file(field: str, many: bool) -> Callable[[Scene, str], Answer]:
    def request(s: Scene, ref: str) -> Answer:
        body = {"space": "OPS", "title": "linked", field: [ref] if many else ref}
        return s.send("POST", "/tasks", "admin", body)

    return request


def _file_by_lease(s: Scene, ref: str) -> Answer:
    return s.send("POST", "/tasks", "lease", {"title": "delegated", "depends_on": [ref]})


def _patch(s: Scene, ref: str) -> Answer:
    return s.send("PATCH", f"/tasks/{s.ids['queued_task']}", "admin", {"depends_on": [ref]})


def _complete(s: Scene, ref: str) -> Answer:
    return s.send("POST", f"/leases/{s.ids['mine']}/complete", "lease", {"created_task_ids": [ref]})


def _newest(s: Scene) -> Any:
    """The task filed last in OPS: the highest number of the space."""
    ops = [t for t in s.rig.store.tasks.values() if t.space == "OPS"]
    return max(ops, key=lambda t: int(t.key.rsplit("-", 1)[1]))


def _report(s: Scene) -> Any:
    lease = s.rig.store.get_lease(s.ids["mine"])
    assert lease is not None and lease.report is not None
    return lease.report.get("created_task_ids")


FIELDS = [
    Field(
        "parent_id", "admin", "idle_task", _file("parent_id", False), lambda s: _newest(s).parent_id
    ),
    Field(
        "depends_on",
        "admin",
        "idle_task",
        _file("depends_on", True),
        lambda s: _newest(s).depends_on,
    ),
    Field(
        "lease depends_on", "lease", "idle_task", _file_by_lease, lambda s: _newest(s).depends_on
    ),
    Field(
        "PATCH depends_on",
        "admin",
        "idle_task",
        _patch,
        lambda s: s.rig.store.get_task(s.ids["queued_task"]).depends_on,  # type: ignore[union-attr]
    ),
    Field("created_task_ids", "lease", "child_task", _complete, _report),
]


def _prepared(base: Scene, monkeypatch: pytest.MonkeyPatch) -> Scene:
    s = _twin(base, monkeypatch)
    queued = s.rig.store.get_lease(s.ids["queued"])
    assert queued is not None and queued.task_id is not None
    s.ids["queued_task"] = queued.task_id
    return s


def _body_of(answer: Answer) -> Any:
    assert 200 <= answer.status < 300, answer
    return answer.body


@pytest.mark.parametrize("field", FIELDS, ids=lambda f: f.name)
def test_a_key_in_the_body_answers_and_stores_exactly_as_the_id(
    base: Scene, field: Field, monkeypatch: pytest.MonkeyPatch
) -> None:
    by_id = _prepared(base, monkeypatch)
    target = by_id.ids[field.target]
    with_id = _body_of(field.request(by_id, target))
    stored = field.stored(by_id)
    assert target in (stored if isinstance(stored, (list, tuple)) else [stored])

    by_key = _prepared(base, monkeypatch)
    with_key = _body_of(field.request(by_key, _key(by_key, target)))
    assert with_key == with_id
    assert field.stored(by_key) == stored  # the id is stored, never the key


def _refused(answer: Answer, ref: str) -> tuple[int, str | None, str]:
    assert answer.status >= 400, answer
    return answer.status, answer.code, answer.body["error"]["message"].replace(ref, "<ref>")


@pytest.mark.parametrize("field", FIELDS, ids=lambda f: f.name)
def test_a_key_of_another_space_answers_as_an_unknown_id_and_reads_no_task(
    base: Scene, field: Field, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = _prepared(base, monkeypatch)
    unknown = _refused(field.request(s, UNKNOWN_ID), UNKNOWN_ID)

    s = _prepared(base, monkeypatch)
    theirs = _key(s, s.ids["else_task"])
    reads: list[str] = []
    get_task = s.rig.store.get_task

    def counted(task_id: str, *args: Any, **kw: Any) -> Any:
        reads.append(task_id)
        return get_task(task_id, *args, **kw)

    monkeypatch.setattr(s.rig.store, "get_task", counted)
    assert _refused(field.request(s, theirs), theirs) == unknown
    assert s.ids["else_task"] not in reads  # the key of a space not acted in is read as none

    s = _prepared(base, monkeypatch)
    missing = "OPS-999999"
    assert _refused(field.request(s, missing), missing) == unknown


def test_keys_cost_one_task_read_each_as_ids_do(
    base: Scene, monkeypatch: pytest.MonkeyPatch
) -> None:
    counts = []
    for use_key in (False, True):
        s = _prepared(base, monkeypatch)
        refs = [s.ids[n] for n in ("idle_task", "waiting_task", "mine_task")]
        if use_key:
            refs = [_key(s, r) for r in refs]
        reads: list[str] = []
        get_task, by_key = s.rig.store.get_task, s.rig.store.task_id_by_key
        monkeypatch.setattr(
            s.rig.store, "get_task", lambda i, g=get_task, r=reads: r.append(i) or g(i)
        )
        monkeypatch.setattr(
            s.rig.store, "task_id_by_key", lambda k, g=by_key, r=reads: r.append(k) or g(k)
        )
        _body_of(s.send("PATCH", f"/tasks/{s.ids['queued_task']}", "admin", {"depends_on": refs}))
        counts.append(sorted(reads))
    assert counts[0] == counts[1]  # the same rows, by the same ids


def test_a_key_and_its_id_together_name_one_task_twice(
    base: Scene, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = _prepared(base, monkeypatch)
    idle = s.ids["idle_task"]
    got = s.send(
        "POST",
        "/tasks",
        "admin",
        {"space": "OPS", "title": "t", "depends_on": [idle, _key(s, idle)]},
    )
    assert (got.status, got.code) == (422, "validation_failed")
    assert "more than once" in got.body["error"]["message"]


def test_a_replayed_completion_naming_keys_answers_the_first_answer(
    base: Scene, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = _prepared(base, monkeypatch)
    key = _key(s, s.ids["child_task"])
    first = _body_of(_complete(s, key))
    assert _body_of(_complete(s, key)) == first


def test_mcp_task_cancel_takes_a_key_and_hides_other_spaces(
    base: Scene, monkeypatch: pytest.MonkeyPatch
) -> None:
    answers = []
    for use_key in (False, True):
        s = _prepared(base, monkeypatch)
        idle = s.ids["idle_task"]
        ref = _key(s, idle) if use_key else idle
        answers.append(_tool(s, "admin", "task_cancel", {"task_id": ref, "reason": "dropped"}))
    assert answers[0] == answers[1] and not answers[0].get("isError"), answers[0]
    assert answers[0]["structuredContent"]["cancelled"] == 1
    s = _prepared(base, monkeypatch)
    hidden = _tool(
        s, "elsewhere", "task_cancel", {"task_id": _key(s, s.ids["idle_task"]), "reason": "x"}
    )
    assert hidden.get("isError") and "task_not_found" in str(hidden), hidden
