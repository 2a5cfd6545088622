"""`token.created` and `token.revoked` are written in the token's own transaction: a fault
where the token's write and its event's used to be two calls leaves both or neither, never a
token that nobody is recorded as having made or revoked."""

from __future__ import annotations

from typing import Any

import pytest
from tenure.app.setup.tokens import INSTANCE_TIMELINE
from tenure.domain.errors import Unavailable

from tests.unit.support import ADMIN, Rig


def activity(rig: Rig) -> list[tuple[str, str]]:
    return [(ev.type, ev.data["name"]) for ev in rig.store.timeline(*INSTANCE_TIMELINE, None)]


def crash_on(rig: Rig, method: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The store call `method` fails as a crash or a lost connection would: nothing of it
    lands."""

    def fails(*args: Any, **kwargs: Any) -> None:
        raise Unavailable("the process died here")

    monkeypatch.setattr(rig.store, method, fails)


def test_a_crash_after_the_token_write_cannot_lose_its_created_event(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rig = Rig()
    crash_on(rig, "put_event", monkeypatch)  # a separate event write would die here
    token, _ = rig.svc.tokens.create_token(ADMIN, "ci", "operator", "read", None, None)
    assert rig.store.get_token(token.token_hash) is not None
    assert activity(rig) == [("token.created", "ci")]


def test_a_failed_token_write_records_no_event(monkeypatch: pytest.MonkeyPatch) -> None:
    rig = Rig()
    crash_on(rig, "put_token", monkeypatch)
    with pytest.raises(Unavailable):
        rig.svc.tokens.create_token(ADMIN, "ci", "operator", "read", None, None)
    assert rig.store.tokens == {} and activity(rig) == []


def test_a_crash_after_the_revocation_cannot_lose_its_revoked_event(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rig = Rig()
    token, _ = rig.svc.tokens.create_token(ADMIN, "ci", "operator", "read", None, None)
    crash_on(rig, "put_event", monkeypatch)
    rig.svc.tokens.revoke_token(ADMIN, token.id)
    assert rig.store.tokens[token.token_hash].revoked_at is not None
    assert activity(rig) == [("token.created", "ci"), ("token.revoked", "ci")]


def test_a_failed_revocation_records_no_event_and_a_retry_records_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rig = Rig()
    token, _ = rig.svc.tokens.create_token(ADMIN, "ci", "operator", "read", None, None)
    real = rig.store.revoke_token
    crash_on(rig, "revoke_token", monkeypatch)
    with pytest.raises(Unavailable):
        rig.svc.tokens.revoke_token(ADMIN, token.id)
    assert rig.store.tokens[token.token_hash].revoked_at is None
    assert activity(rig) == [("token.created", "ci")]
    monkeypatch.setattr(rig.store, "revoke_token", real)
    rig.svc.tokens.revoke_token(ADMIN, token.id)
    rig.svc.tokens.revoke_token(ADMIN, token.id)  # revoked already: nothing again
    assert activity(rig) == [("token.created", "ci"), ("token.revoked", "ci")]


def test_bootstrap_records_its_token_in_the_same_write(monkeypatch: pytest.MonkeyPatch) -> None:
    rig = Rig()
    crash_on(rig, "put_event", monkeypatch)
    rig.svc.tokens.bootstrap_operator("admin")
    assert activity(rig) == [("token.created", "admin")]
