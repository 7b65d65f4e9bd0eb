"""The README's five-minute tour, run against the server `make demo` starts.

The GraphQL operations are read from README.md itself, so the tour a newcomer
follows is the tour this test checks.
"""

from __future__ import annotations

import json
import os
import re
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from websockets.sync.client import connect

from tests.support import free_port, running

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.lake,  # starts a daemon of its own
    pytest.mark.skipif(
        bool(os.environ.get("KINFLOW_TEST_MONGODB_URI")), reason="make demo runs the embedded lake"
    ),
]


def readme_operations() -> list[str]:
    text = (ROOT / "README.md").read_text()
    return re.findall(r"```graphql\n(.*?)```", text, re.S)


@pytest.fixture(scope="module")
def demo_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port()
    env = {**os.environ, "KINFLOW_PORT": str(port),
           "KINFLOW_DATA_DIR": str(tmp_path_factory.mktemp("demo"))}  # fmt: skip
    for key in ("KINFLOW_MONGODB_URI", "KINFLOW_DATABASE", "MAKEFLAGS"):
        env.pop(key, None)
    url = f"http://127.0.0.1:{port}"
    with running(["make", "-s", "demo"], cwd=ROOT, env=env, health_url=f"{url}/healthz"):
        yield url


def post(url: str, query: str) -> dict[str, Any]:
    request = urllib.request.Request(
        f"{url}/graphql", data=json.dumps({"query": query}).encode(),
        headers={"Content-Type": "application/json"},
    )  # fmt: skip
    with urllib.request.urlopen(request, timeout=30) as response:
        body = json.loads(response.read())
    assert "errors" not in body, body
    return dict(body["data"])


def test_the_readme_tour(demo_url: str) -> None:
    start, submit, subscribe, cohort, fire_child, approve = readme_operations()[:6]

    started = post(demo_url, start)["startInstance"]["instance"]
    assert started["currentStage"] == "drafting"
    review = started["id"]

    submitted = post(demo_url, submit.replace("<id>", review))["fireAction"]["instance"]
    assert submitted["currentStage"] == "review"
    assert sorted(r["rowKey"] for r in submitted["subworkflows"]) == ["de", "es", "fr"]
    assert {r["status"] for r in submitted["subworkflows"]} == {"ACTIVE"}

    ws_url = demo_url.replace("http://", "ws://") + "/graphql"
    with connect(ws_url, subprotocols=["graphql-transport-ws"]) as ws:  # type: ignore[list-item]
        ws.send(json.dumps({"type": "connection_init"}))
        assert json.loads(ws.recv(10))["type"] == "connection_ack"
        ws.send(json.dumps({"id": "tour", "type": "subscribe",
                            "payload": {"query": subscribe.replace("<id>", review)}}))  # fmt: skip

        seen = post(demo_url, cohort.replace("<id>", review))["cohort"]
        assert (seen["total"], seen["active"], seen["done"], seen["settled"]) == (3, 3, 0, False)
        for row in seen["rows"]:
            child = post(demo_url, fire_child.replace("<childId>", row["childId"]))
            assert child["fireAction"]["instance"]["status"] == "COMPLETED"
            assert child["fireAction"]["instance"]["currentStage"] == "done"

        completed: dict[str, dict[str, Any]] = {}
        while len(completed) < 3:
            message = json.loads(ws.recv(30))
            assert message["type"] == "next", message
            event = message["payload"]["data"]["childCompleted"]
            completed[event["row"]["rowKey"]] = event["row"]
        assert sorted(completed) == ["de", "es", "fr"]
        assert all(r["status"] == "DONE" and r["stage"] == "done" for r in completed.values())

    settled = post(demo_url, cohort.replace("<id>", review))["cohort"]
    assert (settled["active"], settled["done"], settled["settled"]) == (0, 3, True)
    published = post(demo_url, approve.replace("<id>", review))["fireAction"]["instance"]
    assert published == {"status": "COMPLETED", "currentStage": "published"}


def test_the_cohort_control_tour(demo_url: str) -> None:
    """README's second tour: translation-cohort on article-4 (six locales, window 2)."""
    start, look, submit, give_up, redrive, widen, final = readme_operations()[6:13]
    parent = post(demo_url, start)["startInstance"]["instance"]["id"]

    def cohort() -> dict[str, Any]:
        found: dict[str, Any] = post(demo_url, look.replace("<id>", parent))["cohort"]
        return found

    seen = cohort()
    assert (seen["total"], seen["active"], seen["queued"], seen["maxActive"]) == (6, 2, 4, 2)
    assert seen["budget"] == {"count": 1, "used": 0, "exceeded": False}
    first, second = [n["childId"] for n in seen["page"]["nodes"] if n["status"] == "ACTIVE"]
    done = post(demo_url, submit.replace("<childId>", first))["fireAction"]["instance"]
    assert done["currentStage"] == "done" and done["fields"]["wordCount"] == 400
    post(demo_url, give_up.replace("<otherChildId>", second))
    seen = cohort()
    assert (seen["active"], seen["queued"], seen["budget"]["used"]) == (2, 2, 1)
    assert [n["outcome"] for n in seen["page"]["nodes"][:2]] == ["succeeded", "failed"]

    result = post(demo_url, redrive.replace("<id>", parent))["redriveCohort"]
    assert result == {"matched": 1, "applied": 1, "skipped": 0, "refusals": []}
    widened = post(demo_url, widen.replace("<id>", parent))["updateCohort"]
    assert widened == {"active": 4, "queued": 1, "maxActive": 4}

    for _ in range(6):
        live = [n for n in cohort()["page"]["nodes"] if n["status"] == "ACTIVE"]
        if not live:
            break
        for node in live:
            post(demo_url, submit.replace("<childId>", node["childId"]))
    moved = post(demo_url, final.replace("<id>", parent))["instance"]
    assert moved["currentStage"] == "copy-edit"
    rows = {r["rowKey"]: r for r in moved["subworkflows"]}
    assert rows["fr"]["attempt"] == 2 and rows["fr"]["outcome"] == "succeeded"
    assert sum(r["outputs"]["wordCount"] for r in rows.values() if r["outcome"] == "succeeded") \
        == 2400
