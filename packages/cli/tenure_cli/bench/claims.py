"""`tenure bench claims`: many workers claiming from one pool at once, on DynamoDB Local.

Every lost race is a conditional write DynamoDB bills (at least one write unit), so the figure
that matters is lost conditional writes (failed conditions and cancelled transactions, counted
on the wire by bench/meter.py) per successful claim. Double claims are counted from what the
table holds after the run, never assumed: every lease won must have been won by exactly one
claimer, and its row must still carry that claimer and the version its claim wrote.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from tenure import wiring
from tenure.app.tenure import Tenure
from tenure.config import local_settings
from tenure.domain.model import Pool, Principal
from tenure.domain.states import LeaseState, PoolKind

from tenure_cli.local.engines import DynamoDBLocal, use_local_credentials

from .meter import AwsMeter

ADMIN = Principal(kind="operator", token_id="bench-admin", role="admin")
TARGET_LOST_WRITES_PER_CLAIM = 0.25
FILERS = 8


def _service(endpoint: str, table: str) -> Tenure:
    return wiring.build_service(wiring.build_store(endpoint, table), bare=True)


def run(claimers: int = 32, leases: int = 2000, endpoint: str | None = None) -> dict[str, Any]:
    use_local_credentials()
    meter = AwsMeter().install()
    engine = None
    if endpoint is None:
        engine = DynamoDBLocal(Path(local_settings().cache_dir)).start()
        endpoint = engine.endpoint
    try:
        return _run(meter, endpoint, claimers, leases)
    finally:
        if engine is not None:
            engine.stop()


def _run(meter: AwsMeter, endpoint: str, claimers: int, leases: int) -> dict[str, Any]:
    table = f"claims-{uuid.uuid4().hex[:8]}"
    wiring.build_store(endpoint, table).create_table()
    setup = _service(endpoint, table)
    setup.spaces.create_space(ADMIN, "BENCH", "Claims bench", None)
    setup.pools.create_pool(
        ADMIN, Pool(name="race", space="BENCH", kind=PoolKind.COMMAND, created_at=0)
    )

    def file(n: int) -> None:
        svc = _service(endpoint, table)
        for i in range(n, leases, FILERS):
            svc.filing.create_task(ADMIN, "BENCH", f"job {i}", None, None, {}, "race", None)

    with ThreadPoolExecutor(FILERS) as pool:
        list(pool.map(file, range(FILERS)))
    meter.reset()

    won: list[tuple[str, str, int]] = []  # (lease id, worker id, version written)
    lock = threading.Lock()
    start = threading.Barrier(claimers)
    races = Counter[str]()

    def claimer(n: int) -> None:
        svc = _service(endpoint, table)
        actor = Principal(kind="worker", token_id=f"bench-worker-{n}")
        worker_id = f"claimer-{n}"
        start.wait()
        empty, n_claims = 0, 0
        while empty < 2:  # a None can be a run of lost races: one more look before leaving
            # Each claim carries its own claim_id, as the worker SDK's do: its record moves
            # with every race the claim loses, and that is part of what a claim costs here.
            n_claims += 1
            got = svc.claims.claim(
                actor, "race", worker_id, "bench", 0, None, claim_id=f"{worker_id}-{n_claims}"
            )
            if got is None:
                empty += 1
                continue
            empty = 0
            with lock:
                won.append((got.lease.id, worker_id, got.lease.version))
        with lock:
            races.update(svc.counters)

    with meter.acting("claimers"):
        began = time.perf_counter()
        with ThreadPoolExecutor(claimers) as pool:
            list(pool.map(claimer, range(claimers)))
        elapsed = time.perf_counter() - began
    used = meter.usage("claimers")
    double, unclaimed = _audit(_service(endpoint, table), won, leases)
    claims = len(won)
    lost = used.lost_writes / claims if claims else 0.0
    return {
        "bench": "claims",
        "engine": "DynamoDB Local",
        "claimers": claimers,
        "leases": leases,
        "claims": claims,
        "seconds": round(elapsed, 2),
        "claims_per_second": round(claims / elapsed, 1) if elapsed else 0.0,
        "lost_writes": used.lost_writes,
        "lost_writes_per_claim": round(lost, 4),
        "lost_claim_races": races.get("lost_claim_races", 0),
        "empty_claims": races.get("empty_claims", 0),
        "write_units_per_claim": round((used.write_units + used.lost_write_units) / claims, 2)
        if claims
        else 0.0,
        "read_units_per_claim": round(used.read_units / claims, 2) if claims else 0.0,
        "double_claims": double,
        "left_unclaimed": unclaimed,
        "double_claims_checked": "every lease won by one claimer only, and its row in the "
        "table still holding that claimer at the version its claim wrote",
        "target_lost_writes_per_claim": TARGET_LOST_WRITES_PER_CLAIM,
        "within_target": lost <= TARGET_LOST_WRITES_PER_CLAIM and double == 0,
    }


def _audit(svc: Tenure, won: list[tuple[str, str, int]], leases: int) -> tuple[int, int]:
    """(double claims, pending leases left), from the claimers' answers and the table."""
    double = sum(n - 1 for n in Counter(lease_id for lease_id, _, _ in won).values() if n > 1)
    ids = sorted({lease_id for lease_id, _, _ in won})
    rows: dict[str, Any] = {}
    for i in range(0, len(ids), 100):
        rows.update(svc.rows.leases.get_leases(ids[i : i + 100]))
    for lease_id, worker_id, version in won:
        row = rows.get(lease_id)
        if row is None or row.worker_id != worker_id or row.version != version:
            double += 1  # someone else's claim (or a second grant) wrote over this one
        elif row.state is LeaseState.PENDING:
            double += 1
    return double, leases - len(ids)
