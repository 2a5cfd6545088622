"""A claim whose answer was lost: the worker SDK retries it with the same
claim_id and gets the lease it already won, with a fresh token; never a second lease."""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.support import World, wait_for
from tests.e2e.worker_support import (
    LosesFirstClaimAnswer,
    Site,
    Workers,
    lease,
    running_workers,
    wait_file_lines,
    wait_lease,
)

HELD = {"dispatched", "running"}


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[Workers]:
    yield from running_workers(tmp_path)


def test_a_claim_whose_answer_was_lost_is_retried_into_the_same_lease_never_a_second(
    world: World, workers: Workers, tmp_path: Path
) -> None:
    site = Site.make(world)
    # Two queued jobs: a retry that claimed afresh would win the second and orphan the first.
    queued = {site.task()[1], site.task()[1]}
    relay = LosesFirstClaimAnswer(world.api.base)
    try:
        out = tmp_path / "job"
        out.mkdir()
        q = shlex.quote(str(out))
        script = f'echo "$TENURE_LEASE_ID" > {q}/lease; while [ ! -e {q}/go ]; do sleep 0.1; done'
        run = workers.start(relay.base, site.token, site.pool, script)

        wait_for(lambda: relay.lost or None, 20, "the first claim to reach the stack")
        status, lost = relay.lost_answer()
        assert status == 200, f"the first claim itself was refused: {status} {lost}"
        won = lost["lease"]["id"]
        assert won in queued

        held = wait_file_lines(out / "lease", 1, 20)[0]
        assert held == won, "the retry must come back with the lease the lost answer carried"
        assert relay.claims == 2, f"one claim and one retry, not {relay.claims}"
        pool = site.admin.get(
            "/leases", params={"space": world.space, "pool": site.pool, "limit": 100}
        )
        assert pool.status_code == 200, pool.text
        states = {row["id"]: row["state"] for row in pool.json()["leases"]}
        assert [i for i, s in states.items() if s in HELD] == [won], states
        (other,) = queued - {won}
        assert states[other] == "pending", "no orphaned dispatched lease in the pool"

        # The token in the lost answer is dead: the retry minted the one the job holds.
        dead = world.api.client(lost["token"]).post(f"/leases/{won}/heartbeat", json={})
        assert dead.status_code == 401, (dead.status_code, dead.text)

        (out / "go").touch()
        assert run.wait(30) == 0, run.stderr()
        assert wait_lease(site.admin, won, {"completed"}, 15)["state"] == "completed"
        assert lease(site.admin, other)["state"] == "pending"
        assert run.stderr().count("lease claimed") == 1, run.stderr()
    finally:
        relay.close()
