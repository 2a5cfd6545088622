"""The local stack itself: restarts on its data, its OpenAPI document, and what it never shows."""

from __future__ import annotations

import json
import socket
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from tenure_cli.local.provision import STACK_RESOURCES

from tests.conftest import LocalStack, start_stack, stop_stack
from tests.e2e.support import (
    Api,
    Held,
    Recorder,
    World,
    alive,
    assert_error,
    descendants,
    reap,
    suffix,
    wait_for,
    wait_for_activity,
)

# Every route this slice serves, as the OpenAPI document names them.
ROUTES = {
    "/api/v1/health": {"get"},
    "/api/v1/spaces": {"post"},
    "/api/v1/workflows": {"post"},
    "/api/v1/pools": {"post"},
    "/api/v1/tokens": {"post"},
    "/api/v1/tasks": {"post"},
    "/api/v1/tasks/{task_id}": {"get"},
    "/api/v1/tasks/{task_id}/enqueue": {"post"},
    "/api/v1/tasks/{task_id}/activity": {"get"},
    "/api/v1/leases": {"get"},
    "/api/v1/leases/{lease_id}": {"get"},
    "/api/v1/leases/{lease_id}/cancel": {"post"},
    "/api/v1/leases/{lease_id}/kill": {"post"},
    "/api/v1/leases/{lease_id}/pause": {"post"},
    "/api/v1/leases/{lease_id}/resume": {"post"},
    "/api/v1/pools/{pool}/claim": {"post"},
    "/api/v1/leases/{lease_id}/start": {"post"},
    "/api/v1/leases/{lease_id}/heartbeat": {"post"},
    "/api/v1/workers/{worker_id}/heartbeat": {"post"},
    "/api/v1/leases/{lease_id}/complete": {"post"},
    "/api/v1/leases/{lease_id}/fail": {"post"},
    "/api/v1/leases/{lease_id}/release": {"post"},
    "/api/v1/leases/{lease_id}/payload": {"get"},
    "/api/v1/workers": {"get"},
}


def _listening(endpoint: str) -> bool:
    parts = urlsplit(endpoint)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(1)
        return s.connect_ex((parts.hostname or "127.0.0.1", parts.port or 80)) == 0


@dataclass
class Stopped:
    """A stack that was given data, then SIGTERM, and what its stop looked like."""

    data_dir: Path
    admin_token: str
    world_space: str
    pool: str
    worker_token: str
    held: Held
    done: Held
    waiting: dict[str, Any]
    leases: list[dict[str, Any]]
    activity: dict[str, Any]
    exit_code: int
    children: dict[int, str]  # the stack's child processes just before SIGTERM
    left_behind: dict[int, str]  # those still alive after it exited (reaped since)
    still_listening: list[str]  # engine endpoints that still answered after it exited
    record_left: bool  # its stack.json still there after it exited
    log_tail: str  # the end of the stack's own log, to show why a stop went wrong


@pytest.fixture(scope="module")
def stopped(tmp_path_factory: pytest.TempPathFactory, recorder: Recorder) -> Stopped:
    data_dir = tmp_path_factory.mktemp("restart") / "data"
    admin_token = "tnr_o_restart-" + uuid.uuid4().hex
    stack = start_stack(data_dir, admin_token)
    children: dict[int, str] = {}
    try:
        api = Api(stack.base, admin_token, recorder)
        admin = api.admin()
        world = World(api, admin, f"R{suffix()}")
        r = admin.post("/spaces", json={"key": world.space, "name": "kept"})
        assert r.status_code == 201, r.text
        pool = world.pool()["name"]
        worker_token = world.worker_token([pool])
        worker = api.client(worker_token)
        held = world.held(pool, worker)
        assert held.lease.post(f"/leases/{held.id}/start").status_code == 200
        done = world.held(pool, worker)
        r = done.lease.post(f"/leases/{done.id}/complete", json={"outcome": "success"})
        assert r.status_code == 200, r.text
        waiting = world.task(pool=pool)
        wait_for_activity(admin, done.task["id"], ["lease.completed"])
        r = admin.get("/leases", params={"space": world.space})
        assert r.status_code == 200, r.text
        leases = r.json()["leases"]
        activity = admin.get(f"/tasks/{done.task['id']}/activity").json()
        engines = json.loads((data_dir / "stack.json").read_text())
        assert engines["dynamodb"]["engine"] == "dynamodb-local"
        children = descendants(stack.proc.pid)
        assert any("DynamoDBLocal.jar" in cmd for cmd in children.values()), children
    except BaseException:
        stop_stack(stack)
        reap(children)
        raise
    code = stop_stack(stack)
    give_up = time.monotonic() + 15
    while alive(children) and time.monotonic() < give_up:
        time.sleep(0.2)
    endpoints = [engines["dynamodb"]["endpoint"], engines["aws"]["endpoint"], stack.base]
    listening = [url for url in endpoints if _listening(url)]
    left = reap(children)  # so that the restart below finds its data dir free
    return Stopped(
        data_dir=data_dir,
        admin_token=admin_token,
        world_space=world.space,
        pool=pool,
        worker_token=worker_token,
        held=held,
        done=done,
        waiting=waiting,
        leases=leases,
        activity=activity,
        exit_code=code,
        children=children,
        left_behind=left,
        still_listening=listening,
        record_left=(data_dir / "stack.json").exists(),
        log_tail="\n".join(stack.log.read_text(errors="replace").splitlines()[-12:]),
    )


def test_sigterm_stops_the_stack_with_exit_0_and_no_child_process_left(stopped: Stopped) -> None:
    java = {pid: cmd for pid, cmd in stopped.left_behind.items() if "DynamoDBLocal.jar" in cmd}
    why = f"the stack's log ends with:\n{stopped.log_tail}"
    assert stopped.exit_code == 0, f"exit code {stopped.exit_code} after SIGTERM; {why}"
    assert java == {}, f"DynamoDB Local outlived the stack: {java}; {why}"
    assert stopped.left_behind == {}, why
    assert stopped.still_listening == [], f"still answering: {stopped.still_listening}; {why}"
    # Nothing is left to send a command given no address to the ports that just closed.
    assert not stopped.record_left, why


def test_a_restarted_stack_finds_its_data_and_honours_the_tokens_it_issued(
    stopped: Stopped, recorder: Recorder
) -> None:
    stack = start_stack(stopped.data_dir, stopped.admin_token)
    children: dict[int, str] = {}
    try:
        children = descendants(stack.proc.pid)
        api = Api(stack.base, stopped.admin_token, recorder)
        admin = api.admin()
        r = admin.get("/leases", params={"space": stopped.world_space})
        assert r.status_code == 200, r.text
        assert r.json()["leases"] == stopped.leases
        r = admin.get(f"/tasks/{stopped.done.task['id']}/activity")
        assert r.status_code == 200 and r.json() == stopped.activity
        r = admin.get(f"/tasks/{stopped.done.task['id']}")
        assert r.status_code == 200 and r.json()["task"]["status"] == "completed"
        r = admin.get(f"/tasks/{stopped.waiting['task']['id']}")
        assert r.status_code == 200 and r.json()["lease"]["state"] == "pending"
        r = admin.post("/spaces", json={"key": stopped.world_space, "name": "again"})
        assert_error(r, 409, "already_exists")
        pool = {"name": stopped.pool, "space": stopped.world_space, "kind": "command"}
        r = admin.post("/pools", json=pool)
        assert_error(r, 409, "already_exists")

        # Tokens handed out before the restart still work: their hashes were kept.
        holder = api.client(stopped.held.won["token"])
        r = holder.post(f"/leases/{stopped.held.id}/heartbeat")
        assert r.status_code == 200 and r.json()["state"] == "running", r.text
        worker = api.client(stopped.worker_token)
        r = worker.post(f"/pools/{stopped.pool}/claim", json={"worker_id": "w-after"})
        assert r.status_code == 200, r.text
        assert r.json()["lease"]["id"] == stopped.waiting["lease"]["id"]
        r = holder.post(f"/leases/{stopped.held.id}/complete", json={"outcome": "success"})
        assert r.status_code == 200 and r.json()["lease"]["state"] == "completed", r.text
    finally:
        children.update(descendants(stack.proc.pid))
        # This stop's SIGTERM goes to a thread other than the main one: the stack must stop
        # all the same (it once slept through such a signal in an untimed wait).
        exit_code = stop_stack(stack, to_a_thread=True)
        reap(children)
    assert exit_code == 0
    secrets = {stopped.held.won["token"], stopped.worker_token, stopped.done.won["token"]}
    logs = [*stopped.data_dir.parent.glob("stack-*.log"), *stopped.data_dir.glob("*.log")]
    assert len(logs) >= 3, logs  # two runs of the stack, and DynamoDB Local's own
    for path in logs:
        text = path.read_text(errors="replace")
        assert not [s for s in secrets if s in text], f"a raw token is in {path.name}"


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
        return found + [ref for value in node.values() for ref in _refs(value)]
    if isinstance(node, list):
        return [ref for value in node for ref in _refs(value)]
    return []


def test_openapi_json_is_an_openapi_3_document_listing_the_routes(api: Api) -> None:
    r = api.client().get("/openapi.json")
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("application/json")
    doc = r.json()
    assert str(doc["openapi"]).startswith("3.")
    assert doc["info"]["title"] and doc["info"]["version"]
    paths = doc["paths"]
    for path, methods in ROUTES.items():
        assert path in paths, f"{path} is missing from the OpenAPI document"
        assert methods <= set(paths[path]), (path, sorted(paths[path]))

    # Request bodies come from the same pydantic models the handlers validate with.
    claim = paths["/api/v1/pools/{pool}/claim"]["post"]
    schema = claim["requestBody"]["content"]["application/json"]["schema"]
    name = schema["$ref"].rsplit("/", 1)[-1]
    claim_schema = doc["components"]["schemas"][name]
    assert {"worker_id", "wait_seconds", "lease_seconds"} <= set(claim_schema["properties"])
    assert claim_schema["properties"]["wait_seconds"]["maximum"] == 20

    schemas = doc.get("components", {}).get("schemas", {})
    for ref in _refs(doc):
        assert ref.startswith("#/components/schemas/"), ref
        assert ref.rsplit("/", 1)[-1] in schemas, f"dangling {ref}"

    from aws_lambda_powertools.event_handler.openapi.models import OpenAPI

    OpenAPI.model_validate(doc)
    from openapi_spec_validator import validate

    validate(doc)


def _secrets(recorder: Recorder) -> set[str]:
    """The raw tokens handed out, and their secret halves (what must never be shown again)."""
    found: set[str] = set()
    for token in recorder.lease_tokens | recorder.worker_tokens:
        found.add(token)
        found.add(token.rsplit(".", 1)[-1] if token.startswith("tnr_l_") else token[6:])
    return found


def _issued_here(path: str, status: int) -> bool:
    """The two answers that show a raw token, once: a claim's and a token creation's."""
    return (path.endswith("/claim") and status == 200) or (
        path.endswith("/api/v1/tokens") and status == 201
    )


@pytest.mark.run_last
def test_no_raw_lease_or_worker_token_appears_in_logs_or_other_responses(
    world: World, local_stack: LocalStack
) -> None:
    api, recorder = world.api, world.api.recorder
    # A lifecycle of its own, with refusals that name the lease, so the tier checks something
    # even when it runs alone.
    pool = world.pool()["name"]
    worker = api.client(world.worker_token([pool]))
    a = world.held(pool, worker)
    b = world.held(pool, worker)
    for path in ("start", "heartbeat"):
        assert a.lease.post(f"/leases/{a.id}/{path}").status_code == 200
    assert a.lease.get(f"/leases/{a.id}/payload").status_code == 200
    assert a.lease.post(f"/leases/{b.id}/heartbeat").status_code == 403
    assert a.lease.get(f"/leases/{a.id}").status_code == 403
    r = worker.post("/workers/w-1/heartbeat", json={"leases": [{"id": a.id, "fence": 9}]})
    assert r.status_code == 200 and r.json()["leases"][0]["error"]["code"] == "stale_lease"
    assert a.lease.post(f"/leases/{a.id}/release", json={"reason": "x"}).status_code == 200
    assert a.lease.post(f"/leases/{a.id}/complete", json={}).status_code == 409
    assert b.lease.post(f"/leases/{b.id}/complete", json={"result": "ok"}).status_code == 200
    wait_for_activity(world.admin, a.task["id"], ["lease.released", "lease.stale_report"])
    for held in (a, b):
        assert world.admin.get(f"/tasks/{held.task['id']}/activity").status_code == 200
        assert world.admin.get(f"/leases/{held.id}").status_code == 200
    assert world.admin.get("/leases", params={"space": world.space}).status_code == 200

    secrets = _secrets(recorder)
    assert a.won["token"] in secrets and b.won["token"] in secrets
    with recorder.lock:
        seen = list(recorder.seen)
    shown = [
        (row.method, row.path, row.status)
        for row in seen
        if not _issued_here(row.path, row.status)
        for secret in secrets
        if secret.encode() in row.body
    ]
    assert shown == [], f"raw tokens in responses: {shown[:10]}"

    logs = {local_stack.log, *local_stack.data_dir.glob("*.log")}
    assert local_stack.log.exists() and local_stack.log.stat().st_size > 0
    assert len(logs) >= 2, logs  # the stack's own log and DynamoDB Local's
    for path in sorted(logs):
        text = path.read_bytes()
        leaked = sorted(s[:12] + "…" for s in secrets if s.encode() in text)
        assert leaked == [], f"raw tokens in {path.name}: {leaked}"

    # Only sha256(token) is stored: the engine's own files never hold a raw token either.
    for path in (local_stack.data_dir / "dynamodb").rglob("*"):
        if path.is_file():
            blob = path.read_bytes()
            leaked = sorted(s[:12] + "…" for s in secrets if s.encode() in blob)
            assert leaked == [], f"raw tokens stored in {path.name}: {leaked}"


@pytest.mark.run_last
def test_no_request_of_the_session_was_answered_with_a_server_error(recorder: Recorder) -> None:
    with recorder.lock:
        # 501 on a lease's logs is the documented answer for a pool that keeps none.
        failures = [
            (r.method, r.path, r.status)
            for r in recorder.seen
            if r.status >= 500 and not (r.status == 501 and r.path.endswith("/logs"))
        ]
    assert len(recorder.seen) > 0
    assert failures == []


def test_stack_json_names_every_endpoint_and_resource_section_7_lists(
    local_stack: LocalStack,
) -> None:
    path = local_stack.data_dir / "stack.json"
    # Written once everything is up, a moment after /health first answers.
    wait_for(path.exists, 10, "stack.json")
    info = json.loads(path.read_text())
    assert info["api"] == local_stack.base
    assert info["pid"] == local_stack.proc.pid
    # The worker function's URL and the claim function's, each a listener of its own.
    assert _listening(info["worker_api"]) and _listening(info["worker_claim_api"])
    assert len({info["api"], info["worker_api"], info["worker_claim_api"]}) == 3
    assert info["dynamodb"]["engine"] == "dynamodb-local"
    assert _listening(info["dynamodb"]["endpoint"])
    aws = info["aws"]
    assert aws["region"] == "us-east-1" and _listening(aws["endpoint"])
    res = aws["resources"]
    assert set(STACK_RESOURCES) <= set(res), sorted(res)

    # Each value is a resource moto really holds, reached as AWS's own services reach them.
    client = local_stack.aws

    for bucket in (res["inbound_bucket"], res["attachments_bucket"]):
        client("s3").head_bucket(Bucket=bucket)
    assert res["inbound_bucket"] != res["attachments_bucket"]
    sqs = client("sqs")
    arns = {}
    for key in ("inbound_queue_url", "inbound_dlq_url"):
        attrs = sqs.get_queue_attributes(QueueUrl=res[key], AttributeNames=["All"])["Attributes"]
        arns[key] = attrs["QueueArn"]
    redrive = json.loads(
        sqs.get_queue_attributes(QueueUrl=res["inbound_queue_url"], AttributeNames=["All"])[
            "Attributes"
        ]["RedrivePolicy"]
    )
    assert redrive["deadLetterTargetArn"] == arns["inbound_dlq_url"]
    assert res["inbound_topic_arn"].startswith("arn:aws:sns:us-east-1:")
    sns = client("sns")
    sns.get_topic_attributes(TopicArn=res["inbound_topic_arn"])
    subs = sns.list_subscriptions_by_topic(TopicArn=res["inbound_topic_arn"])["Subscriptions"]
    assert [(s["Protocol"], s["Endpoint"]) for s in subs] == [("sqs", arns["inbound_queue_url"])]
    sub = sns.get_subscription_attributes(SubscriptionArn=subs[0]["SubscriptionArn"])
    # Raw delivery off: each SQS body is the SNS envelope, as SES -> SNS -> SQS delivers it.
    assert sub["Attributes"].get("RawMessageDelivery", "false") == "false"
    policy = sqs.get_queue_attributes(QueueUrl=res["inbound_queue_url"], AttributeNames=["Policy"])
    assert res["inbound_topic_arn"] in policy["Attributes"]["Policy"], "the topic may send"
    groups = client("logs").describe_log_groups(logGroupNamePrefix=res["log_group"])
    assert res["log_group"] in [g["logGroupName"] for g in groups["logGroups"]]
    bus = client("events").describe_event_bus(Name=res["event_bus"])
    assert bus["Name"] == res["event_bus"]
