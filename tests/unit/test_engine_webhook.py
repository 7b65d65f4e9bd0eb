"""The webhook handler kind posts the effect and returns the answer's outputs."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.error import HTTPError

import pytest

from kinflow.engine.drain import EffectCall
from kinflow.engine.handlers import webhook

received: list[dict[str, Any]] = []


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        received.append({"body": body, "key": self.headers["Idempotency-Key"]})
        status = 500 if body["name"] == "broken" else 200
        payload = json.dumps({"outputs": {"messageId": "m-1"}}).encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: Any) -> None:
        return None


@pytest.fixture
def url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hook"
    server.shutdown()
    server.server_close()


async def test_webhook_posts_the_effect_and_returns_outputs(url: str) -> None:
    handler = webhook(url)
    outputs = await handler(EffectCall("instance.1", "k1", "notify", {"who": "ann"}, "tok"))
    assert outputs == {"messageId": "m-1"}
    assert received[-1] == {"key": "k1", "body": {"instanceId": "instance.1", "effectKey": "k1",
                                                  "name": "notify", "params": {"who": "ann"}}}


async def test_webhook_failure_raises_so_the_effect_fails(url: str) -> None:
    with pytest.raises(HTTPError):
        await webhook(url)(EffectCall("instance.1", "k2", "broken", {}, "tok"))
