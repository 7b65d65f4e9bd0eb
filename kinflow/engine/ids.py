"""Entropy for the shell: instance ids, row keys and claim tokens.

The core draws nothing itself (``kinflow.core`` reads no clock and no
randomness): the shell hands these factories to every ``PlanContext`` and
draws each new instance's id before planning its creation.
"""

from __future__ import annotations

import secrets
import time

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def new_instance_id() -> str:
    """``instance.<ULID>``: time-ordered, so ids sort by start time."""
    value = (int(time.time() * 1000) << 80) | secrets.randbits(80)
    chars = []
    for _ in range(26):
        chars.append(_CROCKFORD[value & 31])
        value >>= 5
    return "instance." + "".join(reversed(chars))


def random_key() -> str:
    """An array row's ``_key`` (unique within its instance)."""
    return secrets.token_hex(6)


def random_token() -> str:
    """An effect claim's token: only its holder may complete the effect."""
    return secrets.token_hex(8)
