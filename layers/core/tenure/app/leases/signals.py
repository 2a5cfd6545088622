"""A worker heartbeat's signal: what the caller's last answer vouched for, while the worker's
signal epoch has not moved (domain/signals.py), and the sealed signal of the next answer."""

from __future__ import annotations

from tenure.app.catalog import SchemaGates
from tenure.app.ports import Ids
from tenure.app.rows import WorkerRows
from tenure.domain.signals import Known, opened, seal
from tenure.domain.transitions import SignalKey
from tenure.records import record


@record
class Told:
    """One heartbeat's view of its worker's signal: the epoch read before any of its leases,
    and the leases the echoed signal vouches for at that epoch."""

    key: SignalKey
    epoch: int
    vouched: dict[str, Known]


class WorkerSignals:
    def __init__(self, gates: SchemaGates, ids: Ids, *, workers: WorkerRows) -> None:
        self.gates = gates
        self.ids = ids
        self.workers = workers
        self._secret: str | None = None  # the instance's, read once per process

    def told(self, key: SignalKey, echoed: str | None) -> Told | None:
        """None when the caller asked for no signal (it gets every lease read, as before), or
        while the table's schema is below the version from which every writer raises the
        epoch. Else the worker's epoch, read eventually consistent before any lease is, and
        what `echoed` vouches for at it ("" vouches for nothing: a first heartbeat)."""
        if echoed is None or not self.gates.worker_signals():
            return None
        epoch = self.workers.signal_epoch(key)
        vouched = opened(self._kept(), key, epoch, echoed) if echoed else {}
        return Told(key, epoch, vouched)

    def sealed(self, told: Told, known: dict[str, Known]) -> str:
        """The signal the answer carries: `known` at the epoch read before the leases were."""
        return seal(self._kept(), told.key, told.epoch, known)

    def _kept(self) -> str:
        if self._secret is None:
            self._secret = self.workers.signal_secret() or self.workers.keep_signal_secret(
                self.ids.secret()
            )
        return self._secret
