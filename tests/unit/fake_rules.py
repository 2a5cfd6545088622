"""The RuleStore part of the in-memory fake, with the DynamoDB adapter's semantics."""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field
from typing import Any

from tenure.app.rules.ports import RulePage
from tenure.domain.errors import AlreadyExists, Conflict, NotFound
from tenure.domain.rules.addresses import Address
from tenure.domain.rules.rule import Rule, within_answer
from tenure.store import cursors
from tenure.store.keys import RULE_CURSOR_SHAPE


@dataclass
class _RuleTables:
    rules: dict[str, Rule] = field(default_factory=dict)
    names: dict[tuple[str, str], str] = field(default_factory=dict)
    # (space, event id) → (the lease ids it minted, when the record expires, epoch seconds)
    event_records: dict[tuple[str, str], tuple[list[str], int]] = field(default_factory=dict)
    addresses: dict[str, Address] = field(default_factory=dict)
    # (rule id, hour) → [firings counted, first refusal recorded]
    hours: dict[tuple[str, str], list[int]] = field(default_factory=dict)
    # space → its rules as counted by creates and deletes (absent: not counted yet)
    counts: dict[str, int] = field(default_factory=dict)


def _index_keys(rule: Rule) -> list[tuple[str, str | None]]:
    if not rule.enabled or rule.topic is None:
        return []
    return [(rule.topic, to) for to in rule.inbound_tos]


class FakeRules:
    @property
    def rule_tables(self) -> _RuleTables:
        tables = self.__dict__.get("_rule_tables")
        if tables is None:
            tables = self.__dict__["_rule_tables"] = _RuleTables()
        return tables

    def put_rule(self, rule: Rule, counted: int, cap: int) -> None:
        t = self.rule_tables
        if (rule.space, rule.name) in t.names or rule.id in t.rules:
            raise AlreadyExists(f"a rule named {rule.name!r} already exists in {rule.space!r}")
        kept = t.counts.get(rule.space)
        if kept is not None and kept >= cap:
            raise Conflict("a conditional write lost", over_cap=True)
        t.rules[rule.id] = copy.deepcopy(rule)
        t.names[(rule.space, rule.name)] = rule.id
        t.counts[rule.space] = (counted if kept is None else kept) + 1

    def get_rule(self, rule_id: str) -> Rule | None:
        rule = self.rule_tables.rules.get(rule_id)
        return copy.deepcopy(rule) if rule else None

    def list_rules(self, space: str, limit: int, cursor: str | None = None) -> RulePage:
        t = self.rule_tables
        after = cursors.decode_in(cursor, "rules", RULE_CURSOR_SHAPE, space) if cursor else None
        named = sorted((n, i) for (s, n), i in t.names.items() if s == space)
        rows = [rule_id for name, rule_id in named if after is None or name > after][: limit + 1]
        found = [copy.deepcopy(t.rules[i]) for i in rows[:limit] if i in t.rules]
        rules = within_answer(found)
        more = len(rules) < len(found) or len(rows) > limit
        return RulePage(rules, cursors.encode_in("rules", space, rules[-1].name) if more else None)

    def count_rules(self, space: str, limit: int) -> int:
        return min(limit, sum(1 for s, _ in self.rule_tables.names if s == space))

    def replace_rule(self, old: Rule, new: Rule) -> None:
        t = self.rule_tables
        row = t.rules.get(old.id)
        if row is None or row.version != old.version:
            raise Conflict("rule moved on")
        renamed = (old.space, old.name) != (new.space, new.name)
        if renamed and (new.space, new.name) in t.names:
            raise AlreadyExists(f"a rule named {new.name!r} already exists in {new.space!r}")
        if renamed:
            del t.names[(old.space, old.name)]
            t.names[(new.space, new.name)] = new.id
        t.rules[new.id] = copy.deepcopy(new)

    def delete_rule(self, rule: Rule) -> None:
        t = self.rule_tables
        row = t.rules.get(rule.id)
        if row is None or row.version != rule.version:
            raise Conflict("rule moved on")
        del t.rules[rule.id]
        t.names.pop((rule.space, rule.name), None)
        if rule.space in t.counts:
            t.counts[rule.space] -= 1

    def inbound_rules(
        self, topic: str, recipients: list[str], space: str | None, limit: int
    ) -> list[Rule]:
        wanted = [None, *recipients]
        found: list[Rule] = []
        for to in wanted:
            for rule_id in sorted(self.rule_tables.rules):
                rule = self.rule_tables.rules[rule_id]
                if (topic, to) not in _index_keys(rule) or (
                    space is not None and rule.space != space
                ):
                    continue
                if len(found) < limit and rule not in found:
                    found.append(copy.deepcopy(rule))
        return found

    def scheduled_rules(self, limit: int, after: Rule | None = None) -> list[Rule]:
        rules = self.rule_tables.rules.values()
        found = sorted((r for r in rules if r.kind == "scheduled"), key=lambda r: (r.space, r.id))
        if after is not None:
            found = [r for r in found if (r.space, r.id) > (after.space, after.id)]
        return [copy.deepcopy(r) for r in found[:limit]]

    def get_event_record(self, space: str, event_id: str, now_s: int) -> list[str] | None:
        record = self.rule_tables.event_records.get((space, event_id))
        if record is None or record[1] <= now_s:
            return None
        return list(record[0])

    def put_event_record(
        self, space: str, event_id: str, lease_ids: list[str], expires_at: int, now_s: int
    ) -> None:
        records = self.rule_tables.event_records
        held = records.get((space, event_id))
        if held is not None and held[1] >= now_s:
            raise AlreadyExists(f"event {event_id} was already recorded")
        records[(space, event_id)] = (list(lease_ids), expires_at)

    def put_address(self, address: Address) -> Address:
        held = self.rule_tables.addresses.get(address.address)
        if held is not None:
            if held.space == address.space:
                return held
            raise AlreadyExists(f"address {address.address} belongs to another space")
        self.rule_tables.addresses[address.address] = address
        return address

    def get_address(self, address: str) -> Address | None:
        return self.rule_tables.addresses.get(address)

    def address_owners(self, addresses: list[str]) -> dict[str, str]:
        held = self.rule_tables.addresses
        return {a: held[a].space for a in addresses if a in held}

    def list_addresses(self, space: str, limit: int) -> list[Address]:
        held = sorted(self.rule_tables.addresses.values(), key=lambda a: a.address)
        return [a for a in held if a.space == space][:limit]

    def delete_address(self, space: str, address: str) -> None:
        held = self.rule_tables.addresses.get(address)
        if held is None or held.space != space:
            raise NotFound(f"address {address} is not an address of space {space!r}")
        del self.rule_tables.addresses[address]

    def note_firing(self, rule_id: str, lease_id: str | None, through: int | None) -> bool:
        t = self.rule_tables
        row = t.rules.get(rule_id)
        if row is None:
            return False
        if through is not None and row.fired_through is not None and row.fired_through >= through:
            return False
        changes: dict[str, Any] = {"version": row.version + 1}
        if lease_id is not None:
            changes["last_lease_id"] = lease_id
        if through is not None:
            changes["fired_through"] = through
        t.rules[rule_id] = dataclasses.replace(row, **changes)
        return True

    def count_firing(self, rule_id: str, hour: str, cap: int, expires_at: int) -> str:
        row = self.rule_tables.hours.setdefault((rule_id, hour), [0, 0])
        if row[0] < cap:
            row[0] += 1
            return "counted"
        if row[1]:
            return "limited"
        row[1] = 1
        return "limited_first"
