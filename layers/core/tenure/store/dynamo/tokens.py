"""API token rows: by hash, by id, by name, and the tokens' list partition."""

from __future__ import annotations

from typing import Any

from tenure.app.ports import TokenPage
from tenure.domain.errors import AlreadyExists, Conflict
from tenure.domain.model import Event, Token
from tenure.store import codec, conditions, cursors, expressions, items, keys
from tenure.store.dynamo.timeline import event_put
from tenure.store.table import Table


class DynamoTokens:
    """The TokenRows port on one table."""

    def __init__(self, table: Table) -> None:
        self.table = table

    def put_token(self, token: Token, event: Event | None = None) -> None:
        rows = (
            {**keys.token_name_key(token.name), "token_id": token.id},
            {**keys.token_key(token.token_hash), **items.token_item(token)},
            {**keys.token_id_key(token.id), **items.token_item(token)},
        )
        ops = [
            {
                "Put": {
                    "TableName": self.table.name,
                    "Item": codec.dump(row),
                    "ConditionExpression": conditions.IS_NEW,
                }
            }
            for row in rows
        ]
        if event is not None:
            ops.append(event_put(self.table, event))
        try:
            self.table.transact(ops)
        except Conflict as lost:
            raise AlreadyExists(f"token {token.name} already exists") from lost

    def get_token(self, token_hash: str) -> Token | None:
        # Consistent: a token is used right after it is handed out.
        row = self.table.get(keys.token_key(token_hash))
        return items.token_from(row) if row else None

    def get_token_by_id(self, token_id: str) -> Token | None:
        listed = self.table.get(keys.token_id_key(token_id))
        return self.get_token(str(listed["token_hash"])) if listed else None

    def list_tokens(self, kind: str | None, limit: int, cursor: str | None) -> TokenPage:
        request: dict[str, Any] = {
            "KeyConditionExpression": expressions.IN_PARTITION,
            "ExpressionAttributeValues": codec.values(pk=keys.TOKENS_PK),
            "Limit": limit,
        }
        if cursor:
            position = cursors.decode(cursor, "tokens", keys.TOKEN_ID_SHAPE)
            request["ExclusiveStartKey"] = codec.dump({keys.PK: keys.TOKENS_PK, keys.SK: position})
        out = self.table.query(**request)
        listed = [codec.load(r) for r in out.get("Items", [])]
        # The listed rows are write-once; revocation and last use are on the token rows.
        rows = self.table.batch_get([keys.token_key(str(r["token_hash"])) for r in listed], False)
        by_hash = {str(r["token_hash"]): items.token_from(r) for r in rows}
        tokens = tuple(
            by_hash[h]
            for h in (str(r["token_hash"]) for r in listed)
            if h in by_hash and (kind is None or by_hash[h].kind == kind)
        )
        last = out.get("LastEvaluatedKey")
        after = (
            cursors.encode("tokens", str(codec.load(last)[keys.SK])) if last and listed else None
        )
        return TokenPage(tokens, after)

    def revoke_token(self, token_hash: str, at: int, event: Event | None = None) -> bool:
        update = {
            "TableName": self.table.name,
            "Key": codec.dump(keys.token_key(token_hash)),
            "UpdateExpression": expressions.REVOKE,
            "ConditionExpression": conditions.TOKEN_NOT_REVOKED,
            "ExpressionAttributeValues": codec.values(at=at),
        }
        try:
            if event is None:
                self.table.write("update", Conflict("the token was revoked already"), **update)
            else:
                # The event's id is new, so only the token's condition can lose.
                self.table.transact([{"Update": update}, event_put(self.table, event)])
        except Conflict:
            return False
        return True

    def touch_token(self, token_hash: str, at: int, before: int) -> None:
        self.table.update_if(
            "the token's use was noted already",
            Key=codec.dump(keys.token_key(token_hash)),
            UpdateExpression=expressions.NOTE_USE,
            ConditionExpression=conditions.TOKEN_USE_IS_OLD,
            ExpressionAttributeValues=codec.values(at=at, before=before),
        )
