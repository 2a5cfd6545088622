"""Ports of the rules feature: where rules are kept, and the schedules that fire them."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple, Protocol

if TYPE_CHECKING:  # the store's ports name the rules; what serves no rule never loads them
    from tenure.domain.rules.addresses import Address
    from tenure.domain.rules.rule import Rule


class RulePage(NamedTuple):
    rules: list[Rule]  # by name
    next_cursor: str | None  # null on the last page


class RuleStore(Protocol):
    def put_rule(self, rule: Rule, counted: int, cap: int) -> None:
        """Create the rule and count it in its space; AlreadyExists when its name is taken
        there, Conflict with `details["over_cap"]` when the space already counts `cap` rules.
        `counted`: the space's rules as `count_rules` read them, where the count starts when
        the space has none kept yet."""
        ...

    def get_rule(self, rule_id: str) -> Rule | None: ...

    def list_rules(self, space: str, limit: int, cursor: str | None = None) -> RulePage:
        """One page of the space's rules by name, from `cursor` (one Query on the space's
        partition, at most `limit` rules, fewer when more would weigh past what one answer
        carries: `within_answer`). A cursor of another space's list is refused as forged."""
        ...

    def count_rules(self, space: str, limit: int) -> int:
        """How many rules the space has, counted up to `limit` (its name rows alone read)."""
        ...

    def replace_rule(self, old: Rule, new: Rule) -> None:
        """Replace `old` (Conflict unless the row is still at old.version); AlreadyExists when
        a rename takes a name in use. The name and inbound-index rows move with it."""
        ...

    def delete_rule(self, rule: Rule) -> None:
        """Delete the rule with its name and index rows, and uncount it (Conflict unless
        still at its version)."""
        ...

    def inbound_rules(
        self, topic: str, recipients: list[str], space: str | None, limit: int
    ) -> list[Rule]:
        """Enabled inbound rules of `topic` that could match: those whose match names one of
        `recipients` as `to`, and those with no `to`; of one space, or of every space (None)."""
        ...

    def scheduled_rules(self, limit: int, after: Rule | None = None) -> list[Rule]:
        """The scheduled rules, enabled or not, in the store's order from the one after
        `after` (from the first: None), at most `limit` (their index read, no Scan)."""
        ...

    def get_event_record(self, space: str, event_id: str, now_s: int) -> list[str] | None:
        """The lease ids an event already minted, or None when it was never recorded or its
        record has expired (at `now_s`, epoch seconds)."""
        ...

    def put_event_record(
        self, space: str, event_id: str, lease_ids: list[str], expires_at: int, now_s: int
    ) -> None:
        """Record an event's leases until `expires_at` (epoch seconds); AlreadyExists when a
        record that has not expired by `now_s` is there already."""
        ...

    def put_address(self, address: Address) -> Address:
        """Give the address to its space (one row per address, written only if new): the row
        as it is when the space already owns it; AlreadyExists when another space does."""
        ...

    def get_address(self, address: str) -> Address | None: ...

    def address_owners(self, addresses: list[str]) -> dict[str, str]:
        """The owning space of each of `addresses` that has one (one batch read)."""
        ...

    def list_addresses(self, space: str, limit: int) -> list[Address]:
        """The space's addresses by address (one Query, at most `limit`)."""
        ...

    def delete_address(self, space: str, address: str) -> None:
        """Take the address from the space; NotFound unless the space owns it."""
        ...

    def count_firing(self, rule_id: str, hour: str, cap: int, expires_at: int) -> str:
        """Count one firing of the rule in `hour` unless `cap` are counted already (one
        conditional update): "counted", "limited_first" for the hour's first refusal, or
        "limited"."""
        ...

    def note_firing(self, rule_id: str, lease_id: str | None, through: int | None) -> bool:
        """Note on the rule's row what a firing did: `lease_id` its newest lease (None: left as
        it is) and `through` the latest scheduled time handled (epoch ms), only when later
        than the one noted (None: left as it is). Bumps the row's version, so a PATCH read
        before it is written again from fresh. False when the rule is gone or a later time is
        noted already (then nothing is written)."""
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
