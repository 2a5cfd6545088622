"""A stopping worker's drain (tenure_worker/runner.py): a job stopped for it is released,
never failed; a second signal is what stops the worker at once."""

from __future__ import annotations

import signal
from pathlib import Path

from tenure_worker.client import Client
from tenure_worker.runner import Held, Worker, WorkerOptions

from tests.unit.worker_support import held_record


def _worker(tmp_path: Path, drain: float = 30.0) -> Worker:
    opts = WorkerOptions(
        api="http://127.0.0.1:9",
        token="t",
        pool="p",
        command=["true"],
        worker_id="w",
        state_dir=tmp_path / "state",
        drain_seconds=drain,
    )
    return Worker(opts, client=Client(opts.api, "t", transport=lambda *a: None))  # type: ignore[arg-type]


def _held(tmp_path: Path, reason: str | None) -> Held:
    return held_record(
        tmp_path, "lease_1", token="lt", renew_seconds=1, lease_seconds=4, stop_reason=reason
    )


def test_a_job_stopped_by_the_drain_is_released_not_failed(tmp_path: Path) -> None:
    worker = _worker(tmp_path)
    kind, body = worker._report_for(_held(tmp_path, "drain"), -15) or ("", {})
    assert kind == "release" and set(body) == {"reason"}, body
    # A job that ended on its own while the worker drained is reported as ever.
    assert (worker._report_for(_held(tmp_path, None), 3) or ("",))[0] == "fail"


def test_the_first_signal_drains_and_a_second_stops_at_once(tmp_path: Path) -> None:
    worker = _worker(tmp_path, drain=5)
    worker._stop(signal.SIGTERM, None)
    assert worker.stopping and worker.signals == 1 and worker.drain_until is not None
    first_deadline = worker.drain_until
    assert not worker._may_claim()
    worker._stop(signal.SIGINT, None)
    assert worker.signals == 2 and worker.drain_until == first_deadline
