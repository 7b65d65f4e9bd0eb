"""Admission in the inspector: a keyed cohort's per-key counts, rows' keys and priorities,
and the Pause/Resume button with the pause's reason.

Drives the page in Debian's Chromium against the real app (see ``conftest.py``);
screenshots land in ``test-artifacts/inspector/``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest

from tests.browser.harness import EXAMPLES, OPERATOR, Api, open_page, shot

if TYPE_CHECKING:
    from playwright.sync_api import Dialog, Page

pytestmark = pytest.mark.lake

COHORT = '.cohort[data-activity="reindex"]'


def keyed_batch() -> list[dict[str, Any]]:
    """paced-reindex's child, and a parent spawning it over its own ``items`` by site."""
    child = next(d for d in json.loads((EXAMPLES / "paced-reindex.json").read_text())
                 if d["name"] == "reindex-article")
    parent = {
        "name": "keyed-batch", "title": "Keyed batch", "initialStage": "running",
        "fields": [{"name": "items", "type": "array", "initialValue": {"type": "input"},
                    "of": [{"name": "site", "type": "string"}, {"name": "p", "type": "number"}]}],
        "stages": [{"name": "running", "activities": [{"name": "reindex", "actions": [{
            "name": "fan-out", "when": "true", "spawn": {
                "forEach": "$fields.items", "definition": {"name": "reindex-article"},
                "with": {"article": "$row._key"}, "maxActive": 3,
                "concurrencyKey": "$row.site", "maxActivePerKey": 1,
                "priority": "$row.p"}},
            {"name": "finish", "status": "done"}]}],
            "transitions": [{"name": "to-done", "to": "done", "when": "false"}]},
            {"name": "done"}]}
    return [child, parent]


def test_per_key_counts_and_pause_resume(page: Page, server: Api) -> None:
    api = server
    api.deploy(keyed_batch())
    items = [{"_key": "a", "site": "x"}, {"_key": "b", "site": "x", "p": 5},
             {"_key": "c", "site": "y"}, {"_key": "d", "site": "y"}]
    parent = api.start("keyed-batch", {"items": items})
    open_page(page, api, OPERATOR, f"focus={parent}")

    page.wait_for_selector(f'{COHORT} .keys[data-max-active-per-key="1"]')
    page.wait_for_selector(f'{COHORT} .key[data-key="x"][data-active="1"][data-queued="1"]')
    page.wait_for_selector(f'{COHORT} .key[data-key="y"][data-active="1"][data-queued="1"]')
    page.wait_for_selector(
        f'{COHORT} .tnode[data-row-key="b"][data-status="active"] .flag.priority')
    assert page.locator(f'{COHORT} .tnode[data-row-key="a"] .flag.key').inner_text() == "x"

    def answer(dialog: Dialog) -> None:
        dialog.accept("search cluster down")

    page.once("dialog", answer)
    page.click(f'{COHORT} button.pause[data-action="pause"]')
    page.wait_for_selector(f'{COHORT} .paused[data-reason="search cluster down"]')
    page.wait_for_selector(f'{COHORT} button.pause[data-action="resume"]')
    shot(page, "70-cohort-paused")
    page.click(f'{COHORT} button.pause[data-action="resume"]')
    page.wait_for_selector(f'{COHORT} button.pause[data-action="pause"]')
    assert page.locator(f"{COHORT} .paused").count() == 0
