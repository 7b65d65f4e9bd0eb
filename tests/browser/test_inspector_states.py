"""The inspector's states: a family still loading is not an empty cohort, an empty cohort
says so, the instance list is newest first with or without children, and no status
badge is clipped at common desktop widths (1280 to 1920 px).

Drives Debian's Chromium against the real app (see ``conftest.py``); screenshots land
in ``test-artifacts/inspector/``.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

import pytest

from tests.browser.harness import EXAMPLES, OPERATOR, VIEWER, Api, open_page, shot
from tests.engine.cohort_defs import child, parent

if TYPE_CHECKING:
    from playwright.sync_api import Page, Route

pytestmark = pytest.mark.lake

COHORT = '.cohort[data-activity="translate"]'
WIDTHS = (1280, 1400, 1920)

# Every visible badge whose text overflows it, or whose box leaves its row, its panel or a
# scrolled box around it.
CLIPPED = """() => {
  const out = [];
  const inside = (a, b) => a.left >= b.left - 0.5 && a.right <= b.right + 0.5
    && a.top >= b.top - 0.5 && a.bottom <= b.bottom + 0.5;
  for (const badge of document.querySelectorAll(".badge")) {
    if (!badge.offsetParent) continue;
    const box = badge.getBoundingClientRect();
    if (badge.scrollWidth > badge.clientWidth + 0.5) {
      out.push(`${badge.textContent} overflows its own pill`);  // squeezed by a long name
    }
    const boxes = [];
    const row = badge.closest(".result, .tline, .tnode, .facts");
    if (row) boxes.push(["row", row]);
    for (let up = badge.parentElement; up && up !== document.body; up = up.parentElement) {
      const style = getComputedStyle(up);
      if (style.overflowX !== "visible" || up.parentElement === document.querySelector("main")) {
        boxes.push(["box", up]);
      }
    }
    for (const [kind, holder] of boxes) {
      if (!inside(box, holder.getBoundingClientRect())) {
        out.push(`${badge.textContent} outside its ${kind} ${holder.className || holder.tagName}`);
      }
    }
  }
  return out;
}"""


def held_cohort_reads(page: Page) -> list[Route]:
    """Hold every ``Cohort`` query the page sends until the test lets it go."""
    held: list[Route] = []

    def hold(route: Route) -> None:
        if "query Cohort" in (route.request.post_data or ""):
            held.append(route)
        else:
            route.continue_()

    page.route("**/graphql", hold)
    return held


def test_a_family_loading_is_not_an_empty_cohort(page: Page, server: Api) -> None:
    api = server
    api.deploy([parent(caller_fired=True, extra_actions=[{"name": "close", "status": "done"}]),
                child()])
    waiting = api.start("p", {"items": [{"name": "a"}, {"name": "b"}]})
    assert not api.fire(waiting, "go", "go").get("errors")  # in review: nothing spawned yet

    held = held_cohort_reads(page)
    open_page(page, api, OPERATOR, f"focus={waiting}")
    loading = page.wait_for_selector(f'{COHORT}[data-state="loading"]')
    assert loading is not None
    text = loading.inner_text()
    assert "loading" in text and "total" not in text and "empty" not in text, text
    assert page.locator(f"{COHORT} .chip").count() == 0  # no counts until the rows are in
    shot(page, "60-cohort-loading")
    for _ in range(200):  # the held request reaches this thread through playwright's events
        if held:
            break
        page.wait_for_timeout(50)
    assert held, "the cohort's rows were not read over HTTP"
    for route in held:
        route.continue_()
    page.unroute("**/graphql")

    empty = page.wait_for_selector(f'{COHORT}[data-state="empty"]')
    assert empty is not None
    assert "no child spawned in this visit yet" in empty.inner_text()
    page.wait_for_selector(f'{COHORT} .total:has-text("0 total")')
    shot(page, "61-cohort-empty")

    assert not api.fire(waiting, "translate", "fan-out").get("errors")
    page.wait_for_selector(f'{COHORT}[data-state="rows"][data-total="2"]')
    assert page.locator(f"{COHORT} .tnode").count() == 2


def started(api: Api) -> list[dict[str, Any]]:
    found = api.data("{ instances(first: 100, newestFirst: true) { nodes { id startedAt } } }")
    nodes: list[dict[str, Any]] = found["instances"]["nodes"]
    return nodes


def test_newest_first_with_children_and_badges_inside_their_boxes(
        page: Page, server: Api) -> None:
    api = server
    api.deploy(json.loads((EXAMPLES / "translation-cohort.json").read_text()))
    roots = []
    for title in ("Older", "Newer"):
        article = f"article-{title}-{time.monotonic_ns()}"
        api.put({"_id": article, "_type": "article", "title": title, "locales": ["de", "fr"]})
        roots.append(api.start("translation-cohort",
                               {"subject": {"_id": article, "_type": "article"}}))
        time.sleep(0.01)  # the next family starts in a later millisecond
    older = roots[0]
    children = {row["rowKey"]: row["childId"] for row in api.rows(older)}
    assert not api.fire(children["de"], "translate", "submit", {"words": 300}).get("errors")

    open_page(page, api, VIEWER, f"focus={older}")
    page.click("#searchForm button[type=submit]")
    page.wait_for_selector("#searchInfo:has-text('2 of 2 instances')")
    page.uncheck("#rootsOnly")
    page.wait_for_selector("#searchInfo:has-text('6 of 6 instances')")
    shown = page.locator("#results .result").evaluate_all("nodes => nodes.map(n => n.dataset.id)")
    expected = started(api)
    assert shown == [n["id"] for n in expected]
    stamps = [(n["startedAt"], n["id"]) for n in expected]
    assert stamps == sorted(stamps, reverse=True)
    assert shown[0] != older and shown.index(roots[1]) < shown.index(older)

    # A family started now arrives through the live list: in its place by start time.
    article = f"article-Newest-{time.monotonic_ns()}"
    api.put({"_id": article, "_type": "article", "title": "Newest", "locales": ["de", "fr"]})
    newest = api.start("translation-cohort", {"subject": {"_id": article, "_type": "article"}})
    page.wait_for_selector("#searchInfo:has-text('9 of 9 instances')")
    shown = page.locator("#results .result").evaluate_all("nodes => nodes.map(n => n.dataset.id)")
    assert shown == [n["id"] for n in started(api)]
    assert shown.index(newest) < shown.index(roots[1])
    page.wait_for_selector('#results .result .badge[data-status="completed"]')
    page.wait_for_selector(f'{COHORT} .tnode[data-outcome="succeeded"]')

    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        page.wait_for_timeout(100)  # one layout after the resize
        shot(page, f"62-badges-{width}")
        assert page.evaluate(CLIPPED) == [], width
