"""The local stack's test-only fault hooks (tenure_cli.local.faults) do what the runs rely on."""

from __future__ import annotations

import json
from pathlib import Path

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError, EndpointConnectionError
from tenure import wiring
from tenure.config import local_settings
from tenure.domain.errors import Unavailable
from tenure.store.calls import TRIES, Retry
from tenure_cli.local.faults import FaultFile, hook_faults, install_throttle


def _client() -> object:
    # Nothing listens on port 9: a call that got past the hook could not be answered at all.
    return boto3.client(
        "dynamodb",
        region_name="us-east-1",
        endpoint_url="http://127.0.0.1:9",
        aws_access_key_id="x",
        aws_secret_access_key="x",
        config=Config(retries={"total_max_attempts": 1, "mode": "standard"}, connect_timeout=1),
    )


def test_a_throttled_call_surfaces_as_unavailable_after_the_bounded_retries(tmp_path: Path) -> None:
    path = tmp_path / "faults.json"
    path.write_text(json.dumps({"throttle": 1.0}))
    client = _client()
    install_throttle(client, FaultFile(str(path)))
    retry = Retry(sleep=lambda _: None)
    with pytest.raises(Unavailable):
        retry.call("GetItem", client.get_item, {"TableName": "t", "Key": {"PK": {"S": "a"}}})  # type: ignore[attr-defined]
    # Each try was answered by the hook (never sent), and counted.
    assert (tmp_path / "faults.json.throttled").stat().st_size == TRIES


def test_no_throttle_share_lets_every_call_through(tmp_path: Path) -> None:
    path = tmp_path / "faults.json"
    path.write_text(json.dumps({"throttle": 0.0, "sweeper_paused": True}))
    faults = FaultFile(str(path))
    assert not any(faults.throttles_now() for _ in range(200))
    assert faults.sweeper_paused()
    path.write_text(json.dumps({"throttle": 0.5}))
    hits = sum(faults.throttles_now() for _ in range(400))
    assert 120 < hits < 280 and not faults.sweeper_paused()


def test_the_hook_is_installed_only_when_the_stack_is_started_for_tests(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "faults.json"
    path.write_text(json.dumps({"throttle": 1.0}))
    key = {"TableName": "t", "Key": {"PK": {"S": "a"}}}
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "x")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "x")
    monkeypatch.delenv("TENURE_TEST_FAULTS_FILE", raising=False)
    monkeypatch.setattr(wiring, "DYNAMODB_CLIENT_HOOKS", [])
    assert local_settings().test_faults_file is None
    with pytest.raises(EndpointConnectionError):  # sent: nothing hooked it
        wiring.dynamodb_client("http://127.0.0.1:9").get_item(**key)
    hook_faults(str(path))  # what the stack's start does when the variable names a file
    with pytest.raises(ClientError) as throttled:
        wiring.dynamodb_client("http://127.0.0.1:9").get_item(**key)
    assert throttled.value.response["Error"]["Code"] == "ProvisionedThroughputExceededException"
