"""A short run of `tenure bench load` against the session stack: the same mix as `make load`
(claims, batched heartbeats, completes and fails, reads) from a few workers for a few seconds,
with no error. The two-minute, 64-worker run is `make load`; its figures are in the README."""

from __future__ import annotations

from tenure import load

from tests.e2e.support import Api

ROUTES = {
    "POST /tasks",
    "POST /pools/{pool}/claim",
    "POST /workers/{worker_id}/heartbeat",
    "POST /leases/{id}/complete",
    "GET /leases/{id}",
    "GET /leases?space=",
    "GET /tasks/{id}/activity",
}


def test_a_short_load_run_has_no_error_and_times_every_route(api: Api) -> None:
    figures = load.run(api.base, api.admin_token, workers=6, duration=6.0, warmup=2.0)
    assert figures["errors"] == 0, figures["error_samples"]
    assert figures["stuck_threads"] == 0, figures
    assert figures["leases_reported"] > 0, figures
    assert set(figures["routes"]) >= ROUTES, sorted(figures["routes"])
    for route, seen in figures["routes"].items():
        assert 0 < seen["p50_ms"] <= seen["p99_ms"] <= seen["max_ms"], (route, seen)
