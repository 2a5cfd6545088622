"""Where `tenure worker run` and a job's own commands find the worker endpoint: the option, the
variables, then the local stack's stack.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tenure_cli.commands.worker import worker_endpoints
from tenure_cli.common import UsageError, lease_client

STACK = {"api": "http://127.0.0.1:8787/api/v1", "worker_api": "http://127.0.0.1:40111/api/v1"}


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("TENURE_API", "TENURE_WORKER_API"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "stack.json").write_text(json.dumps(STACK))
    return tmp_path


def test_with_nothing_given_the_worker_claims_on_the_stack_s_worker_endpoint(
    data_dir: Path,
) -> None:
    # Its jobs are given the stack's API for the routes the worker endpoint does not serve.
    assert worker_endpoints(None, data_dir) == (STACK["worker_api"], STACK["api"])


def test_the_option_then_the_variables_come_before_stack_json(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TENURE_API", "https://api.example")
    assert worker_endpoints(None, data_dir) == ("https://api.example", "https://api.example")
    monkeypatch.setenv("TENURE_WORKER_API", "https://url.example/api/v1")
    assert worker_endpoints(None, data_dir) == ("https://url.example/api/v1", "https://api.example")
    assert worker_endpoints("https://given", data_dir) == ("https://given", "https://api.example")


def test_a_stack_json_without_a_worker_endpoint_gives_its_api(tmp_path: Path) -> None:
    (tmp_path / "stack.json").write_text(json.dumps({"api": STACK["api"]}))
    assert worker_endpoints(None, tmp_path) == (STACK["api"], None)


def test_no_address_anywhere_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("TENURE_API", "TENURE_WORKER_API"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "stack.json").write_text("not json")
    with pytest.raises(UsageError, match="--api"):
        worker_endpoints(None, tmp_path)


def test_a_job_reports_on_the_worker_endpoint_and_files_work_on_the_api(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TENURE_API", "http://api.example")
    monkeypatch.setenv("TENURE_WORKER_API", "http://url.example")
    monkeypatch.setenv("TENURE_LEASE_ID", "lease_1")
    monkeypatch.setenv("TENURE_LEASE_TOKEN", "tnr_l_lease_1.s")
    assert lease_client()[0].base == "http://url.example/api/v1"
    assert lease_client(worker_routes=False)[0].base == "http://api.example/api/v1"
    monkeypatch.delenv("TENURE_WORKER_API")
    assert lease_client()[0].base == "http://api.example/api/v1"
