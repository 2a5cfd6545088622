"""A lease's detail over HTTP against `tenure local`: logs, attachments (presigned URLs really
used), runtime coordinates, and retention reclaim with a one-second window."""

from __future__ import annotations

import base64
from typing import Any
from urllib.parse import parse_qs, urlsplit

import boto3
import httpx
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from tests.conftest import LocalStack
from tests.e2e.support import Held, World, assert_error, suffix, wait_for, wait_for_activity

# A lease with no attachment: a list bounded by construction, so never a next page.
NO_ATTACHMENTS = {"attachments": [], "next_cursor": None}


def _held(world: World, **pool_fields: Any) -> tuple[Held, str]:
    pool = world.pool(**pool_fields)["name"]
    held = world.held(pool, world.api.client(world.worker_token([pool])))
    assert held.lease.post(f"/leases/{held.id}/start").status_code == 200
    return held, pool


def _aws(local_stack: LocalStack) -> tuple[dict[str, Any], Any, Any]:
    resources = local_stack.info()["aws"]["resources"]
    return resources, local_stack.aws("s3"), local_stack.aws("logs")


# ---------------------------------------------------------------------------- logs


def test_a_lease_ships_logs_and_operators_and_itself_read_them(world: World) -> None:
    held, _ = _held(world)
    r = held.lease.post(
        f"/leases/{held.id}/logs",
        json={
            "events": [
                {"stream": "stdout", "message": "first line"},
                {"stream": "stderr", "message": "boom", "container": "main"},
                {"stream": "stdout", "message": "sidecar says hi", "container": "sidecar"},
            ]
        },
    )
    assert r.status_code == 202 and r.json() == {"accepted": 3}, r.text
    reader = world.api.client(world.operator_token("read", spaces=[world.space]))
    for client in (reader, held.lease):
        r = client.get(f"/leases/{held.id}/logs")
        assert r.status_code == 200, r.text
        body = r.json()
        assert set(body) == {"events", "truncated", "next_cursor"}
        messages = [(e["container"], e["stream"], e["message"]) for e in body["events"]]
        assert sorted(messages) == sorted(
            [
                ("main", "stdout", "first line"),
                ("main", "stderr", "boom"),
                ("sidecar", "stdout", "sidecar says hi"),
            ]
        )
        stamps = [e["timestamp"] for e in body["events"]]
        assert stamps == sorted(stamps) and all(s.endswith("Z") for s in stamps)
    r = reader.get(f"/leases/{held.id}/logs", params={"container": "sidecar"})
    assert [e["message"] for e in r.json()["events"]] == ["sidecar says hi"]
    r = reader.get(f"/leases/{held.id}/logs", params={"tail": 1, "container": "main"})
    assert len(r.json()["events"]) == 1 and r.json()["truncated"] is True
    assert_error(
        reader.get(f"/leases/{held.id}/logs", params={"since": "yesterday"}),
        422,
        "validation_failed",
        "since",
    )
    too_many = {"events": [{"stream": "stdout", "message": "x"}] * 1001}
    assert_error(
        held.lease.post(f"/leases/{held.id}/logs", json=too_many),
        422,
        "validation_failed",
        "events",
    )


def test_who_may_not_read_a_leases_logs(world: World) -> None:
    held, pool = _held(world)
    other = world.held(pool, world.api.client(world.worker_token([pool])))
    assert_error(other.lease.get(f"/leases/{held.id}/logs"), 403, "lease_token_mismatch")
    other_space = f"X{suffix()}"
    assert world.admin.post("/spaces", json={"key": other_space, "name": "x"}).status_code == 201
    elsewhere = world.api.client(world.operator_token("read", spaces=[other_space]))
    assert_error(elsewhere.get(f"/leases/{held.id}/logs"), 403, "forbidden")
    assert_error(elsewhere.get(f"/leases/{held.id}/attachments"), 403, "forbidden")
    worker = world.api.client(world.worker_token([pool]))
    assert_error(worker.get(f"/leases/{held.id}/logs"), 403, "forbidden")
    assert_error(world.admin.post(f"/leases/{held.id}/logs", json={"events": []}), 403, "forbidden")


def test_a_pool_that_keeps_no_logs_answers_501_both_ways(world: World) -> None:
    held, _ = _held(world, keeps_logs=False)
    body = {"events": [{"stream": "stdout", "message": "x"}]}
    assert_error(held.lease.post(f"/leases/{held.id}/logs", json=body), 501, "unsupported_runtime")
    assert_error(world.admin.get(f"/leases/{held.id}/logs"), 501, "unsupported_runtime")


# --------------------------------------------------------------------- attachments


def test_a_presigned_upload_is_listed_and_downloaded(world: World) -> None:
    held, _ = _held(world)
    data = b'{"passed": 12}'
    r = held.lease.post(
        f"/leases/{held.id}/attachments",
        json={
            "filename": "results.json",
            "content_type": "application/json",
            "kind": "report",
            "byte_size": len(data),
        },
    )
    assert r.status_code == 201, r.text
    answer = r.json()
    upload = answer["upload"]
    assert upload["method"] == "PUT" and "X-Amz-Signature" in upload["url"]
    att_id = answer["attachment"]["id"]
    assert world.admin.get(f"/leases/{held.id}/attachments").json() == NO_ATTACHMENTS
    put = httpx.put(upload["url"], content=data, headers=upload["headers"], timeout=30)
    assert put.status_code == 200, put.text
    for client in (world.admin, held.lease):
        listed = client.get(f"/leases/{held.id}/attachments").json()["attachments"]
        assert listed == [
            {
                "id": att_id,
                "kind": "report",
                "filename": "results.json",
                "content_type": "application/json",
                "byte_size": len(data),
                "created_at": answer["attachment"]["created_at"],
            }
        ]
    got = world.admin.get(f"/leases/{held.id}/attachments/{att_id}")
    assert got.status_code == 200 and got.content == data
    assert got.headers["content-type"].startswith("application/json")


def test_an_upload_of_another_type_than_declared_is_never_listed(world: World) -> None:
    held, _ = _held(world)
    r = held.lease.post(
        f"/leases/{held.id}/attachments",
        json={"filename": "a.txt", "content_type": "text/plain", "byte_size": 3},
    )
    upload = r.json()["upload"]
    headers = {**upload["headers"], "Content-Type": "image/png"}
    httpx.put(upload["url"], content=b"abc", headers=headers, timeout=30)
    assert world.admin.get(f"/leases/{held.id}/attachments").json() == NO_ATTACHMENTS
    att_id = r.json()["attachment"]["id"]
    assert_error(world.admin.get(f"/leases/{held.id}/attachments/{att_id}"), 404, "not_found")


def test_inline_attachments_and_their_limit(world: World) -> None:
    held, _ = _held(world)
    r = held.lease.post(
        f"/leases/{held.id}/attachments",
        json={
            "filename": "note.txt",
            "content_type": "text/plain",
            "content_base64": base64.b64encode(b"hello").decode(),
        },
    )
    assert r.status_code == 201 and set(r.json()) == {"attachment"}, r.text
    att_id = r.json()["attachment"]["id"]
    got = world.admin.get(f"/leases/{held.id}/attachments/{att_id}")
    assert got.content == b"hello" and got.headers["content-type"].startswith("text/plain")
    binary = bytes(range(256)) * 4  # not UTF-8: once a 500 from the response validation
    r = held.lease.post(
        f"/leases/{held.id}/attachments",
        json={
            "filename": "blob.bin",
            "content_type": "application/octet-stream",
            "content_base64": base64.b64encode(binary).decode(),
        },
    )
    got = world.admin.get(f"/leases/{held.id}/attachments/{r.json()['attachment']['id']}")
    assert got.status_code == 200 and got.content == binary, got.text[:200]
    big = base64.b64encode(b"x" * (1024 * 1024 + 1)).decode()
    r = held.lease.post(
        f"/leases/{held.id}/attachments",
        json={
            "filename": "big.bin",
            "content_type": "application/octet-stream",
            "content_base64": big,
        },
    )
    assert "1 MiB" in assert_error(r, 422, "validation_failed", "content_base64")
    assert_error(world.admin.get(f"/leases/{held.id}/attachments/att_nope"), 404, "not_found")


def test_a_large_attachment_redirects_to_a_presigned_get(world: World) -> None:
    held, _ = _held(world)
    data = bytes(range(256)) * (6 * 1024)  # 1.5 MiB
    r = held.lease.post(
        f"/leases/{held.id}/attachments",
        json={
            "filename": "blob.bin",
            "content_type": "application/octet-stream",
            "byte_size": len(data),
        },
    )
    upload = r.json()["upload"]
    assert (
        httpx.put(upload["url"], content=data, headers=upload["headers"], timeout=60).status_code
        == 200
    )
    att_id = r.json()["attachment"]["id"]
    got = world.admin.get(f"/leases/{held.id}/attachments/{att_id}")
    assert got.status_code == 302, got.text
    fetched = httpx.get(got.headers["location"], timeout=60)
    assert fetched.status_code == 200 and fetched.content == data


def test_a_large_page_is_redirected_to_as_bytes_a_browser_will_not_run(world: World) -> None:
    """Over 1 MiB, a download is a redirect to the bucket, which serves the type the
    redirect names: a page or an image with script in it is named opaque bytes there too, as
    the API serves it inline, and always as an attachment."""
    held, _ = _held(world)
    data = b"<html><script>alert(1)</script>" + b" " * (1536 * 1024) + b"</html>"
    r = held.lease.post(
        f"/leases/{held.id}/attachments",
        json={"filename": "page.html", "content_type": "text/html", "byte_size": len(data)},
    )
    upload = r.json()["upload"]
    put = httpx.put(upload["url"], content=data, headers=upload["headers"], timeout=60)
    assert put.status_code == 200, put.text
    got = world.admin.get(f"/leases/{held.id}/attachments/{r.json()['attachment']['id']}")
    assert got.status_code == 302, got.text
    fetched = httpx.get(got.headers["location"], timeout=60)
    assert fetched.status_code == 200 and fetched.content == data
    assert fetched.headers["content-type"] == "application/octet-stream"
    assert fetched.headers["content-disposition"].startswith("attachment;")


def test_a_presigned_url_opens_its_one_object_and_no_engine(
    world: World, local_stack: LocalStack
) -> None:
    """Whoever holds a presigned URL (a lease token's upload, a reader's download) learns the
    access key id it is signed with, never the secret. With that id alone, DynamoDB Local
    shows no table (no token row to write, no lease to read), moto refuses every call the
    stack did not sign, and the URL bent to another object or another method is refused."""
    held, _ = _held(world)
    r = held.lease.post(
        f"/leases/{held.id}/attachments",
        json={"filename": "a.txt", "content_type": "text/plain", "byte_size": 3},
    )
    upload = r.json()["upload"]
    url = str(upload["url"])
    parts = urlsplit(url)
    key_id = parse_qs(parts.query)["X-Amz-Credential"][0].split("/")[0]
    info = local_stack.info()

    def engine(service: str, endpoint: str, secret: str) -> Any:
        make: Any = boto3.client
        return make(
            service,
            endpoint_url=endpoint,
            region_name="us-east-1",
            aws_access_key_id=key_id,
            aws_secret_access_key=secret,
            config=Config(signature_version="s3v4"),  # presigned as the service presigns
        )

    assert engine("dynamodb", info["dynamodb"]["endpoint"], "x").list_tables()["TableNames"] == []
    for secret in ("local", "anything"):  # the placeholder every earlier release used, a guess
        s3 = engine("s3", info["aws"]["endpoint"], secret)
        with pytest.raises(ClientError) as refused:
            s3.list_buckets()
        assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
        bucket = parts.path.split("/")[1]
        forged = s3.generate_presigned_url("list_objects_v2", Params={"Bucket": bucket})
        assert httpx.get(forged, timeout=30).status_code == 403
    other = url.replace(parts.path, parts.path + "-other", 1)
    sent = {"content": b"abc", "headers": upload["headers"], "timeout": 30}
    assert httpx.put(other, **sent).status_code == 403
    assert httpx.get(url, timeout=30).status_code == 403
    assert httpx.put(url, **sent).status_code == 200


# ----------------------------------------------------------------------- exec target


def test_exec_target_says_where_the_lease_runs_and_nothing_secret(world: World) -> None:
    pool = world.pool()["name"]
    world.task(pool=pool)
    worker = world.api.client(world.worker_token([pool]))
    won = world.claim(worker, pool, worker_id="w-exec", host="build-host-3", worker_version="9.9")
    lease_id = won["lease"]["id"]
    r = world.admin.get(f"/leases/{lease_id}/exec_target")
    assert r.status_code == 200, r.text
    target = r.json()
    assert target["host"] == "build-host-3" and target["worker_id"] == "w-exec"
    assert target["kind"] == "command" and target["pool"] == pool
    assert target["worker_version"] == "9.9" and target["state"] == "dispatched"
    assert won["token"] not in r.text and won["claim_token_hash"] not in r.text
    lease = world.api.client(won["token"])
    assert_error(lease.get(f"/leases/{lease_id}/exec_target"), 403, "lease_token_mismatch")


# ------------------------------------------------------------------------- retention


def test_retention_reclaims_logs_and_attachments_and_keeps_the_lease(
    world: World, local_stack: LocalStack
) -> None:
    held, pool = _held(world, retention_seconds=1)
    held.lease.post(
        f"/leases/{held.id}/logs", json={"events": [{"stream": "stdout", "message": "bye"}]}
    )
    r = held.lease.post(
        f"/leases/{held.id}/attachments",
        json={
            "filename": "o.txt",
            "content_type": "text/plain",
            "content_base64": base64.b64encode(b"out").decode(),
        },
    )
    att_id = r.json()["attachment"]["id"]
    assert held.lease.post(f"/leases/{held.id}/complete").status_code == 200
    resources, s3, logs = _aws(local_stack)
    key = f"leases/{held.id}/{att_id}"
    assert s3.head_object(Bucket=resources["attachments_bucket"], Key=key)

    def reclaimed() -> dict[str, Any] | None:
        lease: dict[str, Any] = world.admin.get(f"/leases/{held.id}").json()
        return lease if lease["reclaimed"] else None

    lease = wait_for(reclaimed, 30, "the sweeper to reclaim the lease")
    assert lease["state"] == "completed" and lease["reclaimed_at"] is not None
    listed = world.admin.get("/leases", params={"space": world.space, "pool": pool}).json()
    assert [x["reclaimed"] for x in listed["leases"] if x["id"] == held.id] == [True]
    assert world.admin.get(f"/leases/{held.id}/attachments").json() == NO_ATTACHMENTS
    assert world.admin.get(f"/leases/{held.id}/logs").json() == {
        "events": [],
        "truncated": False,
        "next_cursor": None,
    }
    events = wait_for_activity(world.admin, held.task["id"], ["lease.completed", "lease.reclaimed"])
    assert [e["type"] for e in events].count("lease.reclaimed") == 1
    objects = s3.list_objects_v2(
        Bucket=resources["attachments_bucket"], Prefix=f"leases/{held.id}/"
    )
    assert objects.get("KeyCount", 0) == 0
    streams = logs.describe_log_streams(
        logGroupName=resources["log_group"], logStreamNamePrefix=f"{held.id}/"
    )
    assert streams["logStreams"] == []
