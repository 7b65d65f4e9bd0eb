"""The inspector in a real browser: Debian's Chromium driven by Python playwright.

Each test starts the app (with the inspector's routes) in a uvicorn process on
127.0.0.1 over a fresh database of the session's lake, with API tokens
configured, and drives the page as a person would. Screenshots land in
``test-artifacts/inspector/``. The tests skip when playwright or Chromium is
missing; they never download a browser.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest
import yaml

from tests.browser.harness import (
    OPERATOR,
    VIEWER,
    Api,
    assert_not_reloaded,
    chip,
    enter_token,
    fire_or_skip_without_spawn,
    mark_no_reload,
    open_page,
    shot,
)
from tests.browser.server import ROOT

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = pytest.mark.lake

EXAMPLES = ROOT / "examples" / "definitions"

CHECK_DEFINITION: dict[str, Any] = {
    "name": "inspector-check",
    "title": "Inspector check",
    "initialStage": "open",
    "stages": [
        {
            "name": "open",
            "activities": [{"name": "review", "actions": [
                {"name": "sign", "status": "done",
                 "params": [{"type": "string", "name": "comment", "required": True}]},
                {"name": "reject", "status": "failed"},
            ]}],
            "transitions": [
                {"name": "to-rejected", "to": "rejected", "when": "$anyActivityFailed"},
                {"name": "to-closed", "to": "closed"},
            ],
        },
        {"name": "closed"},
        {"name": "rejected"},
    ],
}  # fmt: skip

BULK_DEFINITIONS: list[dict[str, Any]] = [
    {
        "name": "bulk-item", "title": "One item", "lifecycle": "child", "initialStage": "open",
        "fields": [{"name": "item", "type": "string", "required": True,
                    "initialValue": {"type": "input"}}],
        "stages": [
            {"name": "open",
             "activities": [{"name": "work", "actions": [{"name": "submit", "status": "done"}]}],
             "transitions": [{"name": "to-done", "to": "done"}]},
            {"name": "done"},
        ],
    },
    {
        "name": "bulk", "title": "A thousand items", "initialStage": "working",
        "fields": [{"name": "subject", "type": "subject", "required": True,
                    "initialValue": {"type": "input"}}],
        "stages": [
            {"name": "working",
             "activities": [{"name": "items", "actions": [
                 {"name": "fan-out", "when": "true",
                  "spawn": {"forEach": "*[_id == $fields.subject._id][0].items",
                            "definition": {"name": "bulk-item"}, "with": {"item": "$row"}}},
                 {"name": "all-done", "status": "done",
                  "when": "count($subworkflows[activity == 'items' && current "
                          "&& status == 'active']) == 0"},
             ]}],
             "transitions": [{"name": "to-done", "to": "done"}]},
            {"name": "done"},
        ],
    },
]  # fmt: skip


# ---- the tests --------------------------------------------------------------


def test_token_search_actions_errors_and_live_instance(page: Page, server: Api) -> None:
    api = server
    api.deploy([CHECK_DEFINITION])
    first = api.start("inspector-check")
    second = api.start("inspector-check")

    # Without a token the page asks for one and shows the refusal's code.
    page.goto(f"{api.base}/inspector")
    page.wait_for_selector("#tokenDialog:not([hidden])")
    page.wait_for_selector('#errors .error[data-code="unauthenticated"]')
    shot(page, "01-token-prompt")

    # A viewer can search and look, but firing is refused with `forbidden`.
    enter_token(page, VIEWER)
    page.select_option("#defSelect", "inspector-check")
    page.select_option("#statusSelect", "ACTIVE")
    page.click("#searchForm button[type=submit]")
    page.wait_for_selector("#searchInfo:has-text('2 of 2 instances')")
    assert page.locator("#results .result").count() == 2
    page.click(f'#results .result[data-id="{first}"]')
    page.wait_for_selector(f'.detail[data-id="{first}"][data-stage="open"]')
    page.click('button.action[data-action="review/sign"]')
    page.fill('form.params[data-action="review/sign"] input[name="param-comment"]', "early")
    page.click('form.params[data-action="review/sign"] button[type=submit]')
    page.wait_for_selector('#errors .error[data-code="forbidden"]')
    shot(page, "02-forbidden-for-a-viewer")

    # A new token replaces the old one for this tab; the view comes back with it.
    page.click("#tokenButton")
    enter_token(page, OPERATOR)
    assert page.evaluate("() => sessionStorage.getItem('kinflow.inspector.token')") == OPERATOR
    page.wait_for_selector(f'.detail[data-id="{first}"][data-stage="open"]')
    page.wait_for_selector('#conn[data-state="open"]')
    mark_no_reload(page)

    # The action's form sends its params; the instance closes and the list follows live.
    page.click('button.action[data-action="review/sign"]')
    page.fill('form.params[data-action="review/sign"] input[name="param-comment"]', "looks good")
    page.click('form.params[data-action="review/sign"] button[type=submit]')
    page.wait_for_selector(
        f'.detail[data-id="{first}"][data-status="completed"][data-stage="closed"]'
    )
    page.wait_for_selector(f'#results .result[data-id="{first}"][data-status="completed"]')
    page.wait_for_selector(f'.tline.focus[data-id="{first}"][data-status="completed"]')
    shot(page, "03-signed-with-params")

    # A change made elsewhere shows up without a reload.
    page.click(f'#results .result[data-id="{second}"]')
    page.wait_for_selector(f'.detail[data-id="{second}"][data-stage="open"]')
    assert not api.fire(second, "review", "reject", None).get("errors")
    page.wait_for_selector(f'.detail[data-id="{second}"][data-stage="rejected"]')
    page.wait_for_selector(f'.tline.focus[data-id="{second}"][data-status="completed"]')
    assert_not_reloaded(page)

    # An unknown instance is an error with its code.
    page.fill("#openId", "instance.doesnotexist")
    page.press("#openId", "Enter")
    page.wait_for_selector('#errors .error[data-code="instance-not-found"]')
    shot(page, "04-live-change-and-not-found")

    # The token outlives a reload of the tab: no prompt, the view is restored.
    page.evaluate("h => { window.location.hash = h; }", f"focus={second}")
    page.reload()
    page.wait_for_selector(f'.detail[data-id="{second}"][data-stage="rejected"]')
    assert page.locator("#tokenDialog").is_hidden()


def test_fires_submit_on_a_child_and_sees_the_cohort_change_live(page: Page, server: Api) -> None:
    """The issue's check on the canonical example: article-review and its translations."""
    api = server
    api.deploy(json.loads((EXAMPLES / "article-review.json").read_text()))
    api.put({"_id": "article-1", "_type": "article", "title": "Hello",
             "locales": ["de", "fr", "ja"]})  # fmt: skip
    review = api.start("article-review", {"subject": {"_id": "article-1", "_type": "article"}})
    fire_or_skip_without_spawn(api, review, "write", "submit")
    children = {row["rowKey"]: row["childId"] for row in api.rows(review)}
    assert sorted(children) == ["de", "fr", "ja"]

    open_page(page, api, OPERATOR, f"focus={review}")
    cohort = '.cohort[data-activity="translate"]'
    page.wait_for_selector(f'{cohort}[data-total="3"]')
    page.wait_for_selector(chip(page, "translate", "active", 3))
    page.wait_for_selector(chip(page, "translate", "done", 0))
    assert page.locator(f"{cohort} .tnode").count() == 3
    shot(page, "10-cohort-of-three")
    mark_no_reload(page)

    # Select the `de` child in the tree and fire its `submit` from the page.
    page.click(f'{cohort} .tnode[data-row-key="de"]')
    page.wait_for_selector(f'.detail[data-id="{children["de"]}"][data-stage="translating"]')
    page.click('button.action.enabled[data-action="translate/submit"]')
    page.wait_for_selector(f'{cohort} .tnode[data-row-key="de"][data-status="done"]')
    page.wait_for_selector(chip(page, "translate", "done", 1))
    page.wait_for_selector(chip(page, "translate", "active", 2))
    page.wait_for_selector(f'.detail[data-id="{children["de"]}"][data-status="completed"]')
    assert page.locator(f'{cohort} .tnode[data-row-key="fr"][data-status="active"]').count() == 1
    assert_not_reloaded(page)
    shot(page, "11-child-submitted")

    # The other two finish elsewhere; the cohort settles and the parent can be approved.
    for key in ("fr", "ja"):
        assert not api.fire(children[key], "translate", "submit").get("errors")
    page.wait_for_selector(f'{cohort}[data-settled="true"]')
    page.wait_for_selector(chip(page, "translate", "done", 3))
    page.click(f'.tline.focus[data-id="{review}"]')
    page.wait_for_selector(f'.detail[data-id="{review}"]')
    page.click('button.action.enabled[data-action="approve/approve"]')
    page.wait_for_selector(f'.tline.focus[data-id="{review}"][data-status="completed"]')
    page.wait_for_selector(f'.detail[data-id="{review}"][data-stage="published"]')
    assert_not_reloaded(page)
    shot(page, "12-review-published")


def test_family_tree_shows_parent_children_and_grandchildren(page: Page, server: Api) -> None:
    """The three-level example: a release, its reviews, their translations."""
    api = server
    api.deploy(yaml.safe_load((EXAMPLES / "release.yaml").read_text())
               + json.loads((EXAMPLES / "article-review.json").read_text()))  # fmt: skip
    api.put({"_id": "release-1", "_type": "release", "title": "Spring"})
    for n, locales in ((1, ["de", "fr"]), (2, ["ja"])):
        api.put({"_id": f"art-{n}", "_type": "article", "release": "release-1",
                 "locales": locales})  # fmt: skip
    body = api.call('mutation { startInstance(definition: "release", fields: {subject: '
                    '{_id: "release-1", _type: "release"}}) { instance { id } } }')  # fmt: skip
    errors = body.get("errors") or []
    if errors and errors[0].get("extensions", {}).get("code") == "spawn-not-supported":
        pytest.skip("this engine cannot spawn child workflows yet (spawn-not-supported)")
    assert not errors, errors
    release = body["data"]["startInstance"]["instance"]["id"]
    reviews = {row["rowKey"]: row["childId"] for row in api.rows(release)}
    assert sorted(reviews) == ["art-1", "art-2"]
    translations = {row["rowKey"]: row["childId"] for row in api.rows(reviews["art-1"])}

    open_page(page, api, VIEWER, f"focus={release}")
    cohort = '.cohort[data-activity="reviews"]'
    page.wait_for_selector(f'{cohort}[data-total="2"]')
    page.click(f'{cohort} .tnode[data-row-key="art-1"] button.toggle')
    page.wait_for_selector(f'{cohort} .tnode.depth-2[data-row-key="de"][data-status="active"]')
    page.wait_for_selector(f'{cohort} .tnode.depth-2[data-row-key="fr"]')
    # A grandchild changes elsewhere: the expanded branch follows live.
    assert not api.fire(translations["de"], "translate", "submit").get("errors")
    page.wait_for_selector(f'{cohort} .tnode.depth-2[data-row-key="de"][data-status="done"]')
    shot(page, "19-grandchildren-expanded")
    # Opening a grandchild's own tree shows its ancestors, root first.
    page.dblclick(f'{cohort} .tnode.depth-2[data-row-key="fr"]')
    page.wait_for_selector(f'.lineage .tline[data-id="{release}"]')
    page.wait_for_selector(f'.lineage .tline[data-id="{reviews["art-1"]}"]')
    page.wait_for_selector(f'.lineage .tline.focus[data-id="{translations["fr"]}"]')
    shot(page, "20-grandchild-lineage")


def test_a_cohort_of_a_thousand_children_renders_virtualised(page: Page, server: Api) -> None:
    api = server
    api.deploy(BULK_DEFINITIONS)
    api.put({"_id": "batch-1", "_type": "batch", "items": [f"item-{i:04d}" for i in range(1000)]})
    body = api.call('mutation { startInstance(definition: "bulk", fields: {subject: '
                    '{_id: "batch-1", _type: "batch"}}) { instance { id } } }')  # fmt: skip
    errors = body.get("errors") or []
    if errors and errors[0].get("extensions", {}).get("code") == "spawn-not-supported":
        pytest.skip("this engine cannot spawn child workflows yet (spawn-not-supported)")
    assert not errors, errors
    parent = body["data"]["startInstance"]["instance"]["id"]

    open_page(page, api, OPERATOR, f"focus={parent}")
    cohort = '.cohort[data-activity="items"]'
    page.wait_for_selector(f'{cohort}[data-total="1000"]')
    page.wait_for_selector(chip(page, "items", "active", 1000))
    rendered = page.locator(f"{cohort} .tnode").count()
    assert 0 < rendered <= 60, f"{rendered} rows in the DOM for a cohort of 1,000"
    mark_no_reload(page)

    # Scroll to the end: the last rows are drawn, still only a window of them.
    page.eval_on_selector(f"{cohort} .vlist", "list => { list.scrollTop = list.scrollHeight; }")
    page.wait_for_selector(f'{cohort} .tnode[data-row-key="item-0999"]')
    assert page.locator(f"{cohort} .tnode").count() <= 60
    page.click(f'{cohort} .tnode[data-row-key="item-0999"]')
    page.click('button.action.enabled[data-action="work/submit"]')
    page.wait_for_selector(f'{cohort} .tnode[data-row-key="item-0999"][data-status="done"]')
    page.wait_for_selector(chip(page, "items", "done", 1))
    page.wait_for_selector(chip(page, "items", "active", 999))

    # The status chips filter the rows.
    page.click(chip(page, "items", "done", 1))
    page.wait_for_selector(f'{cohort} .vlist[data-total="1"][data-rendered="1"]')
    assert page.locator(f"{cohort} .tnode").count() == 1
    assert_not_reloaded(page)
    shot(page, "30-thousand-children-filtered")
