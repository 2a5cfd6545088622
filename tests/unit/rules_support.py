"""Helpers of the rules tests: an in-memory Schedules, and rule bodies."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from tenure.app.tenure import Tenure
from tenure.domain.errors import ValidationFailed
from tenure.domain.model import Lease, Principal
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


# A subject whose body is 65,536 control characters: as JSON, each is written `\u0001`, so a
# rule of it weighs about 384 KiB in an answer (64 KiB in its row).
HEAVY_SUBJECT = {"kind": "task", "title": "heavy", "body": "\x01" * 65536}


def check_rule_pages(
    svc: Tenure, admin: Principal, pools: dict[str, str], space: str, other: str
) -> None:
    """A space's rules page by name, by `limit` and by weight, and a cursor resumes only the
    list it came from: the same on every store. `pools`: a pool of each space, by space."""
    rules = svc.rules
    pool = pools[space]
    rules.create_rule(
        admin, other, "elsewhere", pools[other], subject={"kind": "space"}, trigger={"topic": "x"}
    )
    names = [f"r{i:02}" for i in range(14)]
    for name in names:
        rules.create_rule(
            admin, space, name, pool=pool, subject=HEAVY_SUBJECT, trigger={"topic": "page.test"}
        )
    whole = rules.list_rules(admin, space)
    # 14 rules of ~384 KiB pass 4 MiB: the page ends at the 10th, and its cursor goes on.
    assert [r.name for r in whole.rules] == names[:10] and whole.next_cursor is not None
    rest = rules.list_rules(admin, space, cursor=whole.next_cursor)
    assert [r.name for r in rest.rules] == names[10:] and rest.next_cursor is None
    seen, cursor, pages = [], None, 0
    while True:
        page = rules.list_rules(admin, space, limit=3, cursor=cursor)
        seen += [r.name for r in page.rules]
        pages += 1
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seen == names and pages == 5  # 3+3+3+3+2: the last page promises no next
    exact = rules.list_rules(admin, space, limit=7)
    assert [r.name for r in exact.rules] == names[:7] and exact.next_cursor is not None
    with pytest.raises(ValidationFailed, match="cursor"):
        rules.list_rules(admin, other, cursor=exact.next_cursor)  # another space's list
    for forged in ("x", "eyJydWxlcyI6IjEifQ", exact.next_cursor[:-2], "e30"):
        with pytest.raises(ValidationFailed, match="cursor"):
            rules.list_rules(admin, space, cursor=forged)
    assert [r.name for r in rules.list_rules(admin, other).rules] == ["elsewhere"]
