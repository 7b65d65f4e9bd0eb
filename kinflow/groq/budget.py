"""A budget for one query: its length, elements visited, a deadline, a cancel flag.

The evaluator charges the budget once per pass over an array (a filter, a
map, a flat-map, ``order``, ``score``): the charge is the array's length, so
a nested query pays for every element its inner loops visit, while the check
costs one call per pass rather than one per element. Every call also looks
at the cancel flag (set from another thread when nobody awaits the result
any more) and, every few calls, at the deadline. The clock is injected: this
package reads no clock of its own.
"""

from __future__ import annotations

from collections.abc import Callable

from kinflow.groq.errors import GroqCancelled, GroqLimitExceeded

#: charges between two deadline checks (a charge is one pass over an array)
CHECK_EVERY = 16


class Budget:
    """Limits for one evaluation; ``None`` for a limit means unbounded.

    ``timeout`` needs ``clock`` (seconds, monotonic); the deadline starts at
    :meth:`start`, which the evaluator calls when it begins. One budget serves
    one evaluation at a time (several rounds of one query may share it).
    """

    __slots__ = ("_calls", "cancelled", "clock", "deadline", "max_fetched", "max_length",
                 "max_scanned", "scanned", "started", "stopped", "timeout")

    def __init__(self, *, max_scanned: int | None = None, timeout: float | None = None,
                 clock: Callable[[], float] | None = None, max_length: int | None = None,
                 max_fetched: int | None = None) -> None:
        if timeout is not None and clock is None:
            raise ValueError("a timeout needs a clock")
        self.max_scanned = max_scanned
        #: documents one query may read from the store (memory, not CPU: each is held)
        self.max_fetched = max_fetched
        #: longest query text (parsing is pure Python too: 800 KB of GROQ takes seconds)
        self.max_length = max_length
        self.timeout = timeout
        self.clock = clock
        self.scanned = 0
        self.started: float | None = None
        self.deadline: float | None = None
        self.cancelled = False
        #: why the evaluation stopped early: "cancelled", "time", "documents-scanned"
        self.stopped: str | None = None
        self._calls = 0

    def check_length(self, source: str) -> None:
        """Refuse a query text longer than ``max_length`` before anything parses it."""
        if self.max_length is not None and len(source) > self.max_length:
            raise GroqLimitExceeded(
                f"the query is longer than {self.max_length} characters",
                limit="query-length", maxLength=self.max_length, length=len(source))

    def start(self) -> None:
        """Start the clock (idempotent: a second round keeps the first deadline)."""
        if self.started is None and self.clock is not None:
            self.started = self.clock()
            if self.timeout is not None:
                self.deadline = self.started + self.timeout

    def cancel(self) -> None:
        """Ask the evaluation to stop at its next check (safe from any thread)."""
        self.cancelled = True

    def charge(self, elements: int) -> None:
        """Account for a pass over ``elements`` items; raise when a limit is passed."""
        if self.cancelled:
            self.stopped = "cancelled"
            raise GroqCancelled("the query was cancelled", scanned=self.scanned)
        self.scanned += elements
        limit = self.max_scanned
        if limit is not None and self.scanned > limit:
            self.stopped = "documents-scanned"
            raise GroqLimitExceeded(
                f"the query visits more than {limit} documents or array elements",
                limit="documents-scanned", maxScanned=limit, scanned=self.scanned)
        self._calls += 1
        if self.deadline is not None and self._calls % CHECK_EVERY == 0:
            self.check_time()

    def check_time(self) -> None:
        """Raise when the deadline has passed."""
        if self.deadline is None or self.clock is None or self.started is None:
            return
        now = self.clock()
        if now > self.deadline:
            self.stopped = "time"
            raise GroqLimitExceeded(
                f"the query ran longer than {self.timeout:g} s",
                limit="time", timeoutSeconds=self.timeout,
                elapsedSeconds=round(now - self.started, 3), scanned=self.scanned)
