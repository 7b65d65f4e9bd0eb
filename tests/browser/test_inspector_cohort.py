"""Cohort control in the inspector: queued rows, outcomes and outputs, the window, the
failure budget, and a redrive of selected rows.

Drives the page in Debian's Chromium against the real app (see ``conftest.py``);
screenshots land in ``test-artifacts/inspector/``.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING

import pytest

from tests.browser.harness import EXAMPLES, OPERATOR, Api, chip, open_page, shot

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = pytest.mark.lake

COHORT = '.cohort[data-activity="translate"]'


def translation(api: Api, locales: list[str]) -> tuple[str, dict[str, str]]:
    """A translation-cohort (window 2, budget of one failure) of a new article."""
    api.deploy(json.loads((EXAMPLES / "translation-cohort.json").read_text()))
    article = f"article-w-{time.monotonic_ns()}"
    api.put({"_id": article, "_type": "article", "title": "Windows", "locales": locales})
    parent = api.start("translation-cohort", {"subject": {"_id": article, "_type": "article"}})
    return parent, {row["rowKey"]: row["childId"] for row in api.rows(parent)}


def row(key: str, extra: str = "") -> str:
    return f'{COHORT} .tnode[data-row-key="{key}"]{extra}'


def shown_keys(page: Page) -> list[str]:
    keys: list[str] = page.locator(f"{COHORT} .tnode").evaluate_all(
        "nodes => nodes.map(n => n.dataset.rowKey)")
    return keys


def test_queued_rows_outcomes_budget_and_a_redrive_of_the_selection(
        page: Page, server: Api) -> None:
    api = server
    parent, children = translation(api, ["de", "fr", "es"])
    open_page(page, api, OPERATOR, f"focus={parent}")

    # The window holds two; the third row waits, drawn as queued. Live and queued rows can be
    # selected (cancel and abort apply to them), but none is redrivable yet.
    page.wait_for_selector(row("es", '[data-status="queued"]'))
    page.wait_for_selector(chip(page, "translate", "queued", 1))
    page.wait_for_selector(f'{COHORT} .window[data-max-active="2"][data-queued="1"]')
    page.wait_for_selector(f'{COHORT} .budget[data-used="0"][data-count="1"]')
    assert page.locator(row("es", " input.pick")).count() == 1
    assert shown_keys(page) == ["de", "fr", "es"]  # forEach order, not alphabetical
    page.click(f"{COHORT} .pick-all")  # every redrivable row: none yet
    page.wait_for_selector(f'{COHORT} .redrive-selected[disabled]:has-text("(0)")')
    shot(page, "50-cohort-window-queued")

    # fr fails (within the budget of one), de succeeds with its word count: es starts.
    assert not api.fire(children["fr"], "translate", "give-up").get("errors")
    assert not api.fire(children["de"], "translate", "submit", {"words": 400}).get("errors")
    page.wait_for_selector(row("fr", '[data-status="done"][data-outcome="failed"]'))
    page.wait_for_selector(row("de", '[data-outcome="succeeded"]'))
    page.wait_for_selector(row("es", '[data-status="active"]'))
    outputs = page.locator(row("de", " .outputs")).inner_text()
    assert "wordCount: 400" in outputs and 'locale: "de"' in outputs, outputs
    page.wait_for_selector(f'{COHORT} .budget[data-used="1"][data-exceeded="false"]')
    page.wait_for_selector(f'{COHORT} .window[data-queued="0"]')
    assert page.locator(row("de", " input.pick")).count() == 0  # a succeeded row is never offered
    shot(page, "51-cohort-failed-row")

    # Select the failed row and redrive it: one applied, the row starts again as attempt 2.
    page.click(f"{COHORT} .pick-all")  # every redrivable row: fr only
    page.wait_for_selector(f'{COHORT} .redrive-selected:has-text("(1)")')
    assert page.locator(row("fr", " input.pick")).is_checked()
    page.click(f"{COHORT} .clear-picked")
    page.wait_for_selector(f'{COHORT} .redrive-selected[disabled]:has-text("(0)")')
    page.locator(row("fr", " input.pick")).check()
    page.wait_for_selector(f'{COHORT} .redrive-selected:not([disabled]):has-text("(1)")')
    page.click(f"{COHORT} .redrive-selected")
    result = page.wait_for_selector(f'{COHORT} .bulk-result[data-applied="1"]')
    assert result is not None
    assert result.get_attribute("data-matched") == "1"
    assert result.get_attribute("data-skipped") == "0"
    assert result.get_attribute("data-refused") == "0"
    page.wait_for_selector(row("fr", '[data-status="active"][data-attempt="2"]'))
    page.wait_for_selector(row("fr", " .flag.attempt"))
    assert page.locator(row("fr")).count() == 1  # the new attempt replaced the old row
    assert shown_keys(page) == ["de", "fr", "es"]  # the new attempt keeps the row's place
    page.wait_for_selector(f'{COHORT} .budget[data-used="0"]')
    page.wait_for_selector(f'{COHORT} .redrive-selected:has-text("(0)")')
    shot(page, "52-cohort-redriven")

    seen = {r["rowKey"]: r for r in api.rows(parent)}
    assert seen["fr"]["status"] == "ACTIVE" and seen["fr"]["childId"] != children["fr"]


def test_an_exceeded_budget_and_its_skipped_rows(page: Page, server: Api) -> None:
    """Two give-ups cross a budget of one in six rows: two failures, four rows the budget
    stopped (counted as aborted, shown apart)."""
    api = server
    parent, children = translation(api, ["de", "fr", "es", "it", "nl", "pt"])
    assert not api.fire(children["de"], "translate", "give-up").get("errors")
    assert not api.fire(children["fr"], "translate", "give-up").get("errors")
    state = api.data("query($id: ID!) { instance(id: $id) { currentStage } }", {"id": parent})
    assert state["instance"]["currentStage"] == "over-budget"

    open_page(page, api, OPERATOR, f"focus={parent}")
    page.wait_for_selector(f'{COHORT}[data-visit="finished"]')
    budget = page.wait_for_selector(
        f'{COHORT} .budget.exceeded[data-used="2"][data-exceeded="true"]')
    assert budget is not None and budget.inner_text() == "budget 2/1 failed · exceeded"
    stopped = page.wait_for_selector(f'{COHORT} .budget-stopped[data-stopped="4"]')
    assert stopped is not None and stopped.inner_text() == "4 stopped by the budget"
    for key in ("es", "it", "nl", "pt"):  # es aborted while live (abort-rest), the rest skipped
        page.wait_for_selector(row(key, '[data-status="aborted"][data-outcome="aborted"]'))
        reason = page.locator(row(key, " .flag.reason")).inner_text()
        assert reason == "failure-budget-exceeded"
    page.wait_for_selector(chip(page, "translate", "failed", 2))
    page.wait_for_selector(chip(page, "translate", "aborted", 4))
    # The parent left the visit that spawned them: redrive would be refused, so none is offered.
    assert page.locator(f"{COHORT} input.pick").count() == 0
    assert page.locator(f"{COHORT} .redrive-selected").count() == 0
    page.click(chip(page, "translate", "failed", 2))
    page.wait_for_selector(row("es"), state="detached")  # the filter applies on the next frame
    assert shown_keys(page) == ["de", "fr"]
    shot(page, "53-cohort-budget-exceeded")
