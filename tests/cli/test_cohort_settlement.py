"""``kinflow cohort`` prints a cohort's retries (with their time), timed-out rows and
completion (docs/subworkflows.md#settlement), on the lake and through a server."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.engine.outcome_defs import worker
from tests.engine.settle_defs import settling

from .cohorts import named, rows_of, start_cohort, through
from .test_cli import invoke
from .test_remote import server  # noqa: F401  (the running server fixture)

pytestmark = pytest.mark.lake


def started(tmp_path: Path, *remote: str, admin: tuple[str, ...] = ()) -> str:
    return start_cohort(tmp_path, [settling(
        maxActive=2, childTimeoutSeconds=3600,
        retry={"attempts": 2, "backoffSeconds": 600}), worker()], named(3), *remote, admin=admin)


def test_cohort_prints_retries_deadlines_and_completion(cli_env: str, tmp_path: Path) -> None:
    parent = started(tmp_path)
    status, output = invoke("cohort", parent, "translate")
    assert status == 0, output
    assert "retrying 0  timedOut 0  complete false" in output, output
    assert "deadline 20" in output  # a live row's deadline
    rows = rows_of(output)
    assert invoke("fire", rows["r0"][1], "task", "give-up")[0] == 0
    status, output = invoke("cohort", parent, "translate")
    assert status == 0, output
    assert "retrying 1  timedOut 0" in output, output
    line = next(text for text in output.splitlines() if text.strip().startswith("r0"))
    assert "QUEUED" in line and "retry at 20" in line and "-a2" in line, output


def test_cohort_prints_retries_through_a_server(server: str, tmp_path: Path) -> None:  # noqa: F811
    remote = through(server)
    parent = started(tmp_path, *remote, admin=through(server, "admin"))
    status, output = invoke("cohort", parent, "translate", *remote)
    assert status == 0, output
    rows = rows_of(output)
    assert invoke("fire", rows["r0"][1], "task", "give-up", *remote)[0] == 0
    status, output = invoke("cohort", parent, "translate", *remote)
    assert status == 0, output
    assert "retrying 1  timedOut 0  complete false" in output, output
    assert "retry at 20" in output, output
