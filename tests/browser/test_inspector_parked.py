"""The inspector lists parked instances and offers the tick that retries one."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from tests.browser.harness import OPERATOR, TOKENS, Api, open_page, shot
from tests.browser.server import serving
from tests.cli.test_parked import LOOPS

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = pytest.mark.lake
PARKED = "query($ids: [ID!]) { parkedInstances(ids: $ids) { instanceId code } }"


@pytest.fixture
def server(lake_uri: str, database: str) -> Iterator[Api]:
    """A server whose cascades stop after 10 moves: every move lengthens the looping
    instance's history, so each refused cascade of 100 took longer than the last."""
    with serving(lake_uri, database, tokens=TOKENS,
                 settings={"KINFLOW_MAX_CASCADE_MOVES": "10"}) as base:
        yield Api(base)


def test_a_parked_instance_is_listed_explained_and_ticked(page: Page, server: Api) -> None:
    server.deploy([LOOPS])
    iid = server.start("loops")
    body = server.fire(iid, "go", "go")
    # the server's heartbeat may tick the loop meanwhile: either refusal leaves it looping
    refusal = body["errors"][0]["extensions"]
    assert refusal["code"] in {"cascade-limit", "concurrent-modification"}
    assert refusal["code"] != "cascade-limit" or refusal["details"]["limit"] == 10
    deadline = time.monotonic() + 60  # the server's own heartbeat parks it
    while not server.data(PARKED, {"ids": [iid]})["parkedInstances"]:
        assert time.monotonic() < deadline, "the heartbeat never parked the looping instance"
        time.sleep(0.5)
    open_page(page, server, OPERATOR)
    page.wait_for_selector(f'#parkedBox:not([hidden]) .result.parked[data-id="{iid}"]')
    page.click(f'.result.parked[data-id="{iid}"]')
    notice = page.wait_for_selector('.detail .parked-notice[data-code="cascade-limit"]')
    assert notice is not None and "next attempt" in notice.inner_text()
    shot(page, "parked-instance")
    page.click(".parked-notice button")
    page.wait_for_selector('#errors .error[data-code]', timeout=30_000)
    assert "cascade-limit" in page.inner_text("#errors") or "concurrent-modification" in \
        page.inner_text("#errors")
