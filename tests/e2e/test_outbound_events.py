"""Outbound events on the local stack, at each OutboundEvents setting: a consumer's rule on the
stack's bus (moto's events service delivers to SQS) receives a lease's end and its task's
(`endings`, the default, which the session stack runs), every transition (`all`), or nothing
(`none`). The other two settings run on stacks of their own, started with
`tenure local --outbound-events`."""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import LocalStack, start_stack, stop_stack
from tests.e2e.support import TIMELINE_WAIT, Api, Recorder, World, suffix, wait_for


class Consumer:
    """A queue and a rule on the stack's bus for every event of one pool, as a user of the
    deployed stack would make them."""

    def __init__(self, stack: LocalStack, pool: str) -> None:
        self.sqs = stack.aws("sqs")
        events = stack.aws("events")
        bus = stack.info()["aws"]["resources"]["event_bus"]
        name = f"consumer-{suffix()}"
        self.url = self.sqs.create_queue(QueueName=name)["QueueUrl"]
        arn = self.sqs.get_queue_attributes(QueueUrl=self.url, AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"]
        pattern = {"source": ["tenure"], "detail": {"pool": [pool]}}
        events.put_rule(Name=name, EventBusName=bus, EventPattern=json.dumps(pattern))
        events.put_targets(Rule=name, EventBusName=bus, Targets=[{"Id": "queue", "Arn": arn}])
        self.got: list[dict[str, Any]] = []

    def receive(self) -> list[dict[str, Any]]:
        answer = self.sqs.receive_message(
            QueueUrl=self.url, MaxNumberOfMessages=10, WaitTimeSeconds=1
        )
        for message in answer.get("Messages", []):
            self.got.append(json.loads(message["Body"]))
        return self.got

    def types(self) -> list[str]:
        return sorted(e["detail-type"] for e in self.got)

    def wait_for(self, detail_type: str) -> dict[str, Any]:
        def arrived() -> dict[str, Any] | None:
            return next((e for e in self.receive() if e["detail-type"] == detail_type), None)

        return wait_for(arrived, TIMELINE_WAIT, f"{detail_type} on the consumer's queue")


@contextlib.contextmanager
def _world(stack: LocalStack) -> Iterator[World]:
    api = Api(stack.base, stack.admin_token, Recorder())
    with api.admin() as admin:
        key = f"O{suffix()}"
        r = admin.post("/spaces", json={"key": key, "name": f"outbound {key}"})
        assert r.status_code == 201, r.text
        yield World(api, admin, key)


def _stack(tmp_path_factory: pytest.TempPathFactory, setting: str) -> Iterator[LocalStack]:
    root = tmp_path_factory.mktemp(f"outbound-{setting}")
    stack = start_stack(
        root / "data",
        "tnr_o_outbound-" + uuid.uuid4().hex,
        extra=("--outbound-events", setting),
    )
    try:
        yield stack
    finally:
        stop_stack(stack)


@pytest.fixture(scope="module")
def stack_all(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    yield from _stack(tmp_path_factory, "all")


@pytest.fixture(scope="module")
def stack_none(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    yield from _stack(tmp_path_factory, "none")


def _complete(world: World, pool: str, **body: Any) -> tuple[str, str]:
    """A task of `pool`, claimed and completed; (its lease id, its task id)."""
    with world.api.client(world.worker_token([pool])) as worker:
        held = world.held(pool, worker)
        r = held.lease.post(
            f"/leases/{held.id}/complete",
            json={"outcome": "success", "result": {"answer": "kept off the bus"}, **body},
        )
        assert r.status_code == 200, r.text
    return held.id, str(held.task["id"])


def test_by_default_a_lease_s_end_and_its_task_s_completion_are_published_and_nothing_else(
    world: World, local_stack: LocalStack
) -> None:
    pool = world.pool()["name"]
    consumer = Consumer(local_stack, pool)
    lease_id, task_id = _complete(world, pool)
    # The task's completion comes last (the reactor tells it from the row its lease's success
    # settled): once it is here, whatever the claim or the filing would have sent is too.
    task_done = consumer.wait_for("task.completed")
    consumer.receive()
    assert consumer.types() == ["lease.completed", "task.completed"]
    ended = next(e for e in consumer.got if e["detail-type"] == "lease.completed")
    detail = ended["detail"]
    assert (detail["space"], detail["pool"], detail["state"], detail["outcome"]) == (
        world.space,
        pool,
        "completed",
        "success",
    )
    assert detail["task_id"] == task_id and detail["lease_id"] == lease_id
    assert detail["id"].startswith(f"{lease_id}.v")  # the timeline event's id: de-duplicate on it
    assert "kept off the bus" not in json.dumps(consumer.got)
    told = task_done["detail"]
    assert (told["task_id"], told["space"], told["pool"], told["status"]) == (
        task_id,
        world.space,
        pool,
        "completed",
    )


def test_by_default_a_failed_run_is_published_as_its_lease_s_end_and_its_task_s(
    world: World, local_stack: LocalStack
) -> None:
    pool = world.pool()["name"]
    consumer = Consumer(local_stack, pool)
    with world.api.client(world.worker_token([pool])) as worker:
        held = world.held(pool, worker)
        r = held.lease.post(f"/leases/{held.id}/fail", json={"error": "exit 2"})
        assert r.status_code == 200, r.text
    failed = consumer.wait_for("task.failed")
    consumer.wait_for("lease.failed")
    consumer.receive()
    assert consumer.types() == ["lease.failed", "task.failed"]
    assert failed["detail"]["lease_id"] == held.id
    assert failed["detail"]["task_id"] == held.task["id"]


def test_with_all_every_transition_is_published(stack_all: LocalStack) -> None:
    with _world(stack_all) as world:
        pool = world.pool()["name"]
        consumer = Consumer(stack_all, pool)
        lease_id, _ = _complete(world, pool)
        consumer.wait_for("task.completed")
        consumer.wait_for("lease.completed")
        consumer.wait_for("lease.claimed")
        consumer.receive()
        types = consumer.types()
        assert {"lease.created", "lease.claimed", "lease.completed", "task.completed"} <= set(
            types
        ), types
        claimed = next(e for e in consumer.got if e["detail-type"] == "lease.claimed")
        assert claimed["detail"]["lease_id"] == lease_id


def test_with_none_nothing_is_published(stack_none: LocalStack) -> None:
    with _world(stack_none) as world:
        pool = world.pool()["name"]
        consumer = Consumer(stack_none, pool)
        _, task_id = _complete(world, pool)

        def settled() -> bool | None:
            # Completed is what the reactor settles from the lease's success: it has seen both
            # records the default would publish from.
            status = world.admin.get(f"/tasks/{task_id}").json()["task"]["status"]
            return True if status == "completed" else None

        wait_for(settled, TIMELINE_WAIT, "the task completed")
        quiet_until = time.monotonic() + 3
        while time.monotonic() < quiet_until:
            consumer.receive()
        assert consumer.got == []
