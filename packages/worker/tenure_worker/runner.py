"""`tenure worker run`: claims leases from a pool and runs a command under each, safely.

Safety rules (the worker's side of docs/fencing-and-timing.md): one worker-level heartbeat
renews every held lease; a revoke stops the job (SIGTERM, then SIGKILL after a grace period)
and then reports; a job is stopped two heartbeats before its lease could expire whenever the
worker has heard nothing back, so it can never run on after the lease was handed to someone
else; jobs run in sessions of their own and survive the worker, which re-attaches to them from
its state directory after a restart.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from tenure_worker.client import (
    ApiError,
    Claim,
    ClaimUnanswered,
    Client,
    Unavailable,
    Unreachable,
    claim_of,
    new_claim_id,
    post_logs,
)
from tenure_worker.shipping import LogPump, LogShipper

# The shape of a Tenure token (`tnr_` + kind letter + secret): the SDK strips any it finds in
# a job's last output before reporting it, so no token reaches the service's records.
TOKEN_SHAPE = re.compile(r"tnr_[owl]_[A-Za-z0-9_.\-]{16,}")

# How long a stopping worker waits for its jobs' last lines to be shipped.
LOG_DRAIN_SECONDS = 10.0

STDERR_TAIL_BYTES = 4000
# A failed job's `error` names its exit status and its last stderr lines, bounded: the lease
# shows why at a glance, and the report's metadata keeps the longer tail.
ERROR_LINES = 3
ERROR_CHARS = 500
LOOP_SECONDS = 0.2
# Where Linux tells of its processes (absent elsewhere: `ps` is asked instead).
PROC = Path("/proc")
# How a service of a release without `start` on claims refuses one (422 validation_failed).
UNKNOWN_START = "start: is not a known field"


def log(message: str, **fields: Any) -> None:
    extra = " ".join(f"{k}={v}" for k, v in fields.items())
    print(f"[tenure worker] {message} {extra}".rstrip(), file=sys.stderr, flush=True)


@dataclass
class Held:
    """One lease this worker holds and the job running under it (persisted as JSON)."""

    lease_id: str
    fence: int
    token: str  # the lease's own token: kept only in the 0600 state file, to re-attach
    renew_seconds: float
    lease_seconds: float
    pid: int
    exit_file: str
    err_file: str
    payload_file: str
    marker_file: str
    fence_file: str = ""
    # When the job's process started (_start_time), recorded with its pid at launch: the pid
    # alone may name another process after a restart, once the job has ended ("": unknown,
    # as in a state file of an older release, or where the system cannot tell).
    started: str = ""
    acked_at: float = 0.0  # wall clock of the last answered heartbeat (survives a restart)
    keeps_logs: bool = False  # ship the job's output to the lease's logs
    log_positions: dict[str, int] | None = None  # offsets of its output files shipped so far
    # runtime only (see _RUNTIME): never written to the state file
    last_ok: float = 0.0
    revoke: str | None = None
    paused: bool = False
    stop_reason: str | None = None
    kill_at: float | None = None
    killed: bool = False
    proc: subprocess.Popen[bytes] | None = None

    def persisted(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name not in _RUNTIME}

    @property
    def fence_at(self) -> float:
        """When the job must be stopped if nothing is heard: two heartbeats before expiry."""
        return self.last_ok + self.lease_seconds - 2 * self.renew_seconds


_RUNTIME = {"last_ok", "revoke", "paused", "stop_reason", "kill_at", "killed", "proc"}


@dataclass
class WorkerOptions:
    api: str  # where it claims, heartbeats and reports: the worker endpoint or the HTTP API
    token: str
    pool: str
    command: list[str]
    worker_id: str | None = None
    state_dir: Path = Path(".tenure-worker")
    concurrency: int = 1
    once: bool = False
    kill_grace: float = 10.0
    # On a first SIGTERM/SIGINT: how long running jobs may go on to finish before they are
    # stopped and their leases released (back to the queue, no attempt used).
    drain_seconds: float = 30.0
    worker_version: str = "tenure-worker/0.1"
    lease_seconds: int | None = None
    # The API a job is given as TENURE_API (to file tasks, block, call MCP: routes the worker
    # endpoint does not serve); None: `api`. The job reports on `api` (TENURE_WORKER_API).
    job_api: str | None = None


class Worker:
    def __init__(self, opts: WorkerOptions, client: Client | None = None) -> None:
        self.opts = opts
        self.client = client or Client(opts.api, opts.token)
        self.state_dir = opts.state_dir
        self.state_dir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.state_dir, 0o700)
        self.worker_id = opts.worker_id or self._stored_worker_id()
        self.held: dict[str, Held] = {}
        self.unreported: dict[str, tuple[Held, str, dict[str, Any], float]] = {}
        self.report_not_before: dict[str, float] = {}  # the service's Retry-After, per report
        # The claim_id of a claim that got no answer: the next claim goes on with it, so a
        # claim the service did apply comes back as that same lease, never a second one.
        self.claim_intent: str | None = None
        # Claims ask for their lease running (the job is launched on the answer), unless the
        # service is of a release that does not know `start`: then the first heartbeat
        # starts each lease, as it always did, and no report's next claim carries it either.
        self.claim_start = True
        self.claim_not_before = 0.0  # after a failed claim: waited out in the loop, which
        # keeps heartbeating and fencing meanwhile
        self.finished = 0
        self.failed = 0  # jobs that exited non-zero on their own: `--once` then exits 1
        self.stopping = False  # a first signal: claim no more, drain
        self.signals = 0  # a second signal stops at once
        self.drain_until: float | None = None
        self.drain_announced = False
        self.contacted = False  # "worker up" is said once the service has answered
        self.next_beat = 0.0
        self.shippers: dict[str, LogShipper] = {}
        self.pump: LogPump | None = None  # started with the loop (run)

    # -------------------------------------------------------------------- identity

    def _stored_worker_id(self) -> str:
        path = self.state_dir / "worker-id"
        if path.exists():
            return path.read_text().strip()
        worker_id = f"{socket.gethostname()}-{os.getpid()}"
        path.write_text(worker_id)
        return worker_id

    # ------------------------------------------------------------------------ loop

    def run(self) -> int:
        signal.signal(signal.SIGTERM, self._stop)
        signal.signal(signal.SIGINT, self._stop)
        self.pump = LogPump(
            self._post_logs,
            every=5.0,  # a fallback: it is woken after each answered heartbeat
            on_refused=lambda lease_id, err: log(
                "logs refused; not shipping more", lease=lease_id, error=str(err)
            ),
            refusals=(ApiError,),
            unreachable=(Unreachable,),
        )
        self._reattach()
        while True:
            now = time.monotonic()
            if self.held and now >= self.next_beat:
                self._heartbeat()
            for held in list(self.held.values()):
                self._tend(held)
            if self.unreported and now >= self.next_beat - 0.01:
                self._send_reports()
            if self.opts.once and self.finished and not self.held and not self.unreported:
                self._drain_logs()
                return 1 if self.failed else 0
            if self.signals >= 2:
                log(
                    "stopping now; running jobs keep their sessions and stop themselves at "
                    "their fence unless a worker re-attaches",
                    held=len(self.held),
                )
                self._drain_logs()
                return 0
            if self.stopping and self._drained():
                self._drain_logs()
                return 0
            if self._may_claim():
                self._claim()
            else:
                time.sleep(LOOP_SECONDS)

    def _stop(self, signum: int, _frame: Any) -> None:
        # Only flags here: the loop says what it does and does it.
        self.signals += 1
        if not self.stopping:
            self.stopping = True
            self.drain_until = time.monotonic() + self.opts.drain_seconds

    def _drained(self) -> bool:
        """A stopping worker's drain, one turn of it: claim no more; let running jobs finish
        for up to --drain-seconds (heartbeats go on); then stop those still running and
        release their leases, so their work goes back to the queue at once with no attempt
        used, instead of waiting out a lease whose worker is gone. True once nothing is
        held or left to report."""
        if not self.drain_announced:
            self.drain_announced = True
            if self.held:
                log(
                    f"stopping: claiming no more; running jobs may finish for up to "
                    f"{self.opts.drain_seconds:g}s, then they are stopped and their leases "
                    "released (signal again to stop at once and leave them running)",
                    held=len(self.held),
                )
        if not self.held and not self.unreported:
            log("stopped: nothing left running", finished=self.finished)
            return True
        if self.drain_until is not None and time.monotonic() >= self.drain_until:
            for held in list(self.held.values()):
                if held.stop_reason is None:
                    log(
                        "drain time is up: stopping the job to release its lease",
                        lease=held.lease_id,
                    )
                    self._begin_stop(held, "drain")
        return False

    def _contact(self) -> None:
        """The service answered: say the worker is up, and where, once."""
        if not self.contacted:
            self.contacted = True
            log(
                "worker up",
                worker_id=self.worker_id,
                pool=self.opts.pool,
                api=self.client.base,
                held=len(self.held),
            )

    def _may_claim(self) -> bool:
        if self.stopping or len(self.held) >= self.opts.concurrency:
            return False
        if time.monotonic() < self.claim_not_before:
            return False
        return not (self.opts.once and (self.finished or self.held))

    def _claim(self) -> None:
        # Long-poll only when nothing needs heartbeating meanwhile, and not on the first claim:
        # its quick answer is what tells the worker (and whoever reads it) that it is up.
        wait = 10.0 if not self.held and self.contacted else 0.0
        budget = self._budget() if self.held else None
        sent = time.monotonic()  # the lease's clock starts no earlier than this
        try:
            claim = self.client.claim(
                self.opts.pool,
                self.worker_id,
                self.opts.worker_version,
                wait,
                self.opts.lease_seconds,
                claim_id=self.claim_intent,
                budget=budget,
                start=self.claim_start,
            )
        except ApiError as err:
            self.claim_intent = None  # an answer: that intent is settled
            if err.status == 422 and self.claim_start and UNKNOWN_START in err.message:
                log("the service does not know claims that start their lease; claiming without")
                self.claim_start = False
                return
            if err.status in (401, 403, 404):  # a bad token or an unknown pool: say so and stop
                raise
            log("claim failed", error=str(err))
            self.claim_not_before = time.monotonic() + 1.0
            return
        except ClaimUnanswered as err:
            self.claim_intent = err.claim_id
            log("claim not answered; it will be retried as the same claim", error=str(err))
            delay = 1.0 if err.retry_after is None else err.retry_after
            self.claim_not_before = time.monotonic() + delay
            return
        self.claim_intent = None
        self._contact()
        if claim is not None and self.stopping:
            # Won while a stop signal came in (during a long poll): never started, handed back.
            log("stopping: releasing a lease claimed meanwhile", lease=claim.lease_id)
            with contextlib.suppress(ApiError, Unreachable):
                self.client.release(
                    claim.lease_id,
                    claim.token,
                    {"reason": "the worker stopped before the job started"},
                    timeout=self.client.timeout,
                    retries=1,
                )
            return
        if claim is None:
            if self.held:
                time.sleep(LOOP_SECONDS)
            elif wait and time.monotonic() - sent < wait / 2:
                # Nothing, and at once, where the claim could have waited: the token's claims
                # that may wait at once (8) are all waiting already. Wait out the rest here
                # rather than ask again at once, which would spin against the service.
                self.claim_not_before = sent + wait
            return
        self._launch(claim, sent)

    # ------------------------------------------------------------------- launching

    def _launch(self, claim: Claim, claimed_at: float) -> None:
        base = self.state_dir / claim.lease_id
        held = Held(
            lease_id=claim.lease_id,
            fence=claim.fence,
            token=claim.token,
            renew_seconds=claim.renew_seconds,
            lease_seconds=claim.lease_seconds,
            pid=0,
            exit_file=f"{base}.exit",
            err_file=f"{base}.err",
            payload_file=f"{base}.payload.json",
            marker_file=f"{base}.reported",
            fence_file=f"{base}.fence",
            last_ok=claimed_at,
            acked_at=time.time() - (time.monotonic() - claimed_at),
            keeps_logs=claim.keeps_logs,
        )
        log("lease claimed", lease=claim.lease_id, fence=claim.fence)
        try:
            payload = claim.payload
            if payload is None:  # the claim answer could not carry it: one more request
                budget = self._budget()
                payload = self.client.payload(
                    claim.lease_id, claim.token, timeout=budget, budget=budget
                )
            Path(held.payload_file).write_text(json.dumps(payload))
        except (ApiError, Unreachable) as err:
            log("payload unavailable; releasing", lease=claim.lease_id, error=str(err))
            with contextlib.suppress(ApiError, Unreachable):
                self.client.release(
                    claim.lease_id,
                    claim.token,
                    {"reason": "payload_unavailable"},
                    timeout=self._budget(),
                    retries=0,
                )
            return
        env = {
            **os.environ,
            "TENURE_API": self.opts.job_api or self.opts.api,
            "TENURE_WORKER_API": self.opts.api,
            "TENURE_LEASE_ID": claim.lease_id,
            "TENURE_LEASE_TOKEN": claim.token,
            "TENURE_PAYLOAD_FILE": held.payload_file,
            "TENURE_REPORT_MARKER": held.marker_file,
            # `tenure worker usage` notes the job's usage here; the completion sends it.
            "TENURE_USAGE_FILE": _usage_file(held),
        }
        env.pop("TENURE_TOKEN", None)  # the job gets its lease's token, not the worker's
        self._write_fence(held)
        shim = [
            sys.executable,
            "-m",
            "tenure_worker.shim",
            held.exit_file,
            held.fence_file,
            str(_fence_grace(self.opts.kill_grace, held.renew_seconds)),
            "--",
        ]
        with open(f"{base}.out", "ab") as out, open(held.err_file, "ab") as errors:
            proc = subprocess.Popen(
                [*shim, *self.opts.command],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=errors,
                start_new_session=True,
            )
        held.pid, held.proc = proc.pid, proc
        held.started = _start_time(proc.pid)  # our child, unreaped: the pid is still its own
        self._save(held)
        self.held[held.lease_id] = held
        # No POST /start: the claim asked for the lease running (`start`), since the job is
        # launched the moment the answer is in; where the service could not start it with
        # the claim (the lease stays `dispatched`), the next worker heartbeat, which renews
        # every held lease in one call, starts it, as a first heartbeat does. Either way the
        # lease's deadline is one toleration from the claim, and the job's fence counts from
        # the claim: nothing is held longer than the claim allows.

    # ------------------------------------------------------------------ heartbeats

    def _budget(self) -> float:
        """How long a call may block: never past the nearest moment a job must be fenced,
        since nothing checks the fences while the loop waits on the network."""
        if not self.held:
            return self.client.timeout
        nearest = min(h.fence_at for h in self.held.values()) - time.monotonic()
        return max(0.5, min(self.client.timeout, nearest))

    def _heartbeat(self) -> None:
        renew = min(h.renew_seconds for h in self.held.values())
        self.next_beat = time.monotonic() + renew
        live = [h for h in self.held.values() if h.stop_reason != "stale"]
        if not live:
            return
        sent = time.monotonic()
        try:
            answers = self.client.worker_heartbeat(
                self.worker_id, [(h.lease_id, h.fence) for h in live], timeout=self._budget()
            )
        except (Unreachable, ApiError) as err:
            # A 503's Retry-After does not delay the next heartbeat: it is a new call, not a
            # retry, and a skipped one brings the self-fence closer.
            log("heartbeat not answered", error=str(err))
            return
        for answer in answers:
            held = self.held.get(answer["id"])
            if held is None:
                continue
            if "error" in answer:
                code = answer["error"]["code"]
                if os.path.exists(held.marker_file):
                    continue  # the job reported itself; it is on its way out
                log("lease refused by the service", lease=held.lease_id, code=code)
                self._begin_stop(held, "stale")
                continue
            self._contact()
            held.last_ok = sent
            held.acked_at = time.time() - (time.monotonic() - sent)
            self._write_fence(held)
            self._apply_revoke(held, answer.get("revoke"))
        for held in list(self.held.values()):
            self._ship_logs(held)

    def _apply_revoke(self, held: Held, revoke: str | None) -> None:
        if revoke in ("cancel", "kill") and held.stop_reason is None:
            held.revoke = revoke
            log("revoked", lease=held.lease_id, revoke=revoke)
            self._begin_stop(held, revoke)
        elif revoke == "pause" and not held.paused:
            self._signal(held, signal.SIGSTOP)
            held.paused = True
            log("paused", lease=held.lease_id)
        elif revoke is None and held.paused:
            self._signal(held, signal.SIGCONT)
            held.paused = False
            log("resumed", lease=held.lease_id)

    # -------------------------------------------------------------- job lifecycle

    def _tend(self, held: Held) -> None:
        now = time.monotonic()
        status = self._exit_status(held)
        if status is not None:
            self._finish(held, status)
            return
        self._read_logs(held)
        if held.stop_reason is None and now >= held.fence_at:
            log(
                "no word from the service: stopping the job before its lease can expire",
                lease=held.lease_id,
            )
            self._begin_stop(held, "self_fenced")
        if held.kill_at is not None and now >= held.kill_at and not held.killed:
            log("job ignored SIGTERM: killing it", lease=held.lease_id)
            self._signal(held, signal.SIGKILL)
            held.killed = True

    def _begin_stop(self, held: Held, reason: str) -> None:
        if held.stop_reason is not None:
            return
        held.stop_reason = reason
        self._signal(held, signal.SIGTERM)
        if held.paused:
            self._signal(held, signal.SIGCONT)
        # A self-fenced job must be gone before the lease can expire, whatever the grace.
        grace = self.opts.kill_grace
        if reason == "self_fenced":
            grace = _fence_grace(grace, held.renew_seconds)
        held.kill_at = time.monotonic() + grace

    def _exit_status(self, held: Held) -> int | None:
        if held.proc is not None:
            code = held.proc.poll()
            if code is None:
                return None
        elif _alive(held.pid, held.started):
            return None
        try:
            return int(Path(held.exit_file).read_text().strip())
        except (OSError, ValueError):
            # No status written: the shim itself was killed (SIGKILL to the group).
            return -9 if held.killed else -1

    def _finish(self, held: Held, status: int) -> None:
        self.held.pop(held.lease_id, None)
        self.finished += 1
        if status != 0 and held.stop_reason is None:
            self.failed += 1  # the job failed on its own (not stopped by a revoke or a stop)
        # The tail of its output, before the report ends the lease (a killed job's too).
        self._ship_logs(held, final=True)
        report = self._report_for(held, status)
        if report is None:
            self._forget(held)
            return
        kind, body = report
        if kind in ("complete", "fail") and self._may_claim() and self.claim_intent is None:
            # The report claims this worker's next lease in the same call: one
            # request per lease for a busy worker. The claim_id stays with the report, so a
            # report sent again because its answer was lost gets that same lease back.
            body = {**body, "next": self._next_claim()}
        # Kept (with the state files) until the service has it: a report is never dropped
        # while the lease could still take it, and a restarted worker would send it again.
        self.unreported[held.lease_id] = (held, kind, body, time.monotonic())
        self._send_reports()

    def _report_for(self, held: Held, status: int) -> tuple[str, dict[str, Any]] | None:
        if held.stop_reason == "stale":
            log("job stopped; its lease had moved on, nothing to report", lease=held.lease_id)
            return None
        if os.path.exists(held.marker_file):
            log("job reported itself", lease=held.lease_id, exit_status=status)
            return None
        facts = {"exit_status": status}
        if held.stop_reason in ("cancel", "kill"):
            return "fail", {"error": f"revoked: {held.stop_reason}", "metadata": facts}
        if held.stop_reason == "self_fenced":
            return "fail", {"error": "worker lost contact with the service", "metadata": facts}
        if held.stop_reason == "drain":  # back to the queue, no attempt used
            return "release", {"reason": "the worker stopped before the job finished"}
        if status == 0:
            body: dict[str, Any] = {"outcome": "success", "details": facts}
            usage = _noted_usage(held)
            if usage is not None:
                body["usage"] = usage
            return "complete", body
        tail = TOKEN_SHAPE.sub("[token redacted]", _tail(held.err_file))
        return "fail", {
            "error": _failure_error(status, tail),
            "metadata": {**facts, "stderr_tail": tail},
        }

    def _send_reports(self) -> None:
        now = time.monotonic()
        for lease_id, (held, kind, body, since) in list(self.unreported.items()):
            if now < self.report_not_before.get(lease_id, 0.0):
                continue
            sent, won = time.monotonic(), None
            try:
                answer = getattr(self.client, kind)(
                    held.lease_id, held.token, body, timeout=self._budget(), retries=0
                )
                facts = body.get("metadata") or body.get("details") or {}
                log(
                    "reported",
                    lease=lease_id,
                    report=kind,
                    state=answer["lease"]["state"],
                    exit_status=facts.get("exit_status"),
                )
            except ApiError as err:
                nxt = body.get("next") or {}
                if err.status == 422 and UNKNOWN_START in err.message and "start" in nxt:
                    # A service of a release without `start` refused the whole report for its
                    # next claim's field, so nothing was applied: send it again without it.
                    log("the service does not know claims that start their lease; reporting again")
                    self.claim_start = False
                    stripped = {k: v for k, v in nxt.items() if k != "start"}
                    self.unreported[lease_id] = (held, kind, {**body, "next": stripped}, since)
                    continue
                # A 4xx is an answer (409: the lease moved on, or the job reported already).
                log("report refused", lease=lease_id, code=err.code)
            except Unreachable as err:
                # Never a verdict on the lease (a 503 included): try again while it may stand.
                if time.monotonic() - since < held.lease_seconds:
                    log("report not delivered yet; retrying", lease=lease_id, error=str(err))
                    if isinstance(err, Unavailable):
                        self.report_not_before[lease_id] = time.monotonic() + err.retry_after
                    continue
                log("report given up: the lease has expired by now", lease=lease_id)
            else:
                won = claim_of(answer["next"]) if answer.get("next") else None
            self.unreported.pop(lease_id, None)
            self.report_not_before.pop(lease_id, None)
            self._forget(held)
            if won is not None:
                self._launch(won, sent)

    def _next_claim(self) -> dict[str, Any]:
        """The claim a final report carries: never a long poll (other leases need beats)."""
        ask: dict[str, Any] = {
            "worker_id": self.worker_id,
            "claim_id": new_claim_id(),
            "worker_version": self.opts.worker_version,
            "host": socket.gethostname()[:255],
        }
        if self.claim_start:  # launched the moment the answer is in, as a claim's lease
            ask["start"] = True
        if self.opts.lease_seconds:
            ask["lease_seconds"] = self.opts.lease_seconds
        return ask

    def _signal(self, held: Held, sig: signal.Signals) -> None:
        """Signal the job's process group, and nothing else: not a pid the system has given
        to another process since the job ended."""
        if not _is_job(held):
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(held.pid, sig)

    # -------------------------------------------------------------- state directory

    def _save(self, held: Held) -> None:
        path = self.state_dir / f"{held.lease_id}.json"
        tmp = path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            json.dump(held.persisted(), out)
        os.replace(tmp, path)

    def _write_fence(self, held: Held) -> None:
        """Tell the job's shim (and a restarted worker) when the job must be stopped if no
        heartbeat is answered after this one: it fences the job even if this worker dies.

        Half a renew later than the worker's own fence: a live worker stops its job first
        (and says so); the shim is the backstop, still 1.5 renews before the lease can expire."""
        stop_at = held.acked_at + held.lease_seconds - 1.5 * held.renew_seconds
        tmp = f"{held.fence_file}.tmp"
        with open(tmp, "w") as out:
            out.write(f"{stop_at:.3f}")
        os.replace(tmp, held.fence_file)
        self._save(held)

    def _shipper(self, held: Held) -> LogShipper | None:
        """The job's log shipper (None: its lease keeps no logs, or refused them)."""
        if not held.keeps_logs or self.pump is None:
            return None
        shipper = self.shippers.get(held.lease_id)
        if shipper is None:
            base = held.err_file.removesuffix(".err")
            files = {"stdout": f"{base}.out", "stderr": held.err_file}
            shipper = LogShipper(files, held.log_positions or {})
            self.shippers[held.lease_id] = shipper
        return shipper if shipper.enabled else None

    def _read_logs(self, held: Held) -> None:
        """Read the job's new lines on every turn of the loop, not only on the beat: each line
        is stamped when it is read, so its time is within a turn of when the job wrote it
        (read on the beat, every line of a renew period would carry the beat's time)."""
        shipper = self._shipper(held)
        if shipper is not None:
            shipper.collect()

    def _ship_logs(self, held: Held, final: bool = False) -> None:
        """Read what the job printed since the last read (all of it when `final`) for the log
        pump to ship from its own thread: this loop never waits on the network for logs."""
        shipper = self._shipper(held)
        if shipper is None or self.pump is None:
            return
        shipper.collect(final=final)
        self.pump.track(held.lease_id, shipper, held.token, finished=final)
        positions = shipper.positions()
        if positions != held.log_positions:
            held.log_positions = positions
            if held.lease_id in self.held:  # a restarted worker goes on from here
                self._save(held)

    def _post_logs(self, lease_id: str, token: str, events: list[dict[str, Any]]) -> None:
        post_logs(self.client, lease_id, token, events, min(self.client.timeout, 10.0))

    def _drain_logs(self) -> None:
        if self.pump is not None and not self.pump.drain(LOG_DRAIN_SECONDS):
            log("some job output could not be shipped before the worker stopped")

    def _forget(self, held: Held) -> None:
        # (its lines already read stay with the log pump until shipped)
        self.shippers.pop(held.lease_id, None)
        base = self.state_dir / held.lease_id
        for suffix in (
            ".json",
            ".exit",
            ".payload.json",
            ".reported",
            ".err",
            ".out",
            ".fence",
            ".usage",
        ):
            with contextlib.suppress(FileNotFoundError):
                Path(f"{base}{suffix}").unlink()

    def _reattach(self) -> None:
        for path in sorted(self.state_dir.glob("*.json")):
            if path.name.endswith(".payload.json"):
                continue
            try:
                held = Held(**json.loads(path.read_text()))
            except (ValueError, TypeError) as err:
                log("unreadable state file left alone", file=str(path), error=str(err))
                continue
            # The fence counts from the last answered heartbeat, across the restart.
            held.last_ok = time.monotonic() - max(0.0, time.time() - held.acked_at)
            if _alive(held.pid, held.started) and not os.path.exists(held.exit_file):
                log("re-attached", lease=held.lease_id, pid=held.pid)
                # It may have been paused before and resumed while the worker was away: the
                # first heartbeat without a pause revoke sends SIGCONT (a no-op if running).
                held.paused = True
                self.held[held.lease_id] = held
            elif os.path.exists(held.exit_file):
                log("job ended while the worker was away", lease=held.lease_id)
                self._finish(held, int(Path(held.exit_file).read_text().strip() or -1))
            else:
                log("job gone after a restart", lease=held.lease_id)
                self.finished += 1
                report = ("fail", {"error": "worker_restarted"}, time.monotonic())
                self.unreported[held.lease_id] = (held, *report)


def _fence_grace(kill_grace: float, renew_seconds: float) -> float:
    """SIGTERM → SIGKILL time for a fenced job: it must be gone before the lease can expire,
    two heartbeats after the fence, whatever --kill-grace says."""
    return min(kill_grace, max(0.5, renew_seconds))


def _alive(pid: int, started: str = "", proc: Path = PROC) -> bool:
    """Whether the job's process runs: its pid is taken, not by a zombie (ended, not yet
    reaped), and, where the job's start time was recorded, by a process that started then
    (one that did not is another process the pid was given to after the job ended)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # taken by another user's process: the start time tells whether it is the job
    if started and _start_time(pid, proc) != started:
        return False
    try:
        with open(proc / str(pid) / "stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


def _start_time(pid: int, proc: Path = PROC) -> str:
    """When process `pid` started, as this system tells it ("" when there is no such process,
    or no way to tell): with its pid it names one process. Linux: field 22 of
    /proc/<pid>/stat (starttime, in clock ticks since boot); where there is no /proc (macOS,
    the BSDs), `ps -o lstart=` (to the second)."""
    if proc.is_dir():
        try:
            text = (proc / str(pid) / "stat").read_text()
        except OSError:
            return ""
        # The command name (field 2) is in parentheses and may hold anything: count fields
        # from the last ")", after which field 3 comes.
        fields = text.rsplit(")", 1)[-1].split()
        return f"stat:{fields[19]}" if len(fields) > 19 else ""
    try:
        out = subprocess.run(
            ["ps", "-o", "lstart=", "-p", str(pid)],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    stamp = " ".join(out.stdout.split())
    return f"ps:{stamp}" if out.returncode == 0 and stamp else ""


def _is_job(held: Held) -> bool:
    """Whether `held.pid` still names the job's process. A child this runner launched keeps
    its pid until it is reaped; one re-attached from the state directory is the job only
    while its start time is the one recorded at launch."""
    if held.proc is not None:
        return held.proc.returncode is None
    return _alive(held.pid, held.started)


def _tail(path: str) -> str:
    try:
        with open(path, "rb") as err:
            err.seek(0, os.SEEK_END)
            size = err.tell()
            err.seek(max(0, size - STDERR_TAIL_BYTES))
            return err.read().decode(errors="replace")
    except OSError:
        return ""


def _failure_error(status: int, tail: str) -> str:
    """A failed job's `error`: its exit status and its last non-empty stderr lines (at most
    ERROR_LINES, the newest kept whole where they fit in ERROR_CHARS), so the lease itself
    says why; the longer tail stays in the report's metadata."""
    error = f"exit status {status}"
    lines = [line.strip() for line in tail.splitlines() if line.strip()][-ERROR_LINES:]
    if not lines:
        return error
    room = ERROR_CHARS - len(error) - 2
    kept: list[str] = []
    for line in reversed(lines):
        cost = len(line) + (3 if kept else 0)  # " | " between lines
        if cost > room:
            if not kept:  # the last line alone is too long: its end says most
                kept.append("…" + line[-(room - 1) :])
            break
        kept.insert(0, line)
        room -= cost
    return f"{error}: {' | '.join(kept)}"


def _usage_file(held: Held) -> str:
    return held.marker_file.removesuffix(".reported") + ".usage"


def _noted_usage(held: Held) -> dict[str, Any] | None:
    """What the job noted with `tenure worker usage`, if anything."""
    path = Path(_usage_file(held))
    if not path.exists():
        return None
    try:
        found = json.loads(path.read_text())
    except ValueError:
        return None
    return found if isinstance(found, dict) else None
