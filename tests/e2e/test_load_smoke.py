"""A short run of `tenure bench load` against the session stack: the same mix as `make load`
(claims, batched heartbeats, completes and fails, reads) from a few workers for a few seconds,
with no error. The two-minute, 64-worker run is `make load`; its figures are in the README."""

from __future__ import annotations

from tenure_cli.bench import load

from tests.e2e.support import Api

# Answered in any run that reports a lease, which it does by completing or failing it.
ROUTES = {
    "POST /tasks",
    "POST /pools/{pool}/claim",
    "POST /workers/{worker_id}/heartbeat",
    "GET /leases/{id}",
    "GET /leases?space=",
    "GET /tasks/{id}/activity",
}
REPORTS = {"POST /leases/{id}/complete", "POST /leases/{id}/fail"}


def test_a_short_load_run_has_no_error(api: Api) -> None:
    # Three workers: the front door starts a process per concurrent invocation on first use
    # (a Lambda cold start), so a few-second run of many would measure only that.
    figures = load.run(api.base, api.admin_token, workers=3, duration=5.0, warmup=3.0)
    assert figures["errors"] == 0, figures["error_samples"]
    assert figures["stuck_threads"] == 0, figures
    assert figures["leases_reported_whole_run"] > 0, figures
    assert set(figures["requests_whole_run"]) >= ROUTES, figures["requests_whole_run"]
    assert set(figures["requests_whole_run"]) & REPORTS, figures["requests_whole_run"]
    for route, seen in figures["routes"].items():
        assert 0 < seen["p50_ms"] <= seen["p99_ms"] <= seen["max_ms"], (route, seen)
