"""A `Held` record for the worker's unit tests: one lease's state as the worker keeps it, its
files named under a test's directory the way the worker names them, every field a test does not
care about at a plain value."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tenure_worker.jobs import Held


def held_record(directory: Path | str, lease_id: str = "L1", **fields: Any) -> Held:
    base = Path(directory) / lease_id
    values: dict[str, Any] = {
        "lease_id": lease_id,
        "fence": 1,
        "token": "tnr_l_x",
        "renew_seconds": 10.0,
        "lease_seconds": 300.0,
        "pid": 0,
        "exit_file": f"{base}.exit",
        "err_file": f"{base}.err",
        "payload_file": f"{base}.payload.json",
        "marker_file": f"{base}.reported",
    }
    return Held(**(values | fields))
