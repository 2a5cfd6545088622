"""Who may do what: roles (read < member < admin), scopes, and the lease-token rule (a lease
token acts on its own lease only, for as long as its lease lasts; docs/api.md)."""

from __future__ import annotations

from tenure.domain import fencing
from tenure.domain.errors import Forbidden, LeaseNotFound, LeaseTokenMismatch, Unauthenticated
from tenure.domain.model import Lease, Principal
from tenure.domain.task_keys import derived_outside

ROLE_RANK = {"read": 0, "member": 1, "admin": 2}

# What a lease token is used for, as far as its lease's end matters:
# REPORT: heartbeat, start, complete, fail, release: answered as ever, ended or not (a replay
#   gets its first answer, a lost lease 409 stale_lease), so the evidence is kept.
# SHIP: upload the job's last logs and attachments, read its own payload, logs and
#   attachments: for LEASE_GRACE_MS after the end.
# ACT: everything else (list or read other leases, file tasks, blocks, force, other MCP
#   tools): only while the lease is active.
REPORT, SHIP, ACT = "report", "ship", "act"
LEASE_GRACE_MS = 10 * 60 * 1000


def require_role(actor: Principal, role: str) -> None:
    """Kind and role only: checked before a row is looked up, so that a token that may not
    use a route learns nothing about which ids exist."""
    if actor.kind == "lease":
        raise LeaseTokenMismatch("a lease token cannot be used on an operator route")
    if actor.kind != "operator":
        raise Forbidden("this route needs an operator token")
    if ROLE_RANK.get(actor.role or "", -1) < ROLE_RANK[role]:
        raise Forbidden(f"this route needs the {role!r} role; the token has {actor.role!r}")


def require_operator(actor: Principal, role: str, space: str | None = None) -> None:
    require_role(actor, role)
    if actor.spaces is not None:
        if space is None:
            raise Forbidden("a token limited to spaces cannot act across all spaces")
        if space not in actor.spaces:
            raise _not_there(actor.spaces)


def _not_there(spaces: tuple[str, ...]) -> Forbidden:
    # The space is not named: it may be another space's, read from an id the caller gave (a
    # rule's, a lease's), and a refusal must not tell one space about another.
    return Forbidden(
        "the token is not allowed there; it is limited to the spaces " + ", ".join(spaces)
    )


def require_id_in_spaces(actor: Principal, ident: str) -> None:
    """A token limited to spaces, on a task or lease id derived from a key of another space:
    refused before anything is read, as require_operator refuses one it read, so the answer
    is the same whether or not that task exists (domain/task_keys.py derived_outside)."""
    spaces = actor.spaces if actor.kind == "operator" else None
    if spaces is not None and derived_outside(ident, spaces):
        raise _not_there(spaces)


def require_pool_of(actor: Principal, lease: Lease) -> None:
    """A worker token limited to pools, on a lease of another pool (a row of its heartbeat,
    of a bulk force): answered as a lease that does not exist, so that the token learns
    nothing of other pools' leases from the difference (a limit's Forbidden is for a route's
    own pool, which the caller names)."""
    if actor.kind == "worker" and actor.pools is not None and lease.pool not in actor.pools:
        raise LeaseNotFound(f"lease {lease.id} does not exist")


def require_worker(actor: Principal, pool: str | None) -> None:
    if actor.kind == "lease":
        raise LeaseTokenMismatch("a lease token cannot claim; use a worker token")
    if actor.kind != "worker":
        raise Forbidden("this route needs a worker token")
    if pool is not None and actor.pools is not None and pool not in actor.pools:
        raise Forbidden(
            "the token is not allowed in that pool; it is limited to the pools "
            + ", ".join(actor.pools)
        )


WORKER_REPORTS_NEED_NEXT = (
    "a worker token sends a final report only to claim its next lease (with `next`); "
    "report without `next` with the lease's own token"
)


def require_claiming_report(actor: Principal, body: object) -> None:
    """A worker token on a final report: only one that claims the next lease (`next`), which
    is the one report that needs the worker's own credential. Judged on the body as parsed
    leniently, before it is validated, like every other refusal."""
    if actor.kind == "worker" and not (
        isinstance(body, dict) and isinstance(body.get("next"), dict)
    ):
        raise Forbidden(WORKER_REPORTS_NEED_NEXT)


LEASE_TOKENS_RENEW_NOTHING = (
    "a lease token renews no other lease: a report's `heartbeat` goes with the worker token "
    "that claimed the lease, beside its `next`"
)


def refuse_lease_heartbeat(actor: Principal, body: object) -> None:
    """A final report's `heartbeat` renews the worker's other leases: a lease token, which the
    job holds too, must not reach them (403 `lease_token_mismatch`, as the worker heartbeat
    route answers a lease token). Judged on the body as parsed leniently, before it is
    validated."""
    if actor.kind == "lease" and isinstance(body, dict) and body.get("heartbeat") is not None:
        raise LeaseTokenMismatch(LEASE_TOKENS_RENEW_NOTHING)


def require_lease(actor: Principal, lease_id: str) -> None:
    if actor.kind != "lease":
        raise Forbidden("this route needs the lease's own token")
    if actor.lease_id != lease_id:
        raise LeaseTokenMismatch("this lease token belongs to another lease")


def carries_token(actor: Principal, lease: Lease) -> bool:
    """Whether the row `lease`, as read, carries the digest of the lease token `actor` was
    made from (any other principal: true). A copy that does not may be from before the claim
    that minted the token: it is read again consistently before anything is refused."""
    if actor.kind != "lease" or actor.token_hash is None:
        return True
    return fencing.same_hash(lease.token_hash, actor.token_hash)


def require_lease_token(actor: Principal, lease: Lease) -> None:
    """A lease token acts only while its lease's row carries its digest: a claim retried with
    its claim_id gives the lease a new token, and the one it replaces is unknown from then on
    (401, as any unknown token), even to a verdict kept from before. Checked on every row a
    lease token's use is judged on, the fresh read after a lost write included."""
    if not carries_token(actor, lease):
        raise Unauthenticated("unknown token")


def require_lease_power(ended_at: int | None, now: int, use: str) -> None:
    """A lease token's powers end with its lease: refused 401 `unauthenticated` (as an
    unknown token is) for any use its lease's end has taken away."""
    if use == REPORT or ended_at is None:
        return
    if use == SHIP and now < ended_at + LEASE_GRACE_MS:
        return
    if use == SHIP:
        raise Unauthenticated(SPENT)
    raise Unauthenticated("this lease has ended; its token acts on nothing but its reports")


SPENT = "this lease ended over 10 minutes ago; its token is spent"


def ship_seconds_left(ended_at: int | None, now: int) -> int | None:
    """How many seconds, rounded up, a lease token may still ship for (None: its lease is
    active); 0 once it may not. What it is handed to ship with later, an upload URL, lasts no
    longer, but for the part of a second S3's one-second least adds (bytes written past the
    grace are refused all the same: shipped_in_time)."""
    return None if ended_at is None else max(0, -((now - ended_at - LEASE_GRACE_MS) // 1000))


def shipped_in_time(ended_at: int | None, at: int) -> bool:
    """Whether something a lease token shipped that arrived `at` came before its powers to
    ship ended: an upload URL handed out while the lease ran may outlast its end by more
    than LEASE_GRACE_MS, and the bytes it writes after that are refused as a late request
    is."""
    return ended_at is None or at < ended_at + LEASE_GRACE_MS


def lease_ended_at(lease: Lease) -> int | None:
    """When the lease ended (None while it is active). An ended row without its stamp counts
    as long ended: refusing is the safe side."""
    if not lease.state.terminal:
        return None
    return lease.ended_at if lease.ended_at is not None else 0


def require_own_space(actor: Principal, space: str, own_space: str) -> None:
    """A lease token reads the leases of its own lease's space and no other (the MCP tools
    leases_list and leases_get); over HTTP the route table refuses it first."""
    if actor.kind != "lease":
        raise Forbidden("only a lease token is scoped by its own lease's space")
    if space != own_space:
        raise LeaseTokenMismatch(OWN_SPACE_ONLY)


OWN_SPACE_ONLY = "a lease token sees only the leases of its own lease's space"


def require_id_of_own_space(lease_id: str, own_space: str) -> None:
    """require_own_space for a lease id derived from another space's key, judged from its
    form before it is read, so the answer is the same whether or not that lease exists."""
    if derived_outside(lease_id, (own_space,)):
        raise LeaseTokenMismatch(OWN_SPACE_ONLY)
