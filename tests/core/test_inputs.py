"""Caller inputs are bounded before anything is planned (``input-too-large``)."""

from __future__ import annotations

import pytest

from kinflow.core.context import Limits
from kinflow.core.errors import InputTooLarge
from kinflow.core.inputs import (
    bounded_outcome,
    check_key,
    check_text,
    check_value,
    check_values,
    json_bytes,
)
from kinflow.errors import InvalidInput

LIMITS = Limits(key_bytes=8, reason_bytes=10, value_bytes=16)


def test_each_argument_is_measured_in_utf8_bytes() -> None:
    check_key("abcdefgh", LIMITS)
    with pytest.raises(InputTooLarge) as refused:
        check_key("ééééé", LIMITS)  # 5 characters, 10 bytes
    assert refused.value.details == {"argument": "idempotencyKey", "size": 10, "limit": 8,
                                     "setting": "KINFLOW_MAX_IDEMPOTENCY_KEY_BYTES"}  # fmt: skip
    check_text("reason", "x" * 10, LIMITS)
    with pytest.raises(InputTooLarge):
        check_text("reason", "x" * 11, LIMITS)


def test_values_are_measured_as_json() -> None:
    assert json_bytes("ab") == 4 and json_bytes({"a": 1}) == 7
    check_value("params", None, LIMITS)
    check_value("params", {"a": "01234567"}, LIMITS)  # 16 bytes as JSON
    with pytest.raises(InputTooLarge) as refused:
        check_value("params", {"a": "012345678"}, LIMITS)
    assert refused.value.details["argument"] == "params"
    with pytest.raises(InputTooLarge):
        check_values("fields", {"ok": 1, "big": "x" * 20}, LIMITS)


def test_integers_a_document_cannot_store_are_refused() -> None:
    """A JSON integer past 64 bits would fail the lake write as an internal error."""
    wide = Limits(value_bytes=1000)
    check_value("params", {"words": 2**63 - 1, "list": [-(2**63)], "flag": True}, wide)
    for value in ({"words": 2**63}, [1, {"deep": -(2**63) - 1}], 10**40):
        with pytest.raises(InvalidInput) as refused:
            check_value("params", value, wide)
        assert refused.value.code == "invalid-input"
        assert refused.value.details["argument"] == "params"


def test_effect_outputs_with_such_integers_fail_the_effect() -> None:
    outputs, status, error = bounded_outcome({"n": 10**40}, "done", None, Limits())
    assert (outputs, status) == (None, "failed") and error is not None and "64-bit" in error
