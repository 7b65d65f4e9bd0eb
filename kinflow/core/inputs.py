"""Bounds on what a caller may write into an instance document.

Keys, reasons and values a verb receives end up stored in the instance (the
ledger, history, fields, effect runs), and an instance is one MongoDB
document of at most 16 MB. Each is measured here before a verb plans
anything, so an oversized input is refused (``input-too-large``, naming the
argument, its size and the limit) before anything is read or written.
Sizes are UTF-8 bytes for text and compact-JSON bytes for values.
"""

from __future__ import annotations

import json
from typing import Any

from kinflow.core.context import Limits
from kinflow.core.errors import InputTooLarge
from kinflow.errors import InvalidInput

INT64 = (-(2**63), 2**63 - 1)  # what a stored document can hold (BSON int64)


def text_bytes(value: str) -> int:
    return len(value.encode("utf-8", "surrogatepass"))


def json_bytes(value: Any) -> int:
    if isinstance(value, str):
        return text_bytes(value) + 2
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False,
                          default=str).encode("utf-8", "surrogatepass"))


def _refuse(argument: str, size: int, limit: int, setting: str) -> InputTooLarge:
    return InputTooLarge(f"{argument} is {size} bytes; the limit is {limit} ({setting})",
                         argument=argument, size=size, limit=limit, setting=setting)


def check_key(key: Any, limits: Limits) -> None:
    """An idempotency key fits ``KINFLOW_MAX_IDEMPOTENCY_KEY_BYTES``."""
    if isinstance(key, str) and len(key) * 4 > limits.key_bytes:
        size = text_bytes(key)
        if size > limits.key_bytes:
            raise _refuse("idempotencyKey", size, limits.key_bytes,
                          "KINFLOW_MAX_IDEMPOTENCY_KEY_BYTES")


def check_text(argument: str, value: Any, limits: Limits) -> None:
    """A reason, error or detail text fits ``KINFLOW_MAX_REASON_BYTES``."""
    if isinstance(value, str) and len(value) * 4 > limits.reason_bytes:
        size = text_bytes(value)
        if size > limits.reason_bytes:
            raise _refuse(argument, size, limits.reason_bytes, "KINFLOW_MAX_REASON_BYTES")


def check_value(argument: str, value: Any, limits: Limits) -> None:
    """Params, a field value or effect outputs fit ``KINFLOW_MAX_VALUE_BYTES`` as JSON."""
    if value is None:
        return
    size = json_bytes(value)
    if size > limits.value_bytes:
        raise _refuse(argument, size, limits.value_bytes, "KINFLOW_MAX_VALUE_BYTES")
    if _outside_int64(value):
        raise InvalidInput(f"{argument} holds an integer outside the 64-bit range a document "
                           "can store", argument=argument, min=INT64[0], max=INT64[1])


def _outside_int64(value: Any) -> bool:
    """Whether ``value`` holds an integer BSON cannot store (it would fail the write)."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return not INT64[0] <= value <= INT64[1]
    if isinstance(value, dict):
        return any(_outside_int64(item) for item in value.values())
    if isinstance(value, list):
        return any(_outside_int64(item) for item in value)
    return False


def check_values(argument: str, values: Any, limits: Limits) -> None:
    """Each entry of a ``{name: value}`` map (start fields, context) fits on its own."""
    if isinstance(values, dict):
        for name, value in values.items():
            check_text(f"{argument}.<name>", name if isinstance(name, str) else None, limits)
            check_value(f"{argument}.{str(name)[:64]}", value, limits)
    else:
        check_value(argument, values, limits)


def bounded_outcome(outputs: Any, status: str, error: str | None, limits: Limits
                    ) -> tuple[Any, str, str | None]:
    """An effect handler's result made to fit: it is engine code, so never refused.

    Outputs over the value limit fail the effect (saying so) instead of
    failing its completion forever; an error text is cut to the reason limit.
    """
    if outputs is not None:
        size = json_bytes(outputs)
        if size > limits.value_bytes:
            outputs, status = None, "failed"
            error = (f"effect outputs are {size} bytes; the limit is {limits.value_bytes} "
                     "(KINFLOW_MAX_VALUE_BYTES)")
        elif _outside_int64(outputs):
            outputs, status = None, "failed"
            error = "effect outputs hold an integer outside the 64-bit range"
    if error is not None and text_bytes(error) > limits.reason_bytes:
        error = error.encode("utf-8", "surrogatepass")[:limits.reason_bytes - 3].decode(
            "utf-8", "ignore") + "..."
    return outputs, status, error
