"""`tenure bench lifecycle`: DynamoDB capacity units per step of one lease's life."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tenure import wiring
from tenure.config import local_settings
from tenure.core.model import Pool, Principal
from tenure.core.service import LeaseService
from tenure.core.states import PoolKind
from tenure.local.engines import DynamoDBLocal
from tenure.local.streams import StreamPump

BUDGET = {"heartbeat_write_units": 1.0, "lifecycle_write_units": 24.0}


def lifecycle() -> dict[str, Any]:
    cache = Path(local_settings().cache_dir)
    with DynamoDBLocal(cache) as engine:
        store = wiring.build_store(engine.endpoint, "tenure-bench")
        store.create_table()
        pump = StreamPump(engine.endpoint, "tenure-bench", store)
        clock = wiring.ManualClock(wiring.SystemClock().now_ms())
        svc = LeaseService(store, clock, wiring.RandomIds())
        admin = Principal(kind="operator", token_id="bench", role="admin")
        worker = Principal(kind="worker", token_id="bench-worker")
        svc.create_space(admin, "BENCH", "Bench", None)
        svc.create_pool(
            admin, Pool(name="bench", space="BENCH", kind=PoolKind.COMMAND, created_at=0)
        )
        pump.drain()
        steps: dict[str, dict[str, float]] = {}

        def measure(name: str, fn: Any) -> Any:
            r0, w0, _ = store.meter.snapshot()
            out = fn()
            pump.drain(quiet_passes=1)  # the reactor's timeline writes belong to the step
            r1, w1, _ = store.meter.snapshot()
            steps[name] = {"write_units": round(w1 - w0, 2), "read_units": round(r1 - r0, 2)}
            return out

        measure(
            "create_and_enqueue",
            lambda: svc.create_task(admin, "BENCH", "bench task", None, "x", {}, "bench", None),
        )
        won = measure("claim", lambda: svc.claim(worker, "bench", "w-1", "1.0", 0, None))
        lease = Principal(kind="lease", token_id="bench-lease", lease_id=won.lease.id)
        measure("start", lambda: svc.start(lease, won.lease.id))
        clock.sleep(10)
        measure("heartbeat", lambda: svc.heartbeat(lease, won.lease.id, None))
        beats, worst, units, reads = 360, 0.0, 0.0, 0.0  # one hour at renew_seconds 10
        for _ in range(beats):
            clock.sleep(10)
            r0, w0, _ = store.meter.snapshot()
            svc.heartbeat(lease, won.lease.id, None)
            r1, w1, _ = store.meter.snapshot()
            worst, units, reads = max(worst, w1 - w0), units + w1 - w0, reads + r1 - r0
        steps["heartbeat_worst_in_hour"] = {"write_units": round(worst, 2)}
        steps["heartbeat_hour_average"] = {
            "write_units": round(units / beats, 3),
            "read_units": round(reads / beats, 3),
        }
        measure("complete", lambda: svc.complete(lease, won.lease.id, {"outcome": "success"}))
        worst_beat = steps["heartbeat_worst_in_hour"]["write_units"]
        total = (
            sum(
                steps[s]["write_units"]
                for s in ("create_and_enqueue", "claim", "start", "complete")
            )
            + worst_beat
        )
        return {
            "engine": "DynamoDB Local",
            "units": "DynamoDB capacity units (ReturnConsumedCapacity=INDEXES: table + indexes)",
            "steps": steps,
            "lifecycle_write_units": round(total, 2),
            "lifecycle": "create_and_enqueue + claim + start + heartbeat_worst_in_hour + complete",
            "budget": BUDGET,
            "within_budget": worst_beat <= BUDGET["heartbeat_write_units"]
            and total <= BUDGET["lifecycle_write_units"],
        }
