"""A worker heartbeat's `runtime` and `credentials` are never dropped: a worker
holding no lease need not name the pool when its token is limited to one, and is told to
(422 naming `pool`) when its token covers several."""

from __future__ import annotations

from typing import Any

import pytest
from tenure.domain.errors import ValidationFailed
from tenure.domain.model import Principal

from tests.unit.support import POOL, WORKER, Rig, queued, queued_code
from tests.unit.test_api_graph import http  # noqa: F401  (the fixture)

REFUSING = {"state": "refusing", "reason": "docker daemon down"}
UNREACHABLE = {"state": "unreachable", "reason": "vault sealed"}
ONE_POOL = Principal(kind="worker", token_id="tok-worker", pools=(POOL,))
TWO_POOLS = Principal(kind="worker", token_id="tok-worker", pools=(POOL, "other"))


_code = queued_code
_queued = queued


def test_a_one_pool_token_holding_nothing_is_heard_for_its_pool(rig: Rig) -> None:
    lease = _queued(rig)
    assert rig.svc.reports.worker_heartbeat(ONE_POOL, "w1", [], runtime=REFUSING) == []
    assert _code(rig, lease) == "runtime_refusing"
    rig.svc.reports.worker_heartbeat(
        ONE_POOL, "w1", [], credentials=UNREACHABLE, runtime={"state": "ok"}
    )
    assert _code(rig, lease) == "token_pool_unreachable"
    seen = rig.store.get_worker(POOL, "w1")
    assert seen is not None and seen.credentials == UNREACHABLE


@pytest.mark.parametrize("token", [WORKER, TWO_POOLS], ids=["every-pool", "two-pools"])
@pytest.mark.parametrize("said", [{"runtime": REFUSING}, {"credentials": UNREACHABLE}])
def test_a_token_of_several_pools_holding_nothing_must_name_the_pool(
    rig: Rig, token: Principal, said: dict[str, Any]
) -> None:
    lease = _queued(rig)
    with pytest.raises(ValidationFailed, match=r"^pool:"):
        rig.svc.reports.worker_heartbeat(token, "w1", [], **said)
    assert rig.store.get_worker(POOL, "w1") is None and _code(rig, lease) == "awaiting_agent"
    rig.svc.reports.worker_heartbeat(token, "w1", [], pool=POOL, **said)
    assert _code(rig, lease) != "awaiting_agent"


def test_only_refused_leases_do_not_tell_the_pool_either(rig: Rig) -> None:
    won = rig.claimed()
    with pytest.raises(ValidationFailed, match=r"^pool:"):
        rig.svc.reports.worker_heartbeat(WORKER, "w1", [(won.lease.id, 99)], runtime=REFUSING)
    assert rig.lease(won.lease.id).fence == won.lease.fence  # nothing renewed or moved


def test_a_held_lease_still_tells_the_pool(rig: Rig) -> None:
    won = rig.claimed()
    waiting = _queued(rig)
    answers = rig.svc.reports.worker_heartbeat(WORKER, "w1", [(won.lease.id, 1)], runtime=REFUSING)
    assert [a[0] for a in answers] == [won.lease.id]
    assert _code(rig, waiting) == "runtime_refusing"


def test_a_plain_heartbeat_holding_nothing_is_still_fine(rig: Rig) -> None:
    assert rig.svc.reports.worker_heartbeat(WORKER, "w1", []) == []


def test_over_http_the_missing_pool_is_422_naming_it(http: Any, rig: Rig) -> None:  # noqa: F811
    _queued(rig)
    body = {"leases": [], "runtime": REFUSING}
    refused = http("POST", "/workers/w1/heartbeat", body, actor=WORKER)
    assert (refused.status, refused.code) == (422, "validation_failed")
    assert refused.data["error"]["message"].startswith("pool:")
    heard = http("POST", "/workers/w1/heartbeat", body, actor=ONE_POOL)
    assert heard.status == 200, heard.data
    seen = rig.store.get_worker(POOL, "w1")
    assert seen is not None and seen.runtime == REFUSING


def test_a_flood_of_new_worker_ids_keeps_a_bounded_memory_of_them(rig: Rig) -> None:
    """A worker token may claim with any number of made-up worker ids; the rows a process
    keeps to judge heartbeats without a read stay bounded, the most recent kept."""
    from tenure.app.workers import SEEN_KEPT

    pool = rig.svc.kernel.catalog.pool(POOL)
    for n in range(SEEN_KEPT + 500):
        rig.svc.workers.mark_seen(pool, f"junk-{n}", None)
    kept = rig.svc.workers._seen
    assert len(kept) == SEEN_KEPT
    assert (POOL, f"junk-{SEEN_KEPT + 499}") in kept and (POOL, "junk-0") not in kept
