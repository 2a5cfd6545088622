"""Attacks on the handover's single reads (the scheduler row once, one queue head for its
pick) on DynamoDB Local: eight workers end their leases at the same moment, each claiming
its next lease in the same call, while fewer leases wait than workers ask. Every handover
picks the same first head; the losers must look further, never take a lease twice, and never
leave a lease claimed that no answer named.

moto does not apply conditional writes atomically across threads, so none of this runs there.
"""

from __future__ import annotations

import threading

from tenure.app.leases.handover import NextClaim
from tenure.domain.states import LeaseState, ReportKind

from tests.conformance.contract import ALPHA, SPACE, make_world
from tests.conformance.test_claim_record_races import service
from tests.conformance.test_races import run_threads, seed
from tests.conftest import WORKER, Rig

WORKERS = 8
WAITING = 3


def test_eight_handovers_at_once_share_three_waiting_leases_one_each(rig: Rig) -> None:
    make_world(rig.svc)
    seed(rig, WORKERS)
    svc = service(rig.store)
    held = []
    for n in range(WORKERS):
        won = svc.claims.claim(WORKER, ALPHA, f"w{n}", "1.0", 0, None)
        assert won is not None
        held.append(won.lease.id)
    waiting = {lease.id for lease in seed(rig, WAITING)}
    start = threading.Barrier(WORKERS)

    def hand_on(n: int) -> str | None:
        ask = NextClaim(worker_id=f"w{n}", claim_id=f"next-{n}")
        start.wait()
        ended, nxt = svc.handover.report_then_claim(
            WORKER, held[n], ReportKind.COMPLETE, {"outcome": "success"}, ask
        )
        assert ended.state is LeaseState.COMPLETED
        return None if nxt is None else nxt.lease.id

    answers = run_threads(WORKERS, hand_on)
    named = [x for x in answers if x is not None]
    assert len(named) == len(set(named)), f"a lease handed to two workers: {answers}"
    assert set(named) <= waiting
    page = rig.store.list_leases(SPACE, 100, None, LeaseState.DISPATCHED, None)
    claimed = {lease.id for lease in page.leases}
    assert claimed == set(named), "every claimed lease was named in one answer, and only those"
    assert len(named) == WAITING, f"a lease left waiting while a handover answered none: {answers}"
