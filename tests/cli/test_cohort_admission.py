"""``kinflow cohort --pause [--reason R] | --resume`` and the admission line (pause and
its reason, the per-key window, the start rate, per-key counts), on the lake and through
a server."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.engine.outcome_defs import worker
from tests.engine.test_admission import admitted

from .cohorts import named, rows_of, start_cohort, through
from .test_cli import instance_id, invoke
from .test_remote import server  # noqa: F401  (the running server fixture)

pytestmark = pytest.mark.lake

KEYED = "select($row in ['r0', 'r1'] => 'x', 'y')"


def started(tmp_path: Path, *remote: str, admin: tuple[str, ...] = ()) -> str:
    return start_cohort(tmp_path, [admitted(
        2, concurrencyKey=KEYED, maxActivePerKey=1,
        startRate={"count": 50, "perSeconds": 60}), worker()], named(5), *remote, admin=admin)


def test_cohort_pauses_resumes_and_prints_admission(cli_env: str, tmp_path: Path) -> None:
    parent = started(tmp_path)
    status, output = invoke("cohort", parent, "translate")
    assert status == 0, output
    assert ('running  maxActivePerKey 1  startRate {"count":50,"perSeconds":60.0}  '
            "keys (active/queued): x 1/1, y 1/2") in output, output
    status, output = invoke("cohort", parent, "translate", "--pause", "--reason", "hold")
    assert status == 0, output
    assert "paused (hold)" in output, output
    rows = rows_of(output)
    assert invoke("fire", rows["r0"][1], "task", "finish", "--param", "words=1")[0] == 0
    status, output = invoke("cohort", parent, "translate")
    assert "total 5  active 1  queued 3" in output and "paused (hold)" in output, output
    status, output = invoke("cohort", parent, "translate", "--resume")
    assert status == 0, output
    assert "running" in output and "total 5  active 2  queued 2" in output, output
    status, output = invoke("cohort", parent, "translate", "--pause", "--resume")
    assert status == 1 and "invalid-input" in output, output
    status, output = invoke("cohort", parent, "translate", "--reason", "why")
    assert status == 1 and "invalid-input" in output, output


def test_cohort_pauses_through_a_server(server: str, tmp_path: Path) -> None:  # noqa: F811
    remote = through(server)
    parent = started(tmp_path, *remote, admin=through(server, "admin"))
    status, output = invoke("cohort", parent, "translate", "--pause", *remote)
    assert status == 0, output
    assert "paused  maxActivePerKey 1" in output and "x 1/1, y 1/2" in output, output
    status, output = invoke("cohort", parent, "translate", "--resume", *remote)
    assert status == 0 and "running" in output, output


def test_the_readme_walk_through_of_paced_reindex(cli_env: str) -> None:
    examples = Path(__file__).resolve().parents[2] / "examples"
    content = str(examples / "content" / "articles.ndjson")
    assert invoke("lake", "import", "production", content)[0] == 0
    assert invoke("deploy", str(examples / "definitions" / "paced-reindex.json"))[0] == 0
    status, output = invoke("start", "paced-reindex")
    assert status == 0, output
    parent = instance_id(output)
    status, output = invoke("cohort", parent, "reindex")
    assert status == 0, output
    assert ('running  maxActivePerKey 1  startRate {"count":10,"perSeconds":60.0}  keys '
            "(active/queued): release-2026-12 1/2, standalone 1/0") in " ".join(
                output.split("\n")), output
    live = {line.split()[0]: line.split()[-1] for line in output.splitlines()
            if " ACTIVE " in line}
    assert set(live) == {"article-1", "article-4"}, output
    status, output = invoke("cohort", parent, "reindex", "--pause", "--reason",
                            "search cluster down")
    assert "paused (search cluster down)" in output, output
    assert invoke("fire", live["article-1"], "index", "indexed")[0] == 0
    status, output = invoke("cohort", parent, "reindex")
    assert "active 1  queued 2" in output and "paused (search cluster down)" in output, output
    status, output = invoke("cohort", parent, "reindex", "--resume")
    assert "running" in output and "active 2  queued 1" in output, output
    for line in output.splitlines():
        if " ACTIVE " in line:
            assert invoke("fire", line.split()[-1], "index", "indexed")[0] == 0
    status, output = invoke("cohort", parent, "reindex")
    last = next(line.split()[-1] for line in output.splitlines() if " ACTIVE " in line)
    assert invoke("fire", last, "index", "indexed")[0] == 0
    status, output = invoke("inspect", parent)
    assert status == 0 and "COMPLETED  stage done" in output.splitlines()[0], output
