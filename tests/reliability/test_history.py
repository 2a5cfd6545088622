"""The short reliability profile: workers under injected faults, the whole history checked."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest
from tenure.config import local_settings
from tenure_cli.local.engines import EngineUnavailable, install_dynamodb_local, java_available

from tests.reliability.history import Journal
from tests.reliability.proxy import FaultProxy, ProxyFaults
from tests.reliability.run import SHORT, run_history, schedule


def test_one_seed_gives_one_fault_schedule() -> None:
    threads, procs = ["t0", "t1"], ["p0"]
    assert schedule(7, SHORT, threads, procs) == schedule(7, SHORT, threads, procs)
    assert schedule(7, SHORT, threads, procs) != schedule(8, SHORT, threads, procs)
    kinds = {f.kind for seed in range(20) for f in schedule(seed, SHORT, threads, procs)}
    assert kinds == {"kill_worker", "crash_thread", "cut", "pause_sweeper", "throttle"}


def test_one_seed_gives_each_proxy_one_sequence_of_fates() -> None:
    def fates(seed: int) -> list[tuple[str, float]]:
        proxy = FaultProxy("t0", "http://127.0.0.1:9", Journal(), seed, ProxyFaults(0.2, 0.3))
        try:
            return [proxy._fate() for _ in range(50)]
        finally:
            proxy.sock.close()

    assert fates(3) == fates(3) != fates(4)
    assert {f for f, _ in fates(3)} == {"dropped", "delayed", "delivered"}


def test_the_history_under_faults_keeps_every_property(tmp_path: Path) -> None:
    try:
        if not java_available():
            raise EngineUnavailable("java is not installed")
        install_dynamodb_local(Path(local_settings().cache_dir))
    except EngineUnavailable as why:
        if local_settings().require_engines:
            pytest.fail(f"engine unavailable: {why}")
        pytest.skip(f"engine unavailable: {why}")
    given = os.environ.get("TENURE_RELIABILITY_SEED")
    seed = int(given) if given else random.SystemRandom().randrange(1, 2**31)
    result = run_history(SHORT, seed, tmp_path)
    assert result.violations == [], f"seed {seed}: {result.violations}"
    # The run did what it is for: every scheduled fault injected, operations of each kind.
    planned = schedule(
        seed,
        SHORT,
        [f"t{i}" for i in range(SHORT.threads)],
        [f"p{i}" for i in range(SHORT.processes)],
    )
    injected = result.figures["faults"]
    assert sum(injected.get(k, 0) for k in {f.kind for f in planned}) == len(planned)
    kinds = {op.kind for op in result.ops}
    assert {"claim", "heartbeat", "complete"} <= kinds, kinds
