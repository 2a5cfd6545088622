"""The store contract of a lease's detail rows (attachments, the ended index, the reclaim mark),
run on the fake, moto and DynamoDB Local beside contract.py, so the three cannot drift."""

from __future__ import annotations

import pytest
from tenure.app.kernel import over
from tenure.app.ports import Attachment, Change
from tenure.domain.errors import CeilingReached, Conflict
from tenure.domain.states import EndReason, LeaseState
from tenure.domain.transitions import Move

from tests.conformance.contract import ALPHA, MakeRig, claim, enqueue, stored, timeline_of, world
from tests.conftest import lease_principal


def _attachment(lease_id: str, n: int, at: int) -> Attachment:
    return Attachment(
        id=f"att_{n:03d}",
        lease_id=lease_id,
        kind="file",
        filename=f"f{n}.txt",
        content_type="text/plain",
        byte_size=n,
        created_at=at + n,
        key=f"leases/{lease_id}/att_{n:03d}",
    )


class DetailContract:
    def test_attachments_are_recorded_listed_oldest_first_and_capped(
        self, make_rig: MakeRig
    ) -> None:
        r = make_rig()
        world(r)
        _, lease = enqueue(r)
        now = r.clock.now_ms()
        for n in (2, 1):
            r.store.put_attachment(_attachment(lease.id, n, now), cap=2, quota_bytes=10**9)
        with pytest.raises(CeilingReached):
            r.store.put_attachment(_attachment(lease.id, 3, now), cap=2, quota_bytes=10**9)
        listed = r.store.list_attachments(lease.id)
        assert [a.id for a in listed] == ["att_001", "att_002"]
        assert listed[0] == _attachment(lease.id, 1, now)  # a round trip keeps every field
        assert r.store.get_attachment(lease.id, "att_003") is None
        r.store.set_attachment_status(listed[0], "stored")
        assert (r.store.get_attachment(lease.id, "att_001") or listed[1]).status == "stored"
        r.store.delete_attachments(lease.id, ["att_001", "att_002"])
        assert r.store.list_attachments(lease.id) == []
        assert stored(r, lease.id).state == lease.state  # the lease row is untouched

    def test_attachment_bytes_are_counted_against_the_quota_in_the_same_write(
        self, make_rig: MakeRig
    ) -> None:
        r = make_rig()
        world(r)
        _, lease = enqueue(r)
        now = r.clock.now_ms()
        r.store.put_attachment(_attachment(lease.id, 3, now), cap=10, quota_bytes=5)
        with pytest.raises(CeilingReached) as over:
            r.store.put_attachment(_attachment(lease.id, 4, now), cap=10, quota_bytes=5)
        assert over.value.details.get("quota") is True
        r.store.put_attachment(_attachment(lease.id, 2, now), cap=10, quota_bytes=5)
        assert [a.id for a in r.store.list_attachments(lease.id)] == ["att_002", "att_003"]

    def test_log_containers_are_counted_once_each_and_never_past_the_cap(
        self, make_rig: MakeRig
    ) -> None:
        r = make_rig()
        world(r)
        _, lease = enqueue(r)
        count = r.store.count_log_containers
        assert count(lease.id, ["main", "side"], 3) == {"main", "side"}  # the new ones
        assert count(lease.id, ["main"], 3) == set()
        with pytest.raises(CeilingReached):
            count(lease.id, ["a", "b"], 3)  # four: nothing of it is counted
        # Near the cap, the containers already counted do not count twice.
        assert count(lease.id, ["side", "a"], 3) == {"a"}
        with pytest.raises(CeilingReached):
            count(lease.id, ["main", "b"], 3)
        assert count(lease.id, ["main", "side", "a"], 3) == set()
        _, other = enqueue(r)
        assert count(other.id, ["b"], 3) == {"b"}  # each lease counts its own
        assert stored(r, lease.id).state == lease.state  # the lease row is untouched

    def test_only_ended_leases_with_detail_enter_the_ended_index_by_end_time(
        self, make_rig: MakeRig
    ) -> None:
        r = make_rig()
        world(r)
        ended = []
        for n in range(3):
            enqueue(r)
            won = claim(r)
            if n < 2:  # marked while held; the third only after its end (a late log)
                r.store.keep_detail(stored(r, won.lease.id))
            r.clock.advance(1)
            r.svc.reports.complete(lease_principal(won.lease.id), won.lease.id, {})
            if n == 2:
                assert r.store.ended_leases(ALPHA, r.clock.now_ms(), 10) == ended
                r.store.keep_detail(stored(r, won.lease.id))
            ended.append(won.lease.id)
        enqueue(r)
        bare = claim(r)
        r.svc.reports.complete(lease_principal(bare.lease.id), bare.lease.id, {})  # no detail
        enqueue(r)
        held = claim(r)
        r.store.keep_detail(stored(r, held.lease.id))  # held: not in the index
        enqueue(r)  # pending: not in the index
        now = r.clock.now_ms()
        assert stored(r, held.lease.id).keeps_detail and not stored(r, bare.lease.id).keeps_detail
        assert r.store.ended_leases(ALPHA, now, 10) == ended
        assert r.store.ended_leases(ALPHA, now, 2) == ended[:2]
        first_end = stored(r, ended[0]).ended_at or 0
        assert r.store.ended_leases(ALPHA, first_end, 10) == ended[:1]
        assert r.store.ended_leases(ALPHA, first_end - 1, 10) == []
        r.store.unindex_ended(ended[0])
        assert r.store.ended_leases(ALPHA, now, 10) == ended[1:]

    def test_a_whole_row_write_read_before_the_detail_mark_loses_it_never(
        self, make_rig: MakeRig
    ) -> None:
        r = make_rig()
        world(r)
        enqueue(r)
        won = claim(r)
        seen = stored(r, won.lease.id)
        r.store.keep_detail(seen)  # the mark adds no version: only this condition sees it
        done = Move(LeaseState.COMPLETED, "lease.completed", end_reason=EndReason.COMPLETED)
        ended = r.svc.kernel.apply(seen, done, {}, r.clock.now_ms(), outcome="success")
        with pytest.raises(Conflict):
            r.store.commit(Change(leases=[over(seen, ended)]))
        assert stored(r, won.lease.id).state is LeaseState.DISPATCHED
        r.svc.reports.complete(lease_principal(won.lease.id), won.lease.id, {})
        assert stored(r, won.lease.id).keeps_detail
        assert r.store.ended_leases(ALPHA, r.clock.now_ms(), 10) == [won.lease.id]

    def test_a_reclaimed_lease_takes_no_detail_mark(self, make_rig: MakeRig) -> None:
        r = make_rig()
        world(r)
        enqueue(r)
        won = claim(r)
        r.svc.reports.complete(lease_principal(won.lease.id), won.lease.id, {})
        r.clock.advance(5)
        assert r.svc.retention.reclaim(won.lease.id) is True
        with pytest.raises(Conflict):
            r.store.keep_detail(stored(r, won.lease.id))
        assert r.store.ended_leases(ALPHA, r.clock.now_ms(), 10) == []

    def test_a_lease_is_marked_reclaimed_once_with_one_timeline_event(
        self, make_rig: MakeRig
    ) -> None:
        r = make_rig()
        world(r)
        task, _ = enqueue(r)
        won = claim(r)
        r.svc.reports.complete(lease_principal(won.lease.id), won.lease.id, {})
        r.clock.advance(5)
        assert r.svc.retention.reclaim(won.lease.id) is True
        assert r.svc.retention.reclaim(won.lease.id) is False
        lease = stored(r, won.lease.id)
        with pytest.raises(Conflict):
            r.store.mark_reclaimed(lease)
        r.drain()
        types = [t for _, t, _, _ in timeline_of(r, task)]
        assert types.count("lease.reclaimed") == 1
        assert types.index("lease.completed") < types.index("lease.reclaimed")
        assert lease.reclaimed_at == r.clock.now_ms() and lease.state.value == "completed"
        assert r.store.ended_leases(ALPHA, r.clock.now_ms(), 10) == []
