"""Who a bearer token names: the one check the HTTP API's authorizer and the worker function
both run, and the worker function's verdicts, kept as long as API Gateway keeps the
authorizer's."""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from tenure import wiring
from tenure.api.bearer import bearer
from tenure.domain.errors import Unauthenticated
from tenure.domain.fencing import could_be_token
from tenure.domain.model import Principal
from tenure.records import record

if TYPE_CHECKING:
    from tenure.app.worker_tenure import WorkerTenure

# The HTTP API's authorizer is cached this long per Authorization header (infra/template.yaml
# ReauthorizeEvery): a revoked token is refused everywhere within it, on either endpoint. An
# expiring token's verdict is kept no longer than the token lives, and refused from its
# expires_at on whatever was kept (the API function checks the cached principal the same way).
VERDICT_SECONDS = 60.0
EXPIRED = "the token has expired"
# Verdicts one warm function keeps; past it the oldest go first. A verdict is a digest and a
# principal (~1 kB): bounded so a stream of made-up tokens cannot grow the function's memory.
MAX_VERDICTS = 4096
# Refusals one warm function keeps, apart from the admitted tokens' verdicts: a stream of
# made-up tokens (each costs one read, then none for a minute) pushes out only other
# refusals, never a worker's own verdict, which would cost its next request a read again.
MAX_REFUSALS = 4096


def whole_service() -> WorkerTenure:
    """The token check's use cases within the whole service (the authorizer's, the API's)."""
    return wiring.service().core


def principal_of(raw: str | None, core: Callable[[], WorkerTenure] = whole_service) -> Principal:
    """The caller a bearer token names: `Unauthenticated` for no or an unknown token,
    `Unavailable` when the table could not be read. A value that cannot be a Tenure token
    (its shape and length) is refused before the service is built or the table read, so
    garbage costs no read; a revoked or expired token is unknown. `core` gives the service
    whose token check reads the table (the worker function's own, on its function URL)."""
    if not raw:
        raise Unauthenticated("a bearer token is required")
    if not could_be_token(raw):
        raise Unauthenticated("unknown token")
    return core().tokens.authenticate(raw)


def service_now_ms() -> int:
    """The service's clock, which a token's expires_at is on."""
    return whole_service().clock.now_ms()


def expired(principal: Principal, now_ms: int) -> bool:
    return principal.expires_at is not None and now_ms >= principal.expires_at


@record
class _Verdict:
    until: float
    principal: Principal | None
    reason: str  # why the token was refused, when principal is None


class Verdicts:
    """`principal_of`, each token's answer kept `VERDICT_SECONDS` like API Gateway keeps the
    authorizer's: a refusal too (a made-up token costs one read a minute, not one a request);
    never a table that could not be read, which is asked again on the next request. A token
    that expires is kept until then at most, and refused from then on with no read (`wall`:
    the clock its expires_at is on; `clock` times the verdicts)."""

    def __init__(
        self,
        check: Callable[[str | None], Principal] = principal_of,
        clock: Callable[[], float] = time.monotonic,
        seconds: float = VERDICT_SECONDS,
        size: int = MAX_VERDICTS,
        wall: Callable[[], int] = service_now_ms,
        refusals: int = MAX_REFUSALS,
    ) -> None:
        self._check, self._clock, self._seconds, self._size = check, clock, seconds, size
        self._wall = wall
        self._kept: OrderedDict[str, _Verdict] = OrderedDict()
        self._refused: OrderedDict[str, _Verdict] = OrderedDict()
        self._refusals = refusals
        self._lock = threading.Lock()

    def principal(self, headers: Mapping[str, str] | None) -> Principal:
        raw = bearer(headers)
        if raw is None:
            return self._check(raw)  # refused without reading anything
        # Kept by digest: the function holds no token it was shown.
        key = hashlib.sha256(raw.encode()).hexdigest()
        now = self._clock()
        with self._lock:
            kept = self._kept.get(key) or self._refused.get(key)
        if kept is None or kept.until <= now:
            kept = self._keep(key, self._decide(raw, now))
        elif self._outlived(kept):
            kept = self._keep(key, _Verdict(now + self._seconds, None, EXPIRED))  # no read
        if kept.principal is None:
            raise Unauthenticated(kept.reason)
        return kept.principal

    def _keep(self, key: str, verdict: _Verdict) -> _Verdict:
        """Keep the verdict among its kind (admitted or refused), oldest first out of each: a
        flood of refused tokens never pushes an admitted one out."""
        admitted = verdict.principal is not None
        with self._lock:
            into, other = (self._kept, self._refused) if admitted else (self._refused, self._kept)
            other.pop(key, None)
            into[key] = verdict
            into.move_to_end(key)
            while len(into) > (self._size if admitted else self._refusals):
                into.popitem(last=False)
        return verdict

    def _outlived(self, kept: _Verdict) -> bool:
        """A kept principal whose token has expired since (judged on the wall clock, which
        its expires_at is on: the function's own clock times the verdicts)."""
        return kept.principal is not None and expired(kept.principal, self._wall())

    def _decide(self, raw: str, now: float) -> _Verdict:
        until = now + self._seconds
        try:
            principal = self._check(raw)
        except Unauthenticated as refused:
            return _Verdict(until, None, refused.message)
        if principal.expires_at is not None:
            wall = self._wall()
            if expired(principal, wall):
                return _Verdict(until, None, EXPIRED)
            until = min(until, now + (principal.expires_at - wall) / 1000)
        return _Verdict(until, principal, "")
