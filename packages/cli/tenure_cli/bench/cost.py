"""`tenure bench cost`: what one lease costs, all in, on the reference workload.

The reference workload: jobs of 2 minutes, renewed every 10 s, 4 leases held per worker; 10 %
of the leases minted by one `email.received` rule from inbound mail, the rest filed with
POST /tasks. It runs on the metered in-process stack (bench/rig.py) on DynamoDB Local, with
the service's clock moved 10 s per tick instead of waiting: every request, invocation and
capacity unit is real, only the waiting is skipped.

Workers behave as the worker SDK's runner does (tenure_worker/runner.py): a claim, then the
payload, then start; one POST /workers/{id}/heartbeat per renewal for all the leases a worker
holds; complete when the job ends; claim again while below 4. The queue never runs dry, so no
claim comes back empty (the idle polling of a dry queue is not in the figures).

What a lease costs later is counted too: after the workload the service's clock runs past the
pools' retention, and the sweeper passes that reclaim the ended leases with logs or
attachments (their writes and reads, the reactor invocation and the bus entry of each
`lease.reclaimed`) are booked to the leases, less what those passes cost with nothing to
reclaim (the sweeper runs every minute anyway). A lease with neither is reclaimed by
derivation and costs nothing later; the bench checks that every lease reads reclaimed.
"""

from __future__ import annotations

import math
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tenure import wiring
from tenure.domain.outbound import ALL, ENDINGS
from tenure_worker.client import Claim, Client, claim_of, new_claim_id

from . import prices
from .meter import EVENT_ENTRY, Usage
from .rig import Rig

# The worker routes: on the template's default WorkerEndpoint (a Lambda function URL) they
# reach the worker function directly, with no API Gateway request and no authorizer call.
WORKER_ROUTES = (
    "/claim",
    "/start",
    "/heartbeat",
    "/complete",
    "/fail",
    "/release",
    "/payload",
)


def is_worker_route(route: str) -> bool:
    method, _, path = route.partition(" ")
    return path.endswith(WORKER_ROUTES) or (
        method == "POST" and path.endswith(("/logs", "/attachments"))
    )


# The cost budget's targets, in one place: the budget test and the report both read these.
# What a lease costs later (its retention reclaim) is in each figure.
BUDGET = {
    "lifecycle_write_units": 11.0,
    "read_units_per_lease": 15.0,
    "requests_per_lease": 6.0,
    "usd_per_million_leases": 14.0,
    "usd_per_million_leases_all_events": 19.0,
    "usd_per_million_leases_provisioned": 9.0,
}

JOB_SECONDS = 120
RENEW_SECONDS = 10
LEASES_PER_WORKER = 4
EMAIL_SHARE = 0.10
# The volume the fixed monthly costs are spread over in `usd_per_million_leases_with_fixed`.
LEASES_PER_MONTH = 1_000_000
INBOX = "intake@inbound.bench.example"
WARMUP_INBOX = "warmup@inbound.bench.example"
MAIL = (
    "From: Dana <dana@customer.example>\r\n"
    f"To: {INBOX}\r\n"
    "Subject: Please re-run the nightly export\r\n"
    "Message-ID: <{n}@customer.example>\r\n"
    "Date: Mon, 1 Jun 2026 09:00:00 +0000\r\n"
    "Content-Type: text/plain; charset=utf-8\r\n"
    "\r\n"
    "The export of last night stopped halfway; could you run it again?\r\n"
)
# Whose AWS requests are Tenure's per-lease cost: its functions, SES's delivery of mail, and
# Lambda's pollers (SQS receives and deletes; the stream reads of a DynamoDB trigger are free).
PER_LEASE_ACTORS = ["api", "authorizer", "reactor", "inbound", "ses", "lambda-pollers"]
PER_LEASE_FUNCTIONS = ["api", "authorizer", "reactor", "inbound"]


@dataclass
class Held:
    lease_id: str
    token: str
    fence: int
    since: int  # the clock's ms when its job started


class BenchWorker:
    """One worker host: a worker token, up to 4 leases, the runner's order of calls."""

    def __init__(self, rig: Rig, token: str, worker_id: str, pool: str) -> None:
        self.client = Client("http://bench.local", token, transport=rig.transport, retries=0)
        self.rig = rig
        self.worker_id = worker_id
        self.pool = pool
        self.held: list[Held] = []
        self.completed = 0
        self.refused = 0

    def tick(self, queue: list[int]) -> None:
        """One renewal period of the runner's loop (tenure_worker/runner.py), in its order: one
        heartbeat for every lease held, each finished job's report claiming the next lease in
        the same call while work remains, then plain claims for free slots. Every claim asks
        for its lease running (`start`: the runner launches the job on the answer), so there
        is no start call and a first heartbeat has nothing to start. A claim's answer carries
        the payload."""
        now = self.rig.clock.now_ms()
        if self.held:
            answers = self.client.worker_heartbeat(
                self.worker_id, [(h.lease_id, h.fence) for h in self.held]
            )
            self.refused += sum(1 for a in answers if "error" in a or a.get("revoke"))
        for held in [h for h in self.held if now - h.since >= JOB_SECONDS * 1000]:
            body: dict[str, Any] = {"outcome": "success", "details": {"exit_status": 0}}
            if queue[0] > 0:
                body["next"] = {
                    "worker_id": self.worker_id,
                    "claim_id": new_claim_id(),
                    "worker_version": "tenure-worker/bench",
                    "start": True,
                }
            answer = self.client.complete(held.lease_id, held.token, body)
            self.held.remove(held)
            self.completed += 1
            if answer.get("next"):
                self._hold(claim_of(answer["next"]), queue, now)
        while len(self.held) < LEASES_PER_WORKER and queue[0] > 0:
            claim = self.client.claim(
                self.pool, self.worker_id, "tenure-worker/bench", 0, start=True
            )
            if claim is None:
                raise RuntimeError("a claim came back empty while leases were pending")
            self._hold(claim, queue, now)

    def _hold(self, claim: Claim, queue: list[int], now: int) -> None:
        queue[0] -= 1
        if claim.payload is None:  # the answer could not carry it: the SDK fetches it
            self.client.payload(claim.lease_id, claim.token)
        self.held.append(Held(claim.lease_id, claim.token, claim.fence, now))


def measure(
    leases: int = 240,
    workers: int | None = None,
    settings: tuple[str, ...] = (ENDINGS, ALL),
    rig: Callable[[str], Rig] | None = None,
) -> dict[str, Any]:
    """The reference workload once per OutboundEvents setting in `settings` (the first is the
    report's; the template's default first by default); the others' prices beside it."""
    runs = {s: run(leases, workers, rig(s) if rig else Rig(outbound_events=s)) for s in settings}
    result = runs[settings[0]]
    result["by_outbound_events"] = {
        s: {
            "usd_per_million_leases": r["usd_per_million_leases"],
            "usd_per_million_leases_http_api": r["usd_per_million_leases_http_api"],
            "usd_per_million_leases_provisioned": r["usd_per_million_leases_provisioned"],
            "eventbridge_events_per_lease": r["aws_requests_per_lease"]["eventbridge_put_events"],
            "lambda_invocations_per_lease": r["lambda_invocations_per_lease"],
            "lifecycle_write_units": r["lifecycle_write_units"],
            "read_units_per_lease": r["read_units_per_lease"],
            "breakdown": r["breakdown"],
        }
        for s, r in runs.items()
    }
    if ALL in runs:
        result["usd_per_million_leases_all_events"] = runs[ALL]["usd_per_million_leases"]
    every = result["usd_per_million_leases_all_events"]  # None when `all` was not run
    result["within_budget"] = result["within_budget"] and (
        every is not None and every <= BUDGET["usd_per_million_leases_all_events"]
    )
    return result


def run(leases: int = 240, workers: int | None = None, rig: Rig | None = None) -> dict[str, Any]:
    """The reference workload on `leases` leases; by default a worker runs 3 jobs in a row
    per slot, so most renewals are steady-state ones."""
    workers = workers or max(1, math.ceil(leases / (3 * LEASES_PER_WORKER)))
    emails = round(leases * EMAIL_SHARE)
    with rig or Rig() as rig:
        admin_raw = "tnr_o_" + wiring.RandomIds().secret()
        with rig.meter.acting("setup"):
            wiring.service().setup.bootstrap_admin(admin_raw)
        admin = Client("http://bench.local", admin_raw, transport=rig.transport, retries=0)
        admin.call("POST", "/spaces", {"key": "BENCH", "name": "Cost bench"})
        admin.call("POST", "/pools", {"name": "bench", "space": "BENCH", "kind": "command"})
        for address in (INBOX, WARMUP_INBOX):
            admin.call("POST", "/spaces/BENCH/addresses", {"address": address})
        admin.call(
            "POST",
            "/rules",
            {
                "space": "BENCH",
                "name": "intake",
                "pool": "bench",
                "subject": {"kind": "task", "title": "{subject}", "body": "from {from}"},
                "trigger": {"topic": "email.received", "match": {"to": INBOX}},
            },
        )
        tokens = [
            admin.call("POST", "/tokens", {"name": f"w{i}", "kind": "worker", "pools": ["bench"]})[
                1
            ]["token"]
            for i in range(workers)
        ]
        # Every function once before measuring (its cold start is not a lease's cost): one mail
        # minting a lease on a pool of its own, which no worker claims, and a sweeper pass.
        admin.call("POST", "/pools", {"name": "warmup", "space": "BENCH", "kind": "command"})
        admin.call(
            "POST",
            "/rules",
            {
                "space": "BENCH",
                "name": "warmup",
                "pool": "warmup",
                "subject": {"kind": "task", "title": "{subject}"},
                "trigger": {"topic": "email.received", "match": {"to": WARMUP_INBOX}},
            },
        )
        rig.receive_email(MAIL.replace(INBOX, WARMUP_INBOX).encode(), WARMUP_INBOX)
        rig.poll_inbound()
        rig.sweep()
        rig.pump.drain()
        rig.meter.reset()
        rig.calls.clear()
        rig.routes.clear()
        rig.route_units.clear()
        rig.access_log_bytes = 0
        rig.auth_cache.clear()
        # ------------------------------------------------------------ the workload
        for n in range(emails):
            rig.receive_email(MAIL.replace("{n}", str(n)).encode(), INBOX)
        minted = 0
        while minted < emails:
            got = rig.poll_inbound()
            if not got:
                raise RuntimeError(f"only {minted} of {emails} mails reached the inbound queue")
            minted += got
        for n in range(leases - emails):
            admin.call(
                "POST",
                "/tasks",
                {"space": "BENCH", "title": f"job {n}", "body": "run it", "pool": "bench"},
            )
        started = rig.clock.now_ms()
        queue = [leases]
        crew = [BenchWorker(rig, t, f"bench-host-{i}", "bench") for i, t in enumerate(tokens)]
        sweeps: list[Usage] = []
        sweep_calls = rig.calls["sweeper"]
        ticks = 0
        while any(w.held for w in crew) or queue[0] > 0:
            for worker in crew:
                worker.tick(queue)
            if ticks % (60 // RENEW_SECONDS) == 0:
                before = rig.meter.snapshot().get("sweeper", Usage())
                rig.sweep()
                after = rig.meter.usage("sweeper")
                one = Usage()
                one.add(after)
                one.read_units -= before.read_units
                one.write_units -= before.write_units
                sweeps.append(one)
            rig.clock.advance(RENEW_SECONDS)
            ticks += 1
            if ticks > 10_000:
                raise RuntimeError("the workload did not finish")
        done = sum(w.completed for w in crew)
        if done != leases:
            raise RuntimeError(f"{done} of {leases} leases completed")
        refused = sum(w.refused for w in crew)
        window = Window(rig.meter.total(PER_LEASE_ACTORS), sweep_calls.count)
        later = reclaim_later(rig, started, leases)
        return report(rig, leases, emails, workers, ticks, sweeps, window, refused, later)


@dataclass
class Window:
    """The per-lease usage and the sweeper passes of the workload's own window."""

    used: Usage
    sweep_passes: int


@dataclass
class Later:
    """The retention reclaim, priced per lease: its DynamoDB and other AWS usage, and the
    sweeper's extra duration and log bytes over passes that had nothing to reclaim."""

    used: Usage
    reactor_invocations: int
    lambda_duration_usd: float
    log_bytes: float
    passes: int
    reclaimed: int  # by the sweeper: the leases with logs or attachments
    derived: int  # by derivation: the leases with neither (nothing written, nothing deleted)


RECLAIM = "reclaim"  # the sweeper passes of the retention reclaim
RECLAIM_IDLE = "reclaim-idle"  # a pass with nothing left to reclaim: what any pass costs
RECLAIM_REACTOR = "reclaim-reactor"  # the reactor invoked by the reclaim's writes


def reclaim_later(rig: Rig, started: int, leases: int) -> Later:
    """Move the service's clock to the longest pool retention after the workload began, then
    run the sweeper once a virtual minute, as its schedule does, until that retention has
    passed since the workload's last end and a pass finds nothing left; then one pass with
    nothing left, whose usage every pass has anyway and is taken off. A lease with logs or
    attachments is reclaimed by a pass; one with neither reads reclaimed by derivation, with
    nothing written: every lease of the workload must read reclaimed by the end. Each
    reclaimed lease's stream records reach the reactor alone (at the reference rate a
    lease's reclaim does): an upper bound on its invocations."""
    pools = wiring.service().store.list_pools()
    retention_ms = max(p.retention_seconds for p in pools) * 1000
    ended_by = rig.clock.now_ms()  # every lease of the workload has ended
    rig.clock.now = max(rig.clock.now, started + retention_ms)
    # The first pass after the jump reads the gap as the service's absence; nothing has ended
    # long enough ago yet, so it reclaims nothing and is no lease's cost.
    rig.pump.actor = "sweeper"
    rig.sweep()
    rig.pump.actor, rig.pump.per_item = RECLAIM_REACTOR, True
    passes, reclaimed, busy = 0, 0, True
    try:
        while busy or rig.clock.now_ms() < ended_by + retention_ms:
            rig.clock.advance(60)
            answer = rig.sweep(RECLAIM)
            passes += 1
            reclaimed += int(answer["reclaimed"])
            busy = bool(answer["reclaimed"] or answer["reclaim_left"])
            if passes > 10_000:
                raise RuntimeError(f"only {reclaimed} of {leases} leases were reclaimed")
        rig.clock.advance(60)
        idle = rig.sweep(RECLAIM_IDLE)
        if idle["reclaimed"] or idle["reclaim_left"]:
            raise RuntimeError(f"the pass after the reclaim still found some: {idle}")
    finally:
        rig.pump.actor, rig.pump.per_item = "reactor", False
    used = rig.meter.usage(RECLAIM).less(rig.meter.usage(RECLAIM_IDLE), passes)
    used.add(rig.meter.usage(RECLAIM_REACTOR))
    sweeps, idles = rig.calls[RECLAIM], rig.calls[RECLAIM_IDLE]
    extra_ms = max(0.0, sum(sweeps.billed_ms) - passes * sum(idles.billed_ms) / idles.count)
    extra_logs = max(
        0.0,
        sweeps.log_bytes
        - passes * idles.log_bytes / idles.count
        + prices.LOG_EVENT_OVERHEAD_BYTES * (sweeps.log_events - passes * idles.log_events),
    )
    reactor = rig.calls.get(RECLAIM_REACTOR)
    reactor_count = reactor.count if reactor is not None else 0
    duration = prices.lambda_duration_usd(extra_ms, rig.memory["sweeper"])
    if reactor is not None and reactor_count:
        duration += prices.lambda_duration_usd(sum(reactor.billed_ms), rig.memory["reactor"])
        extra_logs += reactor.log_bytes + prices.LOG_EVENT_OVERHEAD_BYTES * reactor.log_events
    derived = _reclaimed_by_derivation(rig)
    if reclaimed + derived != leases:
        raise RuntimeError(
            f"{reclaimed} leases were reclaimed by the sweeper and {derived} by derivation, "
            f"of {leases}"
        )
    return Later(used, reactor_count, duration, extra_logs, passes, reclaimed, derived)


def _reclaimed_by_derivation(rig: Rig) -> int:
    """How many of the bench pool's leases read reclaimed with no reclaim written: the
    bench's own check, read under an actor of its own (no lease's cost)."""
    svc = wiring.service()
    found, cursor = 0, None
    with rig.meter.acting("bench-check"):
        for _ in range(10_000):
            page = svc.store.list_leases("BENCH", 100, cursor, None, "bench")
            for lease in page.leases:
                if (
                    lease.reclaimed_at is None
                    and svc.kernel.catalog.reclaimed_at(lease) is not None
                ):
                    found += 1
            cursor = page.next_cursor
            if cursor is None:
                break
    return found


def _per_lease(used: Usage, per: float) -> dict[str, float]:
    """The AWS usage of `used` that the price table bills, per lease."""
    return {
        "dynamodb_write_units": used.billed_write_units * per,  # AWS's rules (bench/billing.py)
        "dynamodb_read_units": used.read_units * per,
        "sqs_requests": used.count("sqs") * per,
        "sns_publishes": used.count("sns", {"Publish"}) * per,
        "s3_puts": used.count("s3", {"PutObject", "CopyObject", "ListObjectsV2"}) * per,
        "s3_gets": used.count("s3", {"GetObject", "HeadObject"}) * per,
        "eventbridge_events": used.count("events", {EVENT_ENTRY}) * per,
    }


def report(
    rig: Rig,
    leases: int,
    emails: int,
    workers: int,
    ticks: int,
    sweeps: list[Usage],
    window: Window,
    refused: int,
    later: Later,
) -> dict[str, Any]:
    used = Usage()
    used.add(window.used)
    used.add(later.used)
    sweep_passes = window.sweep_passes
    per = 1.0 / leases
    http = sum(rig.routes.values())
    lambdas: dict[str, Any] = {}
    duration_usd = 0.0
    invocations = 0
    log_bytes = 0.0
    log_events = 0
    for name in PER_LEASE_FUNCTIONS:
        calls = rig.calls.get(name)
        if calls is None or not calls.count:
            continue
        billed = sum(calls.billed_ms)
        usd = prices.lambda_duration_usd(billed, rig.memory[name])
        duration_usd += usd
        invocations += calls.count
        log_bytes += calls.log_bytes
        log_events += calls.log_events
        lambdas[name] = {
            "invocations_per_lease": round(calls.count * per, 3),
            "billed_ms_per_invocation": round(billed / calls.count, 1),
            "cpu_ms_per_invocation": round(calls.cpu_ms / calls.count, 1),
            "memory_mb": rig.memory[name],
            "log_bytes_per_invocation": round(calls.log_bytes / calls.count),
            "duration_usd_per_million_leases": prices.per_million(usd * per),
        }
    log_bytes += rig.access_log_bytes + prices.LOG_EVENT_OVERHEAD_BYTES * (log_events + http)
    reactor_later = rig.calls.get(RECLAIM_REACTOR)
    if reactor_later is not None and reactor_later.count:
        billed = sum(reactor_later.billed_ms)
        lambdas["reactor_retention_reclaim"] = {
            "invocations_per_lease": round(reactor_later.count * per, 3),
            "billed_ms_per_invocation": round(billed / reactor_later.count, 1),
            "cpu_ms_per_invocation": round(reactor_later.cpu_ms / reactor_later.count, 1),
            "memory_mb": rig.memory["reactor"],
            "log_bytes_per_invocation": round(reactor_later.log_bytes / reactor_later.count),
            "duration_usd_per_million_leases": prices.per_million(
                prices.lambda_duration_usd(billed, rig.memory["reactor"]) * per
            ),
        }
    reported_writes = used.write_units + used.lost_write_units
    dynamo_writes = used.billed_write_units  # priced by AWS's rules (bench/billing.py)
    # The bench's window (the workload itself) and what its leases cost later (the retention
    # reclaim), priced apart so that `breakdown` names the reclaim.
    lease = {
        "http_requests": http * per,
        "lambda_invocations": invocations * per,
        "lambda_duration_usd": duration_usd * per,
        **_per_lease(window.used, per),
        "log_bytes": log_bytes * per,
        "scheduler_invocations": 0.0,  # the sweeper's schedule is fixed: see fixed_usd_per_month
    }
    reclaim = {
        "http_requests": 0.0,
        "lambda_invocations": later.reactor_invocations * per,  # the sweeper runs anyway
        "lambda_duration_usd": later.lambda_duration_usd * per,
        **_per_lease(later.used, per),
        "log_bytes": later.log_bytes * per,
        "scheduler_invocations": 0.0,
    }
    reclaim_usd = round(sum(prices.tenure_breakdown(reclaim).values()), 4)
    all_in = {k: lease[k] + reclaim[k] for k in lease}
    breakdown_http_api = prices.tenure_breakdown(lease)
    breakdown_http_api["retention_reclaim"] = reclaim_usd
    total_http_api = round(sum(breakdown_http_api.values()), 4)
    # The default configuration: the worker routes on the worker function's URL.
    worker_requests = sum(n for route, n in rig.routes.items() if is_worker_route(route))
    worker_share = worker_requests / http if http else 0.0
    authorizer_calls = rig.calls["authorizer"].count if "authorizer" in rig.calls else 0
    on_url = dict(
        lease,
        http_requests=(http - worker_requests) * per,
        lambda_invocations=(invocations - authorizer_calls * worker_share) * per,
    )
    breakdown = prices.tenure_breakdown(on_url)
    breakdown["retention_reclaim"] = reclaim_usd
    total = round(sum(breakdown.values()), 4)
    on_demand = prices.tenure_breakdown({**on_url, **_per_lease(used, per)})
    provisioned = prices.provisioned_breakdown(all_in)
    total_provisioned = round(
        total
        - on_demand["dynamodb_writes"]
        - on_demand["dynamodb_reads"]
        + sum(provisioned.values()),
        4,
    )
    sweep_calls = rig.calls["sweeper"]
    passes = max(1, sweep_passes)
    sweep_pass = {
        "duration_usd": prices.lambda_duration_usd(
            sum(sweep_calls.billed_ms) / passes, rig.memory["sweeper"]
        ),
        "read_units": sum(s.read_units for s in sweeps) / passes,
        "write_units": sum(s.write_units for s in sweeps) / passes,
        "log_bytes": sweep_calls.log_bytes / passes,
    }
    fixed = prices.fixed_monthly(sweep_pass)
    beats = rig.routes.get("POST /api/v1/workers/<worker_id>/heartbeat", 0) * per
    window_writes = round(window.used.billed_write_units * per, 2)
    window_reads = round(window.used.read_units * per, 2)
    sqs = prices.sqs_alone(beats, emails * per)
    sfn = prices.step_functions_activities(emails * per)
    by_actor = {
        name: {
            "write_units_per_lease": round((u.write_units + u.lost_write_units) * per, 3),
            "read_units_per_lease": round(u.read_units * per, 3),
            "lost_writes_per_lease": round(u.lost_writes * per, 3),
        }
        for name, u in [*sorted(rig.meter.by_actor.items()), ("retention_reclaim", later.used)]
        if (name in PER_LEASE_ACTORS or name == "retention_reclaim")
        and (u.write_units or u.read_units or u.lost_writes)
    }
    lifecycle = round(dynamo_writes * per, 2)
    lifecycle_reported = round(reported_writes * per, 2)
    requests = round(http * per, 3)
    return {
        "bench": "cost",
        "engine": "DynamoDB Local (table, stream) + moto (S3, SQS, SNS, Logs, EventBridge)",
        "workload": {
            "leases": leases,
            "workers": workers,
            "job_seconds": JOB_SECONDS,
            "renew_seconds": RENEW_SECONDS,
            "leases_per_worker": LEASES_PER_WORKER,
            "email_received_share": EMAIL_SHARE,
            "emails": emails,
            "virtual_seconds": ticks * RENEW_SECONDS,
            "how": "the stack in one process (bench/rig.py): the template's resources, the "
            "deployed entry points functions/*/app.py, the worker SDK's Client; the service's "
            "clock moves 10 s per tick instead of waiting. Every HTTP request passes an "
            "authorizer cached 60 s per token (ReauthorizeEvery), each request's stream "
            "records reach the reactor as one trigger batch (the quiet-traffic case: an upper "
            "bound on reactor invocations), the sweeper runs every virtual minute. Lambda "
            "durations are this machine's, against DynamoDB Local.",
        },
        "requests_per_lease": requests,
        "requests_by_route": {k: round(v * per, 3) for k, v in sorted(rig.routes.items())},
        "units_per_request_by_route": {
            route: {
                "write_units": round(rig.route_units[route][0] / n, 2),
                "read_units": round(rig.route_units[route][1] / n, 2),
            }
            for route, n in sorted(rig.routes.items())
        },
        "lifecycle_write_units": lifecycle,
        "lifecycle_write_units_means": "every DynamoDB write the workload made, per lease, "
        "priced by AWS's rules from the items before and after each write (bench/billing.py): "
        "filing or minting, claim, payload, start, its share of the heartbeats, completion, "
        "the reactor's timeline rows, lost conditional writes, and what the lease costs "
        "later: its retention reclaim",
        "lifecycle_write_units_bench_window": window_writes,
        "read_units_per_lease_bench_window": window_reads,
        "bench_window_means": "the same, without the retention reclaim: what the workload's "
        "own window measured",
        "retention_reclaim": {
            "write_units_per_lease": round(later.used.billed_write_units * per, 3),
            "read_units_per_lease": round(later.used.read_units * per, 3),
            "reactor_invocations_per_lease": round(later.reactor_invocations * per, 3),
            "eventbridge_events_per_lease": round(reclaim["eventbridge_events"], 3),
            "usd_per_million_leases": reclaim_usd,
            "leases_reclaimed": later.reclaimed,
            "leases_reclaimed_by_derivation": later.derived,
            "sweeper_passes": later.passes,
            "how": "the service's clock moved past the longest pool retention, then one "
            "sweeper pass a virtual minute until every lease was reclaimed (by a pass when it "
            "had logs or attachments, by derivation, with no write, when it had neither); "
            "each pass less a pass with nothing to reclaim; each lease's stream records one "
            "reactor invocation (an upper bound)",
        },
        "lifecycle_write_units_reported": lifecycle_reported,
        "lifecycle_write_units_reported_means": "the same writes as DynamoDB Local reported "
        "them (it sums item sizes inside a transaction and doubles index writes there), lost "
        "writes at their minimum",
        "write_units_by_target": {
            k: round(v * per, 3) for k, v in sorted(used.billed_by_index.items())
        },
        "billing_model_check": {
            "single_item_writes_agreeing_with_dynamodb_local": used.model_agreed,
            "single_item_writes_disagreeing": used.model_disagreed,
        },
        "read_units_per_lease": round(used.read_units * per, 2),
        "lost_writes_per_lease": round(used.lost_writes * per, 3),
        "dynamodb_by_function": by_actor,
        "lambda": lambdas,
        "lambda_invocations_per_lease": round((invocations + later.reactor_invocations) * per, 3),
        "aws_requests_per_lease": {
            "sqs": round(all_in["sqs_requests"], 3),
            "sns": round(all_in["sns_publishes"], 3),
            "s3_put": round(all_in["s3_puts"], 3),
            "s3_get": round(all_in["s3_gets"], 3),
            "eventbridge_put_events": round(all_in["eventbridge_events"], 3),
            "logs_bytes_ingested": round(all_in["log_bytes"], 1),
        },
        "heartbeat_refusals": refused,
        "usd_per_million_leases": total,
        "usd_per_million_leases_means": "the template's default configuration: the worker "
        "routes on the worker function's URL (no API Gateway request, no authorizer call for "
        "them), every other route on the HTTP API",
        "outbound_events": rig.outbound_events,
        "usd_per_million_leases_all_events": total if rig.outbound_events == ALL else None,
        "usd_per_million_leases_all_events_means": "the same workload with OutboundEvents "
        "all: every lease and task transition published on the bus",
        "usd_per_million_leases_http_api": total_http_api,
        "breakdown": breakdown,
        "usd_per_million_leases_provisioned": total_provisioned,
        "provisioned": {
            "dynamodb_usd_per_million_leases": provisioned,
            "minimum_usd_per_month": prices.provisioned_minimum_monthly(),
            "assumption": "BillingMode PROVISIONED under a steady load at this workload's "
            f"rate: auto scaling holds {prices.PROVISIONED_UTILISATION:.0%} utilisation, so "
            "each consumed unit pays for 1/0.7 unit-seconds of capacity at the WCU-hour and "
            "RCU-hour prices; the same read and write units as on demand (table and indexes). "
            "Bursts above the scaled capacity throttle instead of costing more; the template's "
            "minimum units (table and each index) are paid even when idle.",
        },
        "breakdown_http_api": breakdown_http_api,
        "fixed_usd_per_month": fixed,
        "usd_per_million_leases_with_fixed": round(
            total + sum(fixed.values()) * 1e6 / LEASES_PER_MONTH, 4
        ),
        "fixed_spread_over_leases_per_month": LEASES_PER_MONTH,
        "alternatives": {
            "sqs_alone": {
                "usd_per_million_leases": round(sum(sqs.values()), 4),
                "breakdown": sqs,
                "note": "no fencing, no audit trail, no HTTP front door: the floor",
            },
            "step_functions_activities": {
                "usd_per_million_leases": round(sum(sfn.values()), 4),
                "breakdown": sfn,
                "note": f"Standard workflow, {prices.SFN_TRANSITIONS_PER_EXECUTION} state "
                "transitions per lease; activity polls and heartbeats are not billed",
            },
        },
        "not_included": {
            "ses_receiving_usd_per_million_leases": prices.per_million(
                emails * per * prices.PRICES["ses_email_received"]
            ),
            "storage": "table, log and bucket storage (per GB-month, depends on retention)",
        },
        "prices": prices.table(),
        "budget": BUDGET,
        "within_budget": lifecycle <= BUDGET["lifecycle_write_units"]
        and round(used.read_units * per, 2) <= BUDGET["read_units_per_lease"]
        and requests <= BUDGET["requests_per_lease"]
        and total <= BUDGET["usd_per_million_leases"]
        and total_provisioned <= BUDGET["usd_per_million_leases_provisioned"],
    }


def render(result: dict[str, Any]) -> str:
    """The report as a table for people (the JSON is for machines)."""
    w = result["workload"]
    lines = [
        f"tenure bench cost: {w['leases']} leases, {w['workers']} workers, jobs of "
        f"{w['job_seconds']} s renewed every {w['renew_seconds']} s, {w['leases_per_worker']} "
        f"per worker, {w['email_received_share']:.0%} by email ({w['virtual_seconds']} s "
        "of the service's clock)",
        "",
        f"{'per lease':44s}{'':>12s}",
        f"  {'HTTP requests':42s}{result['requests_per_lease']:>12.3f}",
    ]
    for route, n in result["requests_by_route"].items():
        lines.append(f"    {route:40s}{n:>12.3f}")
    lines.append(f"  {'Lambda invocations':42s}{result['lambda_invocations_per_lease']:>12.3f}")
    for name, fn in result["lambda"].items():
        text = f"{name} ({fn['memory_mb']} MB, {fn['billed_ms_per_invocation']} ms billed avg)"
        lines.append(f"    {text:40s}{fn['invocations_per_lease']:>12.3f}")
    lines += [
        f"  {'DynamoDB write units (all in)':42s}{result['lifecycle_write_units']:>12.2f}",
        f"    {'of which the retention reclaim':40s}"
        f"{result['retention_reclaim']['write_units_per_lease']:>12.2f}",
        f"  {'DynamoDB read units (all in)':42s}{result['read_units_per_lease']:>12.2f}",
        f"    {'of which the retention reclaim':40s}"
        f"{result['retention_reclaim']['read_units_per_lease']:>12.2f}",
        f"  {'lost conditional writes':42s}{result['lost_writes_per_lease']:>12.3f}",
    ]
    for name, n in result["aws_requests_per_lease"].items():
        lines.append(f"  {name:42s}{n:>12.3f}")
    lines += ["", f"{'USD per million leases (us-east-1)':44s}{'':>12s}"]
    for name, usd in result["breakdown"].items():
        lines.append(f"  {name:42s}{usd:>12.4f}")
    lines.append(f"  {'Tenure, all in':42s}{result['usd_per_million_leases']:>12.4f}")
    for setting, figures in result.get("by_outbound_events", {}).items():
        text = f"Tenure, OutboundEvents {setting}"
        lines.append(f"  {text:42s}{figures['usd_per_million_leases']:>12.4f}")
    text = "Tenure, every route on the HTTP API"
    lines.append(f"  {text:42s}{result['usd_per_million_leases_http_api']:>12.4f}")
    text = "Tenure, table PROVISIONED at 70 %"
    lines.append(f"  {text:42s}{result['usd_per_million_leases_provisioned']:>12.4f}")
    for name, alt in result["alternatives"].items():
        lines.append(f"  {name + ' (same workload)':42s}{alt['usd_per_million_leases']:>12.4f}")
    fixed = result["fixed_usd_per_month"]
    lines += [
        "",
        "fixed per month: " + ", ".join(f"{k} ${v:.2f}" for k, v in fixed.items()),
        f"with the fixed part spread over {result['fixed_spread_over_leases_per_month']:,} "
        f"leases a month: ${result['usd_per_million_leases_with_fixed']:.2f} per million",
        f"prices checked {result['prices']['checked']} ({result['prices']['region']}); "
        f"budget {result['budget']}: {'within' if result['within_budget'] else 'OVER'}",
    ]
    return "\n".join(lines)


def main(
    leases: int, workers: int | None, settings: tuple[str, ...] = (ENDINGS, ALL)
) -> dict[str, Any]:
    # Powertools warns on every invocation that flushes no metric: not the bench's news.
    warnings.filterwarnings("ignore", message="No application metrics to publish")
    result = measure(leases, workers, settings)
    print(render(result), file=sys.stderr)
    return result
