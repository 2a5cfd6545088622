"""Ports of the rules feature: where rules are kept, and the schedules that fire them."""

from __future__ import annotations

from typing import Protocol

from tenure.domain.rules.rule import Rule


class RuleStore(Protocol):
    def put_rule(self, rule: Rule) -> None:
        """Create the rule; AlreadyExists when its name is taken in its space."""
        ...

    def get_rule(self, rule_id: str) -> Rule | None: ...

    def list_rules(self, space: str, limit: int) -> list[Rule]:
        """The space's rules by name (one Query on the space's partition, at most `limit`)."""
        ...

    def replace_rule(self, old: Rule, new: Rule) -> None:
        """Replace `old` (Conflict unless the row is still at old.version); AlreadyExists when
        a rename takes a name in use. The name and inbound-index rows move with it."""
        ...

    def delete_rule(self, rule: Rule) -> None:
        """Delete the rule with its name and index rows (Conflict unless still at its version)."""
        ...

    def inbound_rules(
        self, topic: str, recipients: list[str], space: str | None, limit: int
    ) -> list[Rule]:
        """Enabled inbound rules of `topic` that could match: those whose match names one of
        `recipients` as `to`, and those with no `to`; of one space, or of every space (None)."""
        ...

    def scheduled_rules(self, limit: int) -> list[Rule]:
        """Every scheduled rule, enabled or not, at most `limit` (one Query, no Scan)."""
        ...

    def get_event_record(self, space: str, event_id: str) -> list[str] | None:
        """The lease ids an event already minted, or None when it was never recorded."""
        ...

    def put_event_record(self, space: str, event_id: str, lease_ids: list[str]) -> None:
        """Record an event's leases once; AlreadyExists when it already was."""
        ...


class Schedules(Protocol):
    """One EventBridge Scheduler schedule per scheduled rule, created, updated, disabled and
    deleted in the same request as its rule."""

    def put(self, name: str, expression: str, timezone: str, rule_id: str, enabled: bool) -> None:
        """Create the schedule, or update it when it exists."""
        ...

    def delete(self, name: str) -> None:
        """Delete the schedule; one that does not exist is already deleted."""
        ...
