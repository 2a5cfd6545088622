"""Setting up work: spaces, workflows, pools, tokens, and who a bearer token is."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from tenure.app import ports
from tenure.app.setup.versions import check_settings, require_settings
from tenure.app.usage import check_rates
from tenure.domain import authz
from tenure.domain import fencing as rules
from tenure.domain.errors import AlreadyExists, Unauthenticated, ValidationFailed
from tenure.domain.model import Pool, Principal, Space, Token, Workflow

if TYPE_CHECKING:
    from tenure.app.kernel import Kernel


class Setup:
    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel

    def create_space(self, actor: Principal, key: str, name: str, max_active: int | None) -> Space:
        authz.require_operator(actor, "admin")
        space = Space(
            key=key, name=name, max_active=max_active, created_at=self.kernel.clock.now_ms()
        )
        self.kernel.store.put_space(space)
        return space

    def create_workflow(
        self, actor: Principal, space: str, slug: str, name: str, description: str | None
    ) -> Workflow:
        authz.require_operator(actor, "admin", space)
        self.kernel.space(space)
        wf = Workflow(
            space=space,
            slug=slug,
            name=name,
            description=description,
            created_at=self.kernel.clock.now_ms(),
        )
        self.kernel.store.put_workflow(wf)
        return wf

    def create_pool(self, actor: Principal, pool: Pool) -> Pool:
        authz.require_operator(actor, "admin", pool.space)
        self.kernel.space(pool.space)
        check_settings(pool.kind, pool.agent, pool.classifier)
        require_settings(pool.kind, pool.agent, pool.classifier)
        check_rates(pool.rates)
        if len(self.kernel.store.list_pools()) >= ports.POOL_CAP:
            raise ValidationFailed(f"this instance already has {ports.POOL_CAP} pools")
        pool = replace(pool, created_at=self.kernel.clock.now_ms())
        self.kernel.store.put_pool(pool)
        return pool

    def create_token(
        self,
        actor: Principal,
        name: str,
        kind: str,
        role: str | None,
        spaces: tuple[str, ...] | None,
        pools: tuple[str, ...] | None,
    ) -> tuple[Token, str]:
        authz.require_operator(actor, "admin")
        for key in spaces or ():
            self.kernel.space(key)
        for pool in pools or ():
            self.kernel.pool(pool)
        raw = f"{rules.TOKEN_PREFIX[kind]}{self.kernel.ids.secret()}"
        token = Token(
            id=self.kernel.ids.new_id("tok"),
            name=name,
            kind=kind,
            role=role if kind == "operator" else None,
            spaces=spaces if kind == "operator" else None,
            pools=pools if kind == "worker" else None,
            token_hash=rules.hash_token(raw),
            created_at=self.kernel.clock.now_ms(),
        )
        self.kernel.store.put_token(token)
        return token, raw

    def bootstrap_admin(self, raw: str) -> Token:
        """Make sure `raw` is an admin operator token (the local stack's first token)."""
        digest = rules.hash_token(raw)
        existing = self.kernel.store.get_token(digest)
        if existing is not None:
            return existing
        token = Token(
            id=self.kernel.ids.new_id("tok"),
            name=f"admin-{digest[:8]}",
            kind="operator",
            role="admin",
            token_hash=digest,
            created_at=self.kernel.clock.now_ms(),
        )
        try:
            self.kernel.store.put_token(token)
        except AlreadyExists:
            found = self.kernel.store.get_token(digest)
            if found is None:
                raise
            return found
        return token

    def authenticate(self, raw: str | None) -> Principal:
        if not raw:
            raise Unauthenticated("a bearer token is required")
        lease_id = rules.lease_id_of_token(raw)
        digest = rules.hash_token(raw)
        if len(raw) > rules.MAX_TOKEN_LENGTH:
            raise Unauthenticated("unknown token")
        if lease_id is not None:
            # Consistent: a token used right after its claim must see the claim (and API
            # Gateway would cache a wrong "unknown" verdict for a minute).
            lease = self.kernel.store.get_lease(lease_id, consistent=True)
            if lease is None or lease.token_hash != digest:
                raise Unauthenticated("unknown token")
            return Principal(kind="lease", token_id=digest[:8], lease_id=lease.id)
        token = self.kernel.store.get_token(digest)
        if token is None:
            raise Unauthenticated("unknown token")
        return token.principal()
