"""Retention on DynamoDB Local for a lease with nothing to delete: it never enters the ended
index, writes nothing when its retention passes, and still reads reclaimed everywhere, with a
`lease.reclaimed` on its task's activity that no row holds. A lease with one log line or one
attachment is reclaimed by the sweeper as before, a table an earlier release migrated
indexes every ending until it is migrated, and a lease that shipped logs under that release
and is still held when the migration runs is marked by it, so its ending is reclaimed."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from typing import Any

import pytest
from tenure import wiring
from tenure.api import app as api
from tenure.app.migrations import DERIVED_RECLAIMS_FROM_SCHEMA, SchemaState, migrate
from tenure.domain.model import DEFAULT_RETENTION_SECONDS, Principal
from tenure.domain.states import SubjectKind
from tenure_cli.local.frontdoor import to_event

from tests.conformance.contract import ALPHA, make_world
from tests.conftest import ADMIN, WORKER, Rig, lease_principal
from tests.unit.fake_artifacts import FakeBlobs, FakeLogSink

PAST_RETENTION_S = DEFAULT_RETENTION_SECONDS + 1


@pytest.fixture
def get(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(wiring, "service", lambda: rig.svc)

    def call(path: str, who: Principal = ADMIN) -> tuple[int, dict[str, Any]]:
        event = to_event("GET", f"/api/v1{path}", {"host": "conformance"}, b"")
        principal = json.dumps(dataclasses.asdict(who))
        event["requestContext"]["authorizer"] = {"lambda": {"principal": principal}}
        out = api.handle(event, None)
        return out["statusCode"], json.loads(out.get("body") or "{}")

    return call


def _ended(rig: Rig, detail: str | None = None) -> tuple[str, str]:
    """File, claim and complete one task's lease; `detail`: first ship a log line ("log") or
    add an attachment ("attachment"). Answers (task id, lease id)."""
    task, _ = rig.svc.filing.create_task(ADMIN, "OPS", "job", None, None, {}, ALPHA, None)
    won = rig.svc.claims.claim(WORKER, ALPHA, "w-1", "1.0", 0, None)
    assert won is not None
    me = lease_principal(won.lease.id)
    if detail == "log":
        line = {"stream": "stdout", "message": "one line"}
        assert rig.svc.logs.post_logs(me, won.lease.id, [line]) == 1
    elif detail == "attachment":
        rig.svc.attachments.add_attachment(
            me, won.lease.id, "o.txt", "text/plain", "file", None, b"bytes"
        )
    rig.svc.reports.complete(me, won.lease.id, {"outcome": "success"})
    rig.pump.drain()
    return task.id, won.lease.id


def _event_rows(rig: Rig, task_id: str) -> Counter[str]:
    """The task's timeline rows as stored (no stamps, nothing derived)."""
    page = rig.store.timeline_page(SubjectKind.TASK, task_id, 100, None)
    return Counter(e.type for e in page.events)


def test_a_lease_with_nothing_to_delete_reads_reclaimed_with_nothing_written(
    rig: Rig, get: Any
) -> None:
    make_world(rig.svc)
    task_id, lease_id = _ended(rig)
    assert not rig.store.get_lease(lease_id).keeps_detail  # type: ignore[union-attr]
    far = rig.clock.now_ms() + 10 * PAST_RETENTION_S * 1000
    assert rig.store.ended_leases(ALPHA, far, 10) == [], "the ending wrote no ended entry"
    status, body = get(f"/leases/{lease_id}")
    assert status == 200 and body["reclaimed"] is False

    rig.clock.advance(PAST_RETENTION_S)
    before = rig.store.get_lease(lease_id)
    assert rig.svc.retention.reclaim_due().leases == []
    assert rig.pump.drain() == 0, "the pass wrote nothing for the stream to carry"
    assert rig.store.get_lease(lease_id) == before, "the row is as it was"
    assert _event_rows(rig, task_id)["lease.reclaimed"] == 0, "no timeline row"

    status, body = get(f"/leases/{lease_id}")
    assert status == 200, body
    lease = body
    assert lease["reclaimed"] is True and lease["reclaimed_at"] is not None
    assert lease["state"] == "completed" and lease["outcome"] == "success"
    listed = get(f"/leases?space=OPS&pool={ALPHA}")[1]["leases"]
    assert [x["reclaimed"] for x in listed if x["id"] == lease_id] == [True]
    events = get(f"/tasks/{task_id}/activity")[1]["events"]
    types = [e["type"] for e in events]
    assert types[-2:] == ["lease.completed", "lease.reclaimed"], types
    assert events[-1]["at"] == lease["reclaimed_at"]
    assert get(f"/leases/{lease_id}/attachments")[1]["attachments"] == []


@pytest.mark.parametrize("detail", ["log", "attachment"])
def test_a_lease_with_one_log_line_or_attachment_is_reclaimed_as_before(
    rig: Rig, get: Any, detail: str
) -> None:
    blobs, sink = FakeBlobs(), FakeLogSink()
    rig.svc.artifacts.blobs, rig.svc.artifacts.log_sink = blobs, sink
    make_world(rig.svc)
    task_id, lease_id = _ended(rig, detail)
    assert rig.store.get_lease(lease_id).keeps_detail  # type: ignore[union-attr]
    rig.clock.advance(PAST_RETENTION_S)
    assert rig.svc.retention.reclaim_due().leases == [lease_id]
    rig.pump.drain()
    assert blobs.objects == {} and sink.streams == {}
    assert _event_rows(rig, task_id)["lease.reclaimed"] == 1, "one row, as before"
    assert rig.store.ended_leases(ALPHA, rig.clock.now_ms(), 10) == []
    lease = get(f"/leases/{lease_id}")[1]
    assert lease["reclaimed"] is True
    types = [e["type"] for e in get(f"/tasks/{task_id}/activity")[1]["events"]]
    assert types.count("lease.reclaimed") == 1


def test_a_log_shipped_after_the_end_is_still_reclaimed(rig: Rig) -> None:
    sink = FakeLogSink()
    rig.svc.artifacts.log_sink = sink
    make_world(rig.svc)
    _, lease_id = _ended(rig)
    rig.clock.advance(60)  # within the lease token's grace for shipping after its end
    line = {"stream": "stderr", "message": "shipped late"}
    assert rig.svc.logs.post_logs(lease_principal(lease_id), lease_id, [line]) == 1
    assert rig.store.ended_leases(ALPHA, rig.clock.now_ms(), 10) == [lease_id]
    rig.clock.advance(PAST_RETENTION_S)
    assert rig.svc.retention.reclaim_due().leases == [lease_id]
    assert sink.streams == {}


def test_a_table_an_earlier_release_migrated_indexes_every_ending(rig: Rig) -> None:
    """Below the version an earlier release may still be serving: its sweeper finds leases
    only in the ended index, and its views read reclaimed only off the sweeper's mark."""
    state = rig.store.schema_state()
    older = SchemaState(version=DERIVED_RECLAIMS_FROM_SCHEMA - 1, step=state.step + 1)
    assert rig.store.save_schema(state, older)
    make_world(rig.svc)
    task_id, lease_id = _ended(rig)
    assert rig.store.get_lease(lease_id).keeps_detail  # type: ignore[union-attr]
    assert rig.store.ended_leases(ALPHA, rig.clock.now_ms(), 10) == [lease_id]
    rig.clock.advance(PAST_RETENTION_S)
    assert rig.svc.retention.reclaim_due().leases == [lease_id]
    rig.pump.drain()
    assert _event_rows(rig, task_id)["lease.reclaimed"] == 1


def test_a_lease_held_through_the_migration_keeps_its_logs_reclaim(rig: Rig) -> None:
    """A lease that shipped a log line under an earlier release (which marked a lease only at
    its ending) and is still held when the data reaches the version: the migration marks it,
    so its ending puts it in the ended index and the sweeper deletes its logs."""
    sink = FakeLogSink()
    rig.svc.artifacts.log_sink = sink
    state = rig.store.schema_state()
    older = SchemaState(version=DERIVED_RECLAIMS_FROM_SCHEMA - 1, step=state.step + 1)
    assert rig.store.save_schema(state, older)
    make_world(rig.svc)
    task, _ = rig.svc.filing.create_task(ADMIN, "OPS", "job", None, None, {}, ALPHA, None)
    won = rig.svc.claims.claim(WORKER, ALPHA, "w-1", "1.0", 0, None)
    assert won is not None
    me = lease_principal(won.lease.id)
    line = {"stream": "stdout", "message": "one line"}
    assert rig.svc.logs.post_logs(me, won.lease.id, [line]) == 1
    rig.store.unindex_ended(won.lease.id)  # the row as the earlier release left it
    assert not rig.store.get_lease(won.lease.id).keeps_detail  # type: ignore[union-attr]
    assert sink.streams, "the line is stored"

    dry = [o for o in migrate(rig.store, dry_run=True) if o.name == "derived-reclaims"]
    assert [o.counts for o in dry] == [{"held_leases": 1, "already_marked": 0, "would_mark": 1}]
    [ran] = [o for o in migrate(rig.store) if o.name == "derived-reclaims"]
    assert (ran.status, ran.counts) == (
        "applied",
        {"held_leases": 1, "already_marked": 0, "marked": 1},
    )
    assert rig.store.schema_state().version >= DERIVED_RECLAIMS_FROM_SCHEMA
    held = rig.store.get_lease(won.lease.id)
    assert held is not None and held.keeps_detail and held.version == won.lease.version

    rig.svc.reports.complete(me, won.lease.id, {"outcome": "success"})
    rig.pump.drain()
    assert rig.store.ended_leases(ALPHA, rig.clock.now_ms(), 10) == [won.lease.id]
    rig.clock.advance(PAST_RETENTION_S)
    assert rig.svc.retention.reclaim_due().leases == [won.lease.id]
    rig.pump.drain()
    assert sink.streams == {}, "the logs are deleted"
    assert _event_rows(rig, task.id)["lease.reclaimed"] == 1
