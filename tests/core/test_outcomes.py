"""core/cohort/outcomes.py: the cap, and reading a finish from any child document."""

from __future__ import annotations

import json

from kinflow.core.cohort.outcomes import OUTPUT_TOO_LARGE, Finished, capped
from kinflow.core.context import Limits
from kinflow.settings import Settings


def test_the_cap_is_inclusive_and_counts_json_bytes() -> None:
    outputs = {"title": "é" * 10}
    size = len(json.dumps(outputs, separators=(",", ":"), ensure_ascii=False).encode())
    assert capped(outputs, size) == (outputs, None)
    assert capped(outputs, size - 1) == (None, OUTPUT_TOO_LARGE)
    assert capped(None, 1) == (None, None)


def test_a_finish_read_from_documents_old_and_new() -> None:
    assert Finished.of({"completedAt": None}) is None
    assert Finished.of({"completedAt": "t", "abortedAt": "t"}) == Finished("aborted")
    assert Finished.of({"completedAt": "t"}) == Finished("succeeded")  # before outcomes
    read = Finished.of({"completedAt": "t", "result": {
        "outcome": "failed", "outputs": {"n": 1}}})
    assert read == Finished("failed", {"n": 1})


def test_the_parent_checks_the_cap_again_when_it_stamps() -> None:
    finished = Finished("succeeded", {"text": "x" * 100})
    assert finished.row_changes(1000)["outputs"] == {"text": "x" * 100}
    assert finished.row_changes(10) == {"outcome": "succeeded", "outputs": None,
                                        "outputsError": OUTPUT_TOO_LARGE}


def test_the_setting_reaches_the_limits() -> None:
    assert Limits().row_output_bytes == 16384
    settings = Settings(max_row_output_bytes=100)
    assert Limits.from_settings(settings).row_output_bytes == 100
