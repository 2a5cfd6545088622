"""The local stack's engine key: moto's server (KeyedApp) answers calls made with the stack's
access key id alone, whether the key is in a signature's header or in a presigned URL; every
other call is a 403 in the shape its client parses."""

from __future__ import annotations

import json
from typing import Any

import boto3
import httpx
import pytest
from botocore.exceptions import ClientError
from tenure_cli.local.engines import ENGINE_KEY_SHAPE, KeyedApp, MotoServer, new_engine_key

KEY = new_engine_key()


def _served(environ: dict[str, Any]) -> tuple[str, dict[str, str], bytes]:
    seen: dict[str, Any] = {}

    def inner(env: dict[str, Any], start_response: Any) -> list[bytes]:
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"served"]

    def start_response(status: str, headers: list[tuple[str, str]]) -> None:
        seen["status"], seen["headers"] = status, dict(headers)

    body = b"".join(KeyedApp(inner, KEY)({"REQUEST_METHOD": "GET", **environ}, start_response))
    return seen["status"], seen["headers"], body


V4 = f"AWS4-HMAC-SHA256 Credential={KEY}/20261207/us-east-1/s3/aws4_request, SignedHeaders=host"


@pytest.mark.parametrize(
    "environ",
    [
        {"HTTP_AUTHORIZATION": V4},
        {"HTTP_AUTHORIZATION": f"AWS {KEY}:c2lnbmF0dXJl"},
        {"QUERY_STRING": f"X-Amz-Credential={KEY}%2F20261207%2Fus-east-1%2Fs3%2Faws4_request"},
        {"QUERY_STRING": f"AWSAccessKeyId={KEY}&Signature=x&Expires=1"},
        {"REQUEST_METHOD": "OPTIONS", "HTTP_ACCESS_CONTROL_REQUEST_METHOD": "PUT"},
    ],
    ids=["signed", "signed the older way", "presigned", "presigned the older way", "preflight"],
)
def test_a_call_with_the_stacks_key_is_served(environ: dict[str, Any]) -> None:
    assert _served(environ)[0] == "200 OK"


@pytest.mark.parametrize(
    "environ",
    [
        {},
        {"HTTP_AUTHORIZATION": V4.replace(KEY, "tenure")},
        {"HTTP_AUTHORIZATION": V4.replace(KEY, KEY[:-1])},
        {"HTTP_AUTHORIZATION": V4.replace(KEY, KEY + "0")},
        {"QUERY_STRING": "X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20261207"},
        {"REQUEST_METHOD": "OPTIONS"},
        {"HTTP_AUTHORIZATION": "Bearer " + KEY},
    ],
    ids=[
        "unsigned",
        "another key",
        "a prefix",
        "longer",
        "presigned by another",
        "bare OPTIONS",
        "not a signature",
    ],
)
def test_any_other_call_is_refused_and_never_reaches_moto(environ: dict[str, Any]) -> None:
    status, headers, body = _served(environ)
    assert status == "403 Forbidden" and body != b"served"
    assert b"InvalidAccessKeyId" in body and headers["Content-Type"] == "application/xml"
    assert KEY.encode() not in body


def test_a_json_protocol_call_is_refused_in_json() -> None:
    status, headers, body = _served(
        {"HTTP_X_AMZ_TARGET": "Logs_20140328.DescribeLogGroups", "CONTENT_TYPE": "x"}
    )
    assert status == "403 Forbidden" and headers["Content-Type"] == "application/x-amz-json-1.1"
    assert json.loads(body)["__type"] == "UnrecognizedClientException"


def test_keys_are_new_each_time_and_of_one_shape() -> None:
    keys = {new_engine_key() for _ in range(50)}
    assert len(keys) == 50 and all(ENGINE_KEY_SHAPE.fullmatch(k) for k in keys)


def test_the_server_with_a_key_refuses_the_sdk_with_another_and_serves_its_own() -> None:
    server = MotoServer(key=KEY).start()
    try:

        def s3(key: str) -> Any:
            make: Any = boto3.client
            return make(
                "s3",
                endpoint_url=server.endpoint,
                region_name="us-east-1",
                aws_access_key_id=key,
                aws_secret_access_key="anything",
            )

        s3(KEY).create_bucket(Bucket="kept")
        s3(KEY).put_object(Bucket="kept", Key="a", Body=b"payload")
        with pytest.raises(ClientError) as refused:
            s3("tenure").get_object(Bucket="kept", Key="a")
        assert refused.value.response["Error"]["Code"] == "InvalidAccessKeyId"
        url = s3(KEY).generate_presigned_url("get_object", Params={"Bucket": "kept", "Key": "a"})
        assert httpx.get(url).content == b"payload"
        assert httpx.get(url.replace(KEY, "AKIAIOSFODNN7EXAMPLE")).status_code == 403
        assert httpx.get(f"{server.endpoint}/kept/a").status_code == 403
    finally:
        server.stop()
