"""Fixtures of the unit tier: a fresh service on the in-memory store, no AWS, no network."""

from __future__ import annotations

import pytest

from tests.unit.support import Rig


@pytest.fixture
def rig() -> Rig:
    return Rig()
