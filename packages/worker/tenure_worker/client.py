"""A small HTTP client for every worker route (stdlib only), with retries that are safe."""

from __future__ import annotations

import json
import math
import random
import re
import secrets
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

# Connection errors, 5xx and 429 are retried with exponential backoff and full jitter, or after
# the answer's Retry-After when it gives one (capped); any other 4xx (409 above all: the lease
# moved on) is an answer, never retried. Every call makes at most 1 + retries attempts.
RETRIES = 4
BACKOFF_BASE = 0.2
BACKOFF_CAP = 3.0
RETRY_AFTER_CAP = 10.0
RETRYABLE = {429, 500, 502, 503, 504}
# A request not safe to repeat is retried only when it cannot have been applied: it never
# reached the service (`NotDelivered`), or the service turned it away before doing anything
# (429 and 503: come back later). A timeout, a dropped connection or a 500/502/504 may follow
# a write that was made, so such a request ends there with `OutcomeUnknown` instead.
REFUSED = {429, 503}
# Methods whose repeat changes nothing more than the first did (RFC 9110, section 9.2.2). A POST is
# safe to repeat only when its route says so (a claim with its claim_id, a heartbeat, a final
# report that the service answers again with its first answer): `call(idempotent=True)`.
IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE"})
# On the worker endpoint's claim answers: the claim endpoint's base URL, where claims that
# wait should go (its concurrency is the long polls' own, so idle polls never hold the
# function that heartbeats and reports need).
CLAIM_API_HEADER = "tenure-claim-api"


class ApiError(Exception):
    """The service answered with Tenure's error envelope."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.status = status
        self.code = code
        self.message = message


class Unreachable(Exception):
    """No answer from the service after the retries (connection refused, timeouts, 5xx).

    Never a verdict on a lease: whatever was sent may or may not have been applied."""


class Unavailable(Unreachable):
    """The service said 503/429 past the retries: come back after `retry_after` seconds."""

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class NotAClaim(ValueError):
    """An answer the claim route gave that the worker cannot act on: not a claim's shape, a
    lease id that is no file name, or timings no fence can be kept by."""


class ClaimUnanswered(Unreachable):
    """A claim whose outcome is unknown: retry it with the same `claim_id`, never a new one."""

    def __init__(self, message: str, claim_id: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.claim_id = claim_id
        self.retry_after = retry_after


class OutcomeUnknown(Unreachable):
    """A request not safe to repeat reached the service and its answer was lost: it may or may
    not have been applied, so it was not sent again. Look at the service before a new try."""


class NotDelivered(ConnectionError):
    """The request did not reach the service whole (connection refused, no route, no such
    host, a failure while it was being sent): it cannot have been applied."""


@dataclass(frozen=True)
class Answer:
    status: int
    headers: Mapping[str, str]
    body: bytes
    url: str | None = None  # where the answer came from, after any redirect (None: unknown)


# (method, url, headers, body, timeout) -> Answer; raises NotDelivered (or
# ConnectionRefusedError) when the request never reached the service, and any other OSError
# (TimeoutError, ConnectionResetError, …) when it may have but no answer came. Tests put a
# fake here.
Transport = Callable[[str, str, dict[str, str], bytes | None, float], Answer]


def _origin(url: str) -> tuple[str, str]:
    parts = urllib.parse.urlsplit(url)
    return parts.scheme.lower(), parts.netloc.lower()


class _KeepCredentialsHome(urllib.request.HTTPRedirectHandler):
    """Follows a redirect as urllib does, but never carries the bearer token to another
    origin (scheme, host and port): a redirect elsewhere gets the request without it."""

    def redirect_request(
        self,
        req: urllib.request.Request,
        fp: Any,
        code: int,
        msg: str,
        headers: Any,
        newurl: str,
    ) -> urllib.request.Request | None:
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is not None and _origin(newurl) != _origin(req.full_url):
            new.remove_header("Authorization")
        return new


_OPENER = urllib.request.build_opener(_KeepCredentialsHome)


def urllib_transport(
    method: str, url: str, headers: dict[str, str], data: bytes | None, timeout: float
) -> Answer:
    request = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with _OPENER.open(request, timeout=timeout) as resp:
            return Answer(resp.status, dict(resp.headers.items()), resp.read(), resp.geturl())
    except urllib.error.HTTPError as err:
        return Answer(err.code, dict(err.headers.items()) if err.headers else {}, err.read())
    except urllib.error.URLError as err:
        # urlopen wraps only what fails while it connects and sends the request; a timeout or
        # a reset while it waits for the answer comes through unwrapped, as that error.
        reason = err.reason
        text = f"{type(reason).__name__}: {reason}" if isinstance(reason, OSError) else reason
        raise NotDelivered(str(text)) from err


def new_claim_id() -> str:
    """One per claim intent: 128 random bits, reused by every retry of that intent."""
    return secrets.token_hex(16)


def retry_after(headers: Mapping[str, str]) -> float | None:
    """Retry-After in seconds (the delta form; an HTTP date is ignored), capped."""
    for name, value in headers.items():
        if name.lower() == "retry-after":
            try:
                return min(RETRY_AFTER_CAP, max(0.0, float(value.strip())))
            except ValueError:
                return None
    return None


@dataclass(frozen=True)
class Claim:
    lease: dict[str, Any]
    token: str
    fence: int
    renew_seconds: float
    lease_seconds: float
    keeps_logs: bool = False  # the pool keeps logs: ship the job's output
    # The work bundle the claim answer carried (None: GET /leases/{id}/payload for it).
    payload: dict[str, Any] | None = None

    @property
    def lease_id(self) -> str:
        return str(self.lease["id"])


def _host_port(url: str) -> str:
    """`host:port` of a base URL, the scheme's default port spelled out."""
    parts = urllib.parse.urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = None
    if port is None:
        port = 443 if parts.scheme.lower() == "https" else 80
    host = parts.hostname or "?"
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _private_to_this_machine(url: str) -> bool:
    """True for https, and for plain http to this machine's loopback (the local stack)."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme.lower() != "http":
        return True
    host = (parts.hostname or "").lower()
    return host == "localhost" or host.startswith("127.") or host == "::1"


class Client:
    def __init__(
        self,
        api: str,
        token: str,
        timeout: float = 30.0,
        retries: int = RETRIES,
        transport: Transport | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ):
        base = api.rstrip("/")
        self.base = base if base.endswith("/api/v1") else f"{base}/api/v1"
        if transport is None and not _private_to_this_machine(self.base):
            warnings.warn(
                f"{api}: plain http to another host; the token travels unencrypted (use https)",
                stacklevel=2,
            )
        self.token = token
        self.timeout = timeout
        self.retries = retries
        self.transport = transport or urllib_transport
        self.sleep = sleep
        # Where claims that wait go, once the worker endpoint has named it (None: `base`).
        self.claim_base: str | None = None

    def call(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        token: str | None = None,
        timeout: float | None = None,
        retries: int | None = None,
        budget: float | None = None,
        idempotent: bool | None = None,
        base: str | None = None,
    ) -> tuple[int, Any]:
        """One request, retried when no answer came or the service asked to come back later.

        `budget` bounds the whole call, waits included: no retry starts after it ran out.
        `idempotent` (default: by method, see IDEMPOTENT_METHODS) says whether the request may
        be sent again after it may have been applied; when it may not, a lost answer raises
        `OutcomeUnknown` at once. `base`: another base URL of this service to send it to
        (the claim endpoint), with the same token.
        """
        if idempotent is None:
            idempotent = method in IDEMPOTENT_METHODS
        data = json.dumps(body).encode() if body is not None else None
        headers = {
            "authorization": f"Bearer {token or self.token}",
            "content-type": "application/json",
        }
        attempts = 1 + (self.retries if retries is None else retries)
        give_up_at = time.monotonic() + budget if budget is not None else None
        last = "no attempt made"
        # Named in every error: which service was asked (host and port, never any userinfo).
        what = f"{method} {path} at {_host_port(base or self.base)}"
        wait_hint: float | None = None
        for attempt in range(attempts):
            if attempt:
                delay = wait_hint
                if delay is None:
                    delay = random.uniform(0, min(BACKOFF_CAP, BACKOFF_BASE * 2**attempt))
                if give_up_at is not None and time.monotonic() + delay >= give_up_at:
                    break
                self.sleep(delay)
            wait_hint = None
            try:
                url = (base or self.base) + path
                answer = self.transport(method, url, headers, data, timeout or self.timeout)
            except (NotDelivered, ConnectionRefusedError) as err:
                last = f"{type(err).__name__}: {err}"
                continue
            except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as err:
                last = f"{type(err).__name__}: {err}"
                if not idempotent:
                    raise OutcomeUnknown(f"{what}: {last}") from err
                continue
            if answer.status in RETRYABLE:
                wait_hint = retry_after(answer.headers)
                last = f"HTTP {answer.status}"
                if not idempotent and answer.status not in REFUSED:
                    raise OutcomeUnknown(f"{what}: {last}")
                continue
            if answer.status >= 400:
                raise _api_error(answer)
            try:
                found = json.loads(answer.body) if answer.body else None
            except ValueError:  # a proxy's page, a truncated body: no answer of the service
                last = f"HTTP {answer.status}, an answer that is not JSON"
                if not idempotent:
                    raise OutcomeUnknown(f"{what}: {last}") from None
                continue
            if path.endswith("/claim"):
                self._learn_claim_api(url, answer)
            return answer.status, found
        if wait_hint is not None:
            raise Unavailable(f"{what}: {last}", wait_hint)
        raise Unreachable(f"{what}: {last}")

    def _learn_claim_api(self, asked: str, answer: Answer) -> None:
        """Take the claim endpoint a claim answer names, as where later claims that wait go.
        Only from an answer of the origin asked (never one a redirect to elsewhere gave,
        which could name a host of its own to get the token), and only an address the token
        may travel to (https, or http to this machine)."""
        named = next(
            (v.strip() for k, v in answer.headers.items() if k.lower() == CLAIM_API_HEADER), None
        )
        if not named or (answer.url is not None and _origin(answer.url) != _origin(asked)):
            return
        if urllib.parse.urlsplit(named).scheme.lower() not in ("http", "https"):
            return
        if not _private_to_this_machine(named):
            return
        base = named.rstrip("/")
        self.claim_base = base if base.endswith("/api/v1") else f"{base}/api/v1"

    # ------------------------------------------------------------------ worker routes

    def claim(
        self,
        pool: str,
        worker_id: str,
        worker_version: str | None = None,
        wait_seconds: float = 0,
        lease_seconds: int | None = None,
        claim_id: str | None = None,
        budget: float | None = None,
        lease_id: str | None = None,
        start: bool = False,
    ) -> Claim | None:
        """Claim one lease, or None (204: nothing to claim; the next claim is a new intent).
        With `lease_id`, that lease or nothing (an `ApiError` 409 when it is held or ended).
        With `start`, for a worker that begins the job as soon as it has the answer: the
        lease comes back running (see its state), so the first heartbeat writes nothing.

        Every retry of this claim carries the same `claim_id`, so a claim whose answer was lost
        is answered with the lease it already won (and a fresh token), never a second lease.
        Pass the `claim_id` of a `ClaimUnanswered` to go on with that intent.
        """
        claim_id = claim_id or new_claim_id()
        body: dict[str, Any] = {
            "worker_id": worker_id,
            "wait_seconds": wait_seconds,
            "claim_id": claim_id,
            "host": socket.gethostname()[:255],
        }
        if worker_version:
            body["worker_version"] = worker_version
        if lease_seconds:
            body["lease_seconds"] = lease_seconds
        if lease_id:
            body["lease_id"] = lease_id
        if start:
            body["start"] = True
        path = f"/pools/{pool}/claim"
        timeout = self.timeout + wait_seconds
        if budget is not None:
            timeout = max(0.5, min(timeout, budget))
        # A claim that may wait goes to the claim endpoint once one is known; one that does
        # not wait stays on the worker endpoint, which names it (and may name another).
        base = self.claim_base if wait_seconds > 0 else None
        try:
            status, answer = self.call(
                "POST", path, body, timeout=timeout, budget=budget, idempotent=True, base=base
            )
        except (Unreachable, ApiError) as err:
            if base is not None and not (isinstance(err, ApiError) and err.status != 404):
                # The claim endpoint is gone or unreachable: claims go to the worker endpoint
                # again, which names the claim endpoint anew if there is one.
                self.claim_base = None
            if isinstance(err, ApiError):
                raise
            # Whether the claim was applied is unknown (a 503 too): the intent stays open.
            wait = err.retry_after if isinstance(err, Unavailable) else None
            raise ClaimUnanswered(str(err), claim_id, wait) from err
        if status == 204 or answer is None:
            return None
        try:
            return claim_of(answer)
        except NotAClaim as err:
            # Whatever the service meant, this answer is not acted on, and the claim it
            # answers may have won a lease: the intent stays open, as for a lost answer.
            raise ClaimUnanswered(f"POST {path}: {err}", claim_id) from err

    def worker_heartbeat(
        self,
        worker_id: str,
        leases: list[tuple[str, int]],
        timeout: float | None = None,
        **state: Any,
    ) -> list[Any]:
        """`state`: optional `runtime`, `credentials` ({state, reason?}) and `pool`."""
        return list(self._worker_heartbeat(worker_id, leases, timeout, state)["leases"])

    def worker_beats(
        self,
        worker_id: str,
        leases: list[tuple[str, int]],
        signal: str,
        timeout: float | None = None,
        **state: Any,
    ) -> tuple[list[Any], str]:
        """As `worker_heartbeat`, echoing `signal`: what the last answer carried ("" before the
        first). The answer's leases, and the signal to echo next ("" when it carried none).
        While nothing happened to the worker's leases, the service answers them from it
        without reading them; it never answers differently for it."""
        answer = self._worker_heartbeat(worker_id, leases, timeout, {**state, "signal": signal})
        return list(answer["leases"]), str(answer.get("signal") or "")

    def _worker_heartbeat(
        self,
        worker_id: str,
        leases: list[tuple[str, int]],
        timeout: float | None,
        state: dict[str, Any],
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "leases": [{"id": lease_id, "fence": fence} for lease_id, fence in leases]
        }
        body.update({k: v for k, v in state.items() if v is not None})
        # One try only: the caller's loop is the retry, and a late answer is a stale one.
        path = f"/workers/{worker_id}/heartbeat"
        _, answer = self.call("POST", path, body, timeout=timeout, retries=0, idempotent=True)
        return dict(answer)

    def start(
        self, lease_id: str, lease_token: str, timeout: float | None = None
    ) -> dict[str, Any]:
        path = f"/leases/{lease_id}/start"
        return dict(self.call("POST", path, None, lease_token, timeout=timeout, retries=0)[1])

    def heartbeat(self, lease_id: str, lease_token: str) -> dict[str, Any]:
        # A repeated heartbeat renews the same lease again: safe to retry.
        path = f"/leases/{lease_id}/heartbeat"
        return dict(self.call("POST", path, {}, lease_token, idempotent=True)[1])

    def payload(
        self,
        lease_id: str,
        lease_token: str,
        timeout: float | None = None,
        budget: float | None = None,
    ) -> dict[str, Any]:
        path = f"/leases/{lease_id}/payload"
        return dict(self.call("GET", path, None, lease_token, timeout=timeout, budget=budget)[1])

    def complete(self, lease_id: str, lease_token: str, body: dict[str, Any], **opts: Any) -> Any:
        return self._report("complete", lease_id, lease_token, body, **opts)

    def fail(self, lease_id: str, lease_token: str, body: dict[str, Any], **opts: Any) -> Any:
        return self._report("fail", lease_id, lease_token, body, **opts)

    def release(self, lease_id: str, lease_token: str, body: dict[str, Any], **opts: Any) -> Any:
        return self._report("release", lease_id, lease_token, body, **opts)

    def _report(
        self,
        kind: str,
        lease_id: str,
        lease_token: str,
        body: dict[str, Any],
        timeout: float | None = None,
        retries: int | None = None,
    ) -> dict[str, Any]:
        # Safe to retry: the same final report is answered with the first answer.
        path = f"/leases/{lease_id}/{kind}"
        # A report that claims the next lease (`next`) goes with this client's own token, the
        # worker's: the service never claims for a request made with a lease token alone,
        # which the job holds too. Every other report goes with the lease's token.
        token = self.token if "next" in body else lease_token
        try:
            answer = self.call(
                "POST", path, body, token, timeout=timeout, retries=retries, idempotent=True
            )
        except ApiError as err:
            if token == lease_token or (err.status, err.code) != (403, "forbidden"):
                raise
            # A service of an earlier release takes a final report only with the lease's
            # token (the refusal comes before anything is applied): send it that way, without
            # the worker's heartbeat, which a lease token may not carry.
            plain = {k: v for k, v in body.items() if k != "heartbeat"}
            answer = self.call(
                "POST", path, plain, lease_token, timeout=timeout, retries=retries, idempotent=True
            )
        return dict(answer[1])


# A lease id as the service makes them; the worker names its state files by it, so anything
# else (a `/`, a leading dot) is refused rather than written outside the state dir.
LEASE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}")


def claim_of(answer: dict[str, Any]) -> Claim:
    """A won claim, as the claim route answers it (and a final report's `next`); NotAClaim
    when it is not one the worker can act on."""
    try:
        timing = answer["lease"]["timing"]
        won = Claim(
            lease=answer["lease"],
            token=str(answer["token"]),
            fence=int(answer["fence"]),
            renew_seconds=float(answer.get("renew_seconds") or timing["renew_seconds"]),
            lease_seconds=float(timing["lease_seconds"]),
            keeps_logs=bool(answer.get("keeps_logs", False)),
            payload=answer.get("payload"),
        )
    except (KeyError, TypeError, ValueError, OverflowError) as err:
        raise NotAClaim(f"the answer is not a claim ({type(err).__name__}: {err})") from None
    if not LEASE_ID.fullmatch(won.lease_id):
        raise NotAClaim(f"the lease id {won.lease_id[:80]!r} is not one the service makes")
    # A fence kept at NaN, or past an expiry a negative renewal moves, never falls.
    if not (
        math.isfinite(won.lease_seconds)
        and 0 < won.renew_seconds <= won.lease_seconds
        and won.fence >= 1
    ):
        raise NotAClaim(
            f"renew_seconds {won.renew_seconds} and lease_seconds {won.lease_seconds} keep no fence"
        )
    return won


def _api_error(answer: Answer) -> ApiError:
    try:
        envelope = json.loads(answer.body)["error"]
        return ApiError(answer.status, envelope["code"], envelope["message"])
    except (ValueError, KeyError, TypeError):
        return ApiError(answer.status, "http_error", answer.body.decode(errors="replace"))


def post_logs(
    client: Client, lease_id: str, lease_token: str, events: list[dict[str, Any]], timeout: float
) -> int:
    """Ship one batch of the job's lines (one try: the next beat is the retry)."""
    path = f"/leases/{lease_id}/logs"
    _, answer = client.call("POST", path, {"events": events}, lease_token, timeout, retries=0)
    return int(answer["accepted"])
