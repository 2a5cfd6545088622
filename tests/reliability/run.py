"""One reliability run: workers and a seeded fault injector against a local stack, then the check.

`python -m tests.reliability.run [--seconds N] [--seed S]` (what `make soak` runs), or
`run_history(...)` from a test. It prints the seed first: the same seed gives the same fault
schedule (the injector's timeline, and each proxy's and worker's choices in order).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import signal
import tempfile
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from tenure.domain.fencing import DEADLINE_SLACK
from tenure_cli.local.engines import use_local_credentials

from tests.conftest import LocalStack, start_stack, stop_stack
from tests.reliability import checker
from tests.reliability.history import Journal, Op, TaskTruth, Truth, derive, lease_truth
from tests.reliability.proxy import FaultProxy, ProxyFaults
from tests.reliability.workers import ProcessWorker, ThreadWorker, read_job_holds

# The pool's timings: short, so leases expire, and the sweeper is paused past grace, in seconds.
# Generous enough for a loaded 2-core machine (answers of 1-2 s are common there under load):
# the SDK stops a job 2 renews before its lease could expire, i.e. 6 s after its last answer.
TIMING = {"renew_seconds": 2, "grace_seconds": 4, "toleration_seconds": 10}
SWEEP_INTERVAL_S = 1.0


FILING_TRIES = 10  # a task filed while throttling is injected (503 unavailable)


@dataclass
class Profile:
    seconds: float = 14.0  # how long faults are injected
    drain_seconds: float = 45.0  # then, at most, for every task to end
    threads: int = 4
    processes: int = 2
    tasks: int = 16  # queued at the start
    top_up: int = 0  # kept queued while faults run (0: none after the start)
    max_attempts: int = 10
    proxy: ProxyFaults = field(default_factory=ProxyFaults)


SHORT = Profile()


@dataclass
class Fault:
    at: float  # seconds after the run starts
    kind: str  # kill_worker | crash_thread | cut | pause_sweeper | throttle
    target: str = ""
    seconds: float = 0.0
    share: float = 0.0


def schedule(seed: int, profile: Profile, threads: list[str], processes: list[str]) -> list[Fault]:
    """The fault injector's timeline: a pure function of the seed and the profile."""
    rng = random.Random(f"{seed}:injector")
    faults: list[Fault] = []
    at = 2.0
    while at < profile.seconds:
        kind = rng.choices(
            ["kill_worker", "crash_thread", "cut", "pause_sweeper", "throttle"],
            weights=[2 if processes else 0, 2, 3, 1, 2],
        )[0]
        fault = Fault(at=round(at, 2), kind=kind)
        if kind == "kill_worker":
            fault.target, fault.seconds = rng.choice(processes), rng.uniform(0.5, 3.0)
        elif kind == "crash_thread":
            fault.target = rng.choice(threads)
        elif kind == "cut":
            fault.target = rng.choice(threads + processes)
            # Mostly shorter than the self-fence, sometimes past the whole lease: a long one
            # is past the self-fence, often past the toleration, and reaches a second beyond
            # the latest a silent lease is lost (a toleration and the slack, then a sweep).
            lost_by = TIMING["toleration_seconds"] * (1 + DEADLINE_SLACK) + SWEEP_INTERVAL_S
            long = rng.uniform(7, lost_by + 1)
            fault.seconds = rng.uniform(0.5, 3.0) if rng.random() < 0.6 else long
        elif kind == "pause_sweeper":
            grace = TIMING["grace_seconds"]
            fault.seconds = rng.uniform(grace + SWEEP_INTERVAL_S + 1, grace + 6)
        else:
            fault.seconds, fault.share = rng.uniform(1.0, 4.0), rng.uniform(0.2, 0.7)
        faults.append(fault)
        at += rng.uniform(0.8, 3.0)
    return faults


class FaultSwitch:
    """Writes the stack's fault file (tenure_cli.local.faults): throttling and the sweeper pause."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock = threading.Lock()
        self.throttle_until = 0.0
        self.share = 0.0
        self.paused_until = 0.0
        self.write()

    def write(self) -> None:
        now = time.time()
        state = {
            "throttle": self.share if now < self.throttle_until else 0.0,
            "sweeper_paused": now < self.paused_until,
        }
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state))
        os.replace(tmp, self.path)

    def throttle(self, share: float, seconds: float) -> None:
        with self.lock:
            self.share, self.throttle_until = share, time.time() + seconds
            self.write()

    def pause_sweeper(self, seconds: float) -> None:
        with self.lock:
            self.paused_until = max(self.paused_until, time.time() + seconds)
            self.write()

    def tick(self) -> None:
        with self.lock:
            self.write()

    def clear(self) -> None:
        with self.lock:
            self.throttle_until = self.paused_until = 0.0
            self.write()

    def injected_throttles(self) -> int:
        with contextlib.suppress(OSError):
            return Path(f"{self.path}.throttled").stat().st_size
        return 0


@dataclass
class Result:
    seed: int
    ops: list[Op]
    violations: list[str]
    figures: dict[str, Any]


def run_history(
    profile: Profile, seed: int, workdir: Path, stack: LocalStack | None = None
) -> Result:
    """Start a stack with fault hooks (unless given one), run, read the truth, check."""
    print(f"reliability: seed {seed} (TENURE_RELIABILITY_SEED={seed} repeats this schedule)")
    use_local_credentials()
    faults_file = workdir / "faults.json"
    switch = FaultSwitch(faults_file)
    own = stack is None
    if stack is None:
        env = {**os.environ, "TENURE_TEST_FAULTS_FILE": str(faults_file)}
        stack = start_stack(
            workdir / "data",
            "tnr_o_rel-" + uuid.uuid4().hex,
            sweep_interval=SWEEP_INTERVAL_S,
            env=env,
        )
    try:
        return _run(profile, seed, workdir, stack, switch)
    finally:
        switch.clear()
        if own:
            stop_stack(stack)


def _run(
    profile: Profile, seed: int, workdir: Path, stack: LocalStack, switch: FaultSwitch
) -> Result:
    admin = stack.client(stack.admin_token)
    admin.timeout = httpx.Timeout(90.0)  # a loaded 2-core machine answers slowly, not wrongly
    space = "REL" + uuid.uuid4().hex[:6].upper()
    r = admin.post("/spaces", json={"key": space, "name": "reliability"})
    assert r.status_code == 201, r.text
    pool = f"rel-{uuid.uuid4().hex[:8]}"
    body = {"name": pool, "space": space, "kind": "command", "keeps_logs": False, **TIMING}
    r = admin.post("/pools", json=body)
    assert r.status_code == 201, r.text
    r = admin.post("/tokens", json={"name": f"{pool}-w", "kind": "worker", "pools": [pool]})
    assert r.status_code == 201, r.text
    worker_token = r.json()["token"]

    task_ids: list[str] = []

    def queue(n: int) -> None:
        for _ in range(n):
            body = {"space": space, "title": "reliability", "pool": pool}
            body["max_attempts"] = profile.max_attempts
            # The long profile tops the queue up while throttling is injected: a 503 says the
            # filing did not happen, so it is filed again (bounded, honouring Retry-After).
            for _ in range(FILING_TRIES):
                answer = admin.post("/tasks", json=body)
                if answer.status_code != 503:
                    break
                time.sleep(min(2.0, float(answer.headers.get("retry-after", "1"))))
            assert answer.status_code == 201, answer.text
            task_ids.append(answer.json()["task"]["id"])

    queue(profile.tasks)
    journal = Journal(str(workdir / "journal.jsonl"))
    holds_dir = workdir / "holds"
    holds_dir.mkdir(exist_ok=True)
    upstream = stack.base.rsplit("/api/v1", 1)[0]
    stop = threading.Event()
    proxies: dict[str, FaultProxy] = {}

    def proxy(name: str) -> FaultProxy:
        proxies[name] = FaultProxy(name, upstream, journal, seed, profile.proxy).start()
        return proxies[name]

    threads = {
        f"t{i}": ThreadWorker(
            f"t{i}", proxy(f"t{i}").url, worker_token, pool, journal, seed, stop, i % 2 == 0
        )
        for i in range(profile.threads)
    }
    procs = {
        f"p{i}": ProcessWorker(
            f"p{i}", proxy(f"p{i}").url, worker_token, pool, workdir, holds_dir, seed
        )
        for i in range(profile.processes)
    }
    plan = schedule(seed, profile, sorted(threads), sorted(procs))
    injected: Counter[str] = Counter()
    began = time.time()
    for w in threads.values():
        w.start()
    for p in procs.values():
        p.start()
    restarts: list[tuple[float, ProcessWorker]] = []
    try:
        _inject(plan, began, profile, threads, procs, proxies, switch, injected, restarts, queue)
        switch.clear()
        for proxied in proxies.values():
            proxied.cut_until = 0.0
        for _, p in restarts:
            if not p.alive():
                p.start()
        fault_end = time.time()
        ended = _drain(admin, task_ids, profile.drain_seconds)
        drained = time.time() - fault_end
    finally:
        stop.set()
        for p in procs.values():
            p.stop()
        for w in threads.values():
            w.thread.join(timeout=30)
        for proxied in proxies.values():
            proxied.stop()
        _end_leftover_jobs(holds_dir)
    for w in threads.values():
        assert w.error is None, f"thread worker {w.name} broke: {w.error!r}"
    truth = read_truth(admin, task_ids, journal)
    holds = journal.holds + read_job_holds(holds_dir)
    ops = derive(journal.exchanges, {x.id: x.task_id for x in truth.leases.values()})
    violations = checker.check(ops, holds, truth, task_ids)
    # A task still open after the drain is a violation of tasks_end_once on the truth read
    # after it; a drain that ran out of time only says the machine was slow, so it is a figure.
    figures = _figures(journal, ops, holds, truth, injected, switch, proxies, procs, threads)
    figures["seconds"] = round(time.time() - began, 1)
    figures["drain_seconds"] = round(drained, 1)
    figures["drained_in_time"] = ended
    _print(seed, figures, violations)
    return Result(seed, ops, violations, figures)


def _inject(
    plan: list[Fault],
    began: float,
    profile: Profile,
    threads: dict[str, ThreadWorker],
    procs: dict[str, ProcessWorker],
    proxies: dict[str, FaultProxy],
    switch: FaultSwitch,
    injected: Counter[str],
    restarts: list[tuple[float, ProcessWorker]],
    queue: Any,
) -> None:
    pending = list(plan)
    last_top_up = time.time()
    while pending or time.time() - began < profile.seconds:
        # Every fault is planned inside the window, and the last check of a loaded machine
        # can come a tick or more after the window's end: the window stays open until each
        # planned fault is in (one planned at 13.98 s of 14 was once left out).
        now = time.time() - began
        while pending and pending[0].at <= now:
            fault = pending.pop(0)
            injected[fault.kind] += 1
            if fault.kind == "kill_worker":
                worker = procs[fault.target]
                worker.kill()
                restarts.append((time.time() + fault.seconds, worker))
            elif fault.kind == "crash_thread":
                threads[fault.target].crash_now.set()
            elif fault.kind == "cut":
                proxies[fault.target].cut(fault.seconds)
            elif fault.kind == "pause_sweeper":
                switch.pause_sweeper(fault.seconds)
            else:
                switch.throttle(fault.share, fault.seconds)
        for due in [x for x in restarts if x[0] <= time.time()]:
            restarts.remove(due)
            if not due[1].alive():
                due[1].start()
        if profile.top_up and time.time() - last_top_up > 2.0:
            queue(profile.top_up)
            last_top_up = time.time()
        switch.tick()
        time.sleep(0.1)


def _drain(admin: httpx.Client, task_ids: list[str], seconds: float) -> bool:
    """Wait until every task has ended (bounded)."""
    give_up = time.time() + seconds
    open_ = list(task_ids)
    while time.time() < give_up:
        still = []
        for task_id in open_:
            r = admin.get(f"/tasks/{task_id}")
            if r.status_code != 200 or r.json()["lease"] is not None:
                still.append(task_id)
        open_ = still
        if not open_:
            return True
        time.sleep(1.0)
    print(f"reliability: tasks still open after the drain: {open_[:10]}")
    return False


def read_truth(admin: httpx.Client, task_ids: list[str], journal: Journal) -> Truth:
    """What the service itself says: each task, its timeline, and every lease it names."""
    tasks: dict[str, TaskTruth] = {}
    lease_ids: set[str] = set()
    for task_id in task_ids:
        r = admin.get(f"/tasks/{task_id}")
        assert r.status_code == 200, r.text
        status = r.json()["task"]["status"]
        events: list[dict[str, Any]] = []
        cursor = None
        for _ in range(50):  # bounded: a task's timeline here is a few pages at most
            params = {"cursor": cursor} if cursor else {}
            page = admin.get(f"/tasks/{task_id}/activity", params=params)
            assert page.status_code == 200, page.text
            events += page.json()["events"]
            cursor = page.json()["next_cursor"]
            if not cursor:
                break
        tasks[task_id] = TaskTruth(task_id, status, events)
        lease_ids |= {ev["lease_id"] for ev in events if ev.get("lease_id")}
    for ex in journal.exchanges:  # leases the workers named, in case a timeline missed one
        if isinstance(ex.response, dict) and isinstance(ex.response.get("lease"), dict):
            lease_ids.add(ex.response["lease"]["id"])
    leases = {}
    for lease_id in sorted(lease_ids):
        r = admin.get(f"/leases/{lease_id}")
        assert r.status_code == 200, r.text
        leases[lease_id] = lease_truth(r.json())
    return Truth(tasks=tasks, leases=leases)


def _end_leftover_jobs(holds_dir: Path) -> None:
    """Jobs are named by the pid in their note's file name; end any still running."""
    for path in holds_dir.glob("*.json"):
        pid = int(path.stem.rsplit("-", 1)[1])
        with contextlib.suppress(OSError):
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
            if b"tests.reliability.job" in cmd:
                os.kill(pid, signal.SIGKILL)


def _figures(
    journal: Journal,
    ops: list[Op],
    holds: list[Any],
    truth: Truth,
    injected: Counter[str],
    switch: FaultSwitch,
    proxies: dict[str, FaultProxy],
    procs: dict[str, ProcessWorker],
    threads: dict[str, ThreadWorker],
) -> dict[str, Any]:
    faults = dict(injected)
    for kind in ("dropped", "delayed", "cut"):
        faults[f"proxy_{kind}"] = sum(p.counts[kind] for p in proxies.values())
    faults["throttled_dynamodb_calls"] = switch.injected_throttles()
    by_kind = Counter(op.kind for op in ops)
    answers = Counter(
        f"{op.kind} {op.status} {op.code or ''}".strip() for op in ops if op.status not in (200,)
    )
    plans: Counter[str] = Counter()
    for w in threads.values():
        plans.update(w.plans)
    return {
        "exchanges": len(journal.exchanges),
        "operations": len(ops),
        "operations_by_kind": dict(sorted(by_kind.items())),
        "non_200_answers": dict(sorted(answers.items())),
        "holds": len(holds),
        "tasks": len(truth.tasks),
        "leases": len(truth.leases),
        "leases_by_state": dict(Counter(x.state for x in truth.leases.values())),
        "tasks_by_status": dict(Counter(t.status for t in truth.tasks.values())),
        "stale_report_events": sum(
            1 for t in truth.tasks.values() for ev in t.events if ev["type"] == "lease.stale_report"
        ),
        "thread_plans": dict(plans),
        "faults": faults,
    }


def _print(seed: int, figures: dict[str, Any], violations: list[str]) -> None:
    print(f"reliability: seed {seed}")
    print(json.dumps(figures, indent=2, sort_keys=True))
    print(f"reliability: violations {len(violations)}")
    for v in violations[:50]:
        print(f"  VIOLATION {v}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=float(os.environ.get("SOAK_SECONDS", 600)))
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--processes", type=int, default=4)
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else _seed()
    profile = Profile(
        seconds=args.seconds,
        drain_seconds=60.0,
        threads=args.threads,
        processes=args.processes,
        tasks=30,
        top_up=3,
    )
    workdir = Path(tempfile.mkdtemp(prefix="tenure-soak-"))
    result = run_history(profile, seed, workdir)
    if result.violations:
        print(f"reliability: the run's journal and logs are in {workdir}")
        return 1
    shutil.rmtree(workdir, ignore_errors=True)
    return 0


def _seed() -> int:
    given = os.environ.get("TENURE_RELIABILITY_SEED")
    return int(given) if given else random.SystemRandom().randrange(1, 2**31)


if __name__ == "__main__":
    raise SystemExit(main())
