"""Fixtures of the lake tests: a change hub over the per-test lake."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from kinflow.storage import ChangeHub, Lake


@pytest.fixture
async def hub(lake: Lake) -> AsyncIterator[ChangeHub]:
    """A started change hub (its queues hold 500 events); stopped after the test."""
    hub = ChangeHub(lake, queue_size=500)
    await hub.start()
    yield hub
    await hub.stop()
