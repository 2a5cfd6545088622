"""Pure rules of a worker's signal row: which writes raise its epoch (must_signal, in
transitions.py with the lease's other moves), and how an answer seals what it vouches for.

Each worker (its worker token and `worker_id`) has one small signal row carrying an epoch. A
write that changes what a worker heartbeat answers for a lease that worker holds, and that the
worker did not ask for itself, raises that epoch in the same transaction: a cancel, a kill, a
pause or resume, an operator's end, the sweeper's expiry or run-timeout kill, a release, a
job's own heartbeat that changes its lease_seconds. So a heartbeat that finds the epoch where
its last answer left it knows that nothing it must report happened to the worker's leases
since; one that finds it moved reads its leases.

The holder's own routine writes raise nothing: a heartbeat's renewal, the start of its lease
and its complete or fail (the common path, one write each, which a second item in their
transaction would make four)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from typing import Any

from tenure.domain.model import Lease
from tenure.domain.states import LeaseState, Revoke
from tenure.domain.transitions import SignalKey
from tenure.records import record

# ------------------------------------------------------------------ what an answer vouches

# The first answer of a worker heartbeat that asked for a signal holds a sealed copy of what
# it answered for each lease it may vouch for later; the caller echoes it, and while the
# worker's epoch has not moved the next heartbeat answers those leases from it, unread.
# Sealed with a secret of the instance's (never sent): an echo the service did not seal, or
# one sealed for another worker or another epoch, vouches for nothing.
VOUCHED_STATES = frozenset({LeaseState.RUNNING, LeaseState.PAUSED, LeaseState.CANCELLING})
MAC_BYTES = 16  # 128 bits
# The longest signal a caller may echo; an answer vouches for no more leases than fit in it
# (the others are read the next time).
SIGNAL_MAX = 32_768


@record
class Known:
    """What one heartbeat answered for a lease, and what the next needs to answer it again:
    whether it is the lease named (fence), what to answer (state, revoke, deadline), whether
    its deadline is due (lease_seconds), and where the worker was seen (pool, version)."""

    fence: int
    state: LeaseState
    revoke: Revoke | None
    deadline: int
    lease_seconds: int
    pool: str
    worker_version: str | None

    def due(self, now: int) -> bool:
        """Whether a heartbeat now must write the deadline (domain/fencing.py)."""
        return self.deadline < now + 1000 * self.lease_seconds


def known_of(lease: Lease, revoke: Revoke | None) -> Known | None:
    """What may be vouched for of `lease` as answered (None: a lease every heartbeat reads)."""
    if lease.state not in VOUCHED_STATES or lease.deadline is None or not lease.lease_seconds:
        return None
    return Known(
        lease.fence,
        lease.state,
        revoke,
        lease.deadline,
        lease.lease_seconds,
        lease.pool,
        lease.worker_version,
    )


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _mac(secret: str, key: SignalKey, body: str) -> str:
    material = "\n".join((key.claimant, key.worker_id, body)).encode()
    return _b64(hmac.new(secret.encode(), material, hashlib.sha256).digest()[:MAC_BYTES])


def seal(secret: str, key: SignalKey, epoch: int, known: dict[str, Known]) -> str:
    """The signal an answer carries: at `epoch`, for the worker `key`, the leases `known`, or
    as many of them as fit in SIGNAL_MAX (halved until they do)."""
    signal = _sealed(secret, key, epoch, known)
    while len(signal) > SIGNAL_MAX:
        kept = sorted(known)[: len(known) // 2]
        known = {lease_id: known[lease_id] for lease_id in kept}
        signal = _sealed(secret, key, epoch, known)
    return signal


def _sealed(secret: str, key: SignalKey, epoch: int, known: dict[str, Known]) -> str:
    pools = sorted({(k.pool, k.worker_version or "") for k in known.values()})
    where = {p: i for i, p in enumerate(pools)}
    rows = {
        lease_id: [
            k.fence,
            k.state.value,
            k.revoke.value if k.revoke else None,
            k.deadline,
            k.lease_seconds,
            where[(k.pool, k.worker_version or "")],
        ]
        for lease_id, k in sorted(known.items())
    }
    body = _b64(json.dumps([epoch, pools, rows], separators=(",", ":")).encode())
    return f"{body}.{_mac(secret, key, body)}"


def opened(secret: str, key: SignalKey, epoch: int, signal: str) -> dict[str, Known]:
    """What an echoed signal vouches for: its leases when the service sealed it for this
    worker at this very epoch, nothing otherwise (forged, altered, another worker's, older)."""
    body, dot, mac = signal.partition(".")
    if not dot or not hmac.compare_digest(mac.encode(), _mac(secret, key, body).encode()):
        return {}
    try:
        return _vouched(epoch, json.loads(_unb64(body)))
    except (ValueError, TypeError, KeyError, IndexError):
        return {}  # sealed in a form this release does not read: it vouches for nothing


def _vouched(epoch: int, sealed: Any) -> dict[str, Known]:
    sealed_at, pools, rows = sealed
    if sealed_at != epoch:
        return {}
    return {
        lease_id: Known(
            fence,
            LeaseState(state),
            Revoke(revoke) if revoke else None,
            deadline,
            seconds,
            pools[at][0],
            pools[at][1] or None,
        )
        for lease_id, (fence, state, revoke, deadline, seconds, at) in rows.items()
    }
