"""Content hashes of stored definitions.

A definition's identity for versioning is the FNV-1a 64-bit hash (16 hex
digits) of its canonical JSON: object keys sorted by UTF-16 code unit (the
order JavaScript uses, so hashes match the reference engine's), no
insignificant whitespace, non-ASCII kept as is. The envelope (``_id``,
``version``, ...) is never part of the hashed content.
"""

from __future__ import annotations

import json
from typing import Any

_FNV_OFFSET = 0xCBF29CE484222325
_FNV_PRIME = 0x100000001B3
_MASK = 0xFFFFFFFFFFFFFFFF


def _utf16_key(key: str) -> bytes:
    return key.encode("utf-16-be", "surrogatepass")


def canonical(value: Any) -> Any:
    """``value`` with every object's keys in canonical order."""
    if isinstance(value, dict):
        return {k: canonical(value[k]) for k in sorted(value, key=_utf16_key)}
    if isinstance(value, list):
        return [canonical(item) for item in value]
    return value


def canonical_json(value: Any) -> str:
    return json.dumps(canonical(value), separators=(",", ":"), ensure_ascii=False)


def fnv1a64(data: bytes) -> int:
    digest = _FNV_OFFSET
    for byte in data:
        digest = ((digest ^ byte) * _FNV_PRIME) & _MASK
    return digest


def content_hash(stored: dict[str, Any]) -> str:
    return f"{fnv1a64(canonical_json(stored).encode('utf-8')):016x}"
