"""Cancellation in the inspector: cancelling an instance (CANCELLING, then CANCELLED once its
children's cleanup ran) and the cohort verbs on a selection of rows (fire an action,
cancel, abort), each showing its BulkResult.

Drives the page in Debian's Chromium against the real app (see ``conftest.py``);
screenshots land in ``test-artifacts/inspector/``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest

from tests.browser.harness import (
    EXAMPLES,
    OPERATOR,
    VIEWER,
    Api,
    chip,
    enter_token,
    open_page,
    shot,
)
from tests.engine.bulk_defs import cohort_parent, nudgeable, records

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = pytest.mark.lake

HOLDS = '.cohort[data-activity="holds"]'
TASKS = '.cohort[data-activity="translate"]'


def booking(api: Api, *seats: str) -> tuple[str, dict[str, str]]:
    """An event-booking holding one seat-hold child per seat (its cancel stage releases it)."""
    api.deploy(json.loads((EXAMPLES / "seat-booking.json").read_text()))
    booking_id = api.start("event-booking", {"seats": [{"seat": s} for s in seats]})
    return booking_id, {row["rowKey"]: row["childId"] for row in api.rows(booking_id)}


def release(api: Api, hold_id: str) -> None:
    """Complete a cancelled hold's release-seat effect, as its handler would."""
    found = api.data("query($i: ID!) { instance(id: $i) { pendingEffects { key name } } }",
                     {"i": hold_id})["instance"]["pendingEffects"]  # fmt: skip
    assert [e["name"] for e in found] == ["release-seat"], found
    api.data("mutation($i: ID!, $k: String!) { completeEffect(instanceId: $i, effectKey: $k, "
             "status: DONE) { changed } }", {"i": hold_id, "k": found[0]["key"]})  # fmt: skip


def row(cohort: str, key: str, extra: str = "") -> str:
    return f'{cohort} .tnode[data-row-key="{key}"]{extra}'


def pick(page: Page, cohort: str, *keys: str) -> None:
    for key in keys:
        page.locator(row(cohort, key, " input.pick")).check()


def fire_on_selection(page: Page, cohort: str, count: int, action: str) -> None:
    """Open "Fire action on selected (count)", choose the child action, confirm."""
    page.click(f'{cohort} .fire-selected:has-text("({count})")')
    page.select_option(f'{cohort} form.verb-form[data-verb="fire"] select[name="action"]', action)
    page.click(f"{cohort} form.verb-form button.confirm")


def bulk_result(page: Page, cohort: str, verb: str, **counts: int) -> None:
    wanted = "".join(f'[data-{name}="{n}"]' for name, n in counts.items())
    page.wait_for_selector(f'{cohort} .bulk-result[data-verb="{verb}"]{wanted}')


def child_fields(api: Api, child_id: str) -> dict[str, Any]:
    out = api.data("query($i: ID!) { instance(id: $i) { status fields } }", {"i": child_id})
    fields: dict[str, Any] = out["instance"]["fields"]
    return {"status": out["instance"]["status"], **fields}


def test_cancel_a_live_family_and_see_it_cancelling_then_cancelled(
        page: Page, server: Api) -> None:
    api = server
    booking_id, holds = booking(api, "A1", "A2")

    # A viewer sees the button, but the server refuses the cancellation: nothing changes.
    open_page(page, api, VIEWER, f"focus={booking_id}")
    page.wait_for_selector(f'.detail[data-id="{booking_id}"][data-status="active"]')
    page.wait_for_selector(row(HOLDS, "A2", '[data-status="active"][data-cancelling="false"]'))
    page.click(".detail .cancel-instance")
    page.click(".detail form.cancel-confirm button.confirm-cancel")
    page.wait_for_selector('.error[data-code="forbidden"]')
    page.wait_for_selector(".detail .cancel-instance")
    assert page.locator('.detail[data-status="active"]').count() == 1

    # An operator confirms it, with a reason: the booking is CANCELLING, its rows cancelling.
    page.click("#tokenButton")
    enter_token(page, OPERATOR)
    page.wait_for_selector(f'.detail[data-id="{booking_id}"][data-status="active"]')
    page.click(".detail .cancel-instance")
    page.click(".detail form.cancel-confirm button.keep")  # changed our mind once
    assert page.locator(".detail form.cancel-confirm").count() == 0
    page.click(".detail .cancel-instance")
    page.fill('.detail form.cancel-confirm input[name="reason"]', "event called off")
    page.click(".detail form.cancel-confirm button.confirm-cancel")
    page.wait_for_selector('.detail[data-status="cancelling"] .cancel-state')
    assert "event called off" in page.locator(".detail .cancel-state").inner_text()
    assert page.locator(".detail .cancel-instance").count() == 0  # only while ACTIVE
    page.wait_for_selector('.tline.focus[data-status="cancelling"] .badge.status-cancelling')
    for seat in holds:
        page.wait_for_selector(row(HOLDS, seat, '[data-status="active"][data-cancelling="true"]'
                                   " .badge.status-cancelling"))  # fmt: skip
    page.wait_for_selector(chip(page, "holds", "active", 2))
    shot(page, "60-family-cancelling")

    # Each hold's cleanup ends: its row turns cancelled; the booking only after the last one.
    release(api, holds["A1"])
    page.wait_for_selector(row(HOLDS, "A1", '[data-status="cancelled"][data-outcome="cancelled"]'))
    page.wait_for_selector(chip(page, "holds", "cancelled", 1))
    assert page.locator('.tline.focus[data-status="cancelling"]').count() == 1
    assert page.locator(row(HOLDS, "A2", '[data-cancelling="true"]')).count() == 1
    release(api, holds["A2"])
    page.wait_for_selector(row(HOLDS, "A2", '[data-status="cancelled"]'))
    page.wait_for_selector(chip(page, "holds", "cancelled", 2))
    page.wait_for_selector('.tline.focus[data-status="cancelled"] .badge.status-cancelled')
    page.wait_for_selector('.detail[data-status="cancelled"] .cancel-state')
    shot(page, "61-family-cancelled")
    final = api.data("query($i: ID!) { instance(id: $i) { status cancelReason } }",
                     {"i": booking_id})["instance"]  # fmt: skip
    assert final == {"status": "CANCELLED", "cancelReason": "event called off"}


def test_fire_an_action_on_selected_rows_changes_exactly_those(
        page: Page, server: Api) -> None:
    api = server
    api.deploy([cohort_parent(), nudgeable()])
    parent = api.start("p", records("a1", "locked", "a2", "a3"))
    assert not api.fire(parent, "go", "go").get("errors")
    children = {r["rowKey"]: r["childId"] for r in api.rows(parent)}

    open_page(page, api, OPERATOR, f"focus={parent}")
    for key in children:
        page.wait_for_selector(row(TASKS, key, '[data-status="active"]'))
    page.wait_for_selector(f'{TASKS} .fire-selected[disabled]:has-text("(0)")')

    # finish on a1 and a3: those two turn done, the other two stay active.
    pick(page, TASKS, "a1", "a3")
    fire_on_selection(page, TASKS, 2, "task/finish")
    bulk_result(page, TASKS, "fire", matched=2, applied=2, skipped=0, refused=0)
    for key in ("a1", "a3"):
        page.wait_for_selector(row(TASKS, key, '[data-status="done"][data-outcome="succeeded"]'))
    assert "nudges: 0" in page.locator(row(TASKS, "a1", " .outputs")).inner_text()
    for key in ("locked", "a2"):
        assert page.locator(row(TASKS, key, '[data-status="active"]')).count() == 1
    assert page.locator(f"{TASKS} form.verb-form").count() == 0
    page.wait_for_selector(chip(page, "translate", "done", 2))
    shot(page, "62-cohort-fired-on-selection")

    # nudge on a2 and locked: a2 takes it, locked's filter refuses it, listed per row.
    pick(page, TASKS, "a2", "locked")
    fire_on_selection(page, TASKS, 2, "task/nudge")
    bulk_result(page, TASKS, "fire", matched=2, applied=1, refused=1)
    page.wait_for_selector(f'{TASKS} .refusals li[data-row-key="locked"]'
                           '[data-code="action-disabled"]')  # fmt: skip
    shot(page, "63-cohort-fire-refusal")
    assert child_fields(api, children["a2"])["nudges"] == 1
    assert child_fields(api, children["locked"])["nudges"] == 0
    assert {k: r["status"] for k, r in ((r["rowKey"], r) for r in api.rows(parent))} == {
        "a1": "DONE", "locked": "ACTIVE", "a2": "ACTIVE", "a3": "DONE"}


def test_cancel_and_abort_a_selection(page: Page, server: Api) -> None:
    api = server
    booking_id, holds = booking(api, "B1", "B2", "B3")
    open_page(page, api, OPERATOR, f"focus={booking_id}")
    for seat in holds:
        page.wait_for_selector(row(HOLDS, seat, '[data-status="active"]'))

    # Cancel B1: asked for confirmation, then its row is cancelling; the rest untouched.
    pick(page, HOLDS, "B1")
    page.click(f'{HOLDS} .cancel-selected:has-text("(1)")')
    page.fill(f'{HOLDS} form.verb-form[data-verb="cancel"] input[name="reason"]', "seat moved")
    page.click(f"{HOLDS} form.verb-form button.confirm")
    bulk_result(page, HOLDS, "cancel", matched=1, applied=1)
    page.wait_for_selector(row(HOLDS, "B1", '[data-cancelling="true"]'))
    # A cancelling row is not asked again, but it can still be aborted.
    pick(page, HOLDS, "B1")
    page.wait_for_selector(f'{HOLDS} .cancel-selected[disabled]:has-text("(0)")')
    page.wait_for_selector(f'{HOLDS} .abort-selected:has-text("(1)")')
    page.click(f"{HOLDS} .clear-picked")

    # Abort B2, confirmed with a reason: aborted at once, no cleanup.
    pick(page, HOLDS, "B2")
    page.click(f'{HOLDS} .abort-selected:has-text("(1)")')
    page.fill(f'{HOLDS} form.verb-form[data-verb="abort"] input[name="reason"]', "no-show")
    page.click(f"{HOLDS} form.verb-form button.confirm")
    bulk_result(page, HOLDS, "abort", matched=1, applied=1)
    page.wait_for_selector(row(HOLDS, "B2", '[data-status="aborted"][data-outcome="aborted"]'))
    assert page.locator(row(HOLDS, "B2", " .flag.reason")).inner_text() == "cohort-aborted"

    release(api, holds["B1"])
    page.wait_for_selector(row(HOLDS, "B1", '[data-status="cancelled"][data-outcome="cancelled"]'))
    page.wait_for_selector(chip(page, "holds", "cancelled", 1))
    page.wait_for_selector(chip(page, "holds", "aborted", 1))
    page.wait_for_selector(chip(page, "holds", "active", 1))
    b3 = page.locator(row(HOLDS, "B3", '[data-status="active"][data-cancelling="false"]'))
    assert b3.count() == 1
    assert page.locator('.tline.focus[data-status="active"]').count() == 1
    shot(page, "64-cohort-cancel-abort-selection")
    statuses = {holds[k]: child_fields(api, holds[k])["status"] for k in holds}
    assert statuses == {holds["B1"]: "CANCELLED", holds["B2"]: "ABORTED", holds["B3"]: "ACTIVE"}
    # The reasons typed in the forms reached the children.
    b1 = api.data("query($i: ID!) { instance(id: $i) { cancelReason } }", {"i": holds["B1"]})
    assert b1["instance"]["cancelReason"] == "seat moved"
    b2 = api.data("query($i: ID!) { instance(id: $i) { history { type data } } }",
                  {"i": holds["B2"]})["instance"]["history"]  # fmt: skip
    assert "no-show" in json.dumps(b2)
