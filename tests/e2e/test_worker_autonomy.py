"""`tenure worker block|usage|delegate|complete --created-task` from inside a job run by
`tenure worker run --once`."""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.support import World
from tests.e2e.worker_support import Site, Workers, events, lease, running_workers, wait_event


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[Workers]:
    yield from running_workers(tmp_path)


@pytest.fixture
def site(world: World) -> Site:
    return Site.make(world)


def test_a_job_that_blocks_its_task_is_released_and_not_reported_again(
    site: Site, workers: Workers
) -> None:
    task_id, lease_id, _ = site.task("needs a human")
    script = "tenure worker block --kind needs_input --reason 'which branch?'"
    run = workers.start(site.world.api.base, site.token, site.pool, script)
    assert run.wait(30) == 0, run.stderr()
    ended = lease(site.admin, lease_id)
    assert (ended["state"], ended["end_reason"]) == ("cancelled", "released"), ended
    view = site.admin.get(f"/tasks/{task_id}").json()
    assert view["task"]["status"] == "blocked"
    assert [r["kind"] for r in view["task"]["blocked_reasons"]] == ["needs_input"]
    assert "report refused" not in run.stderr(), run.stderr()
    wait_event(site.admin, task_id, "task.run_released")


def test_a_job_delegates_notes_usage_and_claims_only_what_it_filed(
    site: Site, workers: Workers, tmp_path: Path
) -> None:
    task_id, lease_id, _ = site.task("plan the work")
    out = tmp_path / "job"
    out.mkdir()
    q = shlex.quote(str(out))
    script = (
        f"tenure worker delegate --title 'sub-step' > {q}/child.json && "
        "tenure worker usage --input-tokens 1000 --output-tokens 50 > /dev/null && "
        "tenure worker usage --input-tokens 500 > /dev/null && "
        f"tenure worker complete --created-task task_00000000000bogus > /dev/null "
        f"2> {q}/refused.txt; "
        f'tenure worker complete --created-task "$(python -c "import json,sys; '
        f"print(json.load(open('{out}/child.json'))['task']['id'])\")\" > {q}/done.json"
    )
    run = workers.start(site.world.api.base, site.token, site.pool, script)
    assert run.wait(30) == 0, run.stderr()
    assert "unverified_created_tasks" in (out / "refused.txt").read_text()
    child = json.loads((out / "child.json").read_text())["task"]
    assert child["created_by_lease_id"] == lease_id
    ended = lease(site.admin, lease_id)
    assert ended["state"] == "completed", ended
    assert (ended["usage"]["input_tokens"], ended["usage"]["output_tokens"]) == (1500, 50)
    assert ended["usage"]["cost"]["status"] == "unknown"  # the pool has no rates
    usage = site.admin.get(f"/tasks/{task_id}").json()["task"]["usage"]
    assert (usage["input_tokens"], usage["cost_status"], usage["total_cost"]) == (
        1500,
        "unknown",
        None,
    )
    wait_event(site.admin, task_id, "task.completion.hallucination_blocked")
    assert [e["type"] for e in events(site.admin, task_id)].count("lease.completed") == 1
