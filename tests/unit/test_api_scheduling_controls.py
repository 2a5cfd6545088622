"""POST /tasks and enqueue take priority and expires_in_seconds over HTTP: bounds, the lease's
read, and the OpenAPI document."""

from __future__ import annotations

from typing import Any

from tenure.api import models as m

from tests.unit.support import ADMIN, READER, WORKER, Rig, schema_of, shaped
from tests.unit.test_api_graph import Answer, http  # noqa: F401  (the fixture)

BODY = {"space": "OPS", "title": "t", "pool": "builders"}


def test_post_tasks_takes_a_priority_from_0_to_9_and_the_lease_reads_it(http: Any) -> None:  # noqa: F811
    for bad in (-1, 10, "9", 4.5, True):
        refused: Answer = http("POST", "/tasks", {**BODY, "priority": bad})
        assert (refused.status, refused.code) == (422, "validation_failed"), bad
        assert "priority" in str(refused.data)
    made = http("POST", "/tasks", {**BODY, "priority": 9})
    assert made.status == 201, made.data
    lease = shaped(m.LeaseOut, made.data["lease"])
    assert lease["priority"] == 9
    plain = http("POST", "/tasks", BODY)
    read = http("GET", f"/leases/{plain.data['lease']['id']}", actor=READER)
    assert read.data["priority"] == 5


def test_post_tasks_and_enqueue_take_a_queue_timeout_of_a_second_or_more(
    http: Any,  # noqa: F811
    rig: Rig,
) -> None:
    for bad in (0, -1, 1.5, "60"):
        refused = http("POST", "/tasks", {**BODY, "expires_in_seconds": bad})
        assert (refused.status, refused.code) == (422, "validation_failed"), bad
        assert "expires_in_seconds" in str(refused.data)
    made = http("POST", "/tasks", {**BODY, "expires_in_seconds": 60})
    assert made.status == 201, made.data
    assert made.data["lease"]["timing"]["queue_expires_at"] is not None
    task = http("POST", "/tasks", {"space": "OPS", "title": "later"}).data["task"]
    bad = http("POST", f"/tasks/{task['id']}/enqueue", {"pool": "builders", "priority": 11})
    assert (bad.status, bad.code) == (422, "validation_failed")
    queued = http(
        "POST",
        f"/tasks/{task['id']}/enqueue",
        {"pool": "builders", "priority": 2, "expires_in_seconds": 5},
    )
    assert queued.status == 201, queued.data
    assert queued.data["lease"]["priority"] == 2
    rig.advance(6)  # the enqueued run's 5 s have passed; the first task's 60 s have not
    won = rig.svc.claims.claim(WORKER, "builders", "w1", "1", 0, None)
    assert won is not None and won.lease.id == made.data["lease"]["id"]
    assert rig.svc.claims.claim(WORKER, "builders", "w1", "1", 0, None) is None


def test_the_openapi_document_names_the_controls_and_the_new_end_reason() -> None:
    schema = str(m.TaskCreate.model_json_schema())
    assert "priority" in schema and "expires_in_seconds" in schema
    assert "priority" in str(m.Enqueue.model_json_schema())
    assert "queue_timeout" in str(schema_of(m.LeaseOut))


def test_pools_take_a_run_timeout_of_a_second_or_more_and_show_it(http: Any) -> None:  # noqa: F811
    for bad in (0, -1, "60", 1.5):
        refused = http("PATCH", "/pools/builders", {"max_run_seconds": bad}, actor=ADMIN)
        assert (refused.status, refused.code) == (422, "validation_failed"), bad
    patched = http("PATCH", "/pools/builders", {"max_run_seconds": 90}, actor=ADMIN)
    assert patched.status == 200 and patched.data["pool"]["max_run_seconds"] == 90
    made = http("POST", "/tasks", {**BODY, "max_run_seconds": 30})
    assert made.status == 201 and made.data["lease"]["max_run_seconds"] == 30
    cleared = http("PATCH", "/pools/builders", {"max_run_seconds": None}, actor=ADMIN)
    assert cleared.data["pool"]["max_run_seconds"] is None


def test_the_task_read_shows_the_controls_it_was_filed_with(http: Any) -> None:  # noqa: F811
    made = http(
        "POST",
        "/tasks",
        {**BODY, "priority": 7, "expires_in_seconds": 300, "max_run_seconds": 60},
    )
    task = shaped(m.TaskOut, made.data["task"])
    assert (task["priority"], task["expires_in_seconds"], task["max_run_seconds"]) == (7, 300, 60)
    plain = shaped(m.TaskOut, http("POST", "/tasks", BODY).data["task"])
    assert (plain["priority"], plain["expires_in_seconds"], plain["max_run_seconds"]) == (
        5,
        None,
        None,
    )
