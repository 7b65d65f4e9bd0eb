"""Fixtures of the browser tests: a database, the app serving it, a Chromium page."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from pymongo import MongoClient

from tests.browser.harness import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS, TOKENS, Api
from tests.browser.server import serving

if TYPE_CHECKING:
    from playwright.sync_api import Page


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
