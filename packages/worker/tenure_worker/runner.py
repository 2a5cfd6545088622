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
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tenure_worker.client import (
    ApiError,
    Claim,
    ClaimUnanswered,
    Client,
    NotAClaim,
    Unavailable,
    Unreachable,
    claim_of,
    new_claim_id,
    post_logs,
)
from tenure_worker.jobs import (
    LOG_DRAIN_SECONDS,
    LOOP_SECONDS,
    TOKEN_SHAPE,
    UNKNOWN_HEARTBEAT,
    UNKNOWN_SIGNAL,
    UNKNOWN_START,
    DiskFull,
    Held,
    StateDirRefused,
    WorkerOptions,
    alive,
    failure_error,
    fence_grace,
    free_read_output,
    group_left,
    hold_state_dir,
    log,
    noted_usage,
    open_output,
    owned_by_us,
    read_private,
    ridden_rows,
    riding,
    signal_job,
    start_time,
    stderr_tail,
    stored_worker_id,
    usage_file,
    with_beats,
    write_private,
)
from tenure_worker.shipping import LogPump, LogShipper


class Worker:
    def __init__(self, opts: WorkerOptions, client: Client | None = None) -> None:
        self.opts = opts
        self.client = client or Client(opts.api, opts.token)
        self.state_dir = opts.state_dir
        # Held (locked) for the worker's lifetime; refused when it is not this user's alone.
        self.lock = hold_state_dir(self.state_dir)
        self.worker_id = opts.worker_id or stored_worker_id(self.state_dir)
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
        # A report that claims the next lease carries the worker heartbeat due within half a
        # renewal (one request fewer), unless the service is of a release that does not know
        # a report's `heartbeat`: then heartbeats go apart, as they always did.
        self.fold_beats = True
        self.claim_not_before = 0.0  # after a failed claim: waited out in the loop, which
        # keeps heartbeating and fencing meanwhile
        self.finished = 0
        self.failed = 0  # jobs that exited non-zero on their own: `--once` then exits 1
        self.stopping = False  # a first signal: claim no more, drain
        self.signals = 0  # a second signal stops at once
        # What the last worker heartbeat's answer carried, echoed in the next ("" before the
        # first; None: the service does not know the field).
        self.beat_signal: str | None = ""
        self.drain_until: float | None = None
        self.drain_announced = False
        self.contacted = False  # "worker up" is said once the service has answered
        self.next_beat = 0.0
        self.shippers: dict[str, LogShipper] = {}
        self.pump: LogPump | None = None  # started with the loop (run)
        # Why the worker is ending because its state dir's disk is full (None: it is not).
        self.disk_full: str | None = None
        self.unfreed_said = False  # a file system that cannot free output: said once

    # -------------------------------------------------------------------- identity

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
                return self._ended()
            if self.stopping and self._drained():
                self._drain_logs()
                return self._ended()
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

    def _ended(self) -> int:
        if self.disk_full is not None:
            raise DiskFull(
                f"the disk of the state dir {self.state_dir} is full ({self.disk_full}): "
                "every job was stopped and its lease failed; free some room there and start "
                "the worker again"
            )
        return 0

    def _full(self, err: DiskFull) -> None:
        """A write the worker needs failed for want of room: it can no longer keep its jobs'
        fences (the shim reads them from the disk) nor a restart's state. Every job is stopped
        (SIGTERM, SIGKILL after the grace) and its lease failed; nothing more is claimed; the
        worker ends once that is reported."""
        if self.disk_full is None:
            self.disk_full = str(err)
            log(
                "the state dir's disk is full: stopping every job and the worker",
                state_dir=str(self.state_dir),
                error=str(err),
                held=len(self.held),
            )
            self.stopping = True
            self.drain_announced = True  # not a drain: the jobs are stopped now
        for held in list(self.held.values()):
            self._begin_stop(held, "disk_full")

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
        held = self._held_for(claim, claimed_at)
        log("lease claimed", lease=claim.lease_id, fence=claim.fence)
        files = self._prepare(held, claim)
        if files is None:
            return
        out, errors = files
        shim = [
            sys.executable,
            "-m",
            "tenure_worker.shim",
            held.exit_file,
            held.fence_file,
            str(fence_grace(self.opts.kill_grace, held.renew_seconds)),
            str(self.opts.kill_grace),
            "--",
        ]
        try:
            proc = subprocess.Popen(
                [*shim, *self.opts.command],
                env=self._job_env(held, claim),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=errors,
                start_new_session=True,
            )
        finally:
            os.close(out)
            os.close(errors)
        held.pid, held.proc, held.relays = proc.pid, proc, True
        held.started = start_time(proc.pid)  # our child, unreaped: the pid is still its own
        self.held[held.lease_id] = held  # held first: a full disk then stops this job too
        self._save(held)
        # No POST /start: the claim asked for the lease running (`start`), since the job is
        # launched the moment the answer is in; where the service could not start it with
        # the claim (the lease stays `dispatched`), the next worker heartbeat, which renews
        # every held lease in one call, starts it, as a first heartbeat does. Either way the
        # lease's deadline is one toleration from the claim, and the job's fence counts from
        # the claim: nothing is held longer than the claim allows.

    def _held_for(self, claim: Claim, claimed_at: float) -> Held:
        base = self.state_dir / claim.lease_id
        return Held(
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

    def _prepare(self, held: Held, claim: Claim) -> tuple[int, int] | None:
        """The job's payload and fence written and its output files open (stdout, stderr);
        None when that cannot be done: the lease is released unstarted."""
        try:
            payload = claim.payload
            if payload is None:  # the claim answer could not carry it: one more request
                budget = self._budget()
                payload = self.client.payload(
                    claim.lease_id, claim.token, timeout=budget, budget=budget
                )
            write_private(held.payload_file, json.dumps(payload))
            self._write_fence(held, save=False)
            out, errors = open_output(str(self.state_dir / f"{claim.lease_id}.out")), None
            try:
                errors = open_output(held.err_file)
            finally:
                if errors is None:
                    os.close(out)
            return out, errors
        except (DiskFull, StateDirRefused) as err:
            log("cannot write the job's files; releasing", lease=claim.lease_id, error=str(err))
            self._release_unstarted(claim, f"the worker cannot write the job's files: {err}")
            if isinstance(err, DiskFull):
                self._full(err)
            else:
                self.claim_not_before = time.monotonic() + 1.0
        except (ApiError, Unreachable) as err:
            log("payload unavailable; releasing", lease=claim.lease_id, error=str(err))
            self._release_unstarted(claim, "payload_unavailable")
        return None

    def _release_unstarted(self, claim: Claim, reason: str) -> None:
        with contextlib.suppress(ApiError, Unreachable):
            self.client.release(
                claim.lease_id,
                claim.token,
                {"reason": reason},
                timeout=self._budget(),
                retries=0,
            )

    def _job_env(self, held: Held, claim: Claim) -> dict[str, str]:
        env = {
            **os.environ,
            "TENURE_API": self.opts.job_api or self.opts.api,
            "TENURE_WORKER_API": self.opts.api,
            "TENURE_LEASE_ID": claim.lease_id,
            "TENURE_LEASE_TOKEN": claim.token,
            "TENURE_PAYLOAD_FILE": held.payload_file,
            "TENURE_REPORT_MARKER": held.marker_file,
            # `tenure worker usage` notes the job's usage here; the completion sends it.
            "TENURE_USAGE_FILE": usage_file(held),
        }
        env.pop("TENURE_TOKEN", None)  # the job gets its lease's token, not the worker's
        return env

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
            answers = self._beat([(h.lease_id, h.fence) for h in live])
        except (Unreachable, ApiError) as err:
            # A 503's Retry-After does not delay the next heartbeat: it is a new call, not a
            # retry, and a skipped one brings the self-fence closer.
            log("heartbeat not answered", error=str(err))
            return
        self._take_beats(answers, sent)

    def _take_beats(self, answers: list[Any], sent: float) -> None:
        """A worker heartbeat's answers, one per lease, sent at `sent`: from its own request
        or riding on a report's."""
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
            try:
                self._write_fence(held)
            except DiskFull as err:
                self._full(err)
            self._apply_revoke(held, answer.get("revoke"))
        for held in list(self.held.values()):
            self._ship_logs(held)

    def _beat(self, leases: list[tuple[str, int]]) -> list[Any]:
        """One worker heartbeat, echoing the signal the last answer carried, so that the
        service need not read leases nothing happened to. A service of a release without
        signals refuses the field: the heartbeat goes again without it, and so do all after."""
        if self.beat_signal is not None:
            try:
                answers, self.beat_signal = self.client.worker_beats(
                    self.worker_id, leases, self.beat_signal, timeout=self._budget()
                )
                return answers
            except ApiError as err:
                if not (err.status == 422 and UNKNOWN_SIGNAL in err.message):
                    self.beat_signal = ""  # an answer of any other kind: start afresh
                    raise
                self.beat_signal = None
        return self.client.worker_heartbeat(self.worker_id, leases, timeout=self._budget())

    def _apply_revoke(self, held: Held, revoke: str | None) -> None:
        if revoke in ("cancel", "kill") and held.stop_reason is None:
            held.revoke = revoke
            log("revoked", lease=held.lease_id, revoke=revoke)
            self._begin_stop(held, revoke)
        elif revoke == "pause" and not held.paused:
            signal_job(held, signal.SIGSTOP)
            held.paused = True
            log("paused", lease=held.lease_id)
        elif revoke is None and held.paused:
            signal_job(held, signal.SIGCONT)
            held.paused = False
            log("resumed", lease=held.lease_id)

    # -------------------------------------------------------------- job lifecycle

    def _tend(self, held: Held) -> None:
        now = time.monotonic()
        status = self._exit_status(held)
        # An older release's shim leaves as soon as the job's own process exits, when others
        # of the group it led may still run: they are killed once the grace is up, before
        # the lease is reported (a shim of this release sees to that itself).
        stopped = status is not None and held.stop_reason is not None
        if stopped and not held.relays and group_left(held.pid):
            if held.kill_at is not None and now < held.kill_at:
                return
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(held.pid, signal.SIGKILL)
        if status is not None:
            self._finish(held, status)
            return
        self._read_logs(held)
        self._bound_output(held)
        if held.stop_reason is None and now >= held.fence_at:
            log(
                "no word from the service: stopping the job before its lease can expire",
                lease=held.lease_id,
            )
            self._begin_stop(held, "self_fenced")
        if held.kill_at is not None and now >= held.kill_at and not held.killed:
            log("job ignored SIGTERM: killing it", lease=held.lease_id)
            signal_job(held, signal.SIGKILL)
            held.killed = True

    def _begin_stop(self, held: Held, reason: str) -> None:
        if held.stop_reason is not None:
            return
        held.stop_reason = reason
        signal_job(held, signal.SIGTERM)
        if held.paused:
            signal_job(held, signal.SIGCONT)
        # A self-fenced job must be gone before the lease can expire, whatever the grace.
        grace = self.opts.kill_grace
        if reason == "self_fenced":
            grace = fence_grace(grace, held.renew_seconds)
        held.kill_at = time.monotonic() + grace

    def _exit_status(self, held: Held) -> int | None:
        if held.proc is not None:
            code = held.proc.poll()
            if code is None:
                return None
        elif alive(held.pid, held.started):
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
        if held.stop_reason == "disk_full":
            error = "the worker's state dir disk is full: the job was stopped"
            return "fail", {"error": error, "metadata": facts}
        if held.stop_reason == "drain":  # back to the queue, no attempt used
            return "release", {"reason": "the worker stopped before the job finished"}
        if status == 0:
            body: dict[str, Any] = {"outcome": "success", "details": facts}
            usage = noted_usage(held)
            if usage is not None:
                body["usage"] = usage
            return "complete", body
        tail = TOKEN_SHAPE.sub("[token redacted]", stderr_tail(held.err_file))
        return "fail", {
            "error": failure_error(status, tail),
            "metadata": {**facts, "stderr_tail": tail},
        }

    def _send_reports(self) -> None:
        now = time.monotonic()
        for lease_id, (held, kind, body, since) in list(self.unreported.items()):
            if now < self.report_not_before.get(lease_id, 0.0):
                continue
            sent, won = time.monotonic(), None
            # The worker heartbeat due within half a renewal rides on a report that claims
            # (it goes with the worker token); the answer is taken as that heartbeat's.
            riders = riding(self.held, self.next_beat, body) if self.fold_beats else []
            try:
                answer = getattr(self.client, kind)(
                    held.lease_id,
                    held.token,
                    with_beats(body, riders),
                    timeout=self._budget(),
                    retries=0,
                )
                rows = ridden_rows(riders, answer)
                if rows is not None:
                    self.next_beat = sent + min(h.renew_seconds for h in riders)
                    self._take_beats(rows, sent)
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
                if err.status == 422 and UNKNOWN_HEARTBEAT in err.message and riders:
                    # A service of a release without it refused the whole report for its
                    # `heartbeat`, having applied nothing: heartbeats go apart from now on.
                    log("the service does not know heartbeats on reports; sending them apart")
                    self.fold_beats = False
                    continue
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
                try:
                    won = claim_of(answer["next"]) if answer.get("next") else None
                except NotAClaim as err:  # not acted on: whatever it holds expires unheld
                    log("the report's next claim is not one to act on", error=str(err))
                    won = None
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

    # -------------------------------------------------------------- state directory

    def _save(self, held: Held) -> None:
        """The held lease's state file, for a restarted worker. A full disk stops the jobs
        (a restart could not re-attach them) instead of ending the worker with them unwatched."""
        try:
            write_private(self.state_dir / f"{held.lease_id}.json", json.dumps(held.persisted()))
        except DiskFull as err:
            self._full(err)

    def _write_fence(self, held: Held, save: bool = True) -> None:
        """Tell the job's shim (and a restarted worker) when the job must be stopped if no
        heartbeat is answered after this one: it fences the job even if this worker dies.

        Half a renew later than the worker's own fence: a live worker stops its job first
        (and says so); the shim is the backstop, still 1.5 renews before the lease can expire."""
        stop_at = held.acked_at + held.lease_seconds - 1.5 * held.renew_seconds
        write_private(held.fence_file, f"{stop_at:.3f}")  # DiskFull: the caller stops the jobs
        if save:
            self._save(held)

    def _bound_output(self, held: Held) -> None:
        """Keep the job's output files to their last bytes on disk (jobs.OUTPUT_KEEP_BYTES):
        a job that floods its output must not fill the disk its fence and state are on."""
        base = held.err_file.removesuffix(".err")
        for path in (f"{base}.out", held.err_file):
            if not free_read_output(path) and not self.unfreed_said:
                self.unfreed_said = True
                log(
                    "this file system cannot free the head of a job's output: its files grow "
                    "as the job writes",
                    lease=held.lease_id,
                )

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
            ".json.tmp",
            ".payload.json.tmp",
            ".fence.tmp",
        ):
            with contextlib.suppress(FileNotFoundError):
                Path(f"{base}{suffix}").unlink()

    def _reattach(self) -> None:
        for path in sorted(self.state_dir.glob("*.json")):
            if path.name.endswith(".payload.json"):
                continue
            try:
                held = Held(**json.loads(read_private(path)))
            except (ValueError, TypeError, OSError, StateDirRefused) as err:
                log("unreadable state file left alone", file=str(path), error=str(err))
                continue
            # The fence counts from the last answered heartbeat, across the restart.
            held.last_ok = time.monotonic() - max(0.0, time.time() - held.acked_at)
            # Only a process of this user's can be a job this worker launched: a pid the state
            # file names that runs as someone else is never re-attached, nor signalled.
            ours = alive(held.pid, held.started) and owned_by_us(held.pid)
            if ours and not os.path.exists(held.exit_file):
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
