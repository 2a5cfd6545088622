"""The board's task view in a real browser: every card opens, a lease-less one too; one chip
per blocked reason, the diagnosis in words, recent runs and events, and the member actions
that apply, each confirmed and each refusal shown in words."""

from __future__ import annotations

from typing import Any

from tests.browser.test_board import _open, _space
from tests.e2e.support import Api, wait_for


def _task_card(page: Any, task_id: str) -> Any:
    card = page.locator(f'.card[data-task="{task_id}"]')
    card.wait_for(timeout=20_000)
    return card


def _open_task(page: Any, task_id: str) -> Any:
    _task_card(page, task_id).click()
    view = page.locator("#task-detail[open]")
    view.wait_for(timeout=20_000)
    page.locator("#task-next[data-next-action]").wait_for(timeout=20_000)
    return view


def test_a_lease_less_card_opens_the_task_view_with_its_reasons_and_member_actions(
    browser: Any, board_url: str, api: Api
) -> None:
    with api.admin() as admin:
        world = _space(api, admin, "task view")
        pool = world.pool(display_name="Review queue")["name"]
        waiting = world.task(pool=pool, title="Publish the report", requires_approval=True)
        rejected = world.task(pool=pool, title="Email every customer", requires_approval=True)
        blocker = world.task(title="Cut the branch")["task"]
        blocked = world.task(title="Tag it", depends_on=[blocker["id"]])["task"]
        assert waiting["lease"] is None

        reader = _open(browser, board_url, world.operator_token("read", [world.space]), world.space)
        _open_task(reader, blocked["id"])
        chips = reader.locator("#task-reasons .chip")
        wait_for(lambda: chips.count() == 1, 20, "the task's one blocked reason")
        assert chips.first.get_attribute("data-source") == "dependency"
        assert f"waits on {blocker['key']}" in chips.first.inner_text()
        assert "member token" in reader.locator("#task-actions-why").inner_text()
        assert reader.locator("#task-actions button").count() == 0
        reader.context.close()

        member = _open(
            browser, board_url, world.operator_token("member", [world.space]), world.space
        )
        answers: list[str] = []
        member.on("dialog", lambda d: (answers.append(d.message), d.accept("checked by hand")))
        task = waiting["task"]
        _open_task(member, task["id"])
        chip = member.locator('#task-reasons .chip[data-source="approval"]')
        chip.wait_for(timeout=20_000)
        assert "awaiting approval since" in chip.inner_text()
        assert member.locator("#task-next").get_attribute("data-next-action") in (
            "waiting_for_session",
            "claim_available",
        )
        assert member.locator("#task-next").inner_text().endswith(".")
        wait_for(lambda: member.locator("#task-events li").count() >= 1, 20, "its events")
        assert member.locator('#task-actions [data-action="enqueue"]').count() == 0

        # Approved elsewhere meanwhile: the board's approve is refused, and says so in words.
        assert admin.post(f"/tasks/{task['id']}/approve", json={}).status_code == 200
        member.locator('#task-actions [data-action="approve"]').click()
        error = member.locator("#task-error")
        wait_for(lambda: error.is_visible(), 20, "the refusal to show")
        text = error.inner_text()
        assert "could not be approved" in text and "invalid_transition" in text and "409" in text
        assert any("Approve" in a for a in answers)
        # The view follows the task: queued now, its run listed.
        wait_for(
            lambda: member.locator('#task-actions [data-action="approve"]').count() == 0,
            20,
            "approve to go",
        )
        member.locator("#task-runs li").first.wait_for(timeout=20_000)
        assert "pending" in member.locator("#task-runs").inner_text()
        member.locator("#task-close").click()

        # Reject asks for the reason and cancels the task.
        _open_task(member, rejected["task"]["id"])
        member.locator('#task-actions [data-action="reject"]').click()
        wait_for(
            lambda: (
                admin.get(f"/tasks/{rejected['task']['id']}").json()["task"]["status"]
                == "cancelled"
            ),
            10,
            "the task to be rejected",
        )
        # The timeline is written from the table's stream, a moment after the write.
        wait_for(
            lambda: (
                "task.rejected"
                in [
                    e["type"]
                    for e in admin.get(f"/tasks/{rejected['task']['id']}/activity").json()["events"]
                ]
            ),
            20,
            "task.rejected on the timeline",
        )
        member.locator("#task-close").click()

        # A ready task: pause (confirmed), then enqueue on a pool.
        ready = world.task(title="Write the notes")["task"]
        _open_task(member, ready["id"])
        member.locator('#task-actions [data-action="pause"]').click()
        wait_for(
            lambda: admin.get(f"/tasks/{ready['id']}").json()["task"]["paused"],
            10,
            "the pause",
        )
        member.locator('#task-actions [data-action="resume"]').wait_for(timeout=10_000)
        member.locator("#enqueue-pool").select_option(pool)
        member.locator('#task-actions [data-action="enqueue"]').click()
        wait_for(
            lambda: admin.get(f"/tasks/{ready['id']}").json()["lease"] is not None,
            10,
            "the enqueue",
        )
        assert any("Enqueue" in a for a in answers) and any("Pause" in a for a in answers)
        member.context.close()


def test_an_escalated_task_is_recovered_from_its_task_view(
    browser: Any, board_url: str, api: Api
) -> None:
    with api.admin() as admin:
        world = _space(api, admin, "recover view")
        task = world.task(title="Flaky export")["task"]
        for reason in ("first", "again"):
            block = {"kind": "needs_input", "reason": reason}
            placed = admin.post(f"/tasks/{task['id']}/blocks", json=block)
            assert placed.status_code == 201, placed.text
            if reason == "first":
                clear = f"/tasks/{task['id']}/blocks/{placed.json()['block']['id']}/clear"
                assert admin.post(clear, json={}).status_code == 200
        assert admin.get(f"/tasks/{task['id']}").json()["task"]["status"] == "needs_attention"
        page = _open(browser, board_url, world.operator_token("member", [world.space]), world.space)
        page.on("dialog", lambda d: d.accept("the input was given"))
        _open_task(page, task["id"])
        assert page.locator("#task-next").get_attribute("data-next-action") == "recovery_required"
        page.locator('#task-actions [data-action="recover"]').click()
        wait_for(
            lambda: admin.get(f"/tasks/{task['id']}").json()["task"]["status"] == "ready",
            10,
            "the recovery",
        )
        page.context.close()
