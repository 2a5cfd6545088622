"""A small HTTP client for every worker route (stdlib only), with retries that are safe."""

from __future__ import annotations

import json
import random
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

# Connection errors and 5xx are retried with exponential backoff and full jitter; a 4xx
# (409 above all: the lease moved on) is an answer, never retried.
RETRIES = 4
BACKOFF_BASE = 0.2
BACKOFF_CAP = 3.0


class ApiError(Exception):
    """The service answered with Tenure's error envelope."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.status = status
        self.code = code
        self.message = message


class Unreachable(Exception):
    """No answer from the service after the retries (connection refused, timeouts, 5xx)."""


@dataclass(frozen=True)
class Claim:
    lease: dict[str, Any]
    token: str
    fence: int
    renew_seconds: float
    lease_seconds: float

    @property
    def lease_id(self) -> str:
        return str(self.lease["id"])


class Client:
    def __init__(self, api: str, token: str, timeout: float = 30.0, retries: int = RETRIES):
        base = api.rstrip("/")
        self.base = base if base.endswith("/api/v1") else f"{base}/api/v1"
        self.token = token
        self.timeout = timeout
        self.retries = retries

    def call(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        token: str | None = None,
        timeout: float | None = None,
        retries: int | None = None,
    ) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else None
        attempts = 1 + (self.retries if retries is None else retries)
        last: Exception | None = None
        for attempt in range(attempts):
            if attempt:
                delay = min(BACKOFF_CAP, BACKOFF_BASE * 2**attempt)
                time.sleep(random.uniform(0, delay))
            request = urllib.request.Request(
                self.base + path,
                data=data,
                method=method,
                headers={
                    "authorization": f"Bearer {token or self.token}",
                    "content-type": "application/json",
                },
            )
            try:
                with urllib.request.urlopen(request, timeout=timeout or self.timeout) as resp:
                    raw = resp.read()
                    return resp.status, json.loads(raw) if raw else None
            except urllib.error.HTTPError as err:
                raw = err.read()
                if err.code >= 500:
                    last = err
                    continue
                try:
                    envelope = json.loads(raw)["error"]
                    raise ApiError(err.code, envelope["code"], envelope["message"]) from None
                except (ValueError, KeyError, TypeError):
                    raise ApiError(err.code, "http_error", raw.decode(errors="replace")) from None
            except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as err:
                last = err
        raise Unreachable(f"{method} {path}: {last}")

    # ------------------------------------------------------------------ worker routes

    def claim(
        self,
        pool: str,
        worker_id: str,
        worker_version: str | None = None,
        wait_seconds: float = 0,
        lease_seconds: int | None = None,
    ) -> Claim | None:
        body: dict[str, Any] = {"worker_id": worker_id, "wait_seconds": wait_seconds}
        if worker_version:
            body["worker_version"] = worker_version
        if lease_seconds:
            body["lease_seconds"] = lease_seconds
        status, answer = self.call(
            "POST", f"/pools/{pool}/claim", body, timeout=self.timeout + wait_seconds
        )
        if status == 204 or answer is None:
            return None
        timing = answer["lease"]["timing"]
        return Claim(
            lease=answer["lease"],
            token=answer["token"],
            fence=int(answer["fence"]),
            renew_seconds=float(answer.get("renew_seconds") or timing["renew_seconds"]),
            lease_seconds=float(timing["lease_seconds"]),
        )

    def worker_heartbeat(
        self, worker_id: str, leases: list[tuple[str, int]], timeout: float | None = None
    ) -> list[Any]:
        body = {"leases": [{"id": lease_id, "fence": fence} for lease_id, fence in leases]}
        # One try only: the caller's loop is the retry, and a late answer is a stale one.
        path = f"/workers/{worker_id}/heartbeat"
        _, answer = self.call("POST", path, body, timeout=timeout, retries=0)
        return list(answer["leases"])

    def start(
        self, lease_id: str, lease_token: str, timeout: float | None = None
    ) -> dict[str, Any]:
        path = f"/leases/{lease_id}/start"
        return dict(self.call("POST", path, None, lease_token, timeout=timeout, retries=0)[1])

    def heartbeat(self, lease_id: str, lease_token: str) -> dict[str, Any]:
        return dict(self.call("POST", f"/leases/{lease_id}/heartbeat", {}, lease_token)[1])

    def payload(
        self, lease_id: str, lease_token: str, timeout: float | None = None
    ) -> dict[str, Any]:
        path = f"/leases/{lease_id}/payload"
        return dict(self.call("GET", path, None, lease_token, timeout=timeout)[1])

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
        return dict(self.call("POST", path, body, lease_token, timeout=timeout, retries=retries)[1])
