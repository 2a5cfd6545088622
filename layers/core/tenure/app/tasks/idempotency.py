"""Idempotent filing: a request sent again with the same `Idempotency-Key` and body within a
day answers the first answer; the same key with another body is refused."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tenure.app.kernel import RETRY_AFTER_SECONDS
from tenure.app.ports import Filed
from tenure.app.rows import RequestRecords
from tenure.domain.errors import Conflict, Unavailable, ValidationFailed
from tenure.domain.model import Principal

if TYPE_CHECKING:
    from tenure.app.kernel import Kernel

HEADER = "Idempotency-Key"
MAX_KEY_LENGTH = 255
KEEP_SECONDS = 24 * 3600
# How long the request that took a key may take to answer before another may take it over
# (a Lambda that died mid-request never answers), and how often a duplicate sent meanwhile
# looks again for the answer — a bounded wait, well inside the API's timeout.
LOCK_MS = 30_000
LOOK_EVERY_S = 0.1
LOOKS = 100

Answer = tuple[int, dict[str, Any]]


def digest(*parts: Any) -> str:
    text = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


class Idempotency:
    def __init__(self, kernel: Kernel, *, requests: RequestRecords) -> None:
        self.kernel = kernel
        self.requests = requests

    def once(
        self,
        actor: Principal,
        route: str,
        key: str | None,
        body: dict[str, Any],
        run: Callable[[], Answer],
    ) -> Answer:
        """`run` once per (caller's token, route, key): a repeat with the same body answers the
        stored answer (a repeat while the first is still running waits for it, bounded); with
        another body it is 422. No key: `run` as it is, nothing stored."""
        if key is None:
            return run()
        if not 1 <= len(key) <= MAX_KEY_LENGTH or not key.isprintable():
            raise ValidationFailed(f"{HEADER}: 1 to {MAX_KEY_LENGTH} printable characters")
        # Scoped by the caller: two callers' keys never meet. A lease token by its lease (its
        # token id is only the hash's first 8 characters, which two tokens may share).
        caller = f"lease:{actor.lease_id}" if actor.kind == "lease" else actor.token_id
        scoped = digest(caller, route, key)
        body_hash = digest(route, body)
        for _ in range(LOOKS):
            now = self.kernel.clock.now_ms()
            record = Filed(
                key=scoped,
                body_hash=body_hash,
                expires_at=now // 1000 + KEEP_SECONDS,
                locked_until=now + LOCK_MS,
            )
            try:
                held = self.requests.take_request(record, now)
            except Conflict:  # dropped between the write and the read: take it again
                continue
            if held is None:
                return self._run(scoped, run)
            if held.body_hash != body_hash:
                raise ValidationFailed(
                    f"{HEADER}: this key was sent with another body; a new request needs a new key"
                )
            if held.answer is not None and held.status is not None:
                return held.status, json.loads(held.answer)
            self.kernel.clock.sleep(LOOK_EVERY_S)
        raise Unavailable(
            f"{HEADER}: the first request with this key is still running; try again",
            retry_after=RETRY_AFTER_SECONDS,
        )

    def _run(self, scoped: str, run: Callable[[], Answer]) -> Answer:
        try:
            status, answer = run()
        except BaseException:
            # Refused or failed: nothing was filed, so the key is free for the caller's retry.
            self.requests.drop_request(scoped)
            raise
        self.requests.finish_request(scoped, status, json.dumps(answer, separators=(",", ":")))
        return status, answer
