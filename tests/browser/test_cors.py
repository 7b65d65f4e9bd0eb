"""A frontend on another origin: allowed by KINFLOW_ALLOWED_ORIGINS, refused without it.

A page served from a second local port queries, mutates and subscribes to
the API in Chromium. With its origin in ``KINFLOW_ALLOWED_ORIGINS`` all three
work (the JSON POSTs need a CORS preflight); without it the browser is
refused every one of them. A screenshot of each lands in
``test-artifacts/cors/``.
"""

from __future__ import annotations

import functools
import http.server
import threading
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from pymongo import MongoClient

from tests.browser.harness import ARTIFACTS, shot
from tests.browser.server import serving
from tests.support import free_port

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = pytest.mark.lake

SHOTS = ARTIFACTS.parent / "cors"
FRONTEND = """<!doctype html>
<html><head><meta charset="utf-8"><title>another origin</title></head>
<body>
<p>query: <code id="query">…</code></p>
<p>mutation: <code id="mutation">…</code></p>
<p>subscription: <code id="subscription">…</code></p>
<script>
const api = new URLSearchParams(location.search).get("api");
const show = (id, text) => { document.getElementById(id).textContent = text; };
async function gql(query, variables) {
  const response = await fetch(api + "/graphql", {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ query, variables }),
  });
  return response.json();
}
gql("{ definitions { name } }").then(
  (body) => show("query", "ok " + JSON.stringify(body.data)),
  (error) => show("query", "refused " + error),
);
const socket = new WebSocket(api.replace(/^http/, "ws") + "/graphql", "graphql-transport-ws");
let events = 0;
socket.onopen = () => socket.send(JSON.stringify({ type: "connection_init", payload: {} }));
socket.onmessage = (message) => {
  const data = JSON.parse(message.data);
  if (data.type === "connection_ack") {
    socket.send(JSON.stringify({ id: "1", type: "subscribe",
      payload: { query: 'subscription { documentChanged(id: "cors-doc") }' } }));
  } else if (data.type === "next" && ++events === 1) {
    gql('mutation { putDocument(document: {_id: "cors-doc", _type: "note", title: "hi"}) }')
      .then((body) => show("mutation", "ok " + JSON.stringify(body.data)),
            (error) => { show("mutation", "refused " + error); });
  } else if (data.type === "next") {
    show("subscription", "ok " + JSON.stringify(data.payload.data));
  }
};
socket.onclose = (event) => {
  show("subscription", "refused: closed " + event.code);
  if (events === 0) {
    gql('mutation { putDocument(document: {_id: "cors-doc", _type: "note", title: "hi"}) }')
      .then((body) => show("mutation", "ok " + JSON.stringify(body.data)),
            (error) => show("mutation", "refused " + error));
  }
};
</script>
</body></html>
"""


@contextmanager
def frontend(folder: Path) -> Iterator[str]:
    """The page above on its own 127.0.0.1 port: another origin than the API's."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    (folder / "index.html").write_text(FRONTEND)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def results(page: Page, origin: str, api: str) -> dict[str, str]:
    page.goto(f"{origin}/index.html?api={urllib.parse.quote(api)}")
    for name in ("query", "mutation", "subscription"):
        page.wait_for_function(
            "id => !document.getElementById(id).textContent.startsWith('…')", arg=name
        )
    return {n: page.locator(f"#{n}").inner_text() for n in ("query", "mutation", "subscription")}


def test_an_allowed_origin_queries_mutates_and_subscribes(
    page: Page, lake_uri: str, database: str, tmp_path: Path
) -> None:
    with frontend(tmp_path) as origin, serving(
        lake_uri, database, log=SHOTS / "allowed.server.log",
        settings={"KINFLOW_ALLOWED_ORIGINS": origin},
    ) as api:  # fmt: skip
        got = results(page, origin, api)
        shot(page, "allowed", SHOTS)
    assert got["query"].startswith('ok {"definitions":'), got
    assert got["mutation"].startswith('ok {"putDocument":'), got
    assert got["subscription"].startswith('ok {"documentChanged":'), got
    assert '"title":"hi"' in got["subscription"], got


def test_another_origin_is_refused_by_default(
    page: Page, lake_uri: str, database: str, tmp_path: Path
) -> None:
    with frontend(tmp_path) as origin, serving(
        lake_uri, database, log=SHOTS / "refused.server.log"
    ) as api:  # fmt: skip
        got = results(page, origin, api)
        shot(page, "refused", SHOTS)
    assert got["query"].startswith("refused"), got
    assert got["mutation"].startswith("refused"), got
    assert got["subscription"].startswith("refused"), got
    client: MongoClient[dict[str, Any]] = MongoClient(lake_uri)
    try:  # the refused preflight kept the mutation from ever being sent
        assert client[database]["production"].find_one({"_id": "cors-doc"}) is None
    finally:
        client.close()
