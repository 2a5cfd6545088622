"""Tokens: making, listing and revoking them, the first admin token, and who a bearer token
is."""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING

from tenure.app.ports import TokenPage
from tenure.app.rows import LeaseRows, SchemaRows, TokenRows
from tenure.app.schema_versions import SCHEMA_VERSION
from tenure.domain import authz, fencing
from tenure.domain.errors import (
    AlreadyExists,
    Conflict,
    NotFound,
    Unauthenticated,
    ValidationFailed,
)
from tenure.domain.events import TOKEN_CREATED, TOKEN_REVOKED
from tenure.domain.model import Event, Principal, Token

if TYPE_CHECKING:
    from collections import Counter

    from tenure.app.catalog import Catalog
    from tenure.app.own_leases import OwnLeases
    from tenure.app.ports import Clock, Ids

# A token lives at most ten years (`expires_in_seconds`).
MAX_TOKEN_LIFE_S = 10 * 366 * 24 * 3600
# `last_used_at` is written at most once a minute per token.
MAX_TOUCHES_KEPT = 10_000
TOKEN_TOUCH_MS = 60_000

_log = logging.getLogger(__name__)
# GET /tokens reads at most this many tokens a page.
MAX_TOKEN_PAGE = 100
# The instance's own timeline: tokens made and revoked.
INSTANCE_TIMELINE = ("instance", "instance")
# Who made a token written with AWS credentials rather than a Tenure token.
BOOTSTRAP_ACTOR = "aws-credentials"


class Tokens:
    """Tokens: making and revoking them (each with its record on the instance's timeline),
    and who a bearer token is."""

    def __init__(
        self,
        *,
        catalog: Catalog,
        clock: Clock,
        counters: Counter[str],
        ids: Ids,
        owned: OwnLeases,
        leases: LeaseRows,
        schema: SchemaRows,
        tokens: TokenRows,
    ) -> None:
        self.catalog = catalog
        self.clock = clock
        self.counters = counters
        self.ids = ids
        self.owned = owned
        self.leases = leases
        self.schema = schema
        self.tokens = tokens
        # When this process last noted each token's use (by hash): the token row is read
        # eventually consistent, so a note just written can read as old, and a second note's
        # condition would fail — a lost write that is billed. At most one note per token per
        # minute per warm instance.
        self._touched: dict[str, int] = {}

    def create_token(
        self,
        actor: Principal,
        name: str,
        kind: str,
        role: str | None,
        spaces: tuple[str, ...] | None,
        pools: tuple[str, ...] | None,
        expires_in_seconds: int | None = None,
    ) -> tuple[Token, str]:
        authz.require_operator(actor, "admin")
        for key in spaces or ():
            self.catalog.space(key)
        for pool in pools or ():
            self.catalog.pool(pool)
        if expires_in_seconds is not None and not 1 <= expires_in_seconds <= MAX_TOKEN_LIFE_S:
            raise ValidationFailed(f"expires_in_seconds: between 1 and {MAX_TOKEN_LIFE_S}")
        token, raw = self._mint(name, kind, role, spaces, pools, expires_in_seconds)
        self.tokens.put_token(token, self._event(TOKEN_CREATED, actor.token_id, token))
        return token, raw

    def bootstrap_operator(self, name: str) -> tuple[Token, str]:
        """The first admin token of an instance, made by whoever can write its table (the
        `tenure admin bootstrap` command, with the caller's own AWS credentials; the API never
        mints a token for an unauthenticated caller). A token of that name is refused."""
        token, raw = self._mint(name, "operator", "admin", None, None, None)
        self.tokens.put_token(token, self._event(TOKEN_CREATED, BOOTSTRAP_ACTOR, token))
        return token, raw

    def list_tokens(
        self, actor: Principal, kind: str | None, limit: int, cursor: str | None
    ) -> TokenPage:
        """One page of tokens by id (each page reads at most `limit` list rows and their
        token rows). A token limited to spaces sees only tokens limited to spaces it holds, so
        a page may show fewer than `limit`: follow `next_cursor`."""
        authz.require_role(actor, "admin")
        page = self.tokens.list_tokens(kind, min(limit, MAX_TOKEN_PAGE), cursor)
        shown = tuple(t for t in page.tokens if _within(actor, t))
        # Older data still serves (a token without its list row authenticates as before); the
        # answer only says the list may be missing tokens until `tenure admin migrate` runs.
        behind = self.schema.schema_state().version < SCHEMA_VERSION
        return TokenPage(shown, page.next_cursor, behind)

    def revoke_token(self, actor: Principal, token_id: str) -> Token:
        """From now on the token answers 401 (the authorizer's cache holds a verdict for at
        most 60 s). Revoking a revoked token changes nothing and records nothing again."""
        authz.require_role(actor, "admin")
        token = self.tokens.get_token_by_id(token_id) if len(token_id) <= 200 else None
        if token is None or not _within(actor, token):
            # A scoped admin learns nothing of a token outside its spaces.
            raise NotFound(f"token {token_id} does not exist")
        if token.revoked_at is not None:
            return token
        at = self.clock.now_ms()
        # The event is written in the revocation's own transaction: a revocation whose
        # record was lost (a crash between two writes) could not say who revoked the token.
        self.tokens.revoke_token(
            token.token_hash, at, self._event(TOKEN_REVOKED, actor.token_id, token)
        )
        return replace(token, revoked_at=at)

    def _mint(
        self,
        name: str,
        kind: str,
        role: str | None,
        spaces: tuple[str, ...] | None,
        pools: tuple[str, ...] | None,
        expires_in_seconds: int | None,
    ) -> tuple[Token, str]:
        raw = f"{fencing.TOKEN_PREFIX[kind]}{self.ids.secret()}"
        now = self.clock.now_ms()
        token = Token(
            id=self.ids.new_id("tok"),
            name=name,
            kind=kind,
            role=role if kind == "operator" else None,
            spaces=spaces if kind == "operator" else None,
            pools=pools if kind == "worker" else None,
            token_hash=fencing.hash_token(raw),
            created_at=now,
            expires_at=now + 1000 * expires_in_seconds if expires_in_seconds else None,
        )
        return token, raw

    def _event(self, type_: str, by: str, token: Token) -> Event:
        """The instance-timeline event for a token made or revoked: the store writes it in the
        token's own transaction, so the token and the record of who did it land together or
        not at all."""
        data = {"by": by, "token_id": token.id, "name": token.name, "kind": token.kind}
        return Event(
            id=self.ids.new_id("ev"),
            subject_kind=INSTANCE_TIMELINE[0],
            subject_id=INSTANCE_TIMELINE[1],
            type=type_,
            at=self.clock.now_ms(),
            data=data,
        )

    def bootstrap_admin(self, raw: str) -> Token:
        """Make sure `raw` is an admin operator token (the local stack's first token)."""
        if not fencing.could_be_token(raw):
            raise ValidationFailed("the admin token must look like tnr_o_<secret>")
        digest = fencing.hash_token(raw)
        existing = self.tokens.get_token(digest)
        if existing is not None:
            return existing
        token = Token(
            id=self.ids.new_id("tok"),
            name=f"admin-{digest[:8]}",
            kind="operator",
            role="admin",
            token_hash=digest,
            created_at=self.clock.now_ms(),
        )
        try:
            self.tokens.put_token(token)
        except AlreadyExists:
            found = self.tokens.get_token(digest)
            if found is None:
                raise
            return found
        return token

    def authenticate(self, raw: str | None, note_use: bool = True) -> Principal:
        """Who a bearer value is. The reusable token check (the authorizer, and any endpoint
        that checks its own bearer): a value that cannot be a Tenure token is refused before
        the table is read; then one key read; a revoked or expired token is unknown.
        `note_use=False`: a check again of a token the request was already let in with,
        whose use was noted then."""
        if not raw:
            raise Unauthenticated("a bearer token is required")
        if not fencing.could_be_token(raw):
            raise Unauthenticated("unknown token")
        lease_id = fencing.lease_id_of_token(raw)
        digest = fencing.hash_token(raw)
        if lease_id is not None:
            # Consistent: a token used right after its claim must see the claim (and API
            # Gateway would cache a wrong "unknown" verdict for a minute).
            lease = self.leases.get_lease(lease_id, consistent=True)
            if lease is None or not fencing.same_hash(lease.token_hash, digest):
                raise Unauthenticated("unknown token")
            self.owned.token_checked(lease)  # the route's own_lease takes this read
            return Principal(
                kind="lease",
                token_id=digest[:8],
                lease_id=lease.id,
                lease_ended_at=authz.lease_ended_at(lease),
                token_hash=digest,
            )
        token = self.tokens.get_token(digest)
        if token is None or token.revoked_at is not None:
            raise Unauthenticated("unknown token")
        now = self.clock.now_ms()
        if token.expires_at is not None and now >= token.expires_at:
            raise Unauthenticated("the token has expired")
        noted = max(token.last_used_at or 0, self._touched.get(token.token_hash, 0))
        if note_use and now - noted >= TOKEN_TOUCH_MS:
            self._touch(token, now)
        return token.principal()

    def _touch(self, token: Token, now: int) -> None:
        """Note the token's use: one conditional write, which only the first use in a minute
        makes (a concurrent one loses its condition, quietly). Best effort: noting use never
        refuses a valid token, whatever the write meets (a throttle, a refusal of the
        function's role, a dropped connection); a failed note is logged and counted
        (`token_touch_failed`), and tried again a minute later."""
        if len(self._touched) >= MAX_TOUCHES_KEPT:
            self._touched.clear()  # bounded: forgetting costs at most one more note each
        self._touched[token.token_hash] = now
        try:
            self.tokens.touch_token(token.token_hash, now, now - TOKEN_TOUCH_MS)
        except Conflict:
            return  # another request noted it first
        except Exception as failed:  # noting use must never fail the request
            self.counters["token_touch_failed"] += 1
            _log.warning(
                "the token's last_used_at was not written: %s: %s",
                type(failed).__name__,
                failed,
                extra={"token_id": token.token_hash[:8]},
            )


def _within(actor: Principal, token: Token) -> bool:
    """Whether an admin may see this token: every admin an unscoped one's; a token limited
    to spaces only those limited to spaces it holds."""
    if actor.spaces is None:
        return True
    return token.spaces is not None and set(token.spaces) <= set(actor.spaces)
