"""Rules through the local stack: an .eml file to a claimed lease with its trigger,
an event to its leases, and a one-time schedule firing through the scheduler loop."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tests.conftest import LocalStack
from tests.e2e.support import World, suffix, wait_for

EMAIL = Path(__file__).resolve().parents[2] / "samplesources" / "email"


def _rule(world: World, pool: str, **fields: Any) -> dict[str, Any]:
    body = {"space": world.space, "name": f"rule-{suffix().lower()}", "pool": pool, **fields}
    r = world.admin.post("/rules", json=body)
    assert r.status_code == 201, r.text
    rule: dict[str, Any] = r.json()["rule"]
    return rule


def _claim_when_there(world: World, pool: str, timeout: float = 30) -> dict[str, Any]:
    with world.api.client(world.worker_token([pool])) as worker:

        def check() -> dict[str, Any] | None:
            r = worker.post(f"/pools/{pool}/claim", json={"worker_id": "e2e-rules"})
            assert r.status_code in (200, 204), r.text
            return r.json() if r.status_code == 200 else None

        return wait_for(check, timeout, f"a lease in pool {pool}", every=0.5)


def test_an_eml_sent_like_ses_becomes_a_claimed_lease_with_its_trigger(
    world: World, local_stack: LocalStack
) -> None:
    pool = world.pool()["name"]
    inbox = f"intake-{suffix().lower()}@inbound.tenure.example"
    r = world.admin.post(f"/spaces/{world.space}/addresses", json={"address": inbox})
    assert r.status_code == 201, r.text
    _rule(
        world,
        pool,
        subject={"kind": "task", "title": "{subject}", "body": "from {from}"},
        trigger={"topic": "email.received", "match": {"to": inbox}},
    )
    sent = subprocess.run(
        [
            sys.executable,
            "-m",
            "tenure_cli.main",
            "email",
            "send",
            str(EMAIL / "multipart-attachments.eml"),
            "--to",
            inbox,
            "--data-dir",
            str(local_stack.data_dir),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert sent.returncode == 0, sent.stderr
    ses_id = json.loads(sent.stdout)["message_id"]
    won = _claim_when_there(world, pool)
    with world.api.client(won["token"]) as lease:
        r = lease.get(f"/leases/{won['lease']['id']}/payload")
        assert r.status_code == 200, r.text
        bundle = r.json()
    assert bundle["subject"]["title"] == "Invoice 2026-1184 and delivery photo"
    assert bundle["subject"]["body"] == "from billing@supplier.example.org"
    trigger = bundle["trigger"]
    assert trigger["topic"] == "email.received" and trigger["occurred_at"].endswith("Z")
    data = trigger["data"]
    assert data["message_id"] == ses_id
    assert data["from"] == "billing@supplier.example.org"
    assert [a["filename"] for a in data["attachments"]] == ["invoice-2026-1184.pdf", "pallet.png"]
    assert {"to", "cc", "subject", "body"} <= set(data)
    # The email's attachments list among the lease's own, kind "email", and download as sent.
    lease_id = won["lease"]["id"]
    r = world.admin.get(f"/leases/{lease_id}/attachments")
    assert r.status_code == 200, r.text
    listed = r.json()["attachments"]
    assert [(a["kind"], a["filename"]) for a in listed] == [
        ("email", "invoice-2026-1184.pdf"),
        ("email", "pallet.png"),
    ]
    pdf = listed[0]
    r = world.admin.get(f"/leases/{lease_id}/attachments/{pdf['id']}")
    assert r.status_code == 200, r.text
    assert r.content.startswith(b"%PDF") and len(r.content) == pdf["byte_size"]
    assert r.headers["content-type"].startswith("application/pdf")


def test_an_event_mints_once_per_event_id_and_its_lease_carries_the_trigger(world: World) -> None:
    pool = world.pool()["name"]
    _rule(world, pool, subject={"kind": "space"}, trigger={"topic": "deploy.finished"})
    body = {
        "space": world.space,
        "topic": "deploy.finished",
        "data": {"sha": "abc"},
        "event_id": "d-1",
    }
    first = world.admin.post("/events", json=body)
    again = world.admin.post("/events", json=body)
    assert (first.status_code, again.status_code) == (202, 202), first.text
    assert [x["id"] for x in again.json()["leases"]] == [x["id"] for x in first.json()["leases"]]
    (lease,) = first.json()["leases"]
    assert (lease["subject_kind"], lease["task"], lease["workflow"]) == ("space", None, None)
    won = _claim_when_there(world, pool)
    with world.api.client(won["token"]) as holder:
        bundle = holder.get(f"/leases/{won['lease']['id']}/payload").json()
        assert holder.post(f"/leases/{won['lease']['id']}/complete", json={}).status_code == 200
    assert bundle["subject"]["kind"] == "space" and bundle["trigger"]["data"] == {"sha": "abc"}
    wanted = ["lease.created", "lease.claimed", "lease.completed"]

    def timeline() -> list[str] | None:
        r = world.admin.get(f"/spaces/{world.space}/activity")
        assert r.status_code == 200, r.text
        types = [ev["type"] for ev in r.json()["events"]]
        return types if all(t in types for t in wanted) else None

    wait_for(timeline, 30, "the space subject's timeline")


def test_a_one_time_schedule_fires_once_through_the_local_scheduler(world: World) -> None:
    pool = world.pool()["name"]
    world.admin.post(
        "/workflows", json={"space": world.space, "slug": "nightly", "name": "Nightly"}
    )
    # Scheduler's at() takes seconds: 10 s ahead leaves the rule's creation time to land
    # first without the test waiting for the next whole minute (up to 60 s).
    at = (datetime.now(UTC) + timedelta(seconds=10)).replace(microsecond=0)
    rule = _rule(
        world,
        pool,
        subject={"kind": "workflow", "slug": "nightly"},
        trigger={"schedule": f"at({at.strftime('%Y-%m-%dT%H:%M:%S')})"},
    )
    assert rule["kind"] == "scheduled" and rule["schedule_name"]
    won = _claim_when_there(world, pool, timeout=90)
    assert won["lease"]["subject_kind"] == "workflow"
    assert won["lease"]["workflow"] == {"slug": "nightly"} and won["lease"]["task"] is None
    with world.api.client(won["token"]) as holder:
        bundle = holder.get(f"/leases/{won['lease']['id']}/payload").json()
        done = holder.post(f"/leases/{won['lease']['id']}/complete", json={"outcome": "success"})
        assert done.status_code == 200, done.text
    assert bundle["subject"]["slug"] == "nightly" and "trigger" not in bundle

    def timeline() -> list[str] | None:
        r = world.admin.get(f"/workflows/nightly/activity?space={world.space}")
        assert r.status_code == 200, r.text
        types = [ev["type"] for ev in r.json()["events"]]
        return types if "lease.completed" in types else None

    assert wait_for(timeline, 30, "the workflow subject's timeline")[0] == "lease.created"


def _tenure(local_stack: LocalStack, *args: str, stdin: str | None = None) -> str:
    env = {**os.environ, "TENURE_API": local_stack.base.removesuffix("/api/v1")}
    env["TENURE_TOKEN"] = local_stack.admin_token
    done = subprocess.run(
        [sys.executable, "-m", "tenure_cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
    )
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done.stdout


def test_the_rules_cli_creates_lists_fires_disables_and_deletes(
    world: World, local_stack: LocalStack
) -> None:
    pool = world.pool()["name"]
    sample = json.loads((EMAIL.parent / "rules" / "support-inbox.json").read_text())
    sample["pool"] = pool
    # Each space owns its addresses: this test's space gets one of its own.
    address = f"support-{suffix().lower()}@inbound.example.com"
    sample["trigger"]["match"]["to"] = address
    r = world.admin.post(f"/spaces/{world.space}/addresses", json={"address": address})
    assert r.status_code == 201, r.text
    created = json.loads(
        _tenure(
            local_stack,
            "rules",
            "create",
            "-",
            "--space",
            world.space,
            "-o",
            "json",
            stdin=json.dumps(sample),
        )
    )
    assert (created["name"], created["space"], created["kind"]) == (
        "support-inbox",
        world.space,
        "inbound",
    )
    listed = _tenure(local_stack, "rules", "list", "--space", world.space)
    assert "support-inbox" in listed and "email.received" in listed
    fired = json.loads(_tenure(local_stack, "rules", "fire", created["id"], "-o", "json"))
    assert fired["state"] == "pending" and fired["pool"] == pool  # the lease it minted
    off = json.loads(_tenure(local_stack, "rules", "disable", created["id"], "-o", "json"))
    assert off["enabled"] is False
    posted = _tenure(
        local_stack,
        "events",
        "post",
        "--space",
        world.space,
        "--topic",
        "ticket.opened",
        "--data",
        '{"to": ["support@inbound.example.com"]}',
        "--event-id",
        "cli-1",
        "-o",
        "json",
    )
    assert json.loads(posted) == {"leases": []}  # disabled: nothing minted
    _tenure(local_stack, "rules", "delete", created["id"])
    assert world.admin.get(f"/rules/{created['id']}").status_code == 404
