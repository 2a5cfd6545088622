#!/usr/bin/env python3
"""A sample classifier job for `tenure worker run` on a classifier pool.

    tenure worker run --pool judges -- python3 samplesources/workers/classify-job.py

It reads its work bundle (TENURE_PAYLOAD_FILE): the pinned version's `input` document, copied
verbatim, holds `questions` ({id, contains}); each is answered "yes" or "no" by whether the
task's body contains that word. It completes its own lease with the answers as `details`:
{"answers": {id: "yes"|"no"}, "score": <share of yes>, "words": <words in the body>}. What
the task then shows (its checks and properties) is for the pool's output expressions to say;
this job never sees them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys


def classify(bundle: dict) -> dict:
    body = (bundle["subject"].get("body") or "").lower()
    questions = bundle.get("input", {}).get("questions", [])
    answers = {
        str(q["id"]): "yes" if str(q.get("contains", "")).lower() in body else "no"
        for q in questions
    }
    yes = sum(1 for a in answers.values() if a == "yes")
    return {
        "answers": answers,
        "score": round(yes / len(answers), 3) if answers else 0,
        "words": len(body.split()),
    }


def main() -> int:
    with open(os.environ["TENURE_PAYLOAD_FILE"]) as f:
        bundle = json.load(f)
    if bundle.get("kind") != "classifier":
        print(f"not a classifier lease (kind {bundle.get('kind')!r})", file=sys.stderr)
        return 2
    details = classify(bundle)
    print(f"answered {len(details['answers'])} questions (lease {os.environ['TENURE_LEASE_ID']})")
    cli = os.environ.get("TENURE_CLI", "tenure")
    done = [cli, "worker", "complete", "--outcome", "success", "--details", json.dumps(details)]
    return subprocess.run(done, stdout=subprocess.DEVNULL, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
