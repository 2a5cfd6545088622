"""Idempotent filing under races, with real threads on DynamoDB Local: eight requests sent at
once with the same Idempotency-Key file one task and all answer its answer."""

from __future__ import annotations

import threading
from typing import Any

from tenure.api.views import lease_view

from tests.conformance.contract import ALPHA, SPACE, make_world
from tests.conformance.test_races import THREADS, real_time_service, run_threads
from tests.conftest import ADMIN, Rig


def test_eight_requests_with_one_key_file_one_task_and_answer_alike(rig: Rig) -> None:
    make_world(rig.svc)
    services = [real_time_service(rig)[0] for _ in range(THREADS)]
    body = {"space": SPACE, "title": "once", "pool": ALPHA}
    start = threading.Barrier(THREADS, timeout=60)
    filed: list[str] = []
    lock = threading.Lock()

    def send(i: int) -> tuple[int, dict[str, Any]]:
        svc = services[i]

        def run() -> tuple[int, dict[str, Any]]:
            task, lease = svc.filing.create_task(ADMIN, SPACE, "once", None, None, {}, ALPHA, None)
            assert lease is not None
            with lock:
                filed.append(task.id)
            return 201, {"task_id": task.id, "lease": lease_view(lease)}

        start.wait()
        return svc.idempotency.once(ADMIN, "POST /tasks", "same-key", body, run)

    answers = run_threads(THREADS, send)
    assert len(filed) == 1
    assert all(a == answers[0] for a in answers)
    assert answers[0][1]["task_id"] == filed[0]
    listed = rig.svc.listing.list_tasks(ADMIN, SPACE, 100, None).tasks
    assert [t.view.task.id for t in listed] == filed
