"""`kinflow tail` prints each change once, and the lake and `--url` modes print the same lines.

It guards against a child's completion printed twice (lake mode: two identical
lines; ``--url``: ``completed`` then ``changed``), and against only ``--url``
printing snapshots of instances that existed before the tail started.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from kinflow.cli.tail import Lines
from tests.support import free_port, running

from .test_cli import EXAMPLES

pytestmark = pytest.mark.lake


def test_lines_print_each_stage_or_status_change_once() -> None:
    lines = Lines()
    view = {"id": "i1", "definition": "d", "currentStage": "a", "status": "ACTIVE"}
    lines.known(view)
    assert lines.line("t0", view) is None  # a snapshot is not printed, nor a repeat of it
    moved = {**view, "currentStage": "b"}
    assert "changed" in (lines.line("t1", moved) or "")
    assert lines.line("t2", moved) is None
    done = {**moved, "currentStage": "end", "status": "COMPLETED"}
    assert "completed" in (lines.line("t3", done) or "")
    assert lines.line("t4", done) is None  # the parent's stamp, a later bookkeeping commit
    new = {"id": "i2", "definition": "d", "currentStage": "x", "status": "ABORTED"}
    assert "aborted" in (lines.line("t5", new) or "")


def gql(url: str, query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
    request = urllib.request.Request(
        f"{url}/graphql", data=json.dumps({"query": query, "variables": variables or {}}).encode(),
        headers={"Content-Type": "application/json"},
    )  # fmt: skip
    with urllib.request.urlopen(request, timeout=60) as response:
        body: dict[str, Any] = json.loads(response.read())
    assert not body.get("errors"), body["errors"]
    result: dict[str, Any] = body["data"]
    return result


@contextmanager
def tailing(args: list[str]) -> Iterator[list[str]]:
    """A ``kinflow tail`` process; yields the lines it has printed so far."""
    process = subprocess.Popen([sys.executable, "-m", "kinflow.cli", "tail", *args],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               env={**os.environ, "COLUMNS": "250"})  # fmt: skip
    printed: list[str] = []

    def read() -> None:
        assert process.stdout is not None
        for raw in process.stdout:
            printed.append(raw.decode().rstrip())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        yield printed
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
        reader.join(10)


def until(condition: Callable[[], bool], what: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


START = """mutation($f: JSON) { startInstance(definition: "article-review", fields: $f)
  { instance { id } } }"""
FIRE = """mutation($i: ID!, $a: String!, $x: String!) { fireAction(instanceId: $i, activity: $a,
  action: $x) { changed } }"""


def test_both_modes_print_a_childs_commits_once_and_alike(cli_env: str) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "KINFLOW_PORT": str(port), "KINFLOW_WORKER": "false"}
    with running([sys.executable, "-m", "kinflow.cli", "serve"], env=env,
                 health_url=f"{url}/healthz"):  # fmt: skip
        definitions = json.loads((EXAMPLES / "definitions" / "article-review.json").read_text())
        gql(url, "mutation($d: [JSON!]!) { deployDefinitions(definitions: $d) { warnings } }",
            {"d": definitions})  # fmt: skip
        gql(url, 'mutation { putDocument(document: {_id: "a1", _type: "article", '
                 'locales: ["de"]}) }')  # fmt: skip
        before = gql(url, START, {"f": {"subject": "a1"}})["startInstance"]["instance"]["id"]
        with tailing([]) as lake, tailing(["--url", url]) as remote:
            probes: list[str] = []

            def both_follow() -> bool:  # both tails print a fresh start once they follow
                probe = gql(url, START, {"f": {"subject": "a1"}})["startInstance"]["instance"]
                probes.append(probe["id"])
                seen = [any(p in line for p in probes for line in out) for out in (lake, remote)]
                return all(seen)

            until(both_follow, "the tails never printed a fresh instance")
            review = gql(url, START, {"f": {"subject": "a1"}})["startInstance"]["instance"]["id"]
            gql(url, FIRE, {"i": review, "a": "write", "x": "submit"})
            rows = gql(url, """query($i: ID!) { instance(id: $i) { subworkflows { childId } } }""",
                       {"i": review})["instance"]["subworkflows"]  # fmt: skip
            child = rows[0]["childId"]
            gql(url, FIRE, {"i": child, "a": "translate", "x": "submit"})

            def finished(out: list[str]) -> bool:
                return any(child in line and "completed" in line for line in out)

            until(lambda: finished(lake) and finished(remote), "the child's completion")
            time.sleep(2)  # room for a duplicate to show up
            snapshot_lake, snapshot_remote = list(lake), list(remote)

    def about(out: list[str], iid: str) -> list[str]:
        return [line.split(None, 1)[1] for line in out if iid in line]  # without the time

    print("lake:", *snapshot_lake, "url:", *snapshot_remote, sep="\n")
    assert about(snapshot_lake, child) == about(snapshot_remote, child)
    kinds = [line.split()[0] for line in about(snapshot_lake, child)]
    assert kinds == ["changed", "completed"], snapshot_lake
    assert about(snapshot_lake, review) == about(snapshot_remote, review)
    assert about(snapshot_remote, before) == []  # no snapshot of what existed before
