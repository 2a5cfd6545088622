"""The workers of a reliability run: threads on the SDK's client, and `tenure worker run` processes.

A thread worker claims (retrying a claim whose answer was lost under the same claim_id, the
only way a claim may be retried), starts or heartbeats (per lease or batched), works, and ends
the lease by complete, fail or release; or it crashes (abandons the lease), or stalls past its
lease and reports late. It follows the SDK's self-fence rule: it stops acting once its last
answered heartbeat (or claim) is `lease_seconds - 2 * renew_seconds` old. Every instant it acts
is journalled as a Hold. A process worker is the real SDK runner, whose jobs note their own
holds.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from tenure.domain.fencing import DEADLINE_SLACK
from tenure_worker.client import ApiError, ClaimUnanswered, Client, Unreachable

from tests.reliability.history import Hold, Journal

CLAIM_RETRIES = 3
TICK_S = 0.05


class ThreadWorker:
    def __init__(
        self,
        name: str,
        api: str,
        token: str,
        pool: str,
        journal: Journal,
        seed: int,
        stop: threading.Event,
        batched: bool,
    ) -> None:
        self.name = name
        self.client = Client(api, token, timeout=15.0)
        self.pool = pool
        self.journal = journal
        self.rng = random.Random(f"{seed}:thread:{name}")
        self.stop = stop
        self.batched = batched
        self.crash_now = threading.Event()  # set by the fault injector
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.plans: dict[str, int] = {}
        self.error: BaseException | None = None

    def start(self) -> ThreadWorker:
        self.thread.start()
        return self

    def _run(self) -> None:
        try:
            while not self.stop.is_set():
                self._one_lease()
        except BaseException as err:  # reported by the run, never swallowed
            self.error = err

    def _claim(self) -> tuple[Any, float] | None:
        claim_id = None
        for _ in range(1 + CLAIM_RETRIES):
            sent = time.time()
            try:
                got = self.client.claim(self.pool, self.name, "reliability/1", 2.0, None, claim_id)
            except ClaimUnanswered as err:
                claim_id = err.claim_id
                time.sleep(err.retry_after if err.retry_after is not None else 0.5)
                continue
            except ApiError:
                time.sleep(0.5)
                return None
            return (got, sent) if got is not None else None
        return None  # the intent is given up: a lease it won is left to expire

    def _one_lease(self) -> None:
        self.crash_now.clear()
        won = self._claim()
        if won is None:
            time.sleep(0.2)
            return
        claim, last_ok = won
        lease_id, token, fence = claim.lease_id, claim.token, claim.fence
        task_id = (claim.lease.get("task") or {}).get("id", "")
        renew, lease_s = claim.renew_seconds, claim.lease_seconds
        plan = self.rng.choices(
            ["complete", "fail", "failure", "release", "crash", "stall"],
            weights=[60, 8, 6, 10, 8, 8],
        )[0]
        self.plans[plan] = self.plans.get(plan, 0) + 1
        work = self.rng.uniform(0.2, 2.5)
        acting_from = time.time()
        if self.rng.random() < 0.5:
            sent = time.time()
            with contextlib.suppress(ApiError, Unreachable):
                self.client.start(lease_id, token, timeout=self._budget(last_ok, lease_s, renew))
                last_ok = sent
        next_beat = time.time() + renew
        ended = "worked"
        until = acting_from + work
        while time.time() < until:
            now = time.time()
            if now >= last_ok + lease_s - 2 * renew:
                ended = "self_fenced"
                break
            if self.crash_now.is_set() or (plan == "crash" and now >= acting_from + work / 2):
                ended = "crashed"
                break
            if now >= next_beat:
                next_beat = now + renew
                beat = self._beat(lease_id, token, fence, self._budget(last_ok, lease_s, renew))
                if beat == "ok":
                    last_ok = now
                elif beat == "stale":
                    ended = "refused"
                    break
                continue
            time.sleep(TICK_S)
        self.journal.hold(Hold(self.name, lease_id, task_id, fence, acting_from, time.time()))
        if ended in ("crashed", "refused"):
            return
        if ended == "self_fenced":
            self._report(lease_id, token, "fail", {"error": "lost contact"}, lease_s)
            return
        if plan == "stall":
            # A long pause (a stopped VM, a GC): past the lease, then the report anyway.
            time.sleep(lease_s * (1 + DEADLINE_SLACK) + 2 * renew + self.rng.uniform(0.5, 2.0))
            plan = "complete"
        if plan == "complete":
            self._report(lease_id, token, "complete", {"outcome": "success"}, lease_s)
        elif plan == "failure":
            self._report(lease_id, token, "complete", {"outcome": "failure"}, lease_s)
        elif plan == "fail":
            self._report(lease_id, token, "fail", {"error": "the job failed"}, lease_s)
        else:
            self._report(lease_id, token, "release", {"reason": "shutting down"}, lease_s)

    @staticmethod
    def _budget(last_ok: float, lease_s: float, renew: float) -> float:
        return max(0.5, min(15.0, last_ok + lease_s - 2 * renew - time.time()))

    def _beat(self, lease_id: str, token: str, fence: int, budget: float) -> str:
        try:
            if self.batched:
                answers = self.client.worker_heartbeat(self.name, [(lease_id, fence)], budget)
                if answers and "error" in answers[0]:
                    return "stale"
            else:
                self.client.call(
                    "POST", f"/leases/{lease_id}/heartbeat", {}, token, timeout=budget, retries=0
                )
        except ApiError as err:
            return "stale" if err.status == 409 else "error"
        except Unreachable:
            return "error"
        return "ok"

    def _report(
        self, lease_id: str, token: str, kind: str, body: dict[str, Any], lease_s: float
    ) -> None:
        """Sent until answered, while the lease could still take it (like the SDK)."""
        give_up = time.time() + lease_s * (1 + DEADLINE_SLACK) + 2.0
        while time.time() < give_up:
            try:
                getattr(self.client, kind)(lease_id, token, body, timeout=5.0, retries=1)
                return
            except ApiError:
                return  # an answer: refused
            except Unreachable:
                time.sleep(0.3)


class ProcessWorker:
    """`tenure worker run` in a process of its own, through its proxy; killable, restartable."""

    def __init__(
        self,
        name: str,
        api: str,
        token: str,
        pool: str,
        workdir: Path,
        holds_dir: Path,
        seed: int,
    ) -> None:
        self.name = name
        self.api, self.token, self.pool = api, token, pool
        self.state_dir = workdir / name
        self.log = workdir / f"{name}.log"
        self.holds_dir = holds_dir
        self.seed = seed
        self.proc: subprocess.Popen[bytes] | None = None
        self.kills = 0

    def start(self) -> ProcessWorker:
        env = {**os.environ, "TENURE_TOKEN": self.token, "RELIABILITY_WORKER": self.name}
        command = [sys.executable, "-m", "tenure_cli", "worker", "run", "--api", self.api]
        command += ["--pool", self.pool, "--worker-id", self.name]
        command += ["--state-dir", str(self.state_dir), "--kill-grace", "1"]
        command += ["--", sys.executable, "-m", "tests.reliability.job"]
        command += [str(self.holds_dir), str(self.seed)]
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=os.getcwd()
            )
        return self

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)
            self.kills += 1

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        """SIGTERM: the worker stops claiming; its jobs fence themselves at their fence."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)


def read_job_holds(holds_dir: Path) -> list[Hold]:
    found = []
    for path in sorted(holds_dir.glob("*.json")):
        with contextlib.suppress(OSError, ValueError, KeyError):
            note = json.loads(path.read_text())
            found.append(
                Hold(
                    note["worker"],
                    note["lease_id"],
                    note["task_id"],
                    int(note["fence"]),
                    float(note["start"]),
                    float(note["end"]),
                )
            )
    return found
