"""Helpers of the rules tests: an in-memory Schedules, and rule bodies."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tenure.domain.model import Lease
from tenure.domain.rules.rule import Rule

from tests.unit.support import ADMIN, POOL, SPACE, Rig


@dataclass
class FakeSchedules:
    """The Schedules port in memory: what Scheduler would hold, by schedule name."""

    held: dict[str, dict[str, Any]] = field(default_factory=dict)
    fail_next: bool = False

    def put(self, name: str, expression: str, timezone: str, rule_id: str, enabled: bool) -> None:
        if self.fail_next:
            self.fail_next = False
            raise RuntimeError("scheduler refused")
        self.held[name] = {
            "expression": expression,
            "timezone": timezone,
            "rule_id": rule_id,
            "state": "ENABLED" if enabled else "DISABLED",
        }

    def delete(self, name: str) -> None:
        self.held.pop(name, None)


SUPPORT = "support@example.com"


def inbox_trigger(**match: Any) -> dict[str, Any]:
    return {"topic": "email.received", "match": match} if match else {"topic": "email.received"}


def event_trigger(**match: Any) -> dict[str, Any]:
    """A posted topic that carries an email's shape of data (a forwarded mail)."""
    return {"topic": "mail.forwarded", "match": match} if match else {"topic": "mail.forwarded"}


TASK_SUBJECT = {"kind": "task", "title": "Reply to {from}: {subject}", "body": "from the inbox"}
NIGHTLY = {"schedule": "cron(0 2 * * ? *)", "timezone": "Europe/Paris"}


def make_rule(rig: Rig, name: str = "inbox", **kw: Any) -> Rule:
    """An inbound rule of OPS minting a task in `builders` for mail to support@ (kw overrides);
    OPS owns support@ (an email rule receives only its space's addresses)."""
    rig.svc.addresses.add_address(ADMIN, SPACE, SUPPORT)
    args: dict[str, Any] = {
        "pool": POOL,
        "subject": TASK_SUBJECT,
        "trigger": inbox_trigger(to=SUPPORT),
        **kw,
    }
    return rig.svc.rules.create_rule(ADMIN, SPACE, name, **args)


def leases_of_no_task(rig: Rig) -> list[str]:
    """A workflow's lease and the space's, each minted by a rule: (space's, workflow's)."""
    rig.svc.spaces.create_workflow(ADMIN, SPACE, "nightly", "Nightly sweep", None)
    minted = []
    subjects = (("sweep", {"kind": "workflow", "slug": "nightly"}), ("tidy", {"kind": "space"}))
    for name, subject in subjects:
        rule = make_rule(rig, name, subject=subject)
        lease = rig.svc.firings.fire_rule(ADMIN, rule.id)
        assert isinstance(lease, Lease) and lease.task_id is None
        minted.append(lease.id)
        rig.advance(1)
    return minted[::-1]
