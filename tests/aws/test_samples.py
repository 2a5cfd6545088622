"""The sample API Gateway events in samplesources/api replay through the real handlers on moto."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tenure import wiring
from tenure.config import export
from tenure_cli.local.lambda_host import invoke
from tenure_cli.local.streams import StreamPump

from tests.aws.mocked import mocked_aws

SAMPLES = Path(__file__).resolve().parents[2] / "samplesources" / "api"
ADMIN_TOKEN = "tnr_o_sample-admin-" + uuid.uuid4().hex


def _sample(name: str) -> str:
    (path,) = SAMPLES.glob(f"[0-9][0-9]_{name}.json")
    return path.read_text()


@pytest.fixture
def handlers() -> Iterator[None]:
    with mocked_aws():
        export("TENURE_TABLE", "samples")
        export("TENURE_DYNAMODB_ENDPOINT", "")
        wiring.service.cache_clear()
        store = wiring.build_store()
        store.create_table()
        wiring.service().tokens.bootstrap_admin(ADMIN_TOKEN)
        yield
        wiring.service.cache_clear()


class Replay:
    def __init__(self) -> None:
        self.values = {
            "ADMIN_TOKEN": ADMIN_TOKEN,
            "SPACE": "SAMPLES",
            "POOL": "sample-pool",
            "TOKEN_NAME": "sample-worker",
        }

    def send(self, name: str, status: int) -> dict[str, Any]:
        text = re.sub(r"\{\{(\w+)\}\}", lambda m: self.values[m.group(1)], _sample(name))
        event = json.loads(text)
        if event.get("body"):  # the placeholders changed the body's length
            event["headers"]["content-length"] = str(len(event["body"]))
        answer = invoke(event)
        assert answer["statusCode"] == status, (name, answer)
        return json.loads(answer["body"]) if answer.get("body") else {}


def test_every_sample_request_replays_through_the_authorizer_and_the_api(handlers: None) -> None:
    played = Replay()
    assert played.send("health", 200) == {"status": "ok"}
    assert "/api/v1/pools/{pool}/claim" in played.send("openapi", 200)["paths"]
    played.send("create_space", 201)
    played.send("create_workflow", 201)
    played.send("create_pool", 201)
    played.values["WORKER_TOKEN"] = played.send("create_worker_token", 201)["token"]
    created = played.send("create_task", 201)
    assert created["lease"]["state"] == "pending"
    played.values["TASK_ID"] = created["task"]["id"]
    assert played.send("get_task", 200)["task"]["status"] == "queued"

    def claim() -> dict[str, Any]:
        won = played.send("claim", 200)
        played.values["LEASE_ID"] = won["lease"]["id"]
        played.values["LEASE_TOKEN"] = won["token"]
        return won

    claim()
    assert played.send("start", 200)["lease"]["state"] == "running"
    assert played.send("heartbeat", 200)["revoke"] is None
    assert "error" not in played.send("worker_heartbeat", 200)["leases"][0]
    assert played.send("payload", 200)["subject"]["title"] == "Rotate the logs"
    assert [x["id"] for x in played.send("list_leases", 200)["leases"]] == [
        played.values["LEASE_ID"]
    ]
    assert played.send("get_lease", 200)["state"] == "running"
    workers = played.send("list_workers", 200)["workers"]
    assert [w["worker_id"] for w in workers] == ["laptop-1"]
    assert played.send("pause", 200)["lease"]["state"] == "paused"
    assert played.send("resume", 200)["lease"]["state"] == "running"
    assert played.send("complete", 200)["lease"]["state"] == "completed"
    # moto keeps the table's stream too: feed it to the reactor, as the Lambda trigger would.
    StreamPump(None, "samples", wiring.build_store()).drain()
    assert [e["type"] for e in played.send("task_activity", 200)["events"]] == [
        "lease.created",
        "lease.claimed",
        "lease.started",
        "lease.paused",
        "lease.resumed",
        "lease.completed",
    ]

    assert played.send("enqueue", 201)["lease"]["state"] == "pending"
    claim()
    assert played.send("fail", 200)["lease"]["state"] == "failed"
    played.send("enqueue", 201)
    claim()
    released = played.send("release", 200)["lease"]
    assert (released["state"], released["end_reason"]) == ("cancelled", "released")
    claim()
    assert played.send("kill", 200)["lease"]["revoke"] == "kill"
    assert played.send("cancel", 200)["lease"]["state"] == "cancelling"
