"""Rule rows, their name rows and index rows, inbound addresses and firing counters."""

from __future__ import annotations

import dataclasses
from typing import Any

from tenure.app.rules.ports import RulePage
from tenure.domain.errors import AlreadyExists, Conflict, NotFound
from tenure.domain.rules.addresses import Address
from tenure.domain.rules.rule import Rule, within_answer
from tenure.store import codec, conditions, cursors, expressions, keys
from tenure.store.table import Table


def rule_item(rule: Rule) -> dict[str, Any]:
    row = {f.name: getattr(rule, f.name) for f in dataclasses.fields(rule)}
    return {"entity": "rule", **{key: v for key, v in row.items() if v is not None}}


def rule_from(row: dict[str, Any]) -> Rule:
    names = {f.name for f in dataclasses.fields(Rule)}
    return Rule(**{key: v for key, v in row.items() if key in names})


def index_keys(rule: Rule) -> list[dict[str, str]]:
    """The index rows a rule has: an enabled inbound rule one in the inbound index, a
    scheduled rule (enabled or not) one in the scheduled-rules partition."""
    if rule.schedule_name is not None:
        return [keys.scheduled_rule_key(rule.space, rule.id)]
    if not rule.enabled or rule.topic is None:
        return []
    return [keys.inbound_key(rule.topic, to, rule.space, rule.id) for to in rule.inbound_tos]


def _key_id(key: dict[str, str]) -> tuple[str, str]:
    return key[keys.PK], key[keys.SK]


class DynamoRules:
    """The RuleStore port (app/rules/ports.py) on one table."""

    def __init__(self, table: Table) -> None:
        self.table = table

    def put_rule(self, rule: Rule, counted: int, cap: int) -> None:
        ops = [
            self.table.put_op({**keys.rule_key(rule.id), **rule_item(rule)}, conditions.IS_NEW),
            self.table.put_op(
                {**keys.rule_name_key(rule.space, rule.name), "rule_id": rule.id}, conditions.IS_NEW
            ),
            *(self._index_put(key, rule) for key in index_keys(rule)),
            self._count(
                rule.space,
                expressions.COUNT_RULE,
                conditions.RULES_BELOW_CAP,
                counted=counted,
                cap=cap,
                entity="rule_count",
            ),
        ]
        try:
            self.table.transact(ops)
        except Conflict as lost:
            # ops[1] is the name row: its condition lost means the name is taken; the last op
            # is the count: its condition lost means the space is full. Anything else (another
            # transaction on the count row at the same instant) is a lost race, as it is.
            failed = [r == "ConditionalCheckFailed" for r in lost.details.get("reasons") or []]
            if len(failed) > 1 and failed[1]:
                raise AlreadyExists(
                    f"a rule named {rule.name!r} already exists in space {rule.space!r}"
                ) from lost
            if failed and failed[-1]:
                lost.details["over_cap"] = True
            raise

    def get_rule(self, rule_id: str) -> Rule | None:
        row = self.table.get(keys.rule_key(rule_id))
        return rule_from(row) if row else None

    def list_rules(self, space: str, limit: int, cursor: str | None = None) -> RulePage:
        request = self._names(space)
        # One more than the page: a next page is promised only when it holds a rule.
        request["Limit"] = limit + 1
        if cursor:
            after = cursors.decode_in(cursor, "rules", keys.RULE_CURSOR_SHAPE, space)
            request["ExclusiveStartKey"] = codec.dump(keys.rule_name_key(space, after))
        out = self.table.query(**request)
        rows = out.get("Items", [])
        ids = [str(codec.load(row)["rule_id"]) for row in rows[:limit]]
        found = [rule_from(row) for row in self.table.in_order([keys.rule_key(i) for i in ids])]
        rules = within_answer(found)
        more = len(rules) < len(found) or len(rows) > limit
        return RulePage(rules, cursors.encode_in("rules", space, rules[-1].name) if more else None)

    def count_rules(self, space: str, limit: int) -> int:
        request = self._names(space)
        # Consistent: a rule made an instant ago counts against the cap.
        out = self.table.query(**request, Select="COUNT", Limit=limit, ConsistentRead=True)
        return int(out.get("Count", 0))

    @staticmethod
    def _names(space: str) -> dict[str, Any]:
        """The Query of a space's rule name rows, by name."""
        return {
            "KeyConditionExpression": expressions.WITH_PREFIX,
            "ExpressionAttributeValues": codec.values(
                pk=keys.rule_name_key(space, "")[keys.PK], prefix=keys.RULE_NAME_PREFIX
            ),
        }

    def replace_rule(self, old: Rule, new: Rule) -> None:
        ops: list[dict[str, Any]] = [
            self.table.put_op(
                {**keys.rule_key(new.id), **rule_item(new)},
                conditions.RULE_VERSION_IS,
                values=codec.values(expect_version=old.version),
            )
        ]
        renamed = (old.space, old.name) != (new.space, new.name)
        if renamed:
            ops.append(self._name_delete(old))
            ops.append(
                self.table.put_op(
                    {**keys.rule_name_key(new.space, new.name), "rule_id": new.id},
                    conditions.IS_NEW,
                )
            )
        before = {_key_id(key): key for key in index_keys(old)}
        after = {_key_id(key): key for key in index_keys(new)}
        ops += [self._plain_delete(key) for kid, key in before.items() if kid not in after]
        ops += [self._index_put(key, new) for kid, key in after.items() if kid not in before]
        try:
            self.table.transact(ops)
        except Conflict as lost:
            # ops[0] is the rule's own row, ops[2] the new name: only the name lost means taken.
            failed = [r == "ConditionalCheckFailed" for r in lost.details.get("reasons") or []]
            if renamed and len(failed) > 2 and failed[2] and not failed[0]:
                raise AlreadyExists(
                    f"a rule named {new.name!r} already exists in space {new.space!r}"
                ) from lost
            raise

    def delete_rule(self, rule: Rule) -> None:
        ops = [
            {
                "Delete": {
                    "TableName": self.table.name,
                    "Key": codec.dump(keys.rule_key(rule.id)),
                    "ConditionExpression": conditions.RULE_VERSION_IS,
                    "ExpressionAttributeValues": codec.values(expect_version=rule.version),
                }
            },
            self._name_delete(rule),
            *(self._plain_delete(key) for key in index_keys(rule)),
        ]
        uncount = self._count(rule.space, expressions.UNCOUNT_RULE, conditions.RULES_COUNTED)
        try:
            self.table.transact([*ops, uncount])
        except Conflict as lost:
            reasons = lost.details.get("reasons") or []
            if not reasons or reasons[-1] != "ConditionalCheckFailed" or reasons[0] == reasons[-1]:
                raise
            # No count row yet (rules made before it existed): the next create starts it from
            # the rules it reads, this one gone.
            self.table.transact(ops)

    def _count(self, space: str, update: str, condition: str, **values: Any) -> dict[str, Any]:
        """The transaction item that moves the space's rule count by one."""
        return {
            "Update": {
                "TableName": self.table.name,
                "Key": codec.dump(keys.rule_count_key(space)),
                "UpdateExpression": update,
                "ConditionExpression": condition,
                "ExpressionAttributeValues": codec.values(one=1, **values),
            }
        }

    def inbound_rules(
        self, topic: str, recipients: list[str], space: str | None, limit: int
    ) -> list[Rule]:
        ids: list[str] = []
        for to in [None, *recipients]:
            remaining = limit - len(ids)
            if remaining <= 0:
                break
            condition = f"{keys.PK} = :pk"
            values: dict[str, Any] = {"pk": keys.inbound_pk(topic, to)}
            if space is not None:
                condition += f" AND begins_with({keys.SK}, :space)"
                values["space"] = f"{space}#"
            out = self.table.query(
                KeyConditionExpression=condition,
                ExpressionAttributeValues=codec.values(**values),
                Limit=remaining,
            )
            for row in out.get("Items", []):
                rule_id = str(codec.load(row)["rule_id"])
                if rule_id not in ids:
                    ids.append(rule_id)
        return [rule_from(row) for row in self.table.in_order([keys.rule_key(i) for i in ids])]

    def scheduled_rules(self, limit: int, after: Rule | None = None) -> list[Rule]:
        request: dict[str, Any] = {
            "KeyConditionExpression": expressions.IN_PARTITION,
            "ExpressionAttributeValues": codec.values(pk=keys.SCHEDULED_RULES_PK),
        }
        if after is not None:
            start = keys.scheduled_rule_key(after.space, after.id)
            request["ExclusiveStartKey"] = codec.dump(start)
        ids = [str(row["rule_id"]) for row in self.table.query_all(cap=limit, **request)]
        return [rule_from(row) for row in self.table.in_order([keys.rule_key(i) for i in ids])]

    def get_event_record(self, space: str, event_id: str, now_s: int) -> list[str] | None:
        row = self.table.get(keys.event_record_key(space, event_id))
        if row is None or int(row.get(keys.TTL_ATTRIBUTE, now_s + 1)) <= now_s:
            return None
        return [str(i) for i in row.get("lease_ids", [])]

    def put_event_record(
        self, space: str, event_id: str, lease_ids: list[str], expires_at: int, now_s: int
    ) -> None:
        item = {
            **keys.event_record_key(space, event_id),
            "lease_ids": lease_ids,
            keys.TTL_ATTRIBUTE: expires_at,
        }
        try:
            put = self.table.put_op(
                item, conditions.NEW_OR_EXPIRED, values=codec.values(now_s=now_s)
            )
            self.table.put_one(put["Put"])
        except Conflict as lost:
            raise AlreadyExists(f"event {event_id} was already recorded") from lost

    # ------------------------------------------------------------------ inbound addresses

    def put_address(self, address: Address) -> Address:
        row = {"address": address.address, "space": address.space}
        owner = {**keys.address_key(address.address), **row, "created_at": address.created_at}
        listed = {**keys.space_address_key(address.space, address.address), **row}
        try:
            self.table.transact(
                [
                    self.table.put_op(owner, conditions.IS_NEW),
                    {"Put": {"TableName": self.table.name, "Item": codec.dump(listed)}},
                ]
            )
        except Conflict as lost:
            old = (lost.details.get("old") or [None])[0]
            # Already this space's: adding it again answers the row as it was first written.
            if old and old.get("space") == address.space:
                return _address_from(old)
            # The message names the address the caller gave, never the space that owns it.
            raise AlreadyExists(f"address {address.address} belongs to another space") from lost
        return address

    def get_address(self, address: str) -> Address | None:
        row = self.table.get(keys.address_key(address))
        return _address_from(row) if row else None

    def address_owners(self, addresses: list[str]) -> dict[str, str]:
        if not addresses:
            return {}
        rows = self.table.batch_get([keys.address_key(a) for a in dict.fromkeys(addresses)])
        return {str(row["address"]): str(row["space"]) for row in rows}

    def list_addresses(self, space: str, limit: int) -> list[Address]:
        out = self.table.query(
            KeyConditionExpression=expressions.WITH_PREFIX,
            ExpressionAttributeValues=codec.values(
                pk=keys.space_address_key(space, "")[keys.PK], prefix=keys.ADDRESS_PREFIX
            ),
            Limit=limit,
        )
        names = [str(codec.load(row)["address"]) for row in out.get("Items", [])]
        rows = self.table.in_order([keys.address_key(a) for a in names])
        return [_address_from(row) for row in rows if row["space"] == space]

    def delete_address(self, space: str, address: str) -> None:
        try:
            self.table.transact(
                [
                    {
                        "Delete": {
                            "TableName": self.table.name,
                            "Key": codec.dump(keys.address_key(address)),
                            "ConditionExpression": conditions.ADDRESS_IS_OURS,
                            "ExpressionAttributeNames": conditions.SPACE_NAMES,
                            "ExpressionAttributeValues": codec.values(space=space),
                        }
                    },
                    self._plain_delete(keys.space_address_key(space, address)),
                ]
            )
        except Conflict as lost:
            raise NotFound(f"address {address} is not an address of space {space!r}") from lost

    # ------------------------------------------------------------------- firing counters

    def count_firing(self, rule_id: str, hour: str, cap: int, expires_at: int) -> str:
        key = codec.dump(keys.rule_hour_key(rule_id, hour))
        if self.table.update_if(
            "the hour's cap is reached",
            Key=key,
            UpdateExpression=expressions.COUNT_FIRING,
            ConditionExpression=conditions.BELOW_HOURLY_CAP,
            ExpressionAttributeValues=codec.values(one=1, cap=cap, expires=expires_at),
        ):
            return "counted"
        first = self.table.update_if(
            "the hour's refusal is already recorded",
            Key=key,
            UpdateExpression=expressions.NOTE_LIMITED,
            ConditionExpression=conditions.NOT_YET_LIMITED,
            ExpressionAttributeValues=codec.values(hour=hour),
        )
        return "limited_first" if first else "limited"

    def note_firing(self, rule_id: str, lease_id: str | None, through: int | None) -> bool:
        sets = ["version = version + :one"]
        values: dict[str, Any] = {"one": 1}
        if lease_id is not None:
            sets.append("last_lease_id = :lease")
            values["lease"] = lease_id
        condition = conditions.RULE_EXISTS
        if through is not None:
            sets.append("fired_through = :through")
            values["through"] = through
            condition = conditions.RULE_FIRED_BEFORE
        return self.table.update_if(
            "the rule is gone or a later occasion is noted",
            Key=codec.dump(keys.rule_key(rule_id)),
            UpdateExpression=expressions.set_all(sets),
            ConditionExpression=condition,
            ExpressionAttributeValues=codec.values(**values),
        )

    # -------------------------------------------------------------------- transaction ops

    def _index_put(self, key: dict[str, str], rule: Rule) -> dict[str, Any]:
        return {
            "Put": {
                "TableName": self.table.name,
                "Item": codec.dump({**key, "rule_id": rule.id, "space": rule.space}),
            }
        }

    def _plain_delete(self, key: dict[str, str]) -> dict[str, Any]:
        return {"Delete": {"TableName": self.table.name, "Key": codec.dump(key)}}

    def _name_delete(self, rule: Rule) -> dict[str, Any]:
        return {
            "Delete": {
                "TableName": self.table.name,
                "Key": codec.dump(keys.rule_name_key(rule.space, rule.name)),
                "ConditionExpression": conditions.NAME_IS_RULE,
                "ExpressionAttributeValues": codec.values(rule_id=rule.id),
            }
        }


def _address_from(row: dict[str, Any]) -> Address:
    return Address(
        address=str(row["address"]), space=str(row["space"]), created_at=int(row["created_at"])
    )
