"""Caller inputs are bounded before anything is planned (``input-too-large``)."""

from __future__ import annotations

import pytest

from kinflow.core.context import Limits
from kinflow.core.errors import InputTooLarge
from kinflow.core.inputs import check_key, check_text, check_value, check_values, json_bytes

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
