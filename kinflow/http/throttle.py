"""Failed token attempts counted per client address, so tokens cannot be guessed fast.

A fixed window per address: after ``limit`` failures inside ``window``
seconds the address gets ``too-many-attempts`` (HTTP 429) for every
authenticated request until its window ends, whatever token it sends (a
valid token answered differently would turn the lockout into an oracle).
A success never clears the count, so a caller holding a viewer token cannot
interleave valid requests to keep guessing an admin's. The table is bounded:
expired windows go first, then the oldest; IPv6 addresses count per /64,
the block one host usually controls. Every loopback address (127.0.0.0/8,
``::1``) is one client: a local caller can bind any of 16 million of them,
and a bucket per alias would let it guess without limit.
"""

from __future__ import annotations

import ipaddress
import math
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from kinflow.errors import KinflowError


class TooManyAttempts(KinflowError):
    """Too many failed token attempts from one client address; ``details.retryAfter`` says when."""

    code = "too-many-attempts"


@dataclass(slots=True)
class _Window:
    started: float
    failures: int


LOOPBACK = "loopback"


def client_key(host: str | None) -> str:
    """The address failures are counted under: IPv4 as is, IPv6 by its /64, loopback as one."""
    if not host:
        return "unknown"
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if address.is_loopback:
        return LOOPBACK
    if isinstance(address, ipaddress.IPv6Address):
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)


class FailureThrottle:
    """A bounded table of failed attempts per client address (one per process)."""

    def __init__(self, limit: int, window: float, capacity: int,
                 clock: Callable[[], float] = time.monotonic) -> None:  # fmt: skip
        self.limit = limit
        self.window = window
        self.capacity = max(1, capacity)
        self._clock = clock
        self._windows: OrderedDict[str, _Window] = OrderedDict()

    @property
    def enabled(self) -> bool:
        return self.limit > 0

    def __len__(self) -> int:
        return len(self._windows)

    def check(self, host: str | None) -> None:
        """Refuse with ``TooManyAttempts`` while ``host`` has used up its window."""
        if not self.enabled:
            return
        entry = self._windows.get(client_key(host))
        if entry is None or entry.failures < self.limit:
            return
        remaining = entry.started + self.window - self._clock()
        if remaining <= 0:
            return
        retry_after = max(1, math.ceil(remaining))
        raise TooManyAttempts(
            f"too many failed token attempts from this address; retry in {retry_after} s",
            retryAfter=retry_after, limit=self.limit, window=self.window,
        )

    def failed(self, host: str | None) -> None:
        """Count one failed attempt from ``host``."""
        if not self.enabled:
            return
        key, now = client_key(host), self._clock()
        entry = self._windows.get(key)
        if entry is None or now - entry.started >= self.window:
            self._windows.pop(key, None)
            self._make_room(now)
            self._windows[key] = _Window(started=now, failures=1)
        else:
            entry.failures += 1

    def _make_room(self, now: float) -> None:
        """Drop expired windows (oldest first, they lead the order), then the oldest live one."""
        while self._windows:
            _key, oldest = next(iter(self._windows.items()))
            if now - oldest.started < self.window and len(self._windows) < self.capacity:
                return
            self._windows.popitem(last=False)
