"""Reliability fixtures: the seed every random choice derives from, printed for replay."""

from __future__ import annotations

import os
import random

import pytest


@pytest.fixture
def seed() -> int:
    """``KINFLOW_RELIABILITY_SEED`` replays a run; otherwise a fresh seed, printed."""
    chosen = int(os.environ.get("KINFLOW_RELIABILITY_SEED") or random.randrange(1 << 30))
    print(f"reliability seed: {chosen} (replay with KINFLOW_RELIABILITY_SEED={chosen})")
    return chosen
