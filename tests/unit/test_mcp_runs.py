"""The run tools under a worker token, over the fake store through `handle()`: the loop by run
id, the lease resolved from the caller, replays and refusals in the HTTP API's codes, and the
operator's recover, inspect and approve tools."""

from __future__ import annotations

import json
from typing import Any

from tenure.app.tasks.filing import TaskLinks
from tenure.app.usage import lease_usage
from tenure.domain.model import Principal

from tests.unit.support import MEMBER, POOL, READER, WORKER, Rig, as_lease
from tests.unit.test_mcp import rpc, tool

__all__ = ["rpc"]

MINE = Principal(kind="worker", token_id="tok-worker", pools=(POOL,))
OTHER = Principal(kind="worker", token_id="tok-other", pools=(POOL,))


def result(rpc: Any, name: str, arguments: dict[str, Any], actor: Principal) -> dict[str, Any]:
    out = tool(rpc, name, arguments, actor)["result"]
    assert not out.get("isError"), out
    return out["structuredContent"]


def refused(rpc: Any, name: str, arguments: dict[str, Any], actor: Principal) -> str:
    out = tool(rpc, name, arguments, actor)["result"]
    assert out["isError"], out
    return str(out["structuredContent"]["error"]["code"])


def test_a_worker_token_runs_the_loop_by_run_id_and_never_sees_a_token(rpc: Any, rig: Rig) -> None:
    task, _ = rig.task(pool=POOL)
    claimed = result(rpc, "task_run_claim_next", {"worker_id": "agent-1"}, MINE)
    run = claimed["run"]
    assert set(run) == {"run_id", "state", "fence", "deadline", "attempt"}
    assert (run["state"], run["fence"], run["attempt"]) == ("dispatched", 1, 1)
    assert claimed["task"]["id"] == task.id
    assert claimed["payload"]["subject"]["title"] == "Build it"
    lease = rig.lease(run["run_id"])
    assert claimed["claim_token_hash"] == (lease.token_hash or "")[:8]
    assert "token" not in json.dumps(claimed).replace("claim_token_hash", "")

    beat = result(
        rpc, "task_run_heartbeat", {"run_id": run["run_id"], "worker_id": "agent-1"}, MINE
    )
    assert beat["run"]["state"] == "running" and beat["revoke"] is None
    payload = result(
        rpc, "task_run_payload", {"run_id": run["run_id"], "worker_id": "agent-1"}, MINE
    )
    assert payload["lease"]["id"] == run["run_id"]
    done = {"run_id": run["run_id"], "worker_id": "agent-1", "result": {"ok": True}}
    first = result(rpc, "task_run_complete", done, MINE)
    assert first["run"]["state"] == "completed"
    # The answer was lost and the agent sends the same report again: the same answer.
    assert result(rpc, "task_run_complete", done, MINE) == first
    assert rig.svc.graph.get_task(MEMBER, task.id).status.value == "completed"
    # A different report on the ended run is refused as over HTTP.
    failed = {"run_id": run["run_id"], "worker_id": "agent-1", "error": "late"}
    assert refused(rpc, "task_run_fail", failed, MINE) == "invalid_transition"


def test_nothing_claimable_answers_run_null(rpc: Any, rig: Rig) -> None:
    assert result(rpc, "task_run_claim_next", {"worker_id": "agent-1"}, MINE) == {"run": None}


def test_a_token_with_several_pools_must_name_one(rpc: Any, rig: Rig) -> None:
    rig.task(pool=POOL)
    assert refused(rpc, "task_run_claim_next", {"worker_id": "a"}, WORKER) == "validation_failed"
    named = result(rpc, "task_run_claim_next", {"worker_id": "a", "pool": POOL}, WORKER)
    assert named["run"]["state"] == "dispatched"


def test_a_retried_claim_with_the_same_claim_id_returns_the_same_run(rpc: Any, rig: Rig) -> None:
    rig.task(pool=POOL)
    rig.task(pool=POOL)
    ask = {"worker_id": "agent-1", "claim_id": "c-1"}
    first = result(rpc, "task_run_claim_next", ask, MINE)
    again = result(rpc, "task_run_claim_next", ask, MINE)
    assert again["run"]["run_id"] == first["run"]["run_id"]
    assert again["run"]["fence"] == first["run"]["fence"]
    # The second queued task is still there for a new key.
    other = result(rpc, "task_run_claim_next", {"worker_id": "agent-1", "claim_id": "c-2"}, MINE)
    assert other["run"]["run_id"] != first["run"]["run_id"]


def test_a_run_held_by_another_token_or_worker_is_a_stale_lease(rpc: Any, rig: Rig) -> None:
    rig.task(pool=POOL)
    run = result(rpc, "task_run_claim_next", {"worker_id": "agent-1"}, MINE)["run"]
    beat = {"run_id": run["run_id"], "worker_id": "agent-1"}
    assert refused(rpc, "task_run_heartbeat", beat, OTHER) == "stale_lease"
    assert refused(rpc, "task_run_heartbeat", {**beat, "worker_id": "agent-2"}, MINE) == (
        "stale_lease"
    )
    unknown = {"run_id": "lease_nope", "worker_id": "agent-1"}
    assert refused(rpc, "task_run_heartbeat", unknown, MINE) == "lease_not_found"


def test_a_queued_run_nobody_holds_is_an_invalid_transition(rpc: Any, rig: Rig) -> None:
    _, lease = rig.task(pool=POOL)
    assert lease is not None
    done = {"run_id": lease.id, "worker_id": "agent-1"}
    assert refused(rpc, "task_run_complete", done, MINE) == "invalid_transition"


def test_a_run_released_and_requeued_refuses_a_late_report_as_stale(rpc: Any, rig: Rig) -> None:
    rig.task(pool=POOL)
    run = result(rpc, "task_run_claim_next", {"worker_id": "agent-1"}, MINE)["run"]
    ids = {"run_id": run["run_id"], "worker_id": "agent-1"}
    released = result(rpc, "task_run_release", {**ids, "reason": "shutting down"}, MINE)
    assert released["run"]["state"] == "cancelled"
    # The lease expired in between for the sweeper: a heartbeat after is refused, recorded.
    assert refused(rpc, "task_run_heartbeat", ids, MINE) in ("stale_lease", "invalid_transition")


def test_a_block_over_mcp_releases_the_run_without_an_attempt(rpc: Any, rig: Rig) -> None:
    task, _ = rig.task(pool=POOL)
    run = result(rpc, "task_run_claim_next", {"worker_id": "agent-1"}, MINE)["run"]
    ask = {"run_id": run["run_id"], "worker_id": "agent-1", "kind": "needs_input", "reason": "?"}
    blocked = result(rpc, "task_run_block", ask, MINE)
    assert blocked["block"]["kind"] == "needs_input"
    assert rig.lease(run["run_id"]).state.value == "cancelled"
    seen = rig.svc.graph.get_task(MEMBER, task.id)
    assert [r["source"] for r in seen.blocked_reasons] == ["block"]


def test_a_fail_over_mcp_carries_usage(rpc: Any, rig: Rig) -> None:
    rig.task(pool=POOL)
    run = result(rpc, "task_run_claim_next", {"worker_id": "agent-1"}, MINE)["run"]
    usage = {"input_tokens": 10, "output_tokens": 5}
    ask = {"run_id": run["run_id"], "worker_id": "agent-1", "error": "boom", "usage": usage}
    assert result(rpc, "task_run_fail", ask, MINE)["run"]["state"] == "failed"
    shown = lease_usage(rig.lease(run["run_id"])) or {}
    assert (shown["input_tokens"], shown["output_tokens"]) == (10, 5)
    task = rig.svc.graph.get_task(MEMBER, rig.lease(run["run_id"]).task_id or "")
    assert (task.usage or {})["input_tokens"] == 10


def test_operator_tools_inspect_recover_and_approve(rpc: Any, rig: Rig) -> None:
    waiting, lease = rig.task(pool=POOL, links=TaskLinks(requires_approval=True))
    assert lease is None
    shot = result(rpc, "task_inspect", {"id": waiting.id}, READER)
    assert shot["task"]["status"] == "blocked"
    assert [r["source"] for r in shot["task"]["blocked_reasons"]] == ["approval"]
    assert refused(rpc, "task_approve", {"task_id": waiting.id}, READER) == "forbidden"
    approved = result(rpc, "task_approve", {"task_id": waiting.id, "note": "go"}, MEMBER)
    assert approved["task"]["status"] == "queued" and approved["lease"]["state"] == "pending"
    again = refused(rpc, "task_approve", {"task_id": waiting.id}, MEMBER)
    assert again == "invalid_transition"
    not_escalated = {"task_id": waiting.id, "note": "fine"}
    assert refused(rpc, "task_recover", not_escalated, MEMBER) == "invalid_transition"


def test_a_lease_token_reads_its_own_logs_and_attachments_over_mcp(rpc: Any, rig: Rig) -> None:
    lease = rig.running()
    me = as_lease(lease.id)
    listed = tool(rpc, "leases_list_attachments", {"lease_id": lease.id}, me)
    logs = tool(rpc, "leases_fetch_logs", {"lease_id": lease.id}, me)
    # The fake rig has no blob store or log sink: the answers say so, not that it is forbidden.
    for answer in (listed, logs):
        text = json.dumps(answer)
        assert "forbidden" not in text and "lease_token_mismatch" not in text
