"""`tenure bench cost`: what one lease costs, all in, on the reference workload.

The reference workload: jobs of 2 minutes, renewed every 10 s, 4 leases held per worker; 10 %
of the leases minted by one `email.received` rule from inbound mail, the rest filed with
POST /tasks. It runs on the metered in-process stack (bench/rig.py) on DynamoDB Local, with
the service's clock moved 10 s per tick instead of waiting: every request, invocation and
capacity unit is real, only the waiting is skipped.

Workers behave as the worker SDK's runner does (tenure_worker/runner.py): a claim, then the
payload, then start; one POST /workers/{id}/heartbeat per renewal for all the leases a worker
holds, except where a report that claims the next lease carries it; complete when the job
ends; claim again while below 4. The queue never runs dry, so no
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

from .cost_report import Window, judged, render, report
from .meter import Usage
from .reclaim import reclaim_later
from .rig import Rig
from .workload import (
    EMAIL_SHARE,
    JOB_SECONDS,
    LEASES_PER_WORKER,
    PER_LEASE_ACTORS,
    RENEW_SECONDS,
)

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


@dataclass
class Held:
    lease_id: str
    token: str
    fence: int
    since: int  # the clock's ms when its job started


class BenchWorker:
    """One worker host: a worker token, up to 4 leases, the runner's order of calls."""

    def __init__(self, rig: Rig, token: str, worker_id: str, pool: str, fold: bool = True) -> None:
        self.fold = fold  # heartbeats ride on reports that claim, as the runner sends them
        self.client = Client("http://bench.local", token, transport=rig.transport, retries=0)
        self.rig = rig
        self.worker_id = worker_id
        self.pool = pool
        self.held: list[Held] = []
        self.completed = 0
        self.refused = 0
        self.signal = ""  # echoed in each worker heartbeat, as the runner does

    def tick(self, queue: list[int]) -> None:
        """One renewal period of the runner's loop (tenure_worker/runner.py), in its order: one
        heartbeat for every lease held, echoing the last answer's signal (carried by the first
        report that claims, when one does), each finished job's report claiming the next lease
        in the same call while work remains, then plain claims for free slots. Every claim asks
        for its lease running (`start`: the runner launches the job on the answer), so there
        is no start call and a first heartbeat has nothing to start. A claim's answer carries
        the payload."""
        now = self.rig.clock.now_ms()
        ending = [h for h in self.held if now - h.since >= JOB_SECONDS * 1000]
        # The tick's heartbeat rides on the first report when that report claims (as the
        # runner folds a heartbeat due within half a renewal): it renews the leases that go on.
        rides = self.fold and bool(ending) and queue[0] > 0
        if self.held and not rides:
            answers, self.signal = self.client.worker_beats(
                self.worker_id, [(h.lease_id, h.fence) for h in self.held], self.signal
            )
            self.refused += sum(1 for a in answers if "error" in a or a.get("revoke"))
        going_on = [{"id": h.lease_id, "fence": h.fence} for h in self.held if h not in ending]
        for held in ending:
            body: dict[str, Any] = {"outcome": "success", "details": {"exit_status": 0}}
            if queue[0] > 0:
                body["next"] = {
                    "worker_id": self.worker_id,
                    "claim_id": new_claim_id(),
                    "worker_version": "tenure-worker/bench",
                    "start": True,
                }
                if rides and going_on:
                    body["heartbeat"], going_on = going_on, []
            answer = self.client.complete(held.lease_id, held.token, body)
            self.held.remove(held)
            self.completed += 1
            rows = answer.get("heartbeat")
            if isinstance(rows, list):
                self.refused += sum(1 for a in rows if "error" in a or a.get("revoke"))
            elif rows is not None:
                self.refused += 1  # refused as a whole
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
            "reactor_invocations_per_lease": r["lambda"]["reactor"]["invocations_per_lease"],
            "logs_bytes_per_lease": r["aws_requests_per_lease"]["logs_bytes_ingested"],
            "lifecycle_write_units": r["lifecycle_write_units"],
            "read_units_per_lease": r["read_units_per_lease"],
            "breakdown": r["breakdown"],
        }
        for s, r in runs.items()
    }
    if ALL in runs:
        result["usd_per_million_leases_all_events"] = runs[ALL]["usd_per_million_leases"]
    return judged(result)  # the every-event price stays unmeasured when `all` was not run


def run(leases: int = 240, workers: int | None = None, rig: Rig | None = None) -> dict[str, Any]:
    """The reference workload on `leases` leases; by default a worker runs 3 jobs in a row
    per slot, so most renewals are steady-state ones."""
    workers = workers or max(1, math.ceil(leases / (3 * LEASES_PER_WORKER)))
    emails = round(leases * EMAIL_SHARE)
    with rig or Rig() as rig:
        admin, tokens = _set_up(rig, workers)
        _file(rig, admin, leases, emails)
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
                sweeps.append(_sweep(rig))
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


def _set_up(rig: Rig, workers: int) -> tuple[Client, list[str]]:
    """The bench's space, pool, addresses, rule and worker tokens; then every function once,
    and the meters reset: the admin's client and the worker tokens."""
    admin_raw = "tnr_o_" + wiring.RandomIds().secret()
    with rig.meter.acting("setup"):
        wiring.service().tokens.bootstrap_admin(admin_raw)
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
        admin.call("POST", "/tokens", {"name": f"w{i}", "kind": "worker", "pools": ["bench"]})[1][
            "token"
        ]
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
    rig.access_log_bytes.clear()
    rig.auth_cache.clear()
    return admin, tokens


def _file(rig: Rig, admin: Client, leases: int, emails: int) -> None:
    """The workload's leases: `emails` minted by the rule from inbound mail, the rest filed
    with POST /tasks."""
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


def _sweep(rig: Rig) -> Usage:
    """One sweeper pass of the workload's window: the units it used."""
    before = rig.meter.snapshot().get("sweeper", Usage())
    rig.sweep()
    after = rig.meter.usage("sweeper")
    one = Usage()
    one.add(after)
    one.read_units -= before.read_units
    one.write_units -= before.write_units
    return one


def main(
    leases: int, workers: int | None, settings: tuple[str, ...] = (ENDINGS, ALL)
) -> dict[str, Any]:
    # Powertools warns on every invocation that flushes no metric: not the bench's news.
    warnings.filterwarnings("ignore", message="No application metrics to publish")
    result = measure(leases, workers, settings)
    print(render(result), file=sys.stderr)
    return result
