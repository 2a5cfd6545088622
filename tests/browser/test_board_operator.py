"""The board as an operator's first screen, in a real browser: it opens on every space the
token sees with a picker to narrow; a search box and filters by pool, state and age; ages on
every card and a failed card's first error line; Retry and the error's tail in the detail,
approval on its card and Approve in the detail (a member's; a read token sees neither and the
API refuses it too); the workers and pools views; and every column within reach at 1280 px."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from tests.browser.test_board import CALM, _space
from tests.e2e.support import Api, World, suffix, wait_for


@dataclass
class Scene:
    """Two spaces: ONE with a queued, a running, a failed (with a stderr tail) and an
    awaiting-approval task; TWO with a queued one on a pool of its own."""

    one: World
    two: World
    pool: str
    other_pool: str
    queued: dict[str, Any]
    running: dict[str, Any]
    failed: dict[str, Any]
    approval: dict[str, Any]
    elsewhere: dict[str, Any]
    worker_id: str


ERROR = "index shard 3 is corrupt\nTraceback (most recent call last):\n  File build.py, line 9"
STDERR_TAIL = "step 89 of 90\nerror: index shard 3 is corrupt\n"


@pytest.fixture(scope="module")
def scene(api: Api) -> Iterator[Scene]:
    with api.admin() as admin:
        one = _space(api, admin, "operator one")
        two = _space(api, admin, "operator two")
        pool = one.pool(display_name="Search builders", **CALM)["name"]
        other_pool = two.pool(display_name="Second space pool", **CALM)["name"]
        worker_id = f"w-{suffix().lower()}"
        with api.client(one.worker_token([pool])) as worker:
            failed = one.task(pool=pool, title="Rebuild the search index")
            won = one.claim(worker, pool, worker_id=worker_id, worker_version="2.4.1")
            assert won["lease"]["id"] == failed["lease"]["id"]
            with api.client(won["token"]) as lease:
                lease_id = won["lease"]["id"]
                assert lease.post(f"/leases/{lease_id}/start", json={}).status_code == 200
                body = {
                    "error": ERROR,
                    "metadata": {"stderr_tail": STDERR_TAIL},
                    "retryable": False,
                }
                r = lease.post(f"/leases/{lease_id}/fail", json=body)
                assert r.status_code == 200, r.text
            running = one.task(pool=pool, title="Ship the March invoices")
            won = one.claim(
                worker, pool, worker_id=worker_id, worker_version="2.4.1", lease_seconds=3600
            )
            assert won["lease"]["id"] == running["lease"]["id"]
            with api.client(won["token"]) as lease:
                r = lease.post(f"/leases/{won['lease']['id']}/start", json={})
                assert r.status_code == 200, r.text
        queued = one.task(pool=pool, title="Rotate the signing keys")
        approval = one.task(pool=pool, title="Publish the quarterly report", requires_approval=True)
        elsewhere = two.task(pool=other_pool, title="Export the audit trail")
        yield Scene(
            one, two, pool, other_pool, queued, running, failed, approval, elsewhere, worker_id
        )


def _board(browser: Any, url: str, token: str, space: str | None = None, width: int = 1600) -> Any:
    ctx = browser.new_context(viewport={"width": width, "height": 1000})
    ctx.add_init_script(f"sessionStorage.setItem('tenure.board.token', {token!r})")
    page = ctx.new_page()
    page.goto(url + (f"#space={space}" if space else ""))
    return page


def _card(page: Any, task_id: str, timeout: float = 20_000) -> Any:
    card = page.locator(f'.card[data-task="{task_id}"]')
    card.wait_for(timeout=timeout)
    return card


def _shown(page: Any) -> set[str]:
    found: list[str] = page.locator("#columns .card").evaluate_all(
        "cs => cs.map(c => c.dataset.task)"
    )
    return set(found)


def _both(s: Scene) -> str:
    return s.one.operator_token("read", [s.one.space, s.two.space])


def test_the_board_opens_on_every_space_the_picker_narrows_it_and_forget_token_stops_reads(
    browser: Any, board_url: str, scene: Scene
) -> None:
    page = _board(browser, board_url, _both(scene))
    # Chromium tells of anything the page's own policy blocks on the console, in these words.
    refused: list[str] = []
    page.on("console", lambda m: refused.append(m.text) if "Security Policy" in m.text else None)
    _card(page, scene.queued["task"]["id"])
    _card(page, scene.elsewhere["task"]["id"])
    options = page.locator("#space-picker option").evaluate_all("os => os.map(o => o.value)")
    assert options[0] == "" and {scene.one.space, scene.two.space} <= set(options)
    page.locator("#space-picker").select_option(scene.two.space)
    wait_for(lambda: _shown(page) == {scene.elsewhere["task"]["id"]}, 20, "the board to narrow")
    assert page.evaluate("location.hash") == f"#space={scene.two.space}"
    page.locator("#space-picker").select_option("")
    _card(page, scene.queued["task"]["id"])
    page.get_by_role("button", name="Pools").click()
    page.locator(f'#pools-table tr[data-pool="{scene.pool}"]').wait_for(timeout=20_000)
    assert refused == []
    # "Forget token" while four reads are in flight (each space picked in turn: two reads
    # each) and four more wait their turn (every space again): the four are ended, the others
    # never sent, nothing goes out after it (none without a token), and no error is shown for
    # what it cut short.
    held: list[Any] = []
    holding = [True]
    page.route(
        "**/api/v1/**", lambda route: held.append(route) if holding[0] else route.continue_()
    )
    page.get_by_role("button", name="Tasks").click()
    page.locator("#space-picker").select_option(scene.one.space)
    page.locator("#space-picker").select_option(scene.two.space)
    # Route handlers run only inside a Playwright call: the wait makes one each time round.
    wait_for(lambda: page.wait_for_timeout(50) or len(held) >= 4, 10, "four reads in flight")
    page.locator("#space-picker").select_option("")
    sent: list[str] = []
    page.on("request", lambda r: sent.append(r.headers.get("authorization") or "none"))
    page.get_by_role("button", name="Forget token").click()
    holding[0] = False
    for route in held:
        with contextlib.suppress(Exception):  # a read the page ended is not continued
            route.continue_()
    page.locator("#login").wait_for()
    page.wait_for_timeout(500)  # long enough for a reply to let a waiting read go out
    assert sent == [], sent
    assert len(held) == 4 and page.locator("#login-error").is_hidden()
    assert page.locator("#columns .card").count() == 0
    page.context.close()
    # An admin token of every space finds them all from GET /spaces, with nothing typed.
    page = _board(browser, board_url, scene.one.api.admin_token)
    _card(page, scene.queued["task"]["id"])
    _card(page, scene.elsewhere["task"]["id"])
    listed = scene.one.admin.get("/spaces", params={"limit": 100}).json()["spaces"]
    picker = page.locator("#space-picker option").evaluate_all("os => os.map(o => o.value)")
    assert picker[1 : len(listed) + 1] == [s["key"] for s in listed]
    assert page.evaluate("location.hash") in ("", "#")
    page.context.close()


def test_search_finds_a_task_by_key_id_or_title_words(
    browser: Any, board_url: str, scene: Scene
) -> None:
    page = _board(browser, board_url, _both(scene))
    _card(page, scene.queued["task"]["id"])
    search = page.locator("#search")
    for text, wanted in (
        (scene.running["task"]["key"], scene.running),
        (scene.failed["task"]["id"], scene.failed),
        (scene.failed["lease"]["id"], scene.failed),
        ("march INVOICES", scene.running),
        ("audit trail", scene.elsewhere),
    ):
        search.fill(text)
        want = {wanted["task"]["id"]}
        wait_for(lambda w=want: _shown(page) == w, 10, f"the search {text!r} to find one task")
    search.fill("no task has this title")
    wait_for(lambda: _shown(page) == set(), 10, "the search to find nothing")
    search.fill("")
    _card(page, scene.queued["task"]["id"])
    page.context.close()


def test_filters_by_pool_state_and_age(browser: Any, board_url: str, scene: Scene) -> None:
    page = _board(browser, board_url, _both(scene))
    _card(page, scene.elsewhere["task"]["id"])
    page.locator("#pool-filter").select_option(scene.other_pool)
    wait_for(lambda: _shown(page) == {scene.elsewhere["task"]["id"]}, 10, "the pool filter")
    page.locator("#pool-filter").select_option("")
    page.locator("#state-filter").select_option("failed")
    wait_for(lambda: _shown(page) == {scene.failed["task"]["id"]}, 10, "the state filter")
    page.locator("#state-filter").select_option("approval")
    wait_for(lambda: _shown(page) == {scene.approval["task"]["id"]}, 10, "awaiting approval")
    page.locator("#state-filter").select_option("")
    # Everything here is minutes old: nothing is over an hour, everything is under one.
    page.locator("#age-filter").select_option("gt:3600")
    wait_for(lambda: _shown(page) == set(), 10, "nothing over an hour old")
    page.locator("#age-filter").select_option("lt:3600")
    ids = {x["task"]["id"] for x in (scene.queued, scene.running, scene.failed, scene.elsewhere)}
    wait_for(lambda: ids <= _shown(page), 10, "everything under an hour old")
    page.context.close()


AGE = re.compile(
    r"^(queued for|running for|ended|filed|awaiting approval for) \d+ (s|min)( \d+ s)?( ago)?$"
)


def test_every_card_shows_its_age_and_a_failed_card_its_first_error_line(
    browser: Any, board_url: str, scene: Scene
) -> None:
    page = _board(browser, board_url, _both(scene))
    for item, prefix in (
        (scene.queued, "queued for "),
        (scene.running, "running for "),
        (scene.failed, "ended "),
        (scene.approval, "awaiting approval for "),
    ):
        age = _card(page, item["task"]["id"]).locator(".age")
        text = age.inner_text()
        assert text.startswith(prefix) and AGE.match(text), text
    every = page.locator("#columns .card .age").evaluate_all("as => as.map(a => a.textContent)")
    assert every and all(AGE.match(t) for t in every), every
    texts = page.locator("#columns .card").all_inner_texts()
    assert not [t for t in texts if "null" in t or "undefined" in t], texts
    failed = _card(page, scene.failed["task"]["id"])
    assert failed.locator(".error-line").inner_text() == "index shard 3 is corrupt"
    assert _card(page, scene.queued["task"]["id"]).locator(".error-line").count() == 0
    # The age moves on by itself at the next refresh.
    before = _card(page, scene.running["task"]["id"]).locator(".age").inner_text()
    wait_for(
        lambda: _card(page, scene.running["task"]["id"]).locator(".age").inner_text() != before,
        15,
        "the age to move on",
    )
    page.context.close()


def test_a_task_awaiting_approval_reads_so_on_its_card(
    browser: Any, board_url: str, scene: Scene
) -> None:
    page = _board(browser, board_url, _both(scene))
    card = _card(page, scene.approval["task"]["id"])
    assert card.get_attribute("data-approval") == "true"
    assert card.locator(".chip").inner_text().strip() == "awaiting approval"
    assert "awaiting approval" in card.locator(".meta").inner_text()
    assert "blocked:" not in card.inner_text()
    page.context.close()


def _open_lease(page: Any, lease_id: str) -> None:
    page.locator(f'.card[data-lease="{lease_id}"]').click()
    page.locator("#detail[open]").wait_for()
    page.locator("#lease-facts dd").first.wait_for()


def test_a_read_token_sees_no_retry_or_approve_and_the_api_refuses_both(
    browser: Any, board_url: str, scene: Scene, api: Api
) -> None:
    reader = scene.one.operator_token("read", [scene.one.space])
    page = _board(browser, board_url, reader)
    _card(page, scene.failed["task"]["id"])
    _open_lease(page, scene.failed["lease"]["id"])
    wait_for(lambda: page.locator("#error-section").is_visible(), 10, "the error section")
    assert page.locator("#retry-lease").is_hidden()
    assert "member" in page.locator("#retry-why").inner_text()
    page.keyboard.press("Escape")
    _card(page, scene.approval["task"]["id"]).click()
    page.locator("#task-next[data-next-action]").wait_for(timeout=20_000)
    assert page.locator('#task-actions [data-action="approve"]').count() == 0
    assert "member token" in page.locator("#task-actions-why").inner_text()
    page.context.close()
    with httpx.Client(base_url=api.base, headers={"authorization": f"Bearer {reader}"}) as client:
        r = client.post(f"/leases/{scene.failed['lease']['id']}/retry")
        assert (r.status_code, r.json()["error"]["code"]) == (403, "forbidden"), r.text
        r = client.post(f"/tasks/{scene.approval['task']['id']}/approve", json={})
        assert (r.status_code, r.json()["error"]["code"]) == (403, "forbidden"), r.text
    # Nothing moved: no new run of the failed task, the other still awaits approval.
    task = scene.one.admin.get(f"/tasks/{scene.approval['task']['id']}").json()
    assert any(r["source"] == "approval" for r in task["task"]["blocked_reasons"])
    assert scene.one.admin.get(f"/tasks/{scene.failed['task']['id']}").json()["lease"] is None


def test_the_detail_shows_the_error_tail_and_a_member_retries_the_failed_lease(
    browser: Any, board_url: str, scene: Scene
) -> None:
    member = scene.one.operator_token("member", [scene.one.space])
    page = _board(browser, board_url, member)
    page.on("dialog", lambda d: d.accept())
    _card(page, scene.failed["task"]["id"])
    _open_lease(page, scene.failed["lease"]["id"])
    tail = page.locator("#lease-error")
    wait_for(lambda: "error: index shard 3 is corrupt" in tail.inner_text(), 20, "the stderr tail")
    assert "File build.py, line 9" in tail.inner_text()
    button = page.locator("#retry-lease")
    assert button.is_visible() and button.is_enabled()
    button.click()
    task_id = scene.failed["task"]["id"]
    wait_for(
        lambda: scene.one.admin.get(f"/tasks/{task_id}").json()["lease"] is not None,
        15,
        "a new run of the task",
    )
    fresh = scene.one.admin.get(f"/tasks/{task_id}").json()["lease"]
    assert fresh["state"] == "pending" and fresh["previous_lease_id"] == scene.failed["lease"]["id"]
    # The detail follows the new run; the card moves to the queue.
    wait_for(lambda: fresh["id"] in page.locator("#detail-title").inner_text(), 15, "the new run")
    page.keyboard.press("Escape")
    page.locator(f'.column[data-status="queued"] .card[data-task="{task_id}"]').wait_for(
        timeout=15_000
    )
    page.context.close()


def test_a_member_approves_from_the_detail(browser: Any, board_url: str, scene: Scene) -> None:
    task = scene.one.task(pool=scene.pool, title="Approve me", requires_approval=True)["task"]
    page = _board(browser, board_url, scene.one.operator_token("member", [scene.one.space]))
    page.on("dialog", lambda d: d.accept(""))
    _card(page, task["id"]).click()
    approve = page.locator('#task-actions [data-action="approve"]')
    approve.wait_for(timeout=20_000)
    approve.click()
    wait_for(
        lambda: scene.one.admin.get(f"/tasks/{task['id']}").json()["lease"] is not None,
        15,
        "the approval to enqueue the task",
    )
    page.context.close()


def test_the_workers_view_lists_each_worker_of_the_visible_pools(
    browser: Any, board_url: str, scene: Scene
) -> None:
    page = _board(browser, board_url, _both(scene))
    _card(page, scene.queued["task"]["id"])
    page.get_by_role("button", name="Workers").click()
    row = page.locator(f'#workers-table tr[data-worker="{scene.worker_id}"]')
    row.wait_for(timeout=20_000)
    cells = row.locator("td").all_inner_texts()
    assert cells[0] == scene.worker_id
    assert scene.pool in cells[1]
    assert cells[2] == "reachable"
    assert re.fullmatch(r"\d+ (s|min)( \d+ s)? ago", cells[3]), cells[3]
    assert cells[4] == "2.4.1"
    assert cells[5].startswith("1: ") and scene.running["lease"]["id"] in cells[5]
    assert page.locator("#board").is_hidden()
    assert "view=workers" in page.evaluate("location.hash")
    page.context.close()


def test_the_pools_view_shows_each_pools_figures(
    browser: Any, board_url: str, scene: Scene
) -> None:
    page = _board(browser, board_url, _both(scene))
    _card(page, scene.queued["task"]["id"])
    page.get_by_role("button", name="Pools").click()
    row = page.locator(f'#pools-table tr[data-pool="{scene.pool}"]')
    row.wait_for(timeout=20_000)
    figures = scene.one.admin.get(f"/pools/{scene.pool}/figures").json()["figures"]
    headers = page.locator("#pools-table th").all_inner_texts()
    cells = dict(zip(headers, row.locator("td").all_inner_texts(), strict=True))
    assert cells["Space"] == scene.one.space
    assert cells["Queued"] == str(figures["queued"]) and figures["queued"] >= 1
    assert cells["Held"] == str(figures["held"]) and figures["held"] >= 1
    assert re.fullmatch(r"\d+ (s|min)( \d+ s)?", cells["Oldest queued"]), cells["Oldest queued"]
    assert int(cells["Claims (1 h)"]) >= 2 and int(cells["Failed (1 h)"]) >= 1
    assert cells["Completed (1 h)"] == str(figures["last_hour"]["completed"])
    assert cells["Paused"] == "no" and cells["Ceilings"].startswith("active ")
    assert cells["Mass-expiry hold"] == "none"
    other = page.locator(f'#pools-table tr[data-pool="{scene.other_pool}"]')
    assert other.locator("td").nth(1).inner_text() == scene.two.space
    page.context.close()


def test_the_pools_view_shows_a_mass_expiry_hold_while_one_is_on(
    browser: Any, board_url: str, scene: Scene
) -> None:
    # A real hold needs several of a pool's workers to fall silent at once and a sweeper pass
    # (tests/unit/test_pool_figures.py holds the route's figure to the sweeper's state): here
    # the route's own answer is passed through with the hold the route reports while one is on.
    until = "2099-01-01T00:00:00Z"

    def with_hold(route: Any) -> None:
        answer = route.fetch()
        body = answer.json()
        body["figures"]["mass_expiry_hold"] = {"until": until}
        route.fulfill(response=answer, json=body)

    page = _board(browser, board_url, _both(scene))
    page.route(f"**/api/v1/pools/{scene.pool}/figures", with_hold)
    _card(page, scene.queued["task"]["id"])
    page.get_by_role("button", name="Pools").click()
    row = page.locator(f'#pools-table tr[data-pool="{scene.pool}"][data-hold="true"]')
    row.wait_for(timeout=20_000)
    headers = page.locator("#pools-table th").all_inner_texts()
    cells = dict(zip(headers, row.locator("td").all_inner_texts(), strict=True))
    assert cells["Mass-expiry hold"].startswith("held until "), cells
    assert "2099" in cells["Mass-expiry hold"], cells
    other = page.locator(f'#pools-table tr[data-pool="{scene.other_pool}"]')
    assert other.get_attribute("data-hold") == "false"
    page.context.close()


def test_every_column_is_within_reach_at_1280_px(
    browser: Any, board_url: str, scene: Scene
) -> None:
    page = _board(browser, board_url, _both(scene), width=1280)
    page.set_viewport_size({"width": 1280, "height": 800})
    _card(page, scene.queued["task"]["id"])
    headers = page.locator("#columns .column h2")
    assert headers.count() == 8
    for i in range(8):
        header = headers.nth(i)
        header.scroll_into_view_if_needed()
        box = header.bounding_box()
        assert box is not None, i
        # Fully inside the 1280 px window once scrolled to: nothing cut off at either side.
        assert box["x"] >= 0 and box["x"] + box["width"] <= 1280, (i, box)
        assert box["y"] >= 0 and box["y"] + box["height"] <= 800, (i, box)
        assert header.is_visible()
    # And the page never needs a sideways scroll to get there.
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280
    page.context.close()


def test_enqueue_offers_only_the_tasks_own_pools_and_a_member_cancels_what_a_reader_cannot(
    browser: Any, board_url: str, scene: Scene, api: Api
) -> None:
    task = scene.one.task(title="Cancel this task")["task"]
    reader_token = scene.one.operator_token("read", [scene.one.space])
    reader = _board(browser, board_url, reader_token)
    _card(reader, task["id"]).click()
    reader.locator("#task-next[data-next-action]").wait_for(timeout=20_000)
    assert reader.locator('#task-actions [data-action="cancel"]').count() == 0
    reader.context.close()
    with httpx.Client(base_url=api.base, headers={"authorization": f"Bearer {reader_token}"}) as c:
        r = c.post(f"/tasks/{task['id']}/cancel", json={"reason": "not mine to stop"})
        assert (r.status_code, r.json()["error"]["code"]) == (403, "forbidden"), r.text
    assert scene.one.admin.get(f"/tasks/{task['id']}").json()["task"]["status"] == "ready"

    # A member of both spaces, on every space: Enqueue offers the pools of the task's own
    # space only (another's would be refused), one of them chosen.
    both = [scene.one.space, scene.two.space]
    page = _board(browser, board_url, scene.one.operator_token("member", both))
    asked: list[str] = []
    page.on("dialog", lambda d: (asked.append(d.message), d.accept("superseded by OPS-9")))
    _card(page, task["id"]).click()
    offered = page.locator("#enqueue-pool option")
    offered.first.wait_for(state="attached", timeout=20_000)
    pools = scene.one.admin.get("/pools", params={"space": scene.one.space}).json()["pools"]
    assert offered.evaluate_all("os => os.map(o => o.value)") == sorted(p["name"] for p in pools)
    assert page.locator("#enqueue-pool").input_value() in {p["name"] for p in pools}
    page.locator('#task-actions [data-action="cancel"]').click()
    wait_for(
        lambda: scene.one.admin.get(f"/tasks/{task['id']}").json()["task"]["status"] == "cancelled",
        15,
        "the task to be cancelled",
    )
    assert any("Why?" in a for a in asked)
    page.locator("#task-close").click()
    page.locator(f'.column[data-status="cancelled"] .card[data-task="{task["id"]}"]').wait_for(
        timeout=15_000
    )
    page.context.close()
