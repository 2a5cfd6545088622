"""The local stack's engine key: moto's server (behind KeyedApp) answers only calls whose SigV4
signature, in the header or in a presigned URL, is the key's, recomputed over the request as
it arrived. An access key id alone opens nothing: presigned URLs name one to whoever holds
them. Every other call is a 403 in the shape its client parses, and never reaches moto."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import boto3
import httpx
import pytest
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials
from botocore.exceptions import ClientError
from tenure_cli.local.engine_key import EngineKey, KeyedApp
from tenure_cli.local.engines import MotoServer

KEY = EngineKey.new()
BUCKET = "kept"


@pytest.fixture(scope="module")
def server() -> Iterator[MotoServer]:
    started = MotoServer(key=KEY).start()
    try:
        s3(started, KEY.access_key_id).create_bucket(Bucket=BUCKET)
        s3(started, KEY.access_key_id).put_object(Bucket=BUCKET, Key="a", Body=b"payload")
        yield started
    finally:
        started.stop()


def s3(server: MotoServer, key_id: str, secret: str = KEY.secret, signing: str = "s3v4") -> Any:
    make: Any = boto3.client
    return make(
        "s3",
        endpoint_url=server.endpoint,
        region_name="us-east-1",
        aws_access_key_id=key_id,
        aws_secret_access_key=secret,
        config=Config(signature_version=signing, s3={"addressing_style": "path"}),
    )


def client(server: MotoServer, service: str, key_id: str, secret: str = KEY.secret) -> Any:
    make: Any = boto3.client
    return make(
        service,
        endpoint_url=server.endpoint,
        region_name="us-east-1",
        aws_access_key_id=key_id,
        aws_secret_access_key=secret,
    )


def _refused(call: Any) -> dict[str, Any]:
    with pytest.raises(ClientError) as refused:
        call()
    response: dict[str, Any] = refused.value.response
    assert response["ResponseMetadata"]["HTTPStatusCode"] == 403
    return response


@pytest.mark.parametrize("key_id", [KEY.access_key_id, KEY.url_key_id], ids=["own", "url"])
def test_calls_signed_with_either_id_of_the_key_are_served(server: MotoServer, key_id: str) -> None:
    got = s3(server, key_id).get_object(Bucket=BUCKET, Key="a")
    assert got["Body"].read() == b"payload"
    s3(server, key_id).put_object(Bucket=BUCKET, Key=f"by-{key_id}", Body=b"x" * 70_000)
    url = s3(server, key_id).generate_presigned_url(
        "get_object", Params={"Bucket": BUCKET, "Key": "a"}
    )
    assert httpx.get(url).content == b"payload"


def test_json_and_query_protocol_calls_are_checked_over_their_body(server: MotoServer) -> None:
    """SQS, Logs and SNS sign the hash of a body they send without naming it in a header: the
    door hashes the body itself, and hands moto the same bytes."""
    sqs = client(server, "sqs", KEY.access_key_id)
    queue = sqs.create_queue(QueueName="door")["QueueUrl"]
    sqs.send_message(QueueUrl=queue, MessageBody="é" * 1000)
    got = sqs.receive_message(QueueUrl=queue)["Messages"][0]["Body"]
    assert got == "é" * 1000
    logs = client(server, "logs", KEY.access_key_id)
    logs.create_log_group(logGroupName="door")
    assert [g["logGroupName"] for g in logs.describe_log_groups()["logGroups"]] == ["door"]
    assert client(server, "sns", KEY.access_key_id).create_topic(Name="door")["TopicArn"]


@pytest.mark.parametrize(
    ("key_id", "secret"),
    [
        (KEY.access_key_id, "local"),  # the placeholder earlier releases signed with
        (KEY.url_key_id, "anything"),
        ("AKIAIOSFODNN7EXAMPLE", KEY.secret),  # the secret with another id
        (KEY.access_key_id[:-1], KEY.secret),
    ],
    ids=["own id, old placeholder", "url id, a guess", "another id", "a prefix"],
)
def test_an_id_without_the_secret_is_refused_every_way(
    server: MotoServer, key_id: str, secret: str
) -> None:
    assert _refused(lambda: s3(server, key_id, secret).list_buckets())["Error"]["Code"] == (
        "InvalidAccessKeyId"
    )
    url = s3(server, key_id, secret).generate_presigned_url(
        "get_object", Params={"Bucket": BUCKET, "Key": "a"}
    )
    assert httpx.get(url).status_code == 403
    logs = client(server, "logs", key_id, secret)
    refused = _refused(logs.describe_log_groups)
    assert refused["Error"]["Code"] == "UnrecognizedClientException"


def test_a_presigned_url_opens_its_one_object_with_its_one_method(server: MotoServer) -> None:
    signer = s3(server, KEY.url_key_id)
    url = signer.generate_presigned_url("get_object", Params={"Bucket": BUCKET, "Key": "a"})
    assert httpx.get(url).status_code == 200
    bent = {
        "another object": url.replace(f"/{BUCKET}/a?", f"/{BUCKET}/b?"),
        "the bucket's listing": url.replace(f"/{BUCKET}/a?", f"/{BUCKET}?"),
        "a parameter added": url + "&response-content-type=text%2Fhtml",
        "a parameter dropped": url.replace("X-Amz-Expires=3600&", ""),
        "a longer life": url.replace("X-Amz-Expires=3600", "X-Amz-Expires=604800"),
        "no signature": url.split("&X-Amz-Signature=")[0],
    }
    for what, wrong in bent.items():
        assert httpx.get(wrong).status_code == 403, what
    assert httpx.put(url, content=b"overwritten").status_code == 403
    assert httpx.delete(url).status_code == 403
    assert s3(server, KEY.access_key_id).get_object(Bucket=BUCKET, Key="a")["Body"].read() == (
        b"payload"
    )


def test_a_presigned_url_is_refused_once_it_expires(server: MotoServer) -> None:
    url = s3(server, KEY.url_key_id).generate_presigned_url(
        "get_object", Params={"Bucket": BUCKET, "Key": "a"}, ExpiresIn=1
    )
    assert httpx.get(url).status_code == 200
    time.sleep(2.1)
    assert httpx.get(url).status_code == 403


def test_older_signatures_and_no_signature_are_refused(server: MotoServer) -> None:
    older: Any = s3(server, KEY.access_key_id, signing="s3")
    assert _refused(older.list_buckets)
    url = older.generate_presigned_url("get_object", Params={"Bucket": BUCKET, "Key": "a"})
    assert "AWSAccessKeyId" in url and httpx.get(url).status_code == 403
    assert httpx.get(f"{server.endpoint}/{BUCKET}/a").status_code == 403
    for header in (f"Bearer {KEY.secret}", f"AWS {KEY.access_key_id}:c2lnbmF0dXJl"):
        answer = httpx.get(f"{server.endpoint}/{BUCKET}/a", headers={"Authorization": header})
        assert answer.status_code == 403
        assert KEY.secret.encode() not in answer.content


def _door(environ: dict[str, Any]) -> tuple[str, dict[str, str], bytes]:
    seen: dict[str, Any] = {}

    def inner(env: dict[str, Any], start_response: Any) -> list[bytes]:
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"served"]

    def start_response(status: str, headers: list[tuple[str, str]]) -> None:
        seen["status"], seen["headers"] = status, dict(headers)

    body = b"".join(KeyedApp(inner, KEY)({"REQUEST_METHOD": "GET", **environ}, start_response))
    return seen["status"], seen["headers"], body


def test_a_preflight_never_reaches_the_app_and_a_bare_options_is_refused() -> None:
    preflight = {"REQUEST_METHOD": "OPTIONS", "HTTP_ACCESS_CONTROL_REQUEST_METHOD": "GET"}
    status, headers, body = _door(preflight)
    assert status == "200 OK" and body == b""
    status, headers, body = _door({"REQUEST_METHOD": "OPTIONS"})
    assert status == "403 Forbidden" and body != b"served"
    assert b"InvalidAccessKeyId" in body and headers["Content-Type"] == "application/xml"


def test_a_json_protocol_call_is_refused_in_json() -> None:
    status, headers, body = _door(
        {"HTTP_X_AMZ_TARGET": "Logs_20140328.DescribeLogGroups", "CONTENT_TYPE": "x"}
    )
    assert status == "403 Forbidden" and headers["Content-Type"] == "application/x-amz-json-1.1"
    assert json.loads(body)["__type"] == "UnrecognizedClientException"


def test_keys_are_new_each_time_kept_whole_and_never_shown() -> None:
    keys = [EngineKey.new() for _ in range(50)]
    assert len({k.access_key_id for k in keys} | {k.url_key_id for k in keys}) == 100
    assert all(EngineKey.loads(k.dumps()) == k for k in keys)
    assert all(k.secret not in repr(k) for k in keys)
    torn = json.loads(KEY.dumps())
    for broken in ({**torn, "secret": "short"}, {**torn, "url_key_id": KEY.access_key_id}, {}):
        assert EngineKey.loads(json.dumps(broken)) is None
    assert EngineKey.loads(KEY.access_key_id) is None  # an earlier release's bare id


# ----------------------------------------------------------- what the door must not pass on


def _preflight(server: MotoServer, path: str, **headers: str) -> httpx.Response:
    sent = {"Access-Control-Request-Method": "GET", "Origin": "http://elsewhere", **headers}
    return httpx.request("OPTIONS", f"{server.endpoint}{path}", headers=sent)


def test_a_preflight_is_answered_by_the_door_and_never_runs_in_moto(server: MotoServer) -> None:
    """moto serves OPTIONS like any method: a preflight handed to it ran its admin routes
    (a dump of every object and log line, the recorder of the stack's own signed calls) and,
    named by an unchecked header, Logs and SQS actions. The door answers a preflight itself,
    as the attachments bucket's CORS rule does: GET from any origin."""
    for path in ("/moto-api/data.json", "/moto-api/recorder/start-recording", "/"):
        answer = _preflight(server, path)
        assert answer.status_code == 200 and answer.content == b"", path
        assert answer.headers["access-control-allow-origin"] == "*"
        assert answer.headers["access-control-allow-methods"] == "GET"
    forged = {
        "X-Amz-Target": "Logs_20140328.CreateLogGroup",
        "Content-Type": "application/x-amz-json-1.1",
        "Authorization": "AWS4-HMAC-SHA256 Credential=x/20260101/us-east-1/logs/aws4_request",
        "Access-Control-Request-Method": "GET",
    }
    logs = httpx.request(
        "OPTIONS", f"{server.endpoint}/", headers=forged, content=b'{"logGroupName": "attacker"}'
    )
    assert logs.status_code == 200 and logs.content == b""
    groups = client(server, "logs", KEY.access_key_id).describe_log_groups()["logGroups"]
    assert "attacker" not in [g["logGroupName"] for g in groups]
    for asked in (
        {"Access-Control-Request-Method": "PUT"},
        {"Access-Control-Request-Headers": "x"},
    ):
        assert _preflight(server, f"/{BUCKET}/a", **asked).status_code == 403, asked


def _signed(server: MotoServer, path: str, offset_s: int = 0) -> int:
    """A GET of `path` signed with the stack's own key (SigV4, as S3), dated `offset_s` from
    now: the status the door and moto answer."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(time.time() + offset_s))
    request = AWSRequest(method="GET", url=f"{server.endpoint}{path}")
    request.context["timestamp"] = stamp
    request.headers["X-Amz-Date"] = stamp
    request.headers["X-Amz-Content-SHA256"] = "UNSIGNED-PAYLOAD"
    signer = S3SigV4Auth(Credentials(KEY.access_key_id, KEY.secret), "s3", "us-east-1")
    canonical = signer.canonical_request(request)
    signature = signer.signature(signer.string_to_sign(request, canonical), request)
    names = signer.signed_headers(signer.headers_to_sign(request))
    scope = f"{KEY.access_key_id}/{stamp[:8]}/us-east-1/s3/aws4_request"
    request.headers["Authorization"] = (
        f"AWS4-HMAC-SHA256 Credential={scope}, SignedHeaders={names}, Signature={signature}"
    )
    return httpx.get(str(request.url), headers=dict(request.headers.items())).status_code


def test_moto_admin_routes_are_refused_even_signed(server: MotoServer) -> None:
    assert _signed(server, f"/{BUCKET}/a") == 200
    for path in ("/moto-api/data.json", "/moto-api/reset", "/moto-api/recorder/start-recording"):
        assert _signed(server, path) == 403, path


def test_a_presigned_url_carries_no_header_it_did_not_sign(server: MotoServer) -> None:
    """An x-amz-* header moto acts on (a copy source, a storage class) or an Authorization
    header moto routes by, sent beside a presigned URL's query, would change what the URL
    does: refused, as S3 refuses headers present but not signed. So is a chunked body, which
    would pass the signed length."""
    signer = s3(server, KEY.url_key_id)
    url = signer.generate_presigned_url(
        "put_object", Params={"Bucket": BUCKET, "Key": "up", "ContentLength": 3}, HttpMethod="PUT"
    )
    assert httpx.put(url, content=b"abc").status_code == 200
    copy = {"x-amz-copy-source": f"/{BUCKET}/a", "x-amz-metadata-directive": "REPLACE"}
    assert httpx.put(url, content=b"abc", headers=copy).status_code == 403
    routed = {
        "Authorization": "AWS4-HMAC-SHA256 Credential=x/20260101/us-east-1/monitoring/aws4_request"
    }
    assert httpx.put(url, content=b"abc", headers=routed).status_code == 403

    parts = urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as raw:
        raw.sendall(
            f"PUT {parts.path}?{parts.query} HTTP/1.1\r\nHost: {parts.netloc}\r\n"
            "Content-Length: 3\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
            "a\r\nabcdefghij\r\n0\r\n\r\n".encode()
        )
        status = raw.recv(64).split(b" ")[1]
    assert status in (b"400", b"403"), status
    got = s3(server, KEY.access_key_id).get_object(Bucket=BUCKET, Key="up")["Body"].read()
    assert got == b"abc"
    assert s3(server, KEY.access_key_id).get_object(Bucket=BUCKET, Key="a")["Body"].read() == (
        b"payload"
    )


def test_a_signed_call_is_good_for_fifteen_minutes_around_its_date(server: MotoServer) -> None:
    """As AWS holds a signature to its X-Amz-Date: a call captured and sent again later is
    refused (nobody else sees the stack's calls on loopback, but nothing rests on that)."""
    path = f"/{BUCKET}/a"
    assert [_signed(server, path, offset) for offset in (0, -600, 600)] == [200, 200, 200]
    assert [_signed(server, path, offset) for offset in (-1200, 1200)] == [403, 403]


def _raw_put(server: MotoServer, target: str, body: bytes = b"abc") -> bytes:
    """The status of a PUT sent with `target` on its request line as is."""
    host = server.endpoint.split("//")[1]
    head = f"PUT {target} HTTP/1.1\r\nHost: {host}\r\nContent-Length: {len(body)}\r\n"
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as raw:
        raw.sendall(head.encode() + b"Connection: close\r\n\r\n" + body)
        return raw.recv(64).split(b" ")[1]


def test_the_path_moto_serves_is_the_path_that_was_signed(server: MotoServer) -> None:
    """A request target that does not start with `/` once passed: the door read its prefix as
    part of the host and checked the signed path, while moto served the whole target (another
    bucket, another service, moto's admin app). The target must start with `/`, and the path
    moto decodes must be the one the signature covers."""
    s3(server, KEY.access_key_id).create_bucket(Bucket="other")
    url = s3(server, KEY.url_key_id).generate_presigned_url(
        "put_object", Params={"Bucket": BUCKET, "Key": "mine", "ContentLength": 3}, HttpMethod="PUT"
    )
    parts = urlsplit(url)
    target = f"{parts.path}?{parts.query}"
    for prefix in ("other", "Zmonitoring_us-east-1", "%2Fmoto-apiZ", "/other/.."):
        assert _raw_put(server, prefix + target) == b"403", prefix
    assert _raw_put(server, f"http://{parts.netloc}{target}") == b"403"
    listed = s3(server, KEY.access_key_id).list_objects_v2(Bucket="other")
    assert listed.get("KeyCount", 0) == 0
    assert _raw_put(server, target) == b"200"


def test_a_presigned_request_carries_no_body_moto_would_read_as_parameters(
    server: MotoServer,
) -> None:
    """moto reads a form body as the request's parameters, in place of the signed query: a
    download URL's GET with `response-content-type=text/html` in its body was served as a
    page, and an upload of a form body set the object's type and metadata. A presigned GET,
    HEAD or DELETE carries no body, and no presigned request a form."""
    download = s3(server, KEY.url_key_id).generate_presigned_url(
        "get_object",
        Params={"Bucket": BUCKET, "Key": "a", "ResponseContentType": "application/octet-stream"},
    )
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    smuggled = b"response-content-type=text%2Fhtml&response-content-disposition=inline"
    assert httpx.request("GET", download, content=smuggled, headers=form).status_code == 403
    assert httpx.request("GET", download, content=b"x").status_code == 403
    assert httpx.get(download).headers["content-type"] == "application/octet-stream"
    for kind in ("application/x-www-form-urlencoded", "multipart/form-data; boundary=b"):
        upload = s3(server, KEY.url_key_id).generate_presigned_url(
            "put_object",
            Params={"Bucket": BUCKET, "Key": "form", "ContentType": kind},
            HttpMethod="PUT",
        )
        sent = httpx.put(upload, content=b"x-amz-meta-owner=admin", headers={"Content-Type": kind})
        assert sent.status_code == 403, kind
