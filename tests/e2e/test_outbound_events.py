"""Outbound events on the local stack: a completed lease's `lease.completed` reaches a queue
through a rule a consumer puts on the stack's bus (moto's events service delivers to SQS)."""

from __future__ import annotations

import json
from typing import Any

import boto3
from tenure_cli.local.engines import use_local_credentials

from tests.conftest import LocalStack
from tests.e2e.support import TIMELINE_WAIT, World, suffix, wait_for


def _consumer(local_stack: LocalStack, pool: str) -> tuple[Any, str]:
    """A queue and a rule on the stack's bus for `lease.completed` of one pool, as a user of
    the deployed stack would make them."""
    info = json.loads((local_stack.data_dir / "stack.json").read_text())
    use_local_credentials()
    aws = info["aws"]
    make: Any = boto3.client
    sqs = make("sqs", endpoint_url=aws["endpoint"], region_name=aws["region"])
    events = make("events", endpoint_url=aws["endpoint"], region_name=aws["region"])
    bus = aws["resources"]["event_bus"]
    name = f"completed-{suffix()}"
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    pattern = {"source": ["tenure"], "detail-type": ["lease.completed"], "detail": {"pool": [pool]}}
    events.put_rule(Name=name, EventBusName=bus, EventPattern=json.dumps(pattern))
    events.put_targets(Rule=name, EventBusName=bus, Targets=[{"Id": "queue", "Arn": arn}])
    return sqs, url


def test_a_completed_lease_reaches_a_queue_through_a_rule_on_the_bus(
    world: World, local_stack: LocalStack
) -> None:
    pool = world.pool()["name"]
    sqs, url = _consumer(local_stack, pool)
    with world.api.client(world.worker_token([pool])) as worker:
        held = world.held(pool, worker)
        r = held.lease.post(
            f"/leases/{held.id}/complete",
            json={"outcome": "success", "result": {"answer": "kept off the bus"}},
        )
        assert r.status_code == 200, r.text

    def arrived() -> dict[str, Any] | None:
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1)
        for message in got.get("Messages", []):
            event: dict[str, Any] = json.loads(message["Body"])
            if event["detail"].get("lease_id") == held.id:
                return event
        return None

    event = wait_for(arrived, TIMELINE_WAIT, "lease.completed on the consumer's queue")
    assert (event["source"], event["detail-type"]) == ("tenure", "lease.completed")
    detail = event["detail"]
    assert (detail["space"], detail["pool"], detail["state"], detail["outcome"]) == (
        world.space,
        pool,
        "completed",
        "success",
    )
    assert detail["task_id"] == held.task["id"]
    assert detail["id"].startswith(f"{held.id}.v")  # the timeline event's id: de-duplicate on it
    assert "kept off the bus" not in json.dumps(event)
