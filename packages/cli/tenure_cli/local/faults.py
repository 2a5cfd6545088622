"""Test-only fault hooks for the local stack (tests/reliability): throttling and a paused sweeper.

Enabled only when the stack is started with `TENURE_TEST_FAULTS_FILE` naming a JSON file,
which a test rewrites while the stack runs: `{"throttle": 0.3, "sweeper_paused": true}`.
`make local` never sets it, and without it nothing here is installed or read.

* `throttle` — the share (0..1) of DynamoDB calls, in every process of the stack (the API's
  invocation processes, the sweeper, the reactor), answered with
  ProvisionedThroughputExceededException *before* they are sent: nothing lands, exactly like a
  real throttle. The store's bounded retry sees it; past the bound the API answers 503.
  Each injected throttle appends one byte to `<file>.throttled`, so its size is the count.
* `sweeper_paused` — the local stack's sweeper loop skips its passes while true; on resume the
  gap is the service's own absence: none of the leases held then expires for it, and their
  deadlines move out by the gap.
"""

from __future__ import annotations

import json
import os
import random
import threading
from typing import Any

THROTTLE_CODE = "ProvisionedThroughputExceededException"


class FaultFile:
    """The fault settings, re-read whenever the file changes (one stat per look)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._seen: int | None = None
        self._state: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._rng = random.Random()

    def state(self) -> dict[str, Any]:
        try:
            stamp = os.stat(self.path).st_mtime_ns
        except OSError:
            return {}
        with self._lock:
            if stamp != self._seen:
                try:
                    with open(self.path) as src:
                        found = json.load(src)
                except (OSError, ValueError):
                    return self._state  # mid-rewrite elsewhere: keep the last good one
                self._state = found if isinstance(found, dict) else {}
                self._seen = stamp
            return self._state

    def sweeper_paused(self) -> bool:
        return bool(self.state().get("sweeper_paused"))

    def throttles_now(self) -> bool:
        share = float(self.state().get("throttle") or 0.0)
        with self._lock:
            hit = share > 0 and self._rng.random() < share
        if hit:
            fd = os.open(f"{self.path}.throttled", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            try:
                os.write(fd, b".")
            finally:
                os.close(fd)
        return hit


class _Throttled:
    """What botocore's before-call hook returns in place of an HTTP answer."""

    status_code = 400
    headers: dict[str, str] = {}
    content = b""


def install_throttle(client: Any, faults: FaultFile) -> None:
    """Answer a share of this DynamoDB client's calls with a throttle, before they are sent."""

    def before_call(**_: Any) -> tuple[Any, dict[str, Any]] | None:
        if not faults.throttles_now():
            return None
        parsed = {
            "Error": {"Code": THROTTLE_CODE, "Message": "injected by the test fault hook"},
            "ResponseMetadata": {"HTTPStatusCode": 400},
        }
        return _Throttled(), parsed

    client.meta.events.register("before-call.dynamodb", before_call)


_FILES: dict[str, FaultFile] = {}


def fault_file(path: str) -> FaultFile:
    """One reader per file per process."""
    found = _FILES.get(path)
    if found is None:
        found = _FILES[path] = FaultFile(path)
    return found


def hook_faults(path: str) -> None:
    """Make every DynamoDB client the service builds from now on throttle as the fault file
    says (what `tenure local` does when a reliability test starts it with a fault file)."""
    from tenure import wiring

    faults = fault_file(path)
    wiring.DYNAMODB_CLIENT_HOOKS.append(lambda client: install_throttle(client, faults))
