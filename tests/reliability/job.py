"""The job a process worker runs: it notes, every 50 ms, that it is still acting for its lease.

`python -m tests.reliability.job HOLDS_DIR SEED`. Its lease, task and fence come from the worker
(TENURE_LEASE_ID, the payload file); its length and exit status from the seed and the lease id,
so one seed gives one set of jobs. The note is rewritten atomically, so a SIGKILL leaves the
last instant it acted.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time

TICK_S = 0.05


def main(holds_dir: str, seed: str) -> int:
    lease_id = os.environ["TENURE_LEASE_ID"]
    with open(os.environ["TENURE_PAYLOAD_FILE"]) as src:
        lease = json.load(src)["lease"]
    rng = random.Random(f"{seed}:job:{lease_id}")
    # Mostly short jobs; some outlive several heartbeats and the toleration itself.
    seconds = rng.uniform(0.3, 2.5) if rng.random() < 0.8 else rng.uniform(5.0, 8.0)
    status = 0 if rng.random() < 0.85 else 3
    note = {
        "worker": os.environ.get("RELIABILITY_WORKER", "?"),
        "lease_id": lease_id,
        "task_id": (lease.get("task") or {}).get("id", ""),
        "fence": int(lease["fence"]),
        "start": time.time(),
        "end": time.time(),
    }
    path = os.path.join(holds_dir, f"{lease_id}-{os.getpid()}.json")
    until = time.monotonic() + seconds
    while True:
        note["end"] = time.time()
        with open(f"{path}.tmp", "w") as out:
            json.dump(note, out)
        os.replace(f"{path}.tmp", path)
        if time.monotonic() >= until:
            return status
        time.sleep(TICK_S)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
