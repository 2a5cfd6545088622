"""Fixtures of the unit tier: a fresh service on the in-memory store, no AWS, no network."""

from __future__ import annotations

import pytest

from tests.unit.rules_support import FakeSchedules
from tests.unit.support import Rig


@pytest.fixture
def rig() -> Rig:
    return Rig()


@pytest.fixture
def schedules(rig: Rig) -> FakeSchedules:
    """The rig's service with an in-memory EventBridge Scheduler."""
    fake = FakeSchedules()
    rig.svc.rules.schedules = fake
    return fake
