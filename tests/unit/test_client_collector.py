"""The cyclic collector is paused while a boto3 client is built (the first client is most of a
cold start's CPU after the imports) and resumes as it was."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from tenure import wiring


@pytest.fixture
def collector() -> Iterator[None]:
    running = gc.isenabled()
    yield
    (gc.enable if running else gc.disable)()


def test_a_client_is_built_with_the_collector_paused_and_it_resumes(
    monkeypatch: pytest.MonkeyPatch, collector: None
) -> None:
    seen: list[bool] = []
    real = boto3.client

    def client(*args: Any, **kwargs: Any) -> Any:
        seen.append(gc.isenabled())
        return real(*args, **kwargs)

    monkeypatch.setattr(boto3, "client", client)
    gc.enable()
    made = wiring.dynamodb_client("http://127.0.0.1:1")
    assert made.meta.service_model.service_name == "dynamodb"
    wiring.aws_client("s3")
    assert seen == [False, False]
    assert gc.isenabled()


def test_a_collector_paused_before_stays_paused(collector: None) -> None:
    gc.disable()
    with wiring.collector_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()
    gc.enable()
    with pytest.raises(RuntimeError), wiring.collector_paused():
        raise RuntimeError("a client that failed to build")
    assert gc.isenabled()
