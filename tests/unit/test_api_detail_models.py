"""The request bodies of a lease's detail: what a batch of logs and an attachment may carry."""

from __future__ import annotations

import pytest
from pydantic import ValidationError
from tenure.api import models as m
from tenure.api.errors import describe_validation
from tenure.app.artifacts import logs
from tenure.domain import errors as e


def _refusal(model: type[m.Strict], body: dict[str, object]) -> str:
    with pytest.raises(ValidationError) as err:
        model.model_validate(body)
    refused = describe_validation(
        [{**x, "loc": ("body", *x["loc"])} for x in err.value.errors()]  # type: ignore[typeddict-item]
    )
    assert isinstance(refused, e.ValidationFailed)
    return refused.message


def test_a_batch_holds_at_most_1000_events_and_256_kb() -> None:
    one = {"stream": "stdout", "message": "x"}
    assert "events" in _refusal(m.LogBatch, {"events": [one] * 1001})
    big = {"stream": "stdout", "message": "x" * (200 * 1024)}
    assert "256 KB" in _refusal(m.LogBatch, {"events": [big, big]})
    assert "events" in _refusal(m.LogBatch, {"events": []})


def test_a_batch_names_at_most_8_containers_however_many_events_it_holds() -> None:
    # Each container is a log stream: one request may not make hundreds of them.
    nine = [{"stream": "stdout", "message": "x", "container": f"c{i}"} for i in range(9)]
    refused = _refusal(m.LogBatch, {"events": nine})
    assert refused.startswith("events: ") and "9 containers" in refused and "8" in refused
    eight = m.LogBatch.model_validate({"events": nine[:8] * 100})  # a name counts once
    assert len(eight.events) == 800
    assert m.MAX_BATCH_CONTAINERS == logs.MAX_BATCH_CONTAINERS  # the service holds it too


def test_an_event_names_its_stream_and_may_give_its_time_either_way() -> None:
    assert "stream" in _refusal(m.LogEventIn, {"stream": "stdlog", "message": "x"})
    iso = m.LogEventIn.model_validate(
        {"stream": "stdout", "message": "x", "timestamp": "2026-01-01T00:00:01Z"}
    )
    assert iso.timestamp == 1_767_225_601_000 and iso.container == "main"
    ms = m.LogEventIn.model_validate({"stream": "stderr", "message": "x", "timestamp": 5})
    assert ms.timestamp == 5
    assert "timestamp" in _refusal(
        m.LogEventIn, {"stream": "stdout", "message": "x", "timestamp": "soon"}
    )
    assert "container" in _refusal(
        m.LogEventIn, {"stream": "stdout", "message": "x", "container": "../etc"}
    )


def test_an_attachment_declares_a_sane_name_and_type() -> None:
    ok = {"filename": "out.txt", "content_type": "text/plain; charset=utf-8", "byte_size": 1}
    assert m.AttachmentCreate.model_validate(ok).kind == "file"
    assert "filename" in _refusal(m.AttachmentCreate, {**ok, "filename": "a/b"})
    assert "content_type" in _refusal(m.AttachmentCreate, {**ok, "content_type": "text"})
    assert "byte_size" in _refusal(m.AttachmentCreate, {**ok, "byte_size": -1})


def test_pools_keep_logs_for_thirty_days_unless_told_otherwise() -> None:
    pool = m.PoolCreate.model_validate({"name": "p", "space": "OPS", "kind": "command"})
    assert pool.keeps_logs is True and pool.retention_seconds == 2_592_000
    body = {"name": "p", "space": "OPS", "kind": "command", "retention_seconds": 0}
    assert "retention_seconds" in _refusal(m.PoolCreate, body)
