"""GraphiQL works with no internet: every asset comes from kinflow itself.

The browser is cut off from everything but loopback (playwright aborts any
other request). Strawberry's stock page would stay on "Loading..." (its seven
assets are on unpkg); kinflow's page loads them from ``/graphiql/static``, runs
a query and a live subscription, and leaves a screenshot in
``test-artifacts/graphiql/``.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from tests.browser.harness import ARTIFACTS, Api, shot
from tests.browser.server import serving

if TYPE_CHECKING:
    from playwright.sync_api import Page, Route

pytestmark = pytest.mark.lake

SHOTS = ARTIFACTS.parent / "graphiql"
LOOPBACK = {"127.0.0.1", "localhost", "[::1]", "::1"}
GATE: dict[str, Any] = {
    "name": "graphiql-gate",
    "title": "GraphiQL check",
    "initialStage": "open",
    "stages": [
        {"name": "open",
         "activities": [{"name": "review", "actions": [{"name": "sign", "status": "done"}]}],
         "transitions": [{"name": "to-closed", "to": "closed"}]},
        {"name": "closed"},
    ],
}  # fmt: skip


@pytest.fixture
def open_server(lake_uri: str, database: str) -> Iterator[Api]:
    """The app with no API tokens (a developer's laptop), so GraphiQL needs no headers."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with serving(lake_uri, database, log=SHOTS.parent / "graphiql.server.log") as base:
        yield Api(base)


def offline(page: Page) -> list[str]:
    """Abort every request that leaves the machine; return the list of those tried."""
    tried: list[str] = []

    def gate(route: Route) -> None:
        host = urllib.parse.urlsplit(route.request.url).hostname or ""
        if host in LOOPBACK:
            route.continue_()
        else:
            tried.append(route.request.url)
            route.abort("internetdisconnected")

    page.route("**/*", gate)
    return tried


def run_in_graphiql(page: Page, base: str, document: str, expect: str) -> None:
    page.goto(f"{base}/graphql?q={urllib.parse.quote(document)}")
    page.wait_for_selector("button.graphiql-execute-button")
    page.click("button.graphiql-execute-button")
    page.wait_for_function(
        "text => (document.querySelector('.result-window')?.innerText || '').includes(text)",
        arg=expect,
    )


def test_graphiql_runs_a_query_and_a_subscription_offline(page: Page, open_server: Api) -> None:
    api = open_server
    api.deploy([GATE])
    instance = api.start("graphiql-gate")
    tried = offline(page)

    run_in_graphiql(page, api.base, '{ definitions { name title } }', '"GraphiQL check"')
    assert page.locator("link[href^='/graphiql/static/']").count() == 2

    subscription = (f'subscription {{ instanceChanged(id: "{instance}") '
                    "{ kind instance { currentStage } } }")  # fmt: skip
    run_in_graphiql(page, api.base, subscription, '"snapshot"')
    assert not api.fire(instance, "review", "sign").get("errors")
    page.wait_for_function(
        "() => (document.querySelector('.result-window')?.innerText || '').includes('closed')"
    )
    path = shot(page, "graphiql-offline-subscription", SHOTS)
    print(f"screenshot: {path}")
    assert tried == [], f"GraphiQL tried to reach the internet: {tried}"
