"""Noting a token's use never fails the request that used it: whatever the write of
last_used_at meets (a refusal of the function's role, a throttle, a lost condition), the
token is still who it is; the failure is logged and counted."""

from __future__ import annotations

import logging

import pytest
from botocore.exceptions import ClientError
from tenure.domain.errors import Conflict, Unavailable

from tests.unit.support import ADMIN, Rig

DENIED = ClientError(
    {"Error": {"Code": "AccessDeniedException", "Message": "not authorized"}}, "UpdateItem"
)


@pytest.mark.parametrize(
    "failure",
    [DENIED, Unavailable("throttled"), Conflict("noted already"), OSError("connection reset")],
    ids=["access-denied", "unavailable", "conflict", "connection"],
)
def test_a_failed_note_of_use_still_authenticates_the_token(
    rig: Rig,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    failure: Exception,
) -> None:
    _, raw = rig.svc.tokens.create_token(ADMIN, "w", "worker", None, None, None)

    def refuse(token_hash: str, at: int, before: int) -> None:
        raise failure

    monkeypatch.setattr(rig.store, "touch_token", refuse)
    with caplog.at_level(logging.WARNING):
        principal = rig.svc.tokens.authenticate(raw)
    assert principal.kind == "worker"
    if isinstance(failure, Conflict):  # another request noted it first: nothing failed
        assert rig.svc.counters["token_touch_failed"] == 0
        return
    assert rig.svc.counters["token_touch_failed"] == 1
    assert "last_used_at" in caplog.text


def test_the_note_is_tried_once_a_minute_whatever_became_of_it(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, raw = rig.svc.tokens.create_token(ADMIN, "w", "worker", None, None, None)
    tried: list[int] = []

    def refuse(token_hash: str, at: int, before: int) -> None:
        tried.append(at)
        raise DENIED

    monkeypatch.setattr(rig.store, "touch_token", refuse)
    for _ in range(3):
        rig.svc.tokens.authenticate(raw)
    assert len(tried) == 1
    rig.clock.advance(61)
    rig.svc.tokens.authenticate(raw)
    assert len(tried) == 2
