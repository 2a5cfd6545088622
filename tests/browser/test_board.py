"""The operator board in a real browser: every chip kind produced through the API,
reduced motion, cancel by role, errors in words, keyboard navigation, and the screenshot."""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.support import Api, World, suffix, wait_for

ROOT = Path(__file__).resolve().parents[2]
# Pools that keep their leases for the whole module: nothing expires while the page is read.
CALM = {"renew_seconds": 600, "grace_seconds": 1800, "toleration_seconds": 3600}
REFUSING = {"state": "refusing", "reason": "the container runtime is down"}
UNREACHABLE = {"state": "unreachable", "reason": "the credential source is sealed"}


@dataclass
class Gallery:
    """One space holding a lease for every chip the board draws (space_archived aside: an
    archived space holds every lease in it, so that chip lives in a space of its own)."""

    world: World
    archived: World
    conditions: dict[str, str] = field(default_factory=dict)  # code -> lease id
    states: dict[str, str] = field(default_factory=dict)  # running/paused/cancelling -> lease id
    pools: dict[str, str] = field(default_factory=dict)  # code -> pool name


def _pool(world: World, display: str, **fields: Any) -> str:
    name: str = world.pool(display_name=display, **CALM, **fields)["name"]
    return name


TITLES = iter(
    [
        "Rebuild the search index",
        "Rotate the signing keys",
        "Deploy the billing service",
        "Ship the March invoices",
        "Nightly vacuum of the orders table",
        "Build release 4.2 images",
        "Re-run flaky integration suite",
        "Export the audit trail",
        "Review the on-call handbook",
        "Summarise yesterday's incidents",
        "Restore the archived ledger",
        "Re-index the product catalogue",
    ]
)


def _queued(world: World, pool: str, **fields: Any) -> str:
    fields.setdefault("title", next(TITLES, f"task {suffix()}"))
    lease_id: str = world.task(pool=pool, **fields)["lease"]["id"]
    return lease_id


def _claimed(world: World, worker: httpx.Client, pool: str, *, start: bool) -> str:
    lease_id = _queued(world, pool)
    won = world.claim(worker, pool, worker_id=f"w-{suffix().lower()}", lease_seconds=3600)
    assert won["lease"]["id"] == lease_id, "the pool held another lease"
    if start:
        with world.api.client(won["token"]) as lease:
            r = lease.post(f"/leases/{lease_id}/start", json={})
            assert r.status_code == 200, r.text
    return lease_id


def _beat(worker: httpx.Client, pool: str, **said: Any) -> None:
    body = {"leases": [], "pool": pool, **said}
    r = worker.post(f"/workers/w-{suffix().lower()}/heartbeat", json=body)
    assert r.status_code == 200, r.text


def _space(api: Api, admin: httpx.Client, name: str) -> World:
    key = f"B{suffix()}"
    r = admin.post("/spaces", json={"key": key, "name": name})
    assert r.status_code == 201, r.text
    return World(api, admin, key)


@pytest.fixture(scope="module")
def gallery(api: Api) -> Iterator[Gallery]:
    with api.admin() as admin:
        world = _space(api, admin, "board gallery")
        g = Gallery(world, _space(api, admin, "archived"))
        paused = _pool(world, "Nightly builds")
        g.conditions["pool_paused"] = _queued(world, paused)
        assert admin.post(f"/pools/{paused}/pause").status_code == 200

        for code, display, said in (
            ("runtime_refusing", "Container runners", {"runtime": REFUSING}),
            ("token_pool_unreachable", "Deploy agents", {"credentials": UNREACHABLE}),
        ):
            pool = _pool(world, display)
            g.conditions[code] = _queued(world, pool)
            with api.client(world.worker_token([pool])) as worker:
                _beat(worker, pool, **said)

        full = _pool(world, "Delivery workers", max_active=1)
        farm = _pool(world, "Build farm")
        with api.client(world.worker_token([full, farm])) as worker:
            g.states["running"] = _claimed(world, worker, full, start=True)
            g.conditions["pool_full"] = _queued(world, full)
            g.conditions["starting"] = _claimed(world, worker, farm, start=False)
            g.states["paused"] = _claimed(world, worker, farm, start=True)
            g.states["cancelling"] = _claimed(world, worker, farm, start=True)
        # One key held in a pool that allows one per key: the next task of that key waits.
        # (rate_limited is left out: it clears when the minute turns, within this module.)
        keyed = _pool(world, "Tenant exports", max_active_per_key=1)
        with api.client(world.worker_token([keyed])) as worker:
            _queued(world, keyed, concurrency_key="acme")
            world.claim(worker, keyed, worker_id=f"w-{suffix().lower()}", lease_seconds=3600)
        g.conditions["key_full"] = _queued(world, keyed, concurrency_key="acme")
        assert admin.post(f"/leases/{g.states['paused']}/pause").status_code == 200
        assert admin.post(f"/leases/{g.states['cancelling']}/cancel").status_code == 200

        agents = _pool(world, "Review agents")
        g.conditions["awaiting_agent"] = _queued(world, agents)
        later = (datetime.now(UTC) + timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
        g.conditions["waiting_until"] = _queued(world, agents, not_before=later)

        shelf = _pool(g.archived, "Archive shelf")
        g.conditions["space_archived"] = _queued(g.archived, shelf)
        assert admin.post(f"/spaces/{g.archived.space}/archive").status_code == 200
        yield g


# The contrast ratio of a chip's text on its own background (WCAG 2 relative luminance).
CONTRAST = """c => {
  const rgb = s => s.match(/\\d+/g).slice(0, 3).map(Number);
  const lum = ([r, g, b]) => [r, g, b].map(v => {
    v /= 255;
    return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
  }).reduce((sum, v, i) => sum + v * [0.2126, 0.7152, 0.0722][i], 0);
  const style = getComputedStyle(c.querySelector('.label'));
  const a = lum(rgb(style.color)), b = lum(rgb(getComputedStyle(c).backgroundColor));
  return (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
}"""


# Notes every fetch the page makes, as it makes it: the address and the Authorization header.
FETCH_SPY = """(() => {
  const real = window.fetch;
  window.fetched = [];
  window.fetch = (url, init) => {
    window.fetched.push([String(url), ((init || {}).headers || {}).authorization || null]);
    return real(url, init);
  };
})()"""


def _open(
    browser: Any, url: str, token: str, space: str, clock: bool = False, **context: Any
) -> Any:
    """The board on `space`, signed in with `token`. With `clock`, the page's timers run on
    Playwright's clock (time still flows; a test moves it on to fire the board's timers now)
    and every fetch is noted in `window.fetched`."""
    ctx = browser.new_context(viewport={"width": 1600, "height": 1000}, **context)
    ctx.add_init_script(f"sessionStorage.setItem('tenure.board.token', {token!r})")
    page = ctx.new_page()
    if clock:
        page.clock.install()
        ctx.add_init_script(FETCH_SPY)
    page.goto(f"{url}#space={space}")
    return page


def _chip(page: Any, lease_id: str) -> Any:
    card = page.locator(f'.card[data-lease="{lease_id}"]')
    card.wait_for(timeout=20_000)
    return card.locator(".chip")


def _condition(world: World, lease_id: str) -> dict[str, Any]:
    r = world.admin.get(f"/leases/{lease_id}")
    assert r.status_code == 200, r.text
    found: dict[str, Any] = r.json()["queued_condition"]
    return found


def test_board_is_served_without_a_token_with_its_own_policy(board_url: str) -> None:
    r = httpx.get(board_url, timeout=30)
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/html")
    policy = r.headers["content-security-policy"]
    assert "default-src 'none'" in policy and "connect-src 'self'" in policy
    assert "<script>" in r.text and "<style>" in r.text
    # Nothing is loaded from elsewhere; the script may only fetch from the API and, following
    # a large attachment's redirect, from the bucket's origin (scheme, host and port: no path).
    directives = dict(d.strip().split(" ", 1) for d in policy.split(";"))
    assert [name for name, value in directives.items() if "http" in value] == ["connect-src"]
    self_, bucket = directives["connect-src"].split(" ")
    assert self_ == "'self'" and re.fullmatch(r"http://127\.0\.0\.1:\d+", bucket), bucket


def _stored(page: Any) -> str | None:
    token: str | None = page.evaluate("sessionStorage.getItem('tenure.board.token')")
    return token


def test_the_page_asks_for_a_token_once_keeps_it_for_the_tab_and_retries_a_failed_sign_in(
    browser: Any, board_url: str, gallery: Gallery
) -> None:
    page = browser.new_context().new_page()
    page.clock.install()
    page.goto(board_url)
    page.get_by_label("Operator token").fill("tnr_o_not-a-token")
    page.get_by_role("button", name="Open the board").click()
    page.locator("#login-error").wait_for()
    assert "unauthenticated" in page.locator("#login-error").inner_text()
    assert _stored(page) is None
    token = gallery.world.operator_token("read", [gallery.world.space])
    page.get_by_label("Operator token").fill(token)
    page.get_by_role("button", name="Open the board").click()
    # Nothing to type: the board opens on every space the token sees.
    _chip(page, gallery.conditions["awaiting_agent"])
    page.reload()
    assert page.locator("#login").is_hidden()
    _chip(page, gallery.conditions["awaiting_agent"])
    # A sign-in the service does not answer (a reset connection, then a 503) keeps the token
    # and is tried again, later each time, saying so; it opens the board once answered.
    failures: list[str] = ["reset", "unavailable"]

    def flaky(route: Any) -> None:
        if not failures:
            route.continue_()
        elif failures.pop(0) == "reset":
            route.abort("connectionreset")
        else:
            body = {"error": {"code": "unavailable", "message": "no free worker process"}}
            route.fulfill(status=503, json=body)

    page.route("**/api/v1/whoami", flaky)
    page.reload()
    error = page.locator("#login-error")
    error.wait_for(timeout=10_000)
    assert "could not be reached" in error.inner_text(), error.inner_text()
    assert "Signing in again in 1 s" in error.inner_text()
    assert _stored(page) == token
    page.clock.run_for(1000)
    wait_for(lambda: "HTTP 503" in error.inner_text(), 10, "the second try's answer")
    assert "Signing in again in 2 s" in error.inner_text()
    assert _stored(page) == token
    page.clock.run_for(2000)
    _chip(page, gallery.conditions["awaiting_agent"])
    assert page.locator("#login").is_hidden() and _stored(page) == token
    page.context.close()


def test_every_queued_condition_and_held_state_has_its_chip(
    browser: Any, board_url: str, gallery: Gallery
) -> None:
    for world in (gallery.world, gallery.archived):
        page = _open(browser, board_url, world.api.admin_token, world.space)
        pools = {
            p["name"]: p["display_name"]
            for p in world.admin.get("/pools", params={"space": world.space}).json()["pools"]
        }
        for code, lease_id in gallery.conditions.items():
            listed = world.admin.get(f"/leases/{lease_id}").json()
            if listed["space"] != world.space:
                continue
            found = _condition(world, lease_id)
            assert found["code"] == code, (code, found)
            chip = _chip(page, lease_id)
            assert chip.get_attribute("data-condition") == code
            needs = "true" if found["needs_person"] else "false"
            assert chip.get_attribute("data-needs-person") == needs
            assert chip.inner_text().strip() == f"{pools[listed['pool']]} ({found['label']})"
            mark = ".dot" if found["needs_person"] else ".spin"
            assert chip.locator(mark).is_visible(), (code, mark)
        page.context.close()
    page = _open(browser, board_url, gallery.world.api.admin_token, gallery.world.space)
    for name, lease_id in gallery.states.items():
        chip = _chip(page, lease_id)
        assert chip.get_attribute("data-state") == name
        assert chip.inner_text().strip() == name
        assert chip.get_attribute("data-condition") is None
    for lease_id in [*gallery.conditions.values(), *gallery.states.values()]:
        if page.locator(f'.card[data-lease="{lease_id}"]').count():
            ratio = _chip(page, lease_id).evaluate(CONTRAST)
            assert ratio >= 4.5, (lease_id, ratio)  # WCAG AA for text of this size
    amber = _chip(page, gallery.conditions["pool_paused"]).evaluate(
        "c => getComputedStyle(c).backgroundColor"
    )
    neutral = _chip(page, gallery.conditions["pool_full"]).evaluate(
        "c => getComputedStyle(c).backgroundColor"
    )
    assert amber != neutral
    page.context.close()


def _animation(page: Any, lease_id: str, part: str) -> str:
    name: str = (
        _chip(page, lease_id).locator(part).evaluate("n => getComputedStyle(n).animationName")
    )
    return name


def test_reduced_motion_stops_the_spin_while_colour_and_dot_still_read(
    browser: Any, board_url: str, gallery: Gallery
) -> None:
    token, space = gallery.world.api.admin_token, gallery.world.space
    spinning = gallery.conditions["awaiting_agent"]
    page = _open(browser, board_url, token, space)
    assert _animation(page, spinning, ".spin") == "chip-spin"
    page.context.close()
    page = _open(browser, board_url, token, space, reduced_motion="reduce")
    assert page.evaluate("matchMedia('(prefers-reduced-motion: reduce)').matches")
    for lease_id in gallery.conditions.values():
        if page.locator(f'.card[data-lease="{lease_id}"]').count() == 0:
            continue
        names = _chip(page, lease_id).evaluate(
            "c => [c, ...c.querySelectorAll('*')].map(n => getComputedStyle(n).animationName)"
        )
        assert set(names) == {"none"}, (lease_id, names)
    paused = _chip(page, gallery.conditions["pool_paused"])
    assert paused.locator(".dot").is_visible()
    dot = paused.locator(".dot").evaluate("d => getComputedStyle(d).backgroundColor")
    assert dot == "rgb(180, 83, 9)"
    assert _chip(page, spinning).locator(".spin").is_visible()
    page.context.close()


def test_cancel_works_for_a_member_and_is_disabled_for_a_read_token(
    browser: Any, board_url: str, gallery: Gallery
) -> None:
    world = gallery.world
    lease_id = _queued(world, _pool(world, "Cancel me"))
    reader = _open(browser, board_url, world.operator_token("read"), world.space)
    reader.locator(f'.card[data-lease="{lease_id}"]').click()
    reader.locator("#detail[open]").wait_for()
    assert reader.locator("#cancel-lease").is_disabled()
    assert "member" in reader.locator("#cancel-why").inner_text()
    reader.context.close()

    member = _open(browser, board_url, world.operator_token("member", [world.space]), world.space)
    member.on("dialog", lambda dialog: dialog.accept())
    member.locator(f'.card[data-lease="{lease_id}"]').click()
    button = member.locator("#cancel-lease")
    wait_for(lambda: button.is_enabled(), 10, "Cancel to be enabled for a member")
    button.click()
    wait_for(
        lambda: world.admin.get(f"/leases/{lease_id}").json()["state"] == "cancelled",
        10,
        "the lease to be cancelled",
    )
    member.locator('#lease-facts .chip[data-state="cancelled"]').wait_for(timeout=10_000)
    member.keyboard.press("Escape")
    card = member.locator(f'.column[data-status="cancelled"] .card[data-lease="{lease_id}"]')
    card.wait_for(timeout=15_000)
    member.context.close()


def test_an_api_error_is_shown_in_words(browser: Any, board_url: str, gallery: Gallery) -> None:
    world = gallery.world
    page = _open(browser, board_url, world.operator_token("read", [world.space]), "ELSEWHERE")
    notice = page.locator("#notice")
    notice.wait_for(timeout=20_000)
    text = notice.inner_text()
    assert "could not be refreshed" in text and "forbidden" in text and "HTTP 403" in text
    page.context.close()


def test_the_keyboard_reaches_a_card_and_opens_its_lease(
    browser: Any, board_url: str, gallery: Gallery
) -> None:
    page = _open(browser, board_url, gallery.world.api.admin_token, gallery.world.space)
    _chip(page, gallery.conditions["pool_paused"])
    for _ in range(40):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.classList.contains('card')"):
            break
    else:
        pytest.fail("Tab never reached a card")
    outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    assert outline == "solid"  # the focus is visible
    first = page.evaluate("document.activeElement.dataset.lease")
    page.keyboard.press("ArrowDown")
    second = page.evaluate("document.activeElement.dataset.lease")
    assert second != first
    page.keyboard.press("Enter")
    page.locator("#detail[open]").wait_for()
    assert second in page.locator("#detail-title").inner_text()
    page.locator("#lease-facts dd").first.wait_for()
    page.keyboard.press("Escape")
    wait_for(lambda: page.locator("#detail[open]").count() == 0, 5, "the detail to close")
    assert page.evaluate("document.activeElement.dataset.lease") == second
    page.context.close()


def test_a_refresh_updates_cards_in_place_and_moves_them_between_columns(
    browser: Any, board_url: str, api: Api
) -> None:
    with api.admin() as admin:
        world = _space(api, admin, "board refresh")
        pool = _pool(world, "Refresh pool")
        queued = [_queued(world, pool), _queued(world, pool)]
        page = _open(browser, board_url, api.admin_token, world.space)
        for lease_id in queued:
            _chip(page, lease_id).evaluate("c => { c.closest('.card').dataset.mark = 'kept'; }")
        with api.client(world.worker_token([pool])) as worker:
            won = world.claim(worker, pool, lease_seconds=3600)
        moving = won["lease"]["id"]
        [still] = [x for x in queued if x != moving]
        with api.client(won["token"]) as lease:
            assert lease.post(f"/leases/{moving}/start", json={}).status_code == 200
        running = page.locator(f'.column[data-status="running"] .card[data-lease="{moving}"]')
        running.wait_for(timeout=15_000)
        # The same elements, updated: nothing was torn down and rebuilt.
        assert running.get_attribute("data-mark") == "kept"
        assert running.locator(".chip").get_attribute("data-state") == "running"
        kept = page.locator(f'.card[data-lease="{still}"]')
        assert kept.get_attribute("data-mark") == "kept"
        page.context.close()


def test_filters_by_pool_and_by_what_needs_a_person(
    browser: Any, board_url: str, gallery: Gallery
) -> None:
    page = _open(browser, board_url, gallery.world.api.admin_token, gallery.world.space)
    _chip(page, gallery.conditions["pool_paused"])
    page.locator("#state-filter").select_option("needs_person")
    shown = page.locator("#columns .chip").evaluate_all(
        "cs => cs.map(c => c.dataset.condition || c.dataset.state)"
    )
    assert sorted(shown) == ["pool_paused", "runtime_refusing", "token_pool_unreachable"]
    page.locator("#state-filter").select_option("")
    page.locator("#pool-filter").select_option(label="Nightly builds")
    cards = page.locator("#columns .card")
    assert cards.count() == 1
    assert cards.first.get_attribute("data-lease") == gallery.conditions["pool_paused"]
    page.context.close()


def test_screenshot_of_every_chip(
    browser: Any, board_url: str, gallery: Gallery, tmp_path: Path
) -> None:
    """Set TENURE_BOARD_SCREENSHOT=docs/board.png to refresh the README's picture."""
    target = Path(os.environ.get("TENURE_BOARD_SCREENSHOT") or tmp_path / "board.png")
    if not target.is_absolute():
        target = ROOT / target
    page = _open(browser, board_url, gallery.world.api.admin_token, gallery.world.space)
    for lease_id in [*gallery.conditions.values(), *gallery.states.values()]:
        if lease_id != gallery.conditions["space_archived"]:
            _chip(page, lease_id)
    target.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(target), full_page=True)
    assert target.stat().st_size > 10_000
    page.context.close()


def test_the_lease_detail_shows_its_parts_downloads_and_closes_once_its_token_is_refused(
    browser: Any, board_url: str, api: Api
) -> None:
    with api.admin() as admin:
        world = _space(api, admin, "board detail")
        pool = _pool(world, "Detail pool")
        task = world.task(pool=pool, title="Collect the crash dumps")
        with api.client(world.worker_token([pool])) as worker:
            won = world.claim(worker, pool, worker_id="w-detail", lease_seconds=3600)
        lease_id, won_token = task["lease"]["id"], won["token"]
        assert won["lease"]["id"] == lease_id
        with api.client(won_token) as lease:
            assert lease.post(f"/leases/{lease_id}/start", json={}).status_code == 200
            lines = [{"stream": "stdout", "message": f"step {n} done"} for n in range(3)]
            lines.append({"stream": "stderr", "message": "disk nearly full"})
            r = lease.post(f"/leases/{lease_id}/logs", json={"events": lines})
            assert r.status_code == 202, r.text
            body = {
                "filename": "dump.txt",
                "content_type": "text/plain",
                "byte_size": 11,
                "content_base64": base64.b64encode(b"crash dump\n").decode(),
            }
            r = lease.post(f"/leases/{lease_id}/attachments", json=body)
            assert r.status_code == 201, r.text
        body = {"name": f"op-{suffix().lower()}", "kind": "operator", "role": "member"}
        minted = admin.post("/tokens", json={**body, "spaces": [world.space]})
        assert minted.status_code == 201, minted.text
        page = _open(browser, board_url, minted.json()["token"], world.space, clock=True)
        page.locator(f'.card[data-lease="{lease_id}"]').click()
        page.locator("#detail[open]").wait_for()
        facts = page.locator("#lease-facts")
        wait_for(lambda: "w-detail" in facts.inner_text(), 10, "the worker in the detail")
        fence = str(won["lease"]["fence"])
        assert re.search(rf"^Fence\s+{fence}$", facts.inner_text(), re.M), facts.inner_text()
        timing = page.locator("#lease-timing dd")  # created, not before, claimed, started, …
        assert timing.nth(2).inner_text().endswith("UTC") and timing.nth(3).inner_text() != "—"
        timeline = page.locator("#timeline")
        wait_for(lambda: "lease.claimed" in timeline.inner_text(), 10, "the timeline")
        logs = page.locator("#logs")
        wait_for(lambda: "disk nearly full" in logs.inner_text(), 10, "the log lines")
        assert "step 0 done" in logs.inner_text()
        assert page.locator("#logs .stderr").count() == 1
        with page.expect_download() as got:
            page.get_by_role("button", name="Download dump.txt").click()
        saved = got.value.path()
        assert Path(saved).read_bytes() == b"crash dump\n"
        assert got.value.suggested_filename == "dump.txt"
        # The token is revoked while the lease is open and its logs followed: the next read's
        # 401 ends the session in the page. The dialog closes with its data, the token is
        # dropped, and no timer (refresh, detail, follow) asks anything again.
        page.locator("#log-follow").check()
        token_id = minted.json()["id"]
        assert admin.delete(f"/tokens/{token_id}").status_code == 204
        login = page.locator("#login")
        wait_for(lambda: page.clock.run_for(1000) or login.is_visible(), 20, "the sign-in form")
        assert page.locator("#detail[open]").count() == 0
        assert "HTTP 401" in page.locator("#login-error").inner_text()
        assert page.locator("#lease-facts dd").count() == 0
        assert page.locator("#logs").inner_text() == ""
        assert page.evaluate("sessionStorage.getItem('tenure.board.token')") is None
        asked = page.evaluate("window.fetched.length")
        page.clock.run_for(60_000)
        assert page.evaluate("n => window.fetched.slice(n)", asked) == []
        page.context.close()


# Where a column's cards and their parts stand against the column's list: how far its content
# reaches past the list's box, the column's width, and each card title's right edge and text.
GEOMETRY = """c => {
  const ol = c.querySelector('ol');
  const box = ol.getBoundingClientRect();
  const titles = [...ol.querySelectorAll('.card .title')];
  const parts = [...ol.querySelectorAll('.card, .card > *')];
  return {
    overflow: ol.scrollWidth - ol.clientWidth,
    width: c.getBoundingClientRect().width,
    outside: parts.filter(n => n.getBoundingClientRect().right > box.right + 1).length,
    titles: Object.fromEntries(
      titles.map(t => [t.textContent, t.getBoundingClientRect().right <= box.right + 1])),
  };
}"""


def test_ready_and_blocked_tasks_are_cards_and_a_long_word_wraps_inside_its_own_card(
    browser: Any, board_url: str, api: Api
) -> None:
    with api.admin() as admin:
        world = _space(api, admin, "board tasks")
        ready = world.task(title="Write the release notes")["task"]
        blocker = world.task(title="Cut the branch")["task"]
        blocked = world.task(title="Tag the release", depends_on=[blocker["id"]])["task"]
        # One card's unbroken 300-character word (a block's reason, a pool's display name)
        # must not widen its column's cards past the column and hide the others' titles.
        careful = "Rotate the staging keys only - do NOT touch production"
        word = "see-" + "x" * 300
        for title, reason in ((careful, "ask ops"), ("Read the long reason", word)):
            task = world.task(title=title)["task"]
            block = {"kind": "needs_input", "reason": reason}
            assert admin.post(f"/tasks/{task['id']}/blocks", json=block).status_code == 201
        wide = _pool(world, "Builders-" + "y" * 300)
        world.task(pool=wide, title="Queued on a pool with a long name")
        world.task(pool=_pool(world, "Plain"), title=careful)
        page = _open(browser, board_url, api.admin_token, world.space)
        ready_card = page.locator(f'.column[data-status="ready"] .card[data-task="{ready["id"]}"]')
        ready_card.wait_for(timeout=20_000)
        assert "Write the release notes" in ready_card.inner_text()
        assert ready_card.get_attribute("data-lease") is None
        blocked_card = page.locator(
            f'.column[data-status="blocked"] .card[data-task="{blocked["id"]}"]'
        )
        blocked_card.wait_for(timeout=10_000)
        # The reason reads in words, naming the task it waits on by its key.
        assert f"waits on {blocker['key']}" in blocked_card.inner_text()
        assert f"waits on {blocker['key']}" in (blocked_card.get_attribute("aria-label") or "")
        wait_for(
            lambda: (
                page.locator(".column[data-status='blocked'] .card").count() == 3
                and page.locator(".column[data-status='queued'] .card").count() == 2
            ),
            10,
            "three blocked cards and two queued",
        )
        ready_width = page.locator('.column[data-status="ready"]').evaluate(GEOMETRY)["width"]
        for status in ("blocked", "queued"):
            shape = page.locator(f'.column[data-status="{status}"]').evaluate(GEOMETRY)
            assert shape["overflow"] <= 1 and shape["outside"] == 0, (status, shape)
            assert abs(shape["width"] - ready_width) <= 1, (status, shape, ready_width)
            assert shape["titles"][careful] is True, (status, shape)
        page.context.close()


def test_an_attachment_over_a_mebibyte_downloads_from_the_bucket(
    browser: Any, board_url: str, api: Api
) -> None:
    data = bytes(range(256)) * 4200 + b"end"  # 1,075,203 bytes: served by a presigned GET
    with api.admin() as admin:
        world = _space(api, admin, "board big download")
        pool = _pool(world, "Dump pool")
        task = world.task(pool=pool, title="Collect a large dump")
        with api.client(world.worker_token([pool])) as worker:
            won = world.claim(worker, pool, worker_id="w-big", lease_seconds=3600)
        lease_id = task["lease"]["id"]
        with api.client(won["token"]) as lease:
            body = {
                "filename": "core.bin",
                "content_type": "application/octet-stream",
                "byte_size": len(data),
            }
            r = lease.post(f"/leases/{lease_id}/attachments", json=body)
            assert r.status_code == 201, r.text
            upload = r.json()["upload"]
            put = httpx.put(upload["url"], content=data, headers=upload["headers"], timeout=60)
            assert put.status_code == 200, put.text
        got = admin.get(f"/leases/{lease_id}/attachments/{r.json()['attachment']['id']}")
        assert got.status_code == 302  # the API hands the bytes to the bucket
        page = _open(browser, board_url, api.admin_token, world.space)
        page.locator(f'.card[data-lease="{lease_id}"]').click()
        page.locator("#detail[open]").wait_for()
        with page.expect_download(timeout=30_000) as got_file:
            page.get_by_role("button", name="Download core.bin").click()
        assert Path(got_file.value.path()).read_bytes() == data
        assert got_file.value.suggested_filename == "core.bin"
        assert page.locator("#detail-error").is_hidden()
        page.context.close()


def _leases_but(lease_id: str) -> Any:
    """A route handler answering the board's lists of leases of no task as if `lease_id` and
    every older lease were past the pages it reads: the lease left out, a cursor always on."""

    def answer(route: Any) -> None:
        if "cursor=" in route.request.url:
            route.fulfill(json={"leases": [], "next_cursor": "more"})
            return
        got = route.fetch()
        body = got.json()
        body["leases"] = [x for x in body["leases"] if x["id"] != lease_id]
        body["next_cursor"] = "more"
        route.fulfill(response=got, json=body)

    return answer


def test_the_header_counts_what_needs_a_person_as_the_column_and_filter_do_a_rules_lease_too(
    browser: Any, board_url: str, api: Api
) -> None:
    with api.admin() as admin:
        world = _space(api, admin, "board header")
        # A task escalated to Needs attention: its second error block.
        task_id = world.task(title="Reconcile the ledger")["task"]["id"]
        for n in range(2):
            r = admin.post(f"/tasks/{task_id}/blocks", json={"kind": "error", "reason": "bad"})
            assert r.status_code == 201, r.text
            block = r.json()["block"]["id"]
            if n == 0:
                clear = admin.post(f"/tasks/{task_id}/blocks/{block}/clear")
                assert clear.status_code == 200, clear.text
        status = admin.get(f"/tasks/{task_id}").json()["task"]["status"]
        assert status == "needs_attention", status
        paused = _pool(world, "Paused shelf")
        held_back = _queued(world, paused)  # queued on a paused pool: a person must resume it
        # A lease of no task, minted by a rule for a workflow on the same pool: a card of its
        # own, counted, and found by its id. (The API reads such leases apart from the tasks'
        # own, so no number of newer tasks hides one: tests/conformance holds the store to it.)
        body = {"space": world.space, "slug": "nightly", "name": "Nightly"}
        assert admin.post("/workflows", json=body).status_code == 201
        rule = {
            "space": world.space,
            "name": "nightly",
            "pool": paused,
            "subject": {"kind": "workflow", "slug": "nightly"},
            "trigger": {"schedule": "cron(0 2 1 1 ? 2099)", "timezone": "UTC"},
        }
        made = admin.post("/rules", json=rule)
        assert made.status_code == 201, made.text
        fired = admin.post(f"/rules/{made.json()['rule']['id']}/fire")
        assert fired.status_code == 201, fired.text
        minted = fired.json()["lease"]["id"]
        assert admin.post(f"/pools/{paused}/pause").status_code == 200
        _queued(world, _pool(world, "Idle farm"))  # waits for a worker: clears on its own
        page = _open(browser, board_url, api.admin_token, world.space, clock=True)
        _chip(page, held_back)
        _chip(page, minted)
        attention = page.locator('.column[data-status="needs_attention"]')
        attention.locator(f'.card[data-task="{task_id}"]').wait_for(timeout=20_000)
        summary = page.locator("#summary")
        wait_for(
            lambda: summary.inner_text().startswith("3 need a person (1 in Needs attention)"),
            10,
            f"the header's count, read {summary.inner_text()!r}",
        )
        assert "1 waiting on their own" in summary.inner_text()
        assert page.locator("#truncated").is_hidden()
        assert attention.locator(".count").inner_text() == "1"
        # The filter of that name shows the same three.
        page.locator("#state-filter").select_option("needs_person")
        wait_for(lambda: page.locator("#columns .card").count() == 3, 10, "the filter")
        search = page.locator("#search")
        search.fill(minted)
        wait_for(lambda: page.locator("#columns .card").count() == 1, 10, "the search by id")
        search.fill("")
        # Were it past the pages of them the board reads (a space answering page after page of
        # leases of no task), the board says some are not shown, nor counted, and how to find
        # them; a search by its id still reads it and draws its card.
        page.route(lambda url: "subject_kind=" in url, _leases_but(minted))
        page.clock.fast_forward(5000)
        note = page.locator("#truncated")
        wait_for(lambda: note.is_visible(), 20, "the note on leases of no task not shown")
        assert "Search by a lease's id" in note.inner_text()
        assert page.locator(f'.card[data-lease="{minted}"]').count() == 0
        assert summary.inner_text().startswith("2 need a person (1 in Needs attention)")
        search.fill(minted)
        _chip(page, minted)
        assert page.locator("#columns .card").count() == 1
        search.fill("")
        page.unroute_all()
        wait_for(lambda: page.locator("#columns .card").count() == 2, 10, "the filter again")
        # Updated in 24-hour UTC, as every time in the details is (the line is written again
        # by each refresh: wait for it rather than read it between two).
        updated = page.locator("#updated")
        in_utc = re.compile(r"Updated ([01]\d|2[0-3]):[0-5]\d:[0-5]\d UTC ")
        wait_for(
            lambda: in_utc.match(updated.inner_text()) is not None,
            10,
            f"the header's Updated line in UTC, read {updated.inner_text()!r}",
        )
        page.context.close()
