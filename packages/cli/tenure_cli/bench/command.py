"""`tenure bench lifecycle`: DynamoDB write and read units per step of one lease's life, each
step's writes priced as AWS bills them (bench/billing.py) beside what DynamoDB Local reported,
and each write named with the rows it touched."""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import boto3
from tenure import wiring
from tenure.app.leases.handover import NextClaim
from tenure.app.tenure import Tenure
from tenure.config import local_settings
from tenure.domain.model import Pool, Principal
from tenure.domain.states import PoolKind, ReportKind
from tenure.store.task_numbers import TASK_NUMBER_BLOCK
from tenure.triggers.inbound.envelopes import parse_record_body
from tenure.triggers.inbound.mime import parse_mail
from tenure.triggers.inbound.service import trigger_data

from tenure_cli.local.email_send import notification, ses_message_id
from tenure_cli.local.engines import DynamoDBLocal
from tenure_cli.local.streams import StreamPump

from .cost import INBOX, MAIL
from .meter import AwsMeter

# The budget: a heartbeat at most 1 write unit (met), one lifecycle at most the cost bench's
# target (bench/workload.py BUDGET), not met yet, so `within_budget` reads false (README, Cost).
BUDGET = {"heartbeat_write_units": 1.0, "lifecycle_write_units": 11.0}


def lifecycle(worker_flow: bool = False) -> dict[str, Any]:
    cache = Path(local_settings().cache_dir)
    with DynamoDBLocal(cache) as engine:
        return measure_lifecycle(engine.endpoint, "tenure-bench", worker_flow)


def measure_lifecycle(endpoint: str, table: str, worker_flow: bool = False) -> dict[str, Any]:
    """The lifecycle's steps on a fresh table of the DynamoDB Local at `endpoint`. The meter
    hooks boto3's default session, so the session before is put back afterwards: clients
    made later in this process (a test run's) are not priced against this engine."""
    saved = boto3.DEFAULT_SESSION
    try:
        return _measure_lifecycle(endpoint, table, worker_flow)
    finally:
        boto3.DEFAULT_SESSION = saved


def _measure_lifecycle(endpoint: str, table: str, worker_flow: bool) -> dict[str, Any]:
    aws = AwsMeter().install()  # before the store's client is made, so its calls are priced
    aws.price_writes(endpoint, wiring.settings().region)
    store = wiring.build_store(endpoint, table)
    store.create_table()
    pump = StreamPump(endpoint, table, store)
    clock = wiring.ManualClock(wiring.SystemClock().now_ms())
    svc = wiring.build_service(store, clock, bare=True)
    admin = Principal(kind="operator", token_id="bench", role="admin")
    worker = Principal(kind="worker", token_id="bench-worker")
    svc.spaces.create_space(admin, "BENCH", "Bench", None)
    svc.pools.create_pool(
        admin, Pool(name="bench", space="BENCH", kind=PoolKind.COMMAND, created_at=0)
    )
    pump.drain()
    store.meter.writes = []  # one line per write: the rows it touched, what it cost
    steps = _Steps(store, pump, aws)
    measure = steps.measure
    # A warm instance hands a filing its task number from a block it reserved on the space row
    # (one write a block, not one a task): the block's write is measured on its own (the number
    # it hands out here is simply a gap) and booked to each filing as its share of the block.
    measure("task_number_block", lambda: store.next_task_number("BENCH"))
    measure(
        "create_and_enqueue",
        lambda: svc.filing.create_task(admin, "BENCH", "bench task", None, "x", {}, "bench", None),
    )
    won = measure("claim", lambda: svc.claims.claim(worker, "bench", "w-1", "1.0", 0, None))
    lease = Principal(kind="lease", token_id="bench-lease", lease_id=won.lease.id)
    measure("start", lambda: svc.reports.start(lease, won.lease.id))
    clock.sleep(10)
    measure("heartbeat", lambda: svc.reports.heartbeat(lease, won.lease.id, None))
    steps.heartbeat_hour(lambda: svc.reports.heartbeat(lease, won.lease.id, None), clock)
    measure("complete", lambda: svc.reports.complete(lease, won.lease.id, {"outcome": "success"}))
    # What the lease costs later: once its pool's retention has passed, nothing. It had no
    # logs and no attachments, so it never entered the ended index: the sweeper's pass finds
    # nothing, and the lease reads reclaimed by derivation (a lease with logs or attachments
    # gets the sweeper's mark, its entry out and a `lease.reclaimed` timeline row).
    clock.sleep(store.get_pool("bench").retention_seconds + 60)
    measure("reclaim", lambda: svc.retention.reclaim_due())
    # The worker SDK's claims carry a claim_id (its idempotency key): the claim's record is
    # written first, naming the lease, then the lease. Not in the classic sum below; the cost
    # bench (`tenure bench cost`) runs the SDK's flow.
    svc.filing.create_task(admin, "BENCH", "bench task 2", None, "x", {}, "bench", None)
    pump.drain()
    measure(
        "claim_with_claim_id",
        lambda: svc.claims.claim(worker, "bench", "w-2", "1.0", 0, None, claim_id="bench-claim"),
    )
    # The worker SDK's claim asks for its lease running (`start`: it launches the job on the
    # answer): claimed and started by one write, the start call or first heartbeat spared.
    svc.filing.create_task(admin, "BENCH", "bench task 3", None, "x", {}, "bench", None)
    pump.drain()
    measure(
        "claim_started",
        lambda: svc.claims.claim(
            worker, "bench", "w-3", "1.0", 0, None, claim_id="bench-claim-3", start=True
        ),
    )
    # A lease minted by an `email.received` rule from the cost bench's mail (a tenth of its
    # leases): the rule's firing as the inbound function makes it, once the mail is parsed.
    # Not in the sums above: a filed lease's lifecycle is the one they price.
    measure("email_mint", _email_mint(svc, admin, clock))
    flow = _worker_flow(svc, store, pump, clock, admin, worker) if worker_flow else None
    return _lifecycle_report(steps.steps, flow)


def _email_mint(svc: Tenure, admin: Principal, clock: Any) -> Callable[[], Any]:
    """The firing of an `email.received` rule on the cost bench's mail, set up (the inbox
    address, the rule) and ready to measure: the trigger data is what the inbound function
    builds from SES's notification and the stored mail."""
    svc.addresses.add_address(admin, "BENCH", INBOX)
    subject = {"kind": "task", "title": "{subject}", "body": "from {from}"}
    trigger = {"topic": "email.received", "match": {"to": INBOX}}
    svc.rules.create_rule(admin, "BENCH", "intake", "bench", subject, trigger)
    raw = MAIL.replace("{n}", "1").encode()
    note = notification(raw, ses_message_id(), "inbound", "arn:aws:sns:bench", [INBOX])
    mail = parse_record_body(json.dumps(note))
    data = trigger_data(mail, parse_mail(raw), [])
    return lambda: svc.firings.fire_email(clock.now_ms(), data)


class _Steps:
    """The lifecycle's steps as measured: each one's write units (as AWS bills them and as
    DynamoDB Local reported them), read units and writes, one a line."""

    def __init__(self, store: Any, pump: StreamPump, aws: AwsMeter) -> None:
        self.store, self.pump, self.aws = store, pump, aws
        self.steps: dict[str, dict[str, Any]] = {}

    def measure(self, name: str, fn: Any) -> Any:
        store, aws = self.store, self.aws
        r0, w0, _ = store.meter.snapshot()
        billed = aws.total().billed_write_units
        assert store.meter.writes is not None
        first = len(store.meter.writes)
        out = fn()
        self.pump.drain(quiet_passes=1)  # the reactor's timeline writes belong to the step
        r1, w1, _ = store.meter.snapshot()
        self.steps[name] = {
            "write_units": round(aws.total().billed_write_units - billed, 2),
            "write_units_reported": round(w1 - w0, 2),
            "read_units": round(r1 - r0, 2),
            "writes": [_line(w) for w in store.meter.writes[first:]],
        }
        return out

    def heartbeat_hour(self, beat: Any, clock: Any) -> None:
        """An hour of heartbeats at renew_seconds 10: the worst one's write units, the
        average's, and what the stream reactor wrote for them."""
        store, aws = self.store, self.aws
        beats, worst, units, reads = 360, 0.0, 0.0, 0.0
        for _ in range(beats):
            clock.sleep(10)
            r0, _, _ = store.meter.snapshot()
            w0 = aws.total().billed_write_units
            beat()
            r1, _, _ = store.meter.snapshot()
            w1 = aws.total().billed_write_units
            worst, units, reads = max(worst, w1 - w0), units + w1 - w0, reads + r1 - r0
        # What the stream reactor wrote for the hour's heartbeats (nothing, when no beat
        # changes a lease's state), so it is not billed to the next step.
        w0 = aws.total().billed_write_units
        self.pump.drain(quiet_passes=1)
        steps = self.steps
        steps["heartbeat_hour_stream"] = {
            "write_units": round(aws.total().billed_write_units - w0, 2)
        }
        steps["heartbeat_worst_in_hour"] = {"write_units": round(worst, 2)}
        steps["heartbeat_hour_average"] = {
            "write_units": round(units / beats, 3),
            "read_units": round(reads / beats, 3),
        }


def _lifecycle_report(
    steps: dict[str, dict[str, Any]], flow: dict[str, Any] | None
) -> dict[str, Any]:
    """The steps summed into the classic lifecycle and the worker SDK's."""
    worst_beat = steps["heartbeat_worst_in_hour"]["write_units"]
    block = steps["task_number_block"]
    share, share_reported = (
        block["write_units"] / TASK_NUMBER_BLOCK,
        block["write_units_reported"] / TASK_NUMBER_BLOCK,
    )
    classic = ("create_and_enqueue", "claim", "start", "complete", "reclaim")
    total = sum(steps[s]["write_units"] for s in classic) + worst_beat + share
    reported = sum(steps[s]["write_units_reported"] for s in classic) + worst_beat + share_reported
    sdk = ("create_and_enqueue", "claim_started", "complete", "reclaim")
    sdk_total = sum(steps[s]["write_units"] for s in sdk) + worst_beat + share
    return {
        "engine": "DynamoDB Local",
        "units": (
            "write_units: as AWS bills each write (item sizes before and after, index entries, "
            "transactions twice); write_units_reported and each write's line: what DynamoDB "
            "Local reported (ReturnConsumedCapacity=INDEXES)"
        ),
        "steps": steps,
        "lifecycle_write_units": round(total, 2),
        "lifecycle_write_units_reported": round(reported, 2),
        "lifecycle": "task_number_block / block size + create_and_enqueue + claim + start + "
        "heartbeat_worst_in_hour + complete + reclaim",
        "task_number_block_size": TASK_NUMBER_BLOCK,
        "lifecycle_write_units_sdk": round(sdk_total, 2),
        "lifecycle_sdk": "task_number_block / block size + create_and_enqueue + claim_started "
        "(a claim_id, start) + heartbeat_worst_in_hour + complete + reclaim: the worker SDK's "
        "calls",
        "budget": BUDGET,
        "within_budget": worst_beat <= BUDGET["heartbeat_write_units"]
        and total <= BUDGET["lifecycle_write_units"],
        **({"worker_flow": flow} if flow is not None else {}),
    }


def _line(write: dict[str, Any]) -> str:
    """One write as a line: `transact LEASE+CLAIM: 8 (table 4, due 2, queue 2)`."""
    parts = [f"table {write['table']:g}"] + [
        f"{name} {units:g}" for name, units in sorted(write["indexes"].items())
    ]
    rows = "+".join(write["rows"])
    return f"{write['op']} {rows}: {write['write_units']:g} ({', '.join(parts)})"


# The cost bench's reference workload (bench/cost.py): 2-minute jobs, a renewal every 10 s,
# 4 leases a worker.
FLOW_JOB_S, FLOW_RENEW_S, FLOW_SLOTS, FLOW_LEASES = 120, 10, 4, 16


def _worker_flow(
    svc: Tenure, store: Any, pump: StreamPump, clock: Any, admin: Principal, worker: Any
) -> dict[str, Any]:
    """One worker as the SDK runs it, in steady state: the claim answer carries the payload,
    the batched worker heartbeat starts and renews every held lease, and each complete claims
    the next lease. A producer files one task per completion. Everything the service and the
    stream reactor write is metered, per lease completed; so are the HTTP requests the worker
    and the producer would send (one per service call below)."""
    calls: dict[str, int] = {}
    units: dict[str, float] = {}

    def call(route: str, fn: Any) -> Any:
        calls[route] = calls.get(route, 0) + 1
        _, before, _ = store.meter.snapshot()
        out = fn()
        pump.drain(quiet_passes=1)  # the reactor's writes belong to the call that caused them
        units[route] = units.get(route, 0.0) + store.meter.snapshot()[1] - before
        return out

    def file_task() -> None:
        svc.filing.create_task(admin, "BENCH", "flow task", None, "x", {}, "bench", None)

    def completed_and_claimed(lease_id: str, ask: NextClaim) -> Any:
        """A complete that claims the next lease, with the payload its answer carries (the
        endpoint builds it from the lease and the task the claim read)."""
        ended, won = svc.handover.report_then_claim(
            worker, lease_id, ReportKind.COMPLETE, {"outcome": "success"}, ask
        )
        assert won is None or svc.payloads.claimed_payload(won.lease, won.task) is not None
        return ended, won

    held: dict[str, tuple[int, int]] = {}  # lease id -> (fence, claimed at)
    for _ in range(FLOW_SLOTS):  # warm-up, not metered: the worker fills its slots
        file_task()
        won = svc.claims.claim(worker, "bench", "w-flow", "1.0", 0, None)
        assert won is not None and svc.payloads.claimed_payload(won.lease, won.task) is not None
        held[won.lease.id] = (won.lease.fence, clock.now_ms())
    pump.drain()
    calls.clear()
    units.clear()
    r0, w0, _ = store.meter.snapshot()
    done, n = 0, 0
    while done < FLOW_LEASES:
        clock.sleep(FLOW_RENEW_S)
        beats = call(
            "POST /workers/{id}/heartbeat",
            partial(
                svc.reports.worker_heartbeat,
                worker,
                "w-flow",
                [(i, f) for i, (f, _) in held.items()],
            ),
        )
        assert all(not isinstance(b, Exception) for _, _, b in beats)
        for lease_id, (_, at) in list(held.items()):
            if clock.now_ms() - at < FLOW_JOB_S * 1000 or done >= FLOW_LEASES:
                continue
            call("POST /tasks", file_task)
            n += 1
            ask = NextClaim(worker_id="w-flow", claim_id=f"flow-{n}", worker_version="1.0")
            # Sent with the worker token, as the SDK sends a report that claims.
            _, won = call(
                "POST /leases/{id}/complete", partial(completed_and_claimed, lease_id, ask)
            )
            del held[lease_id]
            done += 1
            assert won is not None
            held[won.lease.id] = (won.lease.fence, clock.now_ms())
    r1, w1, _ = store.meter.snapshot()
    return _flow_report(calls, units, done, r1 - r0, w1 - w0)


def _flow_report(
    calls: dict[str, int], units: dict[str, float], done: int, reads: float, writes: float
) -> dict[str, Any]:
    requests = sum(calls.values())
    return {
        "workload": {
            "job_seconds": FLOW_JOB_S,
            "renew_seconds": FLOW_RENEW_S,
            "leases_per_worker": FLOW_SLOTS,
            "leases_completed": done,
        },
        "write_units_per_lease": round(writes / done, 2),
        "read_units_per_lease": round(reads / done, 2),
        "requests_per_lease": round(requests / done, 2),
        "requests_by_route": {route: round(count / done, 2) for route, count in calls.items()},
        "write_units_by_route": {route: round(u / done, 2) for route, u in units.items()},
    }
