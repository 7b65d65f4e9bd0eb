"""A client SIGKILLed mid-transaction no longer blocks its instance for a minute.

The lake here is one kinflow did not start (a daemon the test runs, reached
by URI), so nobody ends every session at start-up: only the heartbeat's
session reaping stands between the kill and a minute of write conflicts.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kinflow.storage.embedded import EmbeddedLake
from tests.reliability.figures import record
from tests.reliability.orphans import blocked_after_kill

pytestmark = pytest.mark.lake


@pytest.fixture
def foreign_lake(tmp_path: Path) -> Iterator[str]:
    daemon = EmbeddedLake(tmp_path / "lake", sync_on_commit=False, test_commands=False)
    uri = daemon.start()
    try:
        yield uri
    finally:
        daemon.stop()


async def test_the_heartbeat_ends_a_killed_clients_transaction(foreign_lake: str) -> None:
    blocked = await blocked_after_kill(foreign_lake, "orphans", ledger=True, limit=45.0)
    record("orphaned_transaction", f"blocked after a SIGKILL mid-transaction, with the session "
                                   f"ledger: {blocked:.2f} s")
    assert blocked < 30.0  # the server alone takes 60 s or more (docs/reliability.md)
