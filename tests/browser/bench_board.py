"""The board's benchmark (a measurement, not a test): 5,000 tasks across 20 spaces on the
local stack, then the board opened in Chromium on every space at once. It prints, for each of
`--runs` page loads, the time to the first card drawn, to every space drawn, and to a search's
answer on the screen (typing a title's words into the search box until only the matching card
is left), then the median of each.

    .venv/bin/python -m tests.browser.bench_board              # starts its own local stack
    .venv/bin/python -m tests.browser.bench_board --api http://127.0.0.1:8000/api/v1 \
        --token-file .tenure-local/admin-token                 # or loads into a running one

The tasks are filed over HTTP by 4 threads; half are enqueued on their space's pool (a queued
lease each), half are not (ready). The board reads with a read token limited to the 20 spaces.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

SPACES = 20
TASKS_PER_SPACE = 250
THREADS = 4
WORDS = ["index", "invoice", "deploy", "backup", "report", "export", "rotate", "vacuum"]


def _file(client: httpx.Client, space: str, pool: str, n: int) -> None:
    body: dict[str, Any] = {
        "space": space,
        "title": f"{WORDS[n % len(WORDS)]} batch {n:04d} of {space.lower()}",
    }
    if n % 2 == 0:
        body["pool"] = pool
    for _ in range(5):
        r = client.post("/tasks", json=body)
        if r.status_code == 201:
            return
        if r.status_code != 503:
            raise RuntimeError(f"filing a task answered {r.status_code}: {r.text}")
        time.sleep(float(r.headers.get("retry-after", "1")))
    raise RuntimeError("the stack kept answering 503")


def load(base: str, admin_token: str, spaces: int, per_space: int) -> tuple[list[str], str]:
    """File the tasks; answer the spaces' keys and one task's title to search for."""
    headers = {"authorization": f"Bearer {admin_token}"}
    tag = uuid.uuid4().hex[:6].upper()
    keys = [f"BN{tag}{i:02d}" for i in range(spaces)]
    with httpx.Client(base_url=base, headers=headers, timeout=60) as admin:
        pools = {}
        for key in keys:
            r = admin.post("/spaces", json={"key": key, "name": f"bench {key}"})
            assert r.status_code == 201, r.text
            r = admin.post(
                "/pools", json={"space": key, "name": f"{key.lower()}-p", "kind": "command"}
            )
            assert r.status_code == 201, r.text
            pools[key] = r.json()["name"]
        started = time.monotonic()
        jobs = [(key, n) for key in keys for n in range(per_space)]
        with ThreadPoolExecutor(THREADS) as pool_of_threads:
            clients = [
                httpx.Client(base_url=base, headers=headers, timeout=60) for _ in range(THREADS)
            ]
            try:
                list(
                    pool_of_threads.map(
                        lambda job: _file(
                            clients[job[1] % THREADS], *job[:1], pools[job[0]], job[1]
                        ),
                        jobs,
                    )
                )
            finally:
                for c in clients:
                    c.close()
        print(f"filed {len(jobs)} tasks in {time.monotonic() - started:.0f} s", flush=True)
        r = admin.post(
            "/tokens",
            json={"name": f"bench-{tag}", "kind": "operator", "role": "read", "spaces": keys},
        )
        assert r.status_code == 201, r.text
        token: str = r.json()["token"]
    return keys, token


# Runs in the page: the time from the navigation's start (performance.now() counts from it).
FIRST_CARD = "() => document.querySelector('#columns .card') !== null"
# The status line names the spaces read once the refresh of every one of them has ended.
EVERY_SPACE = "n => (document.querySelector('#updated').textContent || '').includes(n + ' spaces')"


def measure(
    board_url: str, token: str, keys: list[str], per_space: int, runs: int
) -> dict[str, list[float]]:
    from playwright.sync_api import sync_playwright

    from tests.browser.conftest import CHROMIUM_ARGS, chromium_path

    last = per_space - 1  # the last space's last task, as `_file` titled it
    wanted = f"{WORDS[last % len(WORDS)]} batch {last:04d} of {keys[-1].lower()}"
    figures: dict[str, list[float]] = {"first card": [], "every space": [], "search": []}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=chromium_path(), headless=True, args=CHROMIUM_ARGS
        )
        for _ in range(runs):
            ctx = browser.new_context(viewport={"width": 1600, "height": 1000})
            ctx.add_init_script(f"sessionStorage.setItem('tenure.board.token', {token!r})")
            page = ctx.new_page()
            page.goto(board_url)
            page.wait_for_function(FIRST_CARD, timeout=60_000, polling="raf")
            figures["first card"].append(page.evaluate("performance.now()") / 1000)
            page.wait_for_function(
                EVERY_SPACE,
                arg=len(keys),
                timeout=120_000,
            )
            figures["every space"].append(page.evaluate("performance.now()") / 1000)
            took = page.evaluate(
                """async (words) => {
                  const box = document.querySelector('#search');
                  const began = performance.now();
                  box.value = words;
                  box.dispatchEvent(new Event('input'));
                  await new Promise((done, fail) => {
                    const look = () => {
                      const cards = document.querySelectorAll('#columns .card');
                      if (cards.length === 1 && cards[0].textContent.includes(words)) done();
                      else if (performance.now() - began > 60000) fail(new Error('not found'));
                      else requestAnimationFrame(look);
                    };
                    look();
                  });
                  return (performance.now() - began) / 1000;
                }""",
                wanted,
            )
            figures["search"].append(took)
            shown = sum(int(c) for c in page.locator("#columns .count").all_inner_texts())
            print(
                f"run: first card {figures['first card'][-1]:.2f} s, every space "
                f"{figures['every space'][-1]:.2f} s, search {took:.2f} s ({shown} card counted)",
                flush=True,
            )
            ctx.close()
        browser.close()
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--api", help="a running stack's API (http://HOST:PORT/api/v1)")
    parser.add_argument("--token-file", type=Path, help="the admin token of --api")
    parser.add_argument("--spaces", type=int, default=SPACES)
    parser.add_argument("--tasks-per-space", type=int, default=TASKS_PER_SPACE)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--reuse",
        type=Path,
        help="a file naming the spaces and the read token: written after a load, read instead "
        "of loading again (with --api: measure the board again on the same tasks)",
    )
    args = parser.parse_args(argv)
    stack = None
    if args.api:
        if args.token_file is None:
            parser.error("--api needs --token-file")
        base, admin_token = args.api.rstrip("/"), args.token_file.read_text().strip()
    else:
        from tests.conftest import start_stack, use_local_credentials

        use_local_credentials()
        root = Path(tempfile.mkdtemp(prefix="tenure-bench-board-"))
        admin_token = "tnr_o_bench-" + uuid.uuid4().hex
        stack = start_stack(root / "data", admin_token, sweep_interval=5.0)
        base = stack.base
        print(f"local stack at {base} (data in {root})", flush=True)
    try:
        if args.reuse is not None and args.reuse.exists():
            saved = json.loads(args.reuse.read_text())
            keys, token = saved["spaces"], saved["token"]
            args.spaces, args.tasks_per_space = len(keys), saved["tasks_per_space"]
        else:
            keys, token = load(base, admin_token, args.spaces, args.tasks_per_space)
            if args.reuse is not None:
                saved = {"spaces": keys, "token": token, "tasks_per_space": args.tasks_per_space}
                args.reuse.write_text(json.dumps(saved))
        board_url = base.removesuffix("/api/v1") + "/board"
        figures = measure(board_url, token, keys, args.tasks_per_space, args.runs)
    finally:
        if stack is not None:
            from tests.conftest import stop_stack

            stop_stack(stack)
    total = args.spaces * args.tasks_per_space
    print(f"{total} tasks in {args.spaces} spaces, median of {args.runs} page loads:")
    for name, values in figures.items():
        each = ", ".join(f"{v:.2f}" for v in values)
        print(f"  {name}: {statistics.median(values):.2f} s (runs: {each})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
