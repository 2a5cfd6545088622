"""A write that loses its condition is retried after a back-off measured in its own round
trips: rivals only collide while their writes overlap, so a slow table must widen the
windows, and a bound keeps a request inside its function's time."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from tenure.app.kernel import (
    MAX_WRITE_TRIES,
    SETTLE_BACKOFF_CAP_S,
    SETTLE_BACKOFF_S,
    Kernel,
)
from tenure.app.rows import Rows
from tenure.domain.errors import Conflict, Unavailable
from tenure.wiring import ManualClock

from tests.unit.support import T0


class WholeJitter:
    """Always the top of the back-off window, so the sleeps are exact."""

    def jitter(self) -> float:
        return 1.0


class OneRow:
    def __init__(self) -> None:
        self.row = SimpleNamespace(id="lease_1")

    def get_lease(self, lease_id: str, consistent: bool = True) -> Any:
        return self.row


class SleepLog(ManualClock):
    def __init__(self) -> None:
        super().__init__(T0)
        self.slept: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.slept.append(round(seconds, 6))
        super().sleep(seconds)


def losing_writes(clock: SleepLog, round_trip_s: float, wins_at: int | None) -> Any:
    tries = 0

    def step(_lease: Any) -> str:
        nonlocal tries
        tries += 1
        clock.now += int(round_trip_s * 1000)  # the write takes its time, not a sleep
        if tries == wins_at:
            return "written"
        raise Conflict("lost the condition")

    return step


def settle(round_trip_s: float, wins_at: int | None = None) -> tuple[Any, list[float]]:
    clock = SleepLog()
    kernel = Kernel(Rows.of(OneRow(), OneRow()), clock, WholeJitter())  # type: ignore[arg-type]
    try:
        out: Any = kernel.settle(OneRow().row, losing_writes(clock, round_trip_s, wins_at))
    except Unavailable as error:
        out = error
    return out, clock.slept


def test_a_fast_table_backs_off_from_the_floor() -> None:
    out, slept = settle(0.002, wins_at=4)
    assert out == "written"
    assert slept == [SETTLE_BACKOFF_S * 2**n for n in range(3)]


def test_a_slow_write_widens_each_window_to_its_round_trip() -> None:
    out, slept = settle(0.04, wins_at=3)
    assert out == "written"
    assert slept == [0.04, 0.08]


def test_the_window_stops_growing_at_the_cap_and_the_tries_stay_bounded() -> None:
    out, slept = settle(2.0)
    assert isinstance(out, Unavailable) and out.retry_after == 1
    assert len(slept) == MAX_WRITE_TRIES - 1
    assert slept == [SETTLE_BACKOFF_CAP_S * 2**n for n in range(MAX_WRITE_TRIES - 1)]
    assert sum(slept) <= 3.1 + 1e-9


@pytest.mark.parametrize("attempt", [0, 3])
def test_other_callers_keep_the_floor_when_they_measure_nothing(attempt: int) -> None:
    clock = SleepLog()
    Kernel(Rows.of(OneRow(), OneRow()), clock, WholeJitter()).back_off(attempt)  # type: ignore[arg-type]
    assert clock.slept == [SETTLE_BACKOFF_S * 2**attempt]
