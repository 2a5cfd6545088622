"""The worker's use cases composed alone (the worker function's service) and within the whole
service (the HTTP API's) are built alike: the whole one starts from the worker's composition,
so each use case the worker routes call is one object in both records, and a claim or a
report built alone carries the same stages, in the same order."""

from __future__ import annotations

import dataclasses
from typing import Any

from tenure.app.rows import Rows
from tenure.app.worker_tenure import WorkerTenure, compose_worker

from tests.unit.support import Rig


def _stages(value: Any) -> list[str]:
    return [getattr(getattr(s, "run", s), "__qualname__", repr(s)) for s in value]


def test_the_whole_service_holds_the_worker_s_use_cases_themselves() -> None:
    svc = Rig().svc
    shared = [f.name for f in dataclasses.fields(WorkerTenure) if hasattr(svc, f.name)]
    assert len(shared) >= 20  # nearly every field: rows, kernel, the use cases
    assert [name for name in shared if getattr(svc, name) is not getattr(svc.core, name)] == []


def test_a_worker_s_claims_and_reports_alone_carry_the_whole_service_s_stages() -> None:
    rig = Rig()
    alone = compose_worker(Rows.of(rig.store, rig.store), rig.clock, rig.ids)
    whole = rig.svc
    assert _stages(alone.claims.withdraw) == _stages(whole.claims.withdraw) != []
    for step in ("prepare", "resolve", "contribute", "after"):
        ours = _stages(getattr(alone.reports.completion, step))
        assert ours == _stages(getattr(whole.reports.completion, step)) != []
    assert _stages(alone.gate.holds) == _stages(whole.gate.holds) != []
