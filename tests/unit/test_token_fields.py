"""No raw token in a log line, event, result or error. What a lease or worker token
may store and an operator reads back follows one rule: a free-text field carrying a token is
refused by name (422), and a log line has its tokens masked instead (the rest is kept)."""

from __future__ import annotations

from typing import Any

import pytest
from tenure.domain import fencing as rules
from tenure.domain.errors import ValidationFailed
from tenure.domain.model import Principal

from tests.unit.support import MEMBER, POOL, READER, WORKER, Rig, as_lease, with_artifacts

# One of each kind, shaped as the service mints them.
OPERATOR_TOKEN = "tnr_o_Zx81bq0wLr5VJd2mH7eKcT4a"
WORKER_TOKEN = "tnr_w_Q9fGm2PkV0sXe7LbN4hRtY1c"
COST = {"amount": 1, "currency": "USD", "status": "final"}


@pytest.fixture
def rig() -> Rig:
    return with_artifacts(Rig())


def refused(field: str, call: Any, *args: Any, **kw: Any) -> None:
    with pytest.raises(ValidationFailed) as err:
        call(*args, **kw)
    assert err.value.message.startswith(f"{field}: carries a Tenure token")


def test_the_mask_is_one_form_for_every_kind_and_is_not_itself_a_token() -> None:
    lease_token = rules.mint_lease_token("lease_abc", "S3cr3t-_" * 4)
    text = f"A={lease_token} B={WORKER_TOKEN} C={OPERATOR_TOKEN}."
    masked, count = rules.redact_tokens(text)
    assert count == 3
    assert masked == "A=tnr_[redacted] B=tnr_[redacted] C=tnr_[redacted]."
    assert rules.redact_tokens(masked) == (masked, 0)
    assert rules.redact_tokens("tnr_l_short and tnr_x_notakindofours") == (
        "tnr_l_short and tnr_x_notakindofours",
        0,
    )


# ------------------------------------------------------------------------------ logs


def test_a_log_line_keeps_its_text_with_each_token_masked_and_the_mask_is_counted(
    rig: Rig,
) -> None:
    won = rig.claimed()
    lease_id = won.lease.id
    me = as_lease(lease_id)
    rig.svc.reports.start(me, lease_id)
    events = [
        {"stream": "stdout", "message": f"TENURE_LEASE_TOKEN={won.token}", "container": "main"},
        {"stream": "stderr", "message": f"{WORKER_TOKEN} {OPERATOR_TOKEN}", "container": "side"},
        {"stream": "stdout", "message": "plain", "container": "main"},
    ]
    assert rig.svc.logs.post_logs(me, lease_id, events) == 3
    read = [(x.container, x.message) for x in rig.svc.logs.read_logs(READER, lease_id).events]
    assert sorted(read) == [
        ("main", "TENURE_LEASE_TOKEN=tnr_[redacted]"),
        ("main", "plain"),
        ("side", "tnr_[redacted] tnr_[redacted]"),
    ]
    assert rig.svc.counters["log_tokens_redacted"] == 3
    assert won.token not in repr(rig.svc.artifacts.log_sink.streams)  # type: ignore[union-attr]


def test_a_container_named_with_a_token_refuses_the_batch_by_name(rig: Rig) -> None:
    lease = rig.running()
    events = [
        {"stream": "stdout", "message": "kept?", "container": "main"},
        {"stream": "stdout", "message": "x", "container": WORKER_TOKEN},
    ]
    refused("events[1].container", rig.svc.logs.post_logs, as_lease(lease.id), lease.id, events)
    assert rig.svc.logs.read_logs(READER, lease.id).events == []


# ----------------------------------------------------------------------- attachments


@pytest.mark.parametrize(
    ("field", "filename", "content_type", "kind"),
    [
        ("filename", f"{WORKER_TOKEN}.txt", "text/plain", "file"),
        ("content_type", "a.txt", f"text/{OPERATOR_TOKEN}", "file"),
        ("kind", "a.txt", "text/plain", "tnr_o_abcdefghij0123456789"),
    ],
)
@pytest.mark.parametrize("inline", [True, False])
def test_an_attachment_naming_a_token_is_refused_by_field_and_nothing_is_kept(
    rig: Rig, field: str, filename: str, content_type: str, kind: str, inline: bool
) -> None:
    lease = rig.running()
    me = as_lease(lease.id)
    content, size = (b"hi", None) if inline else (None, 2)
    args = (me, lease.id, filename, content_type, kind, size, content)
    refused(field, rig.svc.attachments.add_attachment, *args)
    assert rig.svc.attachments.list_attachments(READER, lease.id) == []
    assert rig.svc.artifacts.blobs.objects == {} and rig.svc.artifacts.blobs.presigned == []  # type: ignore[union-attr]


def test_an_attachment_named_with_the_leases_own_token_is_refused(rig: Rig) -> None:
    won = rig.claimed()
    me = as_lease(won.lease.id)
    refused(
        "filename",
        rig.svc.attachments.add_attachment,
        me,
        won.lease.id,
        f"{won.token}.txt",
        "text/plain",
        "file",
        None,
        b"x",
    )


# ---------------------------------------------------------------- claims and workers


@pytest.mark.parametrize(
    ("field", "kw"),
    [
        ("host", {"host": f"box-7 {WORKER_TOKEN}"}),
        ("worker_id", {"worker_id": WORKER_TOKEN}),
        ("worker_version", {"worker_version": f"1.0+{OPERATOR_TOKEN}"}),
        ("claim_id", {"claim_id": WORKER_TOKEN}),
    ],
)
def test_a_claim_carrying_a_token_is_refused_by_field_before_anything_is_written(
    rig: Rig, field: str, kw: dict[str, str]
) -> None:
    _, lease = rig.task()
    assert lease is not None
    args: dict[str, Any] = {"worker_id": "w1", "worker_version": "1.0", **kw}
    refused(
        field,
        rig.svc.claims.claim,
        WORKER,
        POOL,
        args.pop("worker_id"),
        args.pop("worker_version"),
        0,
        None,
        **args,
    )
    assert rig.lease(lease.id).state == "pending"
    assert rig.svc.workers.list_workers(READER, POOL) == []  # not even marked seen


@pytest.mark.parametrize("part", ["runtime", "credentials"])
def test_a_worker_heartbeat_reason_carrying_a_token_is_refused_by_field(
    rig: Rig, part: str
) -> None:
    state = {"runtime": "refusing", "credentials": "unreachable"}[part]
    says = {part: {"state": state, "reason": f"login failed for {WORKER_TOKEN}"}}
    refused(f"{part}.reason", rig.svc.reports.worker_heartbeat, WORKER, "w1", [], pool=POOL, **says)
    assert rig.svc.workers.list_workers(READER, POOL) == []
    # Without the token the same heartbeat is noted.
    says[part]["reason"] = "login failed"
    rig.svc.reports.worker_heartbeat(WORKER, "w1", [], pool=POOL, **says)
    (seen,) = rig.svc.workers.list_workers(READER, POOL)
    assert getattr(seen.worker, part) is not None


# ------------------------------------------------------------ reasons, notes, reports


def test_block_reasons_and_notes_carrying_a_token_are_refused_by_field(rig: Rig) -> None:
    task, _ = rig.task()
    running = rig.running()
    assert running.task_id is not None
    lease_actor = as_lease(running.id)
    refused("reason", rig.svc.blocks.block_task, MEMBER, task.id, "error", f"see {OPERATOR_TOKEN}")
    refused(
        "reason", rig.svc.blocks.block_task, lease_actor, running.task_id, "error", WORKER_TOKEN
    )
    assert rig.svc.blocks.list_blocks(MEMBER, task.id) == []
    block = rig.svc.blocks.block_task(MEMBER, task.id, "error", "broken")
    refused("note", rig.svc.blocks.clear_block, MEMBER, task.id, block["id"], OPERATOR_TOKEN)
    assert [b["state"] for b in rig.svc.blocks.list_blocks(MEMBER, task.id)] == ["open"]
    refused("note", rig.svc.breaker.recover_task, MEMBER, task.id, f"fixed {OPERATOR_TOKEN}")


def test_force_reasons_carrying_a_token_are_refused_and_the_leases_are_untouched(
    rig: Rig,
) -> None:
    lease = rig.running()
    refused("reason", rig.svc.force.bulk_release, MEMBER, [lease.id], f"by {OPERATOR_TOKEN}")
    refused("reason", rig.svc.force.bulk_fail, MEMBER, [lease.id], WORKER_TOKEN)
    assert rig.lease(lease.id).state == "running"


@pytest.mark.parametrize(
    ("report", "body"),
    [
        ("release", {"reason": f"moving {WORKER_TOKEN}"}),
        ("fail", {"error": f"auth {OPERATOR_TOKEN} refused"}),
        ("complete", {"usage": {"cost": {**COST, "source": WORKER_TOKEN}}}),
        ("complete", {"next": {"worker_id": "w1", "claim_id": "c1", "host": WORKER_TOKEN}}),
    ],
)
def test_reports_carrying_a_token_anywhere_stay_refused(
    rig: Rig, report: str, body: dict[str, Any]
) -> None:
    lease = rig.running()
    me: Principal = as_lease(lease.id)
    with pytest.raises(ValidationFailed, match="carries a Tenure token"):
        getattr(rig.svc.reports, report)(me, lease.id, body)
    assert rig.lease(lease.id).state == "running"
