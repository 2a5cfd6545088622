"""Each Lambda function's role grants what that function's code calls: every AWS call the run
noted (tests/infra/aws_calls.py) is decided against the function's role in the template by an
IAM policy simulator (tests/infra/least_privilege.py), so a write the role would refuse fails
here rather than on AWS. The check runs after every other test of the run, and first drives
each function through a short run of its own (`mini_run`) so that it decides something even
when it runs alone."""

from __future__ import annotations

import ast
import base64
import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest
from tenure.config import local_settings

from tests.conftest import _unavailable
from tests.infra import aws_calls, least_privilege
from tests.infra.aws_calls import Call
from tests.infra.least_privilege import Stack, Verdicts

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def stack() -> Stack:
    return Stack.load()


@pytest.fixture(scope="module")
def simulator() -> Path:
    try:
        return least_privilege.install_simulator(Path(local_settings().cache_dir))
    except FileNotFoundError as why:
        _unavailable(str(why))
        raise


def decide(simulator: Path, stack: Stack, *calls: Call) -> Verdicts:
    return least_privilege.decide(simulator, stack, calls)


def _refusals(verdicts: Verdicts) -> list[str]:
    return [
        f"{call.describe()} -> {request.resource}: {decision.result} {decision.why or ''}"
        f" (first in {aws_calls.LOG.first.get(call, 'a test of this module')})"
        for call, request, decision in verdicts.refused()
    ]


# ------------------------------------------------------------------ the check can refuse


def test_a_call_the_role_does_not_grant_is_refused(simulator: Path, stack: Stack) -> None:
    scan = Call("AuthorizerFunction", "dynamodb:Scan", "${LeaseTable.Arn}")
    delete = Call("WorkerFunction", "s3:DeleteObject", "${AttachmentsBucket.Arn}/email/m/att_1")
    verdicts = decide(simulator, stack, scan, delete)
    assert [c for c, _, _ in verdicts.refused()] == [scan, delete]


def test_an_action_that_is_no_iam_action_or_an_unknown_resource_is_refused(
    simulator: Path, stack: Stack
) -> None:
    head = Call("ApiFunction", "s3:HeadObject", "${AttachmentsBucket.Arn}/leases/l/a")
    nowhere = Call("ApiFunction", "s3:GetObject", "(no template bucket is named elsewhere)/k")
    unmapped = Call("ApiFunction", "unmapped:sts:GetCallerIdentity", "*")
    verdicts = decide(simulator, stack, head, nowhere, unmapped)
    assert {c for c, _, _ in verdicts.refused()} == {head, nowhere, unmapped}


# ---------------------------------------------------------------------------- the check

# Calls noted that the code does not need granted, with the reason.
NOT_NEEDED = {
    # A GET of a mail object that is gone is noted as needing s3:ListBucket (S3 answers 404
    # only to a caller that may list); the inbound function treats any failed read as
    # unreadable mail, so the 403 it gets instead ends the same.
    "InboundFunction: s3:ListBucket": "a 403 and a 404 of a mail object end the same",
}


@pytest.mark.after_every_tier
def test_every_call_a_function_made_in_this_run_is_granted_by_its_role(
    simulator: Path, stack: Stack, mini_run: None
) -> None:
    verdicts = least_privilege.decide(simulator, stack, aws_calls.LOG.calls)
    refused = [line for line in _refusals(verdicts) if line.split(" on ")[0] not in NOT_NEEDED]
    assert not refused, "calls the template's roles would refuse on AWS:\n" + "\n".join(refused)


# ------------------------------------------------------------------------------ mini-run

MINI = {
    "TENURE_TABLE": "mini",
    "TENURE_DYNAMODB_ENDPOINT": "",
    "TENURE_ATTACHMENTS_BUCKET": "mini-attachments",
    "TENURE_LOG_GROUP": "mini-lease-logs",
    "TENURE_EVENT_BUS": "mini-events",
    "TENURE_SCHEDULE_GROUP": "mini-rules",
    "TENURE_SCHEDULER_TARGET_ARN": "arn:aws:lambda:us-east-1:123456789012:function:mini-scheduler",
    "TENURE_SCHEDULER_ROLE_ARN": "arn:aws:iam::123456789012:role/mini-rule-scheduler",
}


class Front:
    """Requests to the API (its authorizer first) and to the worker function, on moto."""

    def __init__(self, admin: str) -> None:
        self.admin = admin

    def _send(self, worker: bool, method: str, path: str, token: str, body: Any) -> Any:
        from tenure_cli.local import lambda_host
        from tenure_cli.local.frontdoor import to_event

        raw = json.dumps(body).encode() if body is not None else b""
        headers = {"host": "mini", "authorization": f"Bearer {token}"}
        if body is not None:
            headers["content-type"] = "application/json"
        event = to_event(method, f"/api/v1{path}", headers, raw)
        out = (lambda_host.invoke_worker if worker else lambda_host.invoke)(event)
        assert out["statusCode"] < 300, (method, path, out)
        kind = {k.lower(): v for k, v in (out.get("headers") or {}).items()}.get("content-type")
        if not out.get("body") or "json" not in str(kind):
            return out.get("body")
        return json.loads(out["body"])

    def api(self, method: str, path: str, token: str | None = None, body: Any = None) -> Any:
        return self._send(False, method, path, token or self.admin, body)

    def worker(self, method: str, path: str, token: str, body: Any = None) -> Any:
        return self._send(True, method, path, token, body)


def _drive(front: Front, s3: Any) -> None:
    """Each function through the calls its code makes: tokens and leases, attachments inline
    and by upload (arrived, not yet arrived, over the pool's quota), logs written and read,
    a scheduled rule made, changed, fired and deleted, the stream, a sweep."""
    from tenure import wiring
    from tenure.triggers import rule_schedule, sweep
    from tenure_cli.local.lambda_host import _Context
    from tenure_cli.local.streams import StreamPump

    front.api("POST", "/spaces", body={"key": "MINI", "name": "Mini"})
    front.api("POST", "/workflows", body={"space": "MINI", "slug": "chore", "name": "Chore"})
    pool = {"name": "mini", "space": "MINI", "kind": "command", "attachment_quota_bytes": 8}
    front.api("POST", "/pools", body=pool)
    worker = front.api("POST", "/tokens", body={"name": "mini-worker", "kind": "worker"})["token"]
    for title in ("one", "two"):
        front.api("POST", "/tasks", body={"space": "MINI", "pool": "mini", "title": title})
    leases, uploads = [], []
    for via in (front.api, front.worker):
        won = via("POST", "/pools/mini/claim", worker, {"worker_id": "w1", "wait_seconds": 0})
        leases.append((via, won["lease"]["id"], won["token"]))
    for via, lease, token in leases:
        via("POST", f"/leases/{lease}/start", token, {})
        via("POST", f"/leases/{lease}/heartbeat", token, {})
        inline = {"filename": "a.txt", "content_type": "text/plain"}
        via("POST", f"/leases/{lease}/attachments", token, inline | {"content_base64": _b64(5)})
        upload = {"filename": "b.bin", "content_type": "application/octet-stream", "byte_size": 3}
        answer = via("POST", f"/leases/{lease}/attachments", token, upload)
        uploads.append(unquote(urlsplit(answer["upload"]["url"]).path).lstrip("/"))
        events = {"events": [{"stream": "stdout", "message": "hello"}]}
        via("POST", f"/leases/{lease}/logs", token, events)
    # Over the pool's 8 bytes: stored, then deleted when the quota refuses it.
    lease_via, lease, token = leases[1]
    over = {"filename": "c.txt", "content_type": "text/plain", "content_base64": _b64(5)}
    with pytest.raises(AssertionError):
        lease_via("POST", f"/leases/{lease}/attachments", token, over)
    # An upload not yet arrived (a HEAD answered 404), then arrived (copied, then deleted).
    lease_via, lease, token = leases[0]
    front.api("GET", f"/leases/{lease}/attachments")
    bucket = MINI["TENURE_ATTACHMENTS_BUCKET"]
    for key in uploads:  # what a worker's PUT to its upload URL leaves
        s3.put_object(Bucket=bucket, Key=key, Body=b"xyz", ContentType="application/octet-stream")
    for _, lease, _ in leases:
        for found in front.api("GET", f"/leases/{lease}/attachments")["attachments"]:
            front.api("GET", f"/leases/{lease}/attachments/{found['id']}")
        front.api("GET", f"/leases/{lease}/logs")
    for via, lease, token in leases:
        via("POST", f"/leases/{lease}/complete", token, {"result": {}})
    rule = {
        "space": "MINI",
        "name": "nightly",
        "pool": "mini",
        "subject": {"kind": "workflow", "slug": "chore"},
        "trigger": {"schedule": "cron(0 2 * * ? *)", "timezone": "UTC"},
    }
    made = front.api("POST", "/rules", body=rule)
    rule_id = made.get("id") or made["rule"]["id"]
    changed = {"trigger": {"schedule": "cron(0 3 * * ? *)", "timezone": "UTC"}}
    front.api("PATCH", f"/rules/{rule_id}", body=changed)
    rule_schedule.handle({"rule_id": rule_id, "scheduled_time": "2026-11-30T03:00:00Z"}, _Context())
    front.api("DELETE", f"/rules/{rule_id}")
    StreamPump(None, MINI["TENURE_TABLE"], wiring.build_store()).drain()
    sweep.handle({}, _Context())


def _b64(size: int) -> str:
    return base64.b64encode(b"x" * size).decode()


@pytest.fixture(scope="module")
def mini_run() -> Iterator[None]:
    import boto3
    from moto import mock_aws
    from tenure import wiring
    from tenure.config import export
    from tenure_cli.local.engines import use_local_credentials

    use_local_credentials()
    before = {name: os.environ.get(name) for name in MINI}
    with mock_aws():
        for name, value in MINI.items():
            export(name, value)
        wiring.service.cache_clear()
        wiring.publisher.cache_clear()
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket=MINI["TENURE_ATTACHMENTS_BUCKET"])
        boto3.client("logs", region_name="us-east-1").create_log_group(
            logGroupName=MINI["TENURE_LOG_GROUP"]
        )
        boto3.client("events", region_name="us-east-1").create_event_bus(
            Name=MINI["TENURE_EVENT_BUS"]
        )
        boto3.client("scheduler", region_name="us-east-1").create_schedule_group(
            Name=MINI["TENURE_SCHEDULE_GROUP"]
        )
        wiring.build_store().create_table()
        admin = "tnr_o_mini-" + uuid.uuid4().hex
        wiring.service().tokens.bootstrap_admin(admin)
        was = aws_calls.LOG.test
        aws_calls.LOG.test = f"{__name__}::mini_run"
        try:
            _drive(Front(admin), s3)
        finally:
            aws_calls.LOG.test = was
            for name, held in before.items():
                if held is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = held
            from tenure.config import settings

            settings.cache_clear()
            wiring.service.cache_clear()
            wiring.publisher.cache_clear()
    yield


# ----------------------------------------------------------------------- the authorizer


def _touch(attributes: tuple[str, ...], returns: str = "NONE") -> Call:
    keys = (("dynamodb:Attributes", attributes), ("dynamodb:ReturnValues", returns))
    return Call(
        "AuthorizerFunction", "dynamodb:UpdateItem", "${LeaseTable.Arn}", (aws_calls.SECURE, *keys)
    )


def test_the_authorizer_may_write_a_token_s_last_use_and_nothing_else(
    simulator: Path, stack: Stack
) -> None:
    from tenure.store import conditions, keys

    # The attributes the token-use write names: its key, and those of its expressions.
    request = {
        "Key": keys.token_key("h"),
        "UpdateExpression": "SET last_used_at = :at",
        "ConditionExpression": conditions.TOKEN_USE_IS_OLD,
    }
    named = aws_calls.attribute_names(request)
    assert named == ("PK", "SK", "last_used_at")
    noted = _touch(named)
    other = _touch(("PK", "SK", "revoked_at"))
    both = _touch(("PK", "SK", "last_used_at", "role"))
    read_back = _touch(named, "ALL_NEW")
    on_an_index = Call("AuthorizerFunction", "dynamodb:UpdateItem", "${LeaseTable.Arn}/index/queue")
    verdicts = decide(simulator, stack, noted, other, both, read_back, on_an_index)
    assert {c for c, _, _ in verdicts.refused()} == {other, both, read_back, on_an_index}


# ------------------------------------------------------------------ who made the call


def _delegate(handler_file: Path) -> tuple[str, str]:
    """The module and name functions/<dir>/app.py's `handler` hands the event to."""
    tree = ast.parse(handler_file.read_text())
    imported = {
        alias.asname or alias.name: (node.module or "", alias.name)
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    handler = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "handler")
    (returned,) = [n for n in ast.walk(handler) if isinstance(n, ast.Return)]
    (name,) = {
        n.id
        for n in ast.walk(returned)
        if isinstance(n, ast.Name) and imported.get(n.id, ("",))[0].startswith("tenure.")
    }
    return imported[name]


def test_every_function_s_handler_enters_its_code_where_calls_are_attributed(
    stack: Stack,
) -> None:
    template = least_privilege.transformed()
    for name in stack.roles:
        code = Path(template["Resources"][name]["Properties"]["Code"]["S3Key"]).stem
        entry = _delegate(ROOT / "functions" / code / "app.py")
        assert entry == aws_calls.ENTRIES[name][0], name
    assert set(aws_calls.ENTRIES) == set(stack.roles)
