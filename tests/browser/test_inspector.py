"""The inspector in a real browser: Debian's Chromium driven by Python playwright.

Each test starts the app (with the inspector's routes) in a uvicorn process on
127.0.0.1 over a fresh database of the session's lake, with API tokens
configured, and drives the page as a person would. Screenshots land in
``test-artifacts/inspector/``. The tests skip when playwright or Chromium is
missing; they never download a browser.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml
from pymongo import MongoClient

from tests.browser.server import ROOT, serving

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = pytest.mark.lake

CHROMIUM = Path(os.environ.get("KINFLOW_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
ARTIFACTS = ROOT / "test-artifacts" / "inspector"
TOKENS = "view-token=vera:viewer,op-token=otto:operator,admin-token=ada:admin"
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


# ---- the server and its API ------------------------------------------------


class Api:
    """GraphQL over HTTP against the test server, as an admin unless told."""

    def __init__(self, base: str) -> None:
        self.base = base

    def call(self, query: str, variables: dict[str, Any] | None = None,
             token: str = "admin-token") -> dict[str, Any]:  # fmt: skip
        request = urllib.request.Request(
            f"{self.base}/graphql",
            data=json.dumps({"query": query, "variables": variables or {}}).encode(),
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                body: dict[str, Any] = json.loads(response.read())
        except urllib.error.HTTPError as refused:
            body = json.loads(refused.read())
        return body

    def data(self, query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
        body = self.call(query, variables)
        assert not body.get("errors"), body["errors"]
        result: dict[str, Any] = body["data"]
        return result

    def deploy(self, definitions: list[dict[str, Any]]) -> None:
        self.data("mutation($d: [JSON!]!) { deployDefinitions(definitions: $d) "
                  "{ definitions { name } } }", {"d": definitions})  # fmt: skip

    def put(self, document: dict[str, Any]) -> None:
        self.data("mutation($d: JSON!) { putDocument(document: $d) }", {"d": document})

    def start(self, definition: str, fields: dict[str, Any] | None = None) -> str:
        out = self.data(
            "mutation($def: String!, $f: JSON) { startInstance(definition: $def, fields: $f) "
            "{ instance { id } } }", {"def": definition, "f": fields},
        )  # fmt: skip
        instance_id: str = out["startInstance"]["instance"]["id"]
        return instance_id

    def fire(self, instance_id: str, activity: str, action: str,
             params: dict[str, Any] | None = None) -> dict[str, Any]:  # fmt: skip
        return self.call(
            "mutation($id: ID!, $a: String!, $x: String!, $p: JSON) { fireAction(instanceId: $id, "
            "activity: $a, action: $x, params: $p) { instance { status currentStage } } }",
            {"id": instance_id, "a": activity, "x": action, "p": params},
        )

    def rows(self, parent_id: str) -> list[dict[str, Any]]:
        out = self.data("query($id: ID!) { instance(id: $id) { subworkflows(currentOnly: true) "
                        "{ rowKey activity status childId } } }", {"id": parent_id})  # fmt: skip
        rows: list[dict[str, Any]] = out["instance"]["subworkflows"]
        return rows


def fire_or_skip_without_spawn(api: Api, instance_id: str, activity: str, action: str) -> None:
    """Fire an action whose cascade spawns; skip (not fail) on an engine without subworkflows."""
    body = api.fire(instance_id, activity, action)
    errors = body.get("errors") or []
    if errors and errors[0].get("extensions", {}).get("code") == "spawn-not-supported":
        pytest.skip("this engine cannot spawn child workflows yet (spawn-not-supported)")
    assert not errors, errors


@pytest.fixture
def database(lake_uri: str) -> Iterator[str]:
    name = f"insp_{uuid.uuid4().hex[:12]}"
    yield name
    client: MongoClient[dict[str, Any]] = MongoClient(lake_uri)
    client.drop_database(name)
    client.close()


@pytest.fixture
def server(lake_uri: str, database: str, request: pytest.FixtureRequest) -> Iterator[Api]:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    log = ARTIFACTS / f"{request.node.name}.server.log"
    with serving(lake_uri, database, tokens=TOKENS, log=log) as base:
        yield Api(base)


# ---- the browser ------------------------------------------------------------


@pytest.fixture
def page(tmp_path: Path) -> Iterator[Page]:
    """A fresh headless Chromium profile and one page; fails the test on a page error."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("Python playwright is not installed (pip install playwright)")
    if not CHROMIUM.exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    page_errors: list[str] = []
    with sync_playwright() as driver:
        context = driver.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"), executable_path=str(CHROMIUM), headless=True,
            args=CHROMIUM_ARGS, viewport={"width": 1400, "height": 900},
        )  # fmt: skip
        try:
            opened = context.pages[0] if context.pages else context.new_page()
            opened.set_default_timeout(30_000)
            opened.on("pageerror", lambda error: page_errors.append(str(error)))
            yield opened
        finally:
            context.close()
    assert not page_errors, page_errors


def shot(page: Page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def enter_token(page: Page, token: str) -> None:
    page.wait_for_selector("#tokenDialog:not([hidden])")
    page.fill("#tokenInput", token)
    page.click("#tokenForm button[type=submit]")
    page.wait_for_selector("#tokenDialog", state="hidden")


def open_page(page: Page, api: Api, token: str, hash_: str = "") -> None:
    page.goto(f"{api.base}/inspector")
    enter_token(page, token)
    if hash_:
        page.evaluate("h => { window.location.hash = h; }", hash_)
    page.wait_for_selector('#conn[data-state="open"]')


def mark_no_reload(page: Page) -> None:
    page.evaluate("() => { window.__sameDocument = true; }")


def assert_not_reloaded(page: Page) -> None:
    assert page.evaluate("() => window.__sameDocument === true"), "the page was reloaded"


def chip(page: Page, activity: str, status: str, value: int) -> str:
    return (f'.cohort[data-activity="{activity}"] .chip[data-count="{status}"]'
            f'[data-value="{value}"]')  # fmt: skip


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
    enter_token(page, "view-token")
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
    enter_token(page, "op-token")
    assert page.evaluate("() => sessionStorage.getItem('kinflow.inspector.token')") == "op-token"
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

    open_page(page, api, "op-token", f"focus={review}")
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

    open_page(page, api, "view-token", f"focus={release}")
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

    open_page(page, api, "op-token", f"focus={parent}")
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
