"""Helpers shared by the browser tests: the API over HTTP, the page, screenshots.

The fixtures that use them (``database``, ``server``, ``page``) live in this
folder's ``conftest.py``.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.browser.server import ROOT

if TYPE_CHECKING:
    from playwright.sync_api import Page

CHROMIUM = Path(os.environ.get("KINFLOW_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
ARTIFACTS = ROOT / "test-artifacts" / "inspector"
VIEWER, OPERATOR, ADMIN = "view-token-browser", "op-token-for-browser", "admin-token-browser"
TOKENS = f"{VIEWER}=vera:viewer,{OPERATOR}=otto:operator,{ADMIN}=ada:admin"
EXAMPLES = ROOT / "examples" / "definitions"


# ---- the server and its API ------------------------------------------------


class Api:
    """GraphQL over HTTP against the test server, as an admin unless told."""

    def __init__(self, base: str) -> None:
        self.base = base

    def call(self, query: str, variables: dict[str, Any] | None = None,
             token: str = ADMIN) -> dict[str, Any]:  # fmt: skip
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


def shot(page: Page, name: str, folder: Path = ARTIFACTS) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


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
