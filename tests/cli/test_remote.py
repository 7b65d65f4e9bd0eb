"""The CLI against a running, token-protected server (``--url`` and ``--token``)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import free_port, running

from .test_cli import EXAMPLES, instance_id, invoke, refused

TOKENS = ("ops-token-for-tests=ops:operator,admin-token-for-tests=root:admin,"
          "viewer-token-for-tests=eve:viewer")


@pytest.fixture
def server(cli_env: str, lake_uri: str, tmp_path: Path) -> Iterator[str]:
    port = free_port()
    env = {**os.environ, "KINFLOW_PORT": str(port), "KINFLOW_API_TOKENS": TOKENS,
           "KINFLOW_WORKER": "false"}  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    with running([sys.executable, "-m", "kinflow.cli", "serve"], env=env,
                 health_url=f"{url}/healthz"):  # fmt: skip
        yield url


def test_verbs_through_the_api(server: str) -> None:
    remote = ["--url", server, "--token", "admin-token-for-tests"]
    status, output = invoke(
        "lake", "import", "production", str(EXAMPLES / "content" / "articles.ndjson")
    )
    assert status == 0, output
    status, output = invoke(
        "deploy", str(EXAMPLES / "definitions" / "article-review.json"), *remote
    )
    assert status == 0 and "created  article-review v1" in output, output
    status, output = invoke("start", "article-review", "--field", "subject=article-3", *remote)
    assert status == 0 and "stage drafting" in output, output
    review = instance_id(output)
    status, output = invoke("fire", review, "write", "submit", *remote)
    assert status == 0 and "stage review" in output, output
    status, tree = invoke("inspect", review, *remote)
    assert status == 0 and "cohort translate: 1 child: 1 active, 0 done, 0 aborted" in tree
    status, output = invoke("groq", "count(*[_type == 'kinflow.instance'])", *remote)
    assert status == 0 and output.strip() == "2", output


def test_tokens_and_roles_are_enforced(server: str) -> None:
    definitions = str(EXAMPLES / "definitions" / "article-review.json")
    refused(["deploy", definitions, "--url", server], "unauthenticated")
    refused(["deploy", definitions, "--url", server, "--token", "wrong"], "unauthenticated")
    refused(["deploy", definitions, "--url", server, "--token", "ops-token-for-tests"], "forbidden")
    refused(["inspect", "instance.nope", "--url", server, "--token", "viewer-token-for-tests"],
            "instance-not-found")  # fmt: skip


def test_demo_refuses_an_unreachable_lake(cli_env: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KINFLOW_MONGODB_URI", "mongodb://127.0.0.1:9/?serverSelectionTimeoutMS=300")
    monkeypatch.setenv("KINFLOW_OPERATION_TIMEOUT", "1")
    refused(["demo"], "lake-unavailable")
