"""A lease's detail in the core: logs, attachments, runtime coordinates and retention reclaim,
on the fake store with the in-memory bucket and log group."""

from __future__ import annotations

from dataclasses import replace

import pytest
from tenure.app.artifacts import logs
from tenure.app.artifacts.attachments import (
    ATTACHMENTS_PER_LEASE,
    MAX_INLINE_BYTES,
    SERVE_INLINE_BYTES,
    UPLOAD_EXPIRES_S,
    upload_key,
)
from tenure.app.artifacts.logs import MAX_BATCH_CONTAINERS, MAX_LEASE_CONTAINERS
from tenure.app.artifacts.retention import CLOCK_SKEW_MS, RECLAIM_STALL_MS
from tenure.app.kernel import over
from tenure.app.migrations import DERIVED_RECLAIMS_FROM_SCHEMA, SchemaState, migrate
from tenure.app.ports import Change
from tenure.app.rows import Rows
from tenure.app.tenure import compose
from tenure.domain.errors import (
    Conflict,
    Forbidden,
    InvalidTransition,
    LeaseTokenMismatch,
    NotFound,
    UnsupportedRuntime,
    ValidationFailed,
)
from tenure.domain.model import Principal
from tenure.domain.states import EndReason, LeaseState
from tenure.domain.transitions import Move
from tenure.store.logs import MAX_STREAMS

from tests.unit.fake_artifacts import FakeBlobs, FakeLogSink
from tests.unit.support import ADMIN, POOL, READER, SPACE, T0, WORKER, Rig, as_lease, with_artifacts

OTHER_SPACE_READER = Principal(kind="operator", token_id="tok-sec", role="read", spaces=("SEC",))
OPS_READER = Principal(kind="operator", token_id="tok-ops", role="read", spaces=(SPACE,))


@pytest.fixture
def rig() -> Rig:
    return with_artifacts(Rig())


def blobs(r: Rig) -> FakeBlobs:
    assert isinstance(r.svc.artifacts.blobs, FakeBlobs)
    return r.svc.artifacts.blobs


def sink(r: Rig) -> FakeLogSink:
    assert isinstance(r.svc.artifacts.log_sink, FakeLogSink)
    return r.svc.artifacts.log_sink


def line(message: str, stream: str = "stdout", **kw: object) -> dict[str, object]:
    return {"stream": stream, "message": message, "container": "main", **kw}


# ---------------------------------------------------------------------------- logs


def test_the_lease_ships_logs_and_whoever_sees_the_lease_reads_them_oldest_first(rig: Rig) -> None:
    lease = rig.running()
    me = as_lease(lease.id)
    assert rig.svc.logs.post_logs(me, lease.id, [line("second", timestamp=T0 + 2)]) == 1
    assert rig.svc.logs.post_logs(me, lease.id, [line("first", "stderr", timestamp=T0 + 1)]) == 1
    for reader in (READER, OPS_READER, me):
        page = rig.svc.logs.read_logs(reader, lease.id)
        assert [(x.message, x.stream) for x in page.events] == [
            ("first", "stderr"),
            ("second", "stdout"),
        ]
        assert page.truncated is False and page.next_cursor is None


def test_tail_keeps_the_last_lines_and_says_it_cut(rig: Rig) -> None:
    lease = rig.running()
    events = [line(f"l{i}", timestamp=T0 + i) for i in range(5)]
    rig.svc.logs.post_logs(as_lease(lease.id), lease.id, events)
    page = rig.svc.logs.read_logs(READER, lease.id, tail=2)
    assert [x.message for x in page.events] == ["l3", "l4"] and page.truncated
    assert not rig.svc.logs.read_logs(READER, lease.id, tail=5).truncated
    since = rig.svc.logs.read_logs(READER, lease.id, since=T0 + 3)
    assert [x.message for x in since.events] == ["l3", "l4"]


def test_containers_are_read_together_or_one_at_a_time(rig: Rig) -> None:
    lease = rig.running()
    rig.svc.logs.post_logs(
        as_lease(lease.id),
        lease.id,
        [line("a", timestamp=T0 + 1), {**line("b", timestamp=T0 + 2), "container": "sidecar"}],
    )
    assert [x.container for x in rig.svc.logs.read_logs(READER, lease.id).events] == [
        "main",
        "sidecar",
    ]
    only = rig.svc.logs.read_logs(READER, lease.id, container="sidecar").events
    assert [x.message for x in only] == ["b"]


def test_another_leases_token_cannot_read_or_write_these_logs(rig: Rig) -> None:
    lease = rig.running("w1")
    other = rig.running("w2")
    with pytest.raises(LeaseTokenMismatch):
        rig.svc.logs.read_logs(as_lease(other.id), lease.id)
    with pytest.raises(LeaseTokenMismatch):
        rig.svc.logs.post_logs(as_lease(other.id), lease.id, [line("x")])
    with pytest.raises(Forbidden):
        rig.svc.logs.post_logs(ADMIN, lease.id, [line("x")])


def test_an_operator_scoped_to_another_space_or_a_worker_token_is_forbidden(rig: Rig) -> None:
    lease = rig.running()
    with pytest.raises(Forbidden):
        rig.svc.logs.read_logs(OTHER_SPACE_READER, lease.id)
    with pytest.raises(Forbidden):
        rig.svc.logs.read_logs(WORKER, lease.id)
    with pytest.raises(Forbidden):
        rig.svc.attachments.list_attachments(OTHER_SPACE_READER, lease.id)


def test_a_pool_that_keeps_no_logs_answers_unsupported_runtime_both_ways(rig: Rig) -> None:
    rig.make_pool("quiet", keeps_logs=False)
    lease = rig.running(pool="quiet")
    with pytest.raises(UnsupportedRuntime):
        rig.svc.logs.post_logs(as_lease(lease.id), lease.id, [line("x")])
    with pytest.raises(UnsupportedRuntime):
        rig.svc.logs.read_logs(READER, lease.id)


def test_pools_keep_logs_by_default(rig: Rig) -> None:
    assert rig.svc.kernel.catalog.pool(POOL).keeps_logs is True
    assert rig.svc.kernel.catalog.pool(POOL).retention_seconds == 2_592_000


def test_a_timestamp_cloudwatch_would_drop_is_refused_by_name(rig: Rig) -> None:
    lease = rig.running()
    me = as_lease(lease.id)
    with pytest.raises(ValidationFailed, match=r"events\[1\].timestamp"):
        rig.svc.logs.post_logs(
            me, lease.id, [line("ok"), line("old", timestamp=T0 - 15 * 86_400_000)]
        )
    with pytest.raises(ValidationFailed, match="ahead"):
        rig.svc.logs.post_logs(me, lease.id, [line("future", timestamp=T0 + 3 * 3_600_000)])
    assert rig.svc.logs.read_logs(READER, lease.id).events == []  # nothing half-stored


def test_a_tail_cannot_be_paged(rig: Rig) -> None:
    lease = rig.running()
    with pytest.raises(ValidationFailed, match="cursor"):
        rig.svc.logs.read_logs(READER, lease.id, tail=3, cursor="abc")


def test_logs_page_on_with_a_cursor_that_ends_null(rig: Rig) -> None:
    lease = rig.running()
    rig.svc.logs.post_logs(
        as_lease(lease.id), lease.id, [line(f"l{i}", timestamp=T0 + i) for i in range(5)]
    )
    assert isinstance(rig.svc.artifacts.log_sink, FakeLogSink)
    page = rig.svc.artifacts.log_sink.read(lease.id, None, None, None, None, 3)
    assert [x.message for x in page.events] == ["l0", "l1", "l2"] and page.next_cursor
    rest = rig.svc.logs.read_logs(READER, lease.id, cursor=page.next_cursor)
    assert [x.message for x in rest.events] == ["l3", "l4"] and rest.next_cursor is None


def _containers(names: list[str]) -> list[dict[str, object]]:
    return [{**line(f"from {name}"), "container": name} for name in names]


def test_a_batch_naming_more_containers_than_one_request_may_is_refused_whole(rig: Rig) -> None:
    lease = rig.running()
    names = [f"c{i}" for i in range(MAX_BATCH_CONTAINERS + 1)]
    with pytest.raises(ValidationFailed, match=r"^events: .*9 containers.* 8"):
        rig.svc.logs.post_logs(as_lease(lease.id), lease.id, _containers(names))
    assert sink(rig).streams == {} and "count_log_containers" not in rig.store.writes


def test_a_lease_keeps_logs_of_no_more_containers_than_its_reads_and_reclaim_reach(
    rig: Rig,
) -> None:
    lease = rig.running()
    me = as_lease(lease.id)
    names = [f"c{i:02d}" for i in range(MAX_LEASE_CONTAINERS)]
    for at in range(0, len(names), MAX_BATCH_CONTAINERS):
        batch = names[at : at + MAX_BATCH_CONTAINERS]
        assert rig.svc.logs.post_logs(me, lease.id, _containers(batch)) == len(batch)
    with pytest.raises(ValidationFailed, match=rf"^events: .*{MAX_LEASE_CONTAINERS} containers"):
        rig.svc.logs.post_logs(me, lease.id, _containers(["c00", "one-too-many"]))
    assert len(sink(rig).streams) == MAX_LEASE_CONTAINERS == MAX_STREAMS
    # A container it already keeps goes on taking lines, on any instance.
    again = compose(Rows.of(rig.store, rig.store), rig.clock, rig.ids, log_sink=sink(rig))
    assert again.logs.post_logs(me, lease.id, _containers(["c00", "c49"])) == 2
    assert len(sink(rig).streams[f"{lease.id}/c49"]) == 2


def test_a_warm_instance_counts_a_container_once_and_only_a_new_one_is_made(rig: Rig) -> None:
    lease = rig.running()
    me = as_lease(lease.id)
    for _ in range(3):
        rig.svc.logs.post_logs(me, lease.id, _containers(["main", "side"]))
    assert rig.store.writes.count("count_log_containers") == 1
    # The stream is made once, by the request that counted its container first; another
    # instance (which has not counted it) writes to it as to a stream that exists.
    again = compose(Rows.of(rig.store, rig.store), rig.clock, rig.ids, log_sink=sink(rig))
    again.logs.post_logs(me, lease.id, _containers(["main"]))
    assert rig.store.writes.count("count_log_containers") == 2
    assert sink(rig).made == [f"{lease.id}/main", f"{lease.id}/side"]


def test_what_an_instance_remembers_of_counted_containers_is_bounded(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(logs, "MAX_CONTAINERS_KEPT", 2)
    lease = rig.running()
    for name in ("a", "b", "c"):
        rig.svc.logs.post_logs(as_lease(lease.id), lease.id, _containers([name]))
    assert len(rig.svc.logs._counted) <= 2
    rig.svc.logs.post_logs(as_lease(lease.id), lease.id, _containers(["a"]))  # counted again
    assert rig.store.writes.count("count_log_containers") == 4
    assert sink(rig).made == [f"{lease.id}/{name}" for name in "abc"]  # made once each


# --------------------------------------------------------------------- attachments


def test_an_inline_attachment_is_stored_at_once_listed_and_fetched_as_bytes(rig: Rig) -> None:
    lease = rig.running()
    att, upload = rig.svc.attachments.add_attachment(
        as_lease(lease.id), lease.id, "out.txt", "text/plain", "file", None, b"hello"
    )
    assert upload is None and att.byte_size == 5
    for reader in (READER, as_lease(lease.id)):
        assert [a.id for a in rig.svc.attachments.list_attachments(reader, lease.id)] == [att.id]
    got = rig.svc.attachments.fetch_attachment(READER, lease.id, att.id)
    assert got.data == b"hello" and got.url is None


def test_an_inline_body_past_one_mib_is_refused_naming_the_limit(rig: Rig) -> None:
    lease = rig.running()
    with pytest.raises(ValidationFailed, match=r"content_base64.*1048576 bytes \(1 MiB\)"):
        rig.svc.attachments.add_attachment(
            as_lease(lease.id),
            lease.id,
            "big.bin",
            "application/octet-stream",
            "file",
            None,
            b"x" * (MAX_INLINE_BYTES + 1),
        )
    assert blobs(rig).objects == {}


def test_a_presigned_upload_is_listed_only_once_its_bytes_arrived_as_declared(rig: Rig) -> None:
    lease = rig.running()
    me = as_lease(lease.id)
    att, upload = rig.svc.attachments.add_attachment(
        me, lease.id, "r.json", "application/json", "report", 4, None
    )
    assert upload is not None and upload.method == "PUT"
    assert upload.headers == {"Content-Type": "application/json", "Content-Length": "4"}
    assert rig.svc.attachments.list_attachments(READER, lease.id) == []
    with pytest.raises(NotFound):
        rig.svc.attachments.fetch_attachment(READER, lease.id, att.id)
    blobs(rig).put(upload_key(att.key), b"{}{}", "application/json")
    listed = rig.svc.attachments.list_attachments(READER, lease.id)
    assert [(a.id, a.kind, a.status) for a in listed] == [(att.id, "report", "stored")]


def test_an_upload_of_other_bytes_than_declared_is_never_listed(rig: Rig) -> None:
    lease = rig.running()
    me = as_lease(lease.id)
    size, _ = rig.svc.attachments.add_attachment(me, lease.id, "a", "text/plain", "file", 4, None)
    kind, _ = rig.svc.attachments.add_attachment(me, lease.id, "b", "text/plain", "file", 2, None)
    blobs(rig).put(upload_key(size.key), b"12345", "text/plain")
    blobs(rig).put(upload_key(kind.key), b"12", "image/png")
    assert rig.svc.attachments.list_attachments(READER, lease.id) == []
    assert not blobs(rig).objects
    assert {a.status for a in rig.store.list_attachments(lease.id)} == {"rejected"}


def test_an_upload_that_never_came_is_abandoned_and_no_longer_checked(rig: Rig) -> None:
    lease = rig.running()
    rig.svc.attachments.add_attachment(
        as_lease(lease.id), lease.id, "a", "text/plain", "file", 4, None
    )
    rig.advance(2 * 3600)
    assert rig.svc.attachments.list_attachments(READER, lease.id) == []
    assert [a.status for a in rig.store.list_attachments(lease.id)] == ["abandoned"]


def _expires_s(url: str) -> int:
    return int(url.rpartition("X-Amz-Expires=")[2])


def test_an_upload_url_asked_for_in_a_leases_grace_expires_when_the_grace_does(
    rig: Rig,
) -> None:
    """The token may ship for 10 minutes after its lease ended; an upload URL it gets then
    must not outlive that (a presigned PUT otherwise lasts 15 minutes)."""
    lease = rig.running()
    me = as_lease(lease.id)
    _, live = rig.svc.attachments.add_attachment(me, lease.id, "a", "text/plain", "file", 4, None)
    assert live is not None and _expires_s(live.url) == UPLOAD_EXPIRES_S
    rig.svc.reports.complete(me, lease.id, {})
    rig.advance(9 * 60)
    _, late = rig.svc.attachments.add_attachment(me, lease.id, "b", "text/plain", "file", 4, None)
    assert late is not None and _expires_s(late.url) == 60
    # In the grace's last second the token may still ship: a URL of the one second S3 takes
    # at least (bytes it writes past the grace are refused as any late bytes are).
    rig.advance(59.5)
    _, last = rig.svc.attachments.add_attachment(me, lease.id, "c", "text/plain", "file", 4, None)
    assert last is not None and _expires_s(last.url) == 1


def test_bytes_that_arrive_after_the_grace_are_never_listed(rig: Rig) -> None:
    """A URL handed out while the lease ran can outlive its end by more than the grace: what
    it writes once the grace is over is not stored, however it was asked for."""
    lease = rig.running()
    me = as_lease(lease.id)
    early, _ = rig.svc.attachments.add_attachment(me, lease.id, "a", "text/plain", "file", 2, None)
    late, _ = rig.svc.attachments.add_attachment(me, lease.id, "b", "text/plain", "file", 2, None)
    rig.svc.reports.complete(me, lease.id, {})
    rig.advance(9 * 60)
    blobs(rig).put(upload_key(early.key), b"ok", "text/plain")
    rig.advance(2 * 60)
    blobs(rig).put(upload_key(late.key), b"no", "text/plain")
    listed = rig.svc.attachments.list_attachments(READER, lease.id)
    assert [a.id for a in listed] == [early.id]
    assert rig.store.get_attachment(lease.id, late.id).status == "rejected"  # type: ignore[union-attr]
    assert upload_key(late.key) not in blobs(rig).objects and late.key not in blobs(rig).objects
    with pytest.raises(NotFound):
        rig.svc.attachments.fetch_attachment(READER, lease.id, late.id)


def test_a_large_attachment_is_fetched_through_a_presigned_url(rig: Rig) -> None:
    lease = rig.running()
    size = SERVE_INLINE_BYTES + 1
    att, _ = rig.svc.attachments.add_attachment(
        as_lease(lease.id), lease.id, "big.bin", "application/octet-stream", "file", size, None
    )
    blobs(rig).put(upload_key(att.key), b"x" * size, "application/octet-stream")
    got = rig.svc.attachments.fetch_attachment(READER, lease.id, att.id)
    assert got.data is None and got.url and "big.bin" in got.url


def test_an_attachment_whose_object_expired_is_not_found_and_says_why(rig: Rig) -> None:
    lease = rig.running()
    att, _ = rig.svc.attachments.add_attachment(
        as_lease(lease.id), lease.id, "o.txt", "text/plain", "file", None, b"hi"
    )
    blobs(rig).objects.clear()  # the bucket's lifecycle rule took it
    with pytest.raises(NotFound, match="lifecycle"):
        rig.svc.attachments.fetch_attachment(READER, lease.id, att.id)


def test_an_unknown_attachment_is_not_found(rig: Rig) -> None:
    lease = rig.running()
    with pytest.raises(NotFound) as err:
        rig.svc.attachments.fetch_attachment(READER, lease.id, "att_nope")
    assert err.value.code == "not_found"


def test_a_lease_keeps_a_bounded_number_of_attachments(rig: Rig) -> None:
    lease = rig.running()
    me = as_lease(lease.id)
    for i in range(ATTACHMENTS_PER_LEASE):
        rig.svc.attachments.add_attachment(me, lease.id, f"f{i}", "text/plain", "file", None, b"x")
    with pytest.raises(ValidationFailed, match="attachments"):
        rig.svc.attachments.add_attachment(
            me, lease.id, "one-more", "text/plain", "file", None, b"x"
        )
    assert len(blobs(rig).objects) == ATTACHMENTS_PER_LEASE  # the refused bytes did not stay


def test_only_the_leases_own_token_attaches(rig: Rig) -> None:
    lease = rig.running("w1")
    other = rig.running("w2")
    with pytest.raises(LeaseTokenMismatch):
        rig.svc.attachments.add_attachment(
            as_lease(other.id), lease.id, "a", "text/plain", "file", 1, None
        )
    with pytest.raises(Forbidden):
        rig.svc.attachments.add_attachment(ADMIN, lease.id, "a", "text/plain", "file", 1, None)


# --------------------------------------------------------------- exec target


def test_exec_target_names_where_the_lease_runs_and_nothing_secret(rig: Rig) -> None:
    won = (
        rig.svc.claims.claim(WORKER, POOL, "w1", "2.1", 0, None, host="box-7")
        if rig.task()
        else None
    )
    assert won is not None
    target = rig.svc.logs.exec_target(READER, won.lease.id)
    assert target == {
        "lease_id": won.lease.id,
        "state": "dispatched",
        "pool": POOL,
        "kind": "command",
        "worker_id": "w1",
        "worker_version": "2.1",
        "claimed_at": T0,
        "host": "box-7",
    }
    assert won.token not in repr(target) and str(won.lease.token_hash) not in repr(target)
    with pytest.raises(LeaseTokenMismatch):
        rig.svc.logs.exec_target(as_lease(won.lease.id), won.lease.id)
    with pytest.raises(Forbidden):
        rig.svc.logs.exec_target(OTHER_SPACE_READER, won.lease.id)


def test_exec_target_before_a_claim_has_no_worker(rig: Rig) -> None:
    _, lease = rig.task()
    assert lease is not None
    target = rig.svc.logs.exec_target(READER, lease.id)
    assert target["worker_id"] is None and target["host"] is None and target["claimed_at"] is None


# --------------------------------------------------------------------- retention


def ended_with_detail(rig: Rig, retention: int = 60) -> str:
    rig.make_pool("short", retention_seconds=retention)
    lease = rig.running(pool="short")
    me = as_lease(lease.id)
    rig.svc.logs.post_logs(me, lease.id, [line("hello")])
    rig.svc.attachments.add_attachment(
        me, lease.id, "out.txt", "text/plain", "file", None, b"hello"
    )
    rig.svc.reports.complete(me, lease.id, {})
    return lease.id


def test_reclaim_waits_for_the_pools_retention(rig: Rig) -> None:
    lease_id = ended_with_detail(rig, retention=60)
    rig.advance(59)
    assert rig.sweep().reclaimed == []
    rig.advance(1)
    assert rig.sweep().reclaimed == [lease_id]


def test_a_pool_younger_than_its_retention_costs_a_pass_no_read_of_its_ended_leases(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing of a pool ended before the pool was made, so nothing of it is due before the
    pool is as old as its retention (less the clocks' skew): the pass skips its index."""
    read: list[str] = []
    ended_leases = rig.store.ended_leases

    def counted(pool: str, ended_before: int, limit: int) -> list[str]:
        read.append(pool)
        return ended_leases(pool, ended_before, limit)

    monkeypatch.setattr(rig.store, "ended_leases", counted)
    rig.make_pool("hourly", retention_seconds=3600)
    lease = rig.running(pool="hourly")
    rig.svc.logs.post_logs(as_lease(lease.id), lease.id, [line("hello")])
    rig.svc.reports.complete(as_lease(lease.id), lease.id, {})
    young = 3600 - CLOCK_SKEW_MS // 1000 - 1
    rig.advance(young)
    assert rig.sweep().reclaimed == []
    assert "hourly" not in read
    rig.advance(1)
    assert rig.sweep().reclaimed == []  # read from here on: the lease ended after T0
    assert read.count("hourly") == 1
    rig.advance(3600 - young - 2)
    assert rig.sweep().reclaimed == []
    rig.advance(1)
    assert rig.sweep().reclaimed == [lease.id], "due at its retention, not a pass later"


def test_a_reclaimed_lease_still_reads_with_empty_detail_and_its_timeline_whole(rig: Rig) -> None:
    lease_id = ended_with_detail(rig)
    before = rig.lease(lease_id)
    rig.advance(61)
    rig.sweep()
    after = rig.lease(lease_id)
    assert after.reclaimed_at == rig.clock.now_ms()
    assert (after.state, after.attempt, after.pool, after.subject_kind, after.ended_at) == (
        before.state,
        before.attempt,
        before.pool,
        before.subject_kind,
        before.ended_at,
    )
    assert rig.svc.operator.get_lease(READER, lease_id).reclaimed_at is not None
    assert rig.svc.attachments.list_attachments(READER, lease_id) == []
    assert rig.svc.logs.read_logs(READER, lease_id) == ([], False, None)
    assert blobs(rig).objects == {} and sink(rig).streams == {}
    assert rig.store.list_attachments(lease_id) == []
    types = rig.types(before.task_id or "")
    assert types[-2:] == ["lease.completed", "lease.reclaimed"]
    with pytest.raises(NotFound):
        rig.svc.attachments.fetch_attachment(READER, lease_id, "att_any")
    with pytest.raises(InvalidTransition):
        rig.svc.logs.post_logs(as_lease(lease_id), lease_id, [line("late")])


def test_reclaiming_twice_deletes_nothing_twice_and_records_one_event(rig: Rig) -> None:
    lease_id = ended_with_detail(rig)
    rig.advance(61)
    assert rig.svc.retention.reclaim(lease_id) is True
    assert rig.svc.retention.reclaim(lease_id) is False
    rig.sweep()
    assert set(blobs(rig).deleted.values()) == {1}
    assert set(sink(rig).deleted.values()) == {1}
    task_id = rig.lease(lease_id).task_id or ""
    assert rig.types(task_id).count("lease.reclaimed") == 1
    assert rig.store.ended_leases("short", rig.clock.now_ms(), 10) == []


def test_a_reclaim_that_stopped_midway_is_finished_by_a_later_pass(rig: Rig) -> None:
    lease_id = ended_with_detail(rig)
    rig.advance(61)
    lease = rig.lease(lease_id)
    mark = replace(lease, reclaimed_at=rig.clock.now_ms(), version=lease.version + 1)
    rig.store.mark_reclaimed(replace(mark, event_type="lease.reclaimed", event_data={}))
    assert rig.sweep().reclaimed == []  # fresh mark: another pass may be on it
    assert blobs(rig).objects
    rig.advance(RECLAIM_STALL_MS / 1000)
    rig.sweep()
    assert blobs(rig).objects == {} and sink(rig).streams == {}
    assert rig.store.ended_leases("short", rig.clock.now_ms(), 10) == []


def test_a_pass_reclaims_a_bounded_number_and_counts_what_is_left(rig: Rig) -> None:
    rig.make_pool("short", retention_seconds=1)
    ids = []
    for _ in range(4):
        lease = rig.running(pool="short")
        rig.svc.logs.post_logs(as_lease(lease.id), lease.id, [line("hello")])
        rig.svc.reports.complete(as_lease(lease.id), lease.id, {})
        ids.append(lease.id)
    rig.advance(2)
    first = rig.svc.retention.reclaim_due(budget=3)
    assert first.leases == ids[:3] and first.left >= 1
    second = rig.svc.retention.reclaim_due(budget=3)
    assert second.leases == ids[3:] and second.left == 0


def test_held_and_queued_leases_are_never_reclaimed(rig: Rig) -> None:
    rig.make_pool("short", retention_seconds=1)
    held = rig.running(pool="short")
    _, queued = rig.task(pool="short")
    rig.advance(3600)
    rig.svc.reports.heartbeat(as_lease(held.id), held.id, None)
    assert rig.sweep().reclaimed == []
    assert queued is not None and rig.lease(queued.id).reclaimed_at is None


def test_a_service_without_a_bucket_or_log_group_says_so(rig: Rig) -> None:
    bare = compose(Rows.of(rig.store, rig.store), rig.clock, rig.ids)
    lease = rig.running()
    with pytest.raises(UnsupportedRuntime):
        bare.logs.read_logs(READER, lease.id)
    with pytest.raises(UnsupportedRuntime):
        bare.attachments.add_attachment(
            as_lease(lease.id), lease.id, "a", "text/plain", "file", 1, None
        )


# ------------------------------------------------ a lease with nothing to reclaim


def ended_bare(rig: Rig, retention: int = 60) -> str:
    rig.make_pool("short", retention_seconds=retention)
    lease = rig.running(pool="short")
    rig.svc.reports.complete(as_lease(lease.id), lease.id, {})
    return lease.id


def test_a_lease_without_logs_or_attachments_is_reclaimed_with_no_write(rig: Rig) -> None:
    lease_id = ended_bare(rig, retention=60)
    assert not rig.lease(lease_id).keeps_detail
    assert rig.store.ended_leases("short", rig.clock.now_ms() + 10**9, 10) == []
    rig.advance(59)
    assert rig.svc.kernel.catalog.reclaimed_at(rig.lease(lease_id)) is None
    rig.advance(1)
    writes = list(rig.store.writes)
    assert rig.sweep().reclaimed == []
    assert "mark_reclaimed" not in rig.store.writes[len(writes) :]
    stored = rig.lease(lease_id)
    assert stored.reclaimed_at is None, "nothing written"
    assert rig.svc.kernel.catalog.reclaimed_at(stored) == stored.ended_at + 60_000  # type: ignore[operator]
    assert rig.svc.kernel.catalog.shown(stored).reclaimed_at == stored.ended_at + 60_000  # type: ignore[operator]
    assert rig.svc.attachments.list_attachments(READER, lease_id) == []
    assert rig.svc.logs.read_logs(READER, lease_id) == ([], False, None)
    with pytest.raises(InvalidTransition):  # within the token's grace, still refused
        rig.svc.logs.post_logs(as_lease(lease_id), lease_id, [line("late")])
    with pytest.raises(InvalidTransition):
        rig.svc.attachments.add_attachment(
            as_lease(lease_id), lease_id, "late.txt", "text/plain", "file", None, b"late"
        )
    assert not rig.lease(lease_id).keeps_detail and blobs(rig).objects == {}


def test_a_log_shipped_after_the_end_puts_the_lease_among_those_the_sweeper_reclaims(
    rig: Rig,
) -> None:
    lease_id = ended_bare(rig, retention=60)
    rig.advance(30)  # within the token's grace after the end, before the retention
    rig.svc.logs.post_logs(as_lease(lease_id), lease_id, [line("shipped late")])
    assert rig.lease(lease_id).keeps_detail
    assert rig.store.ended_leases("short", rig.clock.now_ms(), 10) == [lease_id]
    rig.advance(31)
    assert rig.sweep().reclaimed == [lease_id]
    assert sink(rig).streams == {}
    assert rig.lease(lease_id).reclaimed_at == rig.clock.now_ms()


def test_an_attachment_added_while_running_marks_the_lease_once(rig: Rig) -> None:
    rig.make_pool("short", retention_seconds=60)
    lease = rig.running(pool="short")
    me = as_lease(lease.id)
    for n in range(2):
        rig.svc.attachments.add_attachment(
            me, lease.id, f"{n}.txt", "text/plain", "file", None, b"x"
        )
    assert rig.store.writes.count("keep_detail") == 1
    rig.svc.reports.complete(me, lease.id, {})
    assert rig.lease(lease.id).keeps_detail, "the ending write keeps the mark"
    rig.advance(61)
    assert rig.sweep().reclaimed == [lease.id] and blobs(rig).objects == {}


def test_a_whole_row_write_of_a_lease_read_before_its_mark_loses(rig: Rig) -> None:
    lease = rig.running()
    seen = rig.lease(lease.id)
    rig.store.keep_detail(seen)
    done = Move(LeaseState.COMPLETED, "lease.completed", end_reason=EndReason.COMPLETED)
    ended = rig.svc.kernel.apply(seen, done, {}, rig.clock.now_ms(), outcome="success")
    with pytest.raises(Conflict):
        rig.store.commit(Change(leases=[over(seen, ended)]))
    # Read again, the report lands with the mark kept.
    rig.svc.reports.complete(as_lease(lease.id), lease.id, {})
    assert rig.lease(lease.id).keeps_detail


def test_a_table_an_earlier_release_migrated_indexes_every_ending_until_migrated(
    rig: Rig,
) -> None:
    rig.store.schema = SchemaState(version=DERIVED_RECLAIMS_FROM_SCHEMA - 1, step=2)
    before = ended_bare(rig, retention=60)
    assert rig.lease(before).keeps_detail, "an earlier release's sweeper must find it"
    assert {o.name: o.status for o in migrate(rig.store)}["derived-reclaims"] == "applied"
    rig.advance(31)  # the kernel reads the schema row at most once per pool cache period
    after = rig.running(pool="short")
    rig.svc.reports.complete(as_lease(after.id), after.id, {})
    assert not rig.lease(after.id).keeps_detail
    rig.advance(61)
    assert rig.sweep().reclaimed == [before], "the one indexed before is reclaimed as before"
    assert rig.svc.kernel.catalog.reclaimed_at(rig.lease(after.id)) is not None


def test_inspect_shows_a_lease_reclaimed_by_derivation(rig: Rig) -> None:
    lease_id = ended_bare(rig, retention=60)
    task_id = rig.lease(lease_id).task_id or ""
    assert rig.svc.inspection.inspect(READER, task_id).current_lease.reclaimed_at is None  # type: ignore[union-attr]
    rig.advance(60)
    shot = rig.svc.inspection.inspect(READER, task_id)
    assert shot.current_lease is not None and shot.current_lease.reclaimed_at is not None
    assert [x.reclaimed_at is not None for x in shot.recent_leases] == [True]


def test_reclaim_deletes_an_upload_no_listing_checked_yet(rig: Rig) -> None:
    # A presigned PUT writes under uploads/, and its bytes move to the served key only when a
    # listing checks them: bytes uploaded but never checked are the lease's too.
    rig.make_pool("short", retention_seconds=60)
    lease = rig.running(pool="short")
    me = as_lease(lease.id)
    attachment, upload = rig.svc.attachments.add_attachment(
        me, lease.id, "big.bin", "application/octet-stream", "file", 5, None
    )
    assert upload is not None
    blobs(rig).put(upload_key(attachment.key), b"bytes", "application/octet-stream")
    rig.svc.reports.complete(me, lease.id, {})
    rig.advance(61)
    assert rig.sweep().reclaimed == [lease.id]
    assert blobs(rig).objects == {}
