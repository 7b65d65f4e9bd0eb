"""``kinflow cohort PARENT ACTIVITY [--status S] [--fire ACT/ACTION | --abort | --redrive]`` on
the lake and through a server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.engine.bulk_defs import cohort_parent, nudgeable, records
from tests.engine.cohort_defs import windowed
from tests.engine.outcome_defs import worker

from .cohorts import named, rows_of, start_cohort, through
from .test_cli import instance_id, invoke, refused
from .test_remote import server  # noqa: F401  (the running server fixture)

pytestmark = pytest.mark.lake


def test_cohort_prints_counts_rows_filters_and_redrives(cli_env: str, tmp_path: Path) -> None:
    parent = start_cohort(tmp_path, [windowed(3), worker()], named(5))

    status, output = invoke("cohort", parent, "translate")
    assert status == 0, output
    assert "total 5  active 3  queued 2  done 0" in output, output
    rows = rows_of(output)
    assert {k: s for k, (s, _) in rows.items()} == {
        "r0": "ACTIVE", "r1": "ACTIVE", "r2": "ACTIVE", "r3": "QUEUED", "r4": "QUEUED"}

    assert invoke("fire", rows["r0"][1], "task", "finish", "--param", "words=42")[0] == 0
    assert invoke("fire", rows["r1"][1], "task", "give-up")[0] == 0
    status, output = invoke("cohort", parent, "translate", "--status", "DONE")
    assert status == 0, output
    assert "done 2" in output and "failed 1" in output, output
    assert set(rows_of(output)) == {"r0", "r1"}
    assert '{"wordCount":42,' in output and "succeeded" in output and "failed" in output

    status, output = invoke("cohort", parent, "translate", "--status", "done", "--redrive")
    assert status == 0, output
    assert "redrive: matched 2  applied 1  skipped 1  refused 0" in output, output
    again = rows_of(output)
    assert set(again) == {"r0"}  # r1 is a new attempt now, no longer DONE
    status, output = invoke("cohort", parent, "translate")
    assert rows_of(output)["r1"][0] in ("ACTIVE", "QUEUED"), output


def test_cohort_refuses_an_unknown_status_activity_or_parent(cli_env: str,
                                                             tmp_path: Path) -> None:
    assert "--status" in refused(["cohort", "instance.x", "translate", "--status", "late"],
                                 "invalid-input")
    refused(["cohort", "instance.nobody", "translate"], "instance-not-found")
    definitions = tmp_path / "cohort.json"
    definitions.write_text(json.dumps([windowed(3), worker()]))
    assert invoke("deploy", str(definitions))[0] == 0
    status, output = invoke("start", "p", "--field", 'items=[{"name": "r0"}]')
    parent = instance_id(output)
    refused(["cohort", parent, "nope"], "cohort-not-found")
    status, output = invoke("cohort", parent, "translate")  # not spawned yet: total 0
    assert status == 0 and "total 0" in output, output


def test_cohort_through_a_server(server: str, tmp_path: Path) -> None:  # noqa: F811
    remote = through(server)
    parent = start_cohort(tmp_path, [windowed(2), worker()], named(4), *remote,
                          admin=through(server, "admin"))
    status, output = invoke("cohort", parent, "translate", "--status", "queued", *remote)
    assert status == 0, output
    assert "total 4  active 2  queued 2" in output, output
    assert set(rows_of(output)) == {"r2", "r3"}
    status, output = invoke("cohort", parent, "translate", "--redrive", *remote)
    assert status == 0 and "redrive: matched 4  applied 0  skipped 4" in output, output


def bulk_cohort(*options: str, tmp_path: Path, names: tuple[str, ...]) -> str:
    """Deploy the bulk tests' parent and child, start a parent over ``names`` and spawn."""
    admin = tuple(o.replace("ops-token", "admin-token") for o in options)
    return start_cohort(tmp_path, [cohort_parent(max_active=3), nudgeable()],
                        records(*names)["items"], *options, admin=admin)


def test_cohort_fires_and_aborts_across_a_cohort(cli_env: str, tmp_path: Path) -> None:
    parent = bulk_cohort(tmp_path=tmp_path, names=("r0", "r1", "r2", "r3"))
    status, output = invoke("cohort", parent, "translate", "--status", "active",
                            "--fire", "task/nudge")
    assert status == 0, output
    assert "fire: matched 3  applied 3  skipped 0  refused 0" in output, output
    status, output = invoke("cohort", parent, "translate", "--fire", "task/finish",
                            "--params", "{}", "--status", "active")
    assert status == 0 and "fire: matched 3  applied 3" in output, output
    assert "total 4  active 1  queued 0  done 3" in output, output  # r3 left the window
    assert set(rows_of(output)) == {"r3"}  # the page shows the rows --status selects

    status, output = invoke("cohort", parent, "translate", "--abort")
    assert status == 0, output
    assert "abort: matched 4  applied 1  skipped 3  refused 0" in output, output
    assert rows_of(output)["r3"][0] == "ABORTED"
    refused(["fire", parent, "translate", "top-up"], "cohort-closed")


def test_cohort_cancels_across_a_cohort(cli_env: str, tmp_path: Path) -> None:
    parent = bulk_cohort(tmp_path=tmp_path, names=("r0", "r1", "r2", "r3", "r4"))
    status, output = invoke("cohort", parent, "translate", "--cancel")
    assert status == 0, output
    assert "cancel: matched 5  applied 5  skipped 0  refused 0" in output, output
    assert "cancelled 5" in output and "queued 0" in output, output
    assert {s for s, _ in rows_of(output).values()} == {"CANCELLED"}
    refused(["fire", parent, "translate", "top-up"], "cohort-closed")


def test_cohort_refuses_a_bad_verb_before_anything(cli_env: str) -> None:
    assert "--abort" in refused(["cohort", "instance.x", "translate", "--redrive", "--abort"],
                                "invalid-input")
    refused(["cohort", "instance.x", "translate", "--cancel", "--fire", "task/nudge"],
            "invalid-input")
    refused(["cohort", "instance.x", "translate", "--fire", "nudge"], "invalid-input")
    refused(["cohort", "instance.x", "translate", "--fire", "task/nudge", "--params", "[1]"],
            "invalid-input")
    refused(["cohort", "instance.x", "translate", "--params", "{}"], "invalid-input")


def test_cohort_verbs_through_a_server(server: str, tmp_path: Path) -> None:  # noqa: F811
    remote = through(server)
    parent = bulk_cohort(*remote, tmp_path=tmp_path, names=("r0", "locked", "r2"))
    status, output = invoke("cohort", parent, "translate", "--fire", "task/nudge", *remote)
    assert status == 0, output
    assert "fire: matched 3  applied 2  skipped 0  refused 1" in output, output
    assert "locked" in output and "action-disabled" in output
    status, output = invoke("cohort", parent, "translate", "--abort", "--status", "active",
                            *remote)
    assert status == 0 and "abort: matched 3  applied 3" in output, output
