"""A budget for one query: its length, its parameters, the work it does, the values it
builds, a deadline and a cancel flag.

Work is counted in steps: each pass over an array is charged its length before it
starts (a filter, a map, ``order``, ``score``), and each function or operator that
loops charges what its loop will do (``array::intersects`` the product of its two
lengths, ``string::split`` the text's length, ``in`` the array's length, sorting
``n log n``). Values a query builds (strings joined or concatenated, arrays and
objects assembled) are charged their estimated size in bytes, so doubling a value
a few dozen times is refused before the memory is asked for. Loops over long arrays
call :meth:`Budget.check` between chunks, so the deadline and the cancel flag are
seen inside every loop, not only when a pass is charged. The clock is injected:
this package reads no clock of its own.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from kinflow.groq.errors import GroqCancelled, GroqLimitExceeded

#: charges between two deadline checks (a charge is one pass or one function's loop)
CHECK_EVERY = 16
#: steps charged between two deadline checks, whatever the number of charges
CHECK_STEPS = 4096
#: elements a loop handles between two checks of the deadline and the cancel flag
CHUNK = 256
#: estimated bytes of one array slot, one object entry, one new string's header
SLOT_BYTES = 8
ENTRY_BYTES = 16
STRING_BYTES = 48


class Budget:
    """Limits for one evaluation; ``None`` for a limit means unbounded.

    ``timeout`` needs ``clock`` (seconds, monotonic); the deadline starts at
    :meth:`start`, which the evaluator calls when it begins. One budget serves
    one evaluation at a time (several rounds of one query may share it, and a
    cohort filter shares one across every row it tests).
    """

    __slots__ = ("_calls", "_since", "built", "cancelled", "clock", "deadline", "max_fetched",
                 "max_length", "max_params_bytes", "max_scanned", "max_value_bytes", "pause",
                 "scanned", "started", "stopped", "timeout")

    def __init__(self, *, max_scanned: int | None = None, timeout: float | None = None,
                 clock: Callable[[], float] | None = None, max_length: int | None = None,
                 max_fetched: int | None = None, max_value_bytes: int | None = None,
                 max_params_bytes: int | None = None) -> None:
        if timeout is not None and clock is None:
            raise ValueError("a timeout needs a clock")
        #: steps one query may take: elements visited, comparisons, characters scanned
        self.max_scanned = max_scanned
        #: documents one query may read from the store (memory, not CPU: each is held)
        self.max_fetched = max_fetched
        #: longest query text (parsing is pure Python too: 800 KB of GROQ takes seconds)
        self.max_length = max_length
        #: estimated bytes of the values one query builds, and of its answer
        self.max_value_bytes = max_value_bytes
        #: JSON bytes of the parameters a query is given
        self.max_params_bytes = max_params_bytes
        self.timeout = timeout
        self.clock = clock
        self.scanned = 0
        self.built = 0
        self.started: float | None = None
        self.deadline: float | None = None
        self.cancelled = False
        #: why the evaluation stopped early: "cancelled", "time", "documents-scanned",
        #: "value-bytes"
        self.stopped: str | None = None
        self._calls = 0
        self._since = 0
        #: called at every check of the deadline: a worker thread gives the event loop
        #: its turn there (``kinflow.groq.pool``); ``None`` in the caller's own thread
        self.pause: Callable[[], None] | None = None

    def check_length(self, source: str) -> None:
        """Refuse a query text longer than ``max_length`` before anything parses it."""
        if self.max_length is not None and len(source) > self.max_length:
            raise GroqLimitExceeded(
                f"the query is longer than {self.max_length} characters",
                limit="query-length", maxLength=self.max_length, length=len(source))

    def check_params(self, params: Mapping[str, Any] | None) -> None:
        """Refuse parameters larger than ``max_params_bytes`` (as JSON) before any work."""
        if self.max_params_bytes is None or not params:
            return
        size = len(json.dumps(params, default=str, ensure_ascii=False).encode())
        if size > self.max_params_bytes:
            raise GroqLimitExceeded(
                f"the query's parameters are larger than {self.max_params_bytes} bytes",
                limit="params-bytes", maxParamsBytes=self.max_params_bytes, paramsBytes=size)

    def start(self) -> None:
        """Start the clock (idempotent: a second round keeps the first deadline)."""
        if self.started is None and self.clock is not None:
            self.started = self.clock()
            if self.timeout is not None:
                self.deadline = self.started + self.timeout

    def cancel(self) -> None:
        """Ask the evaluation to stop at its next check (safe from any thread)."""
        self.cancelled = True

    def charge(self, steps: int) -> None:
        """Account for ``steps`` of work about to be done; raise when a limit is passed."""
        if self.cancelled:
            self._cancelled()
        self.scanned += steps
        limit = self.max_scanned
        if limit is not None and self.scanned > limit:
            self.stopped = "documents-scanned"
            raise GroqLimitExceeded(
                f"the query visits more than {limit} documents, array elements or "
                "comparisons", limit="documents-scanned", maxScanned=limit,
                scanned=self.scanned)
        self._calls += 1
        self._since += steps
        if self.deadline is not None and (self._calls % CHECK_EVERY == 0
                                          or self._since >= CHECK_STEPS):
            self._since = 0
            self.check_time()

    def build(self, size: int) -> None:
        """Account for a value of about ``size`` bytes about to be built."""
        if self.cancelled:
            self._cancelled()
        self.built += size
        limit = self.max_value_bytes
        if limit is not None and self.built > limit:
            self._too_big(self.built)
        self._calls += 1
        if self.deadline is not None and self._calls % CHECK_EVERY == 0:
            self.check_time()

    def check(self) -> None:
        """The check a loop makes between chunks: the cancel flag and the deadline."""
        if self.cancelled:
            self._cancelled()
        if self.deadline is not None:
            self.check_time()
        elif self.pause is not None:
            self.pause()

    def chunks(self, items: list[Any]) -> Iterator[list[Any]]:
        """``items`` in slices of ``CHUNK``, checking the budget before each one."""
        if len(items) <= CHUNK:
            yield items
            return
        for start in range(0, len(items), CHUNK):
            self.check()
            yield items[start:start + CHUNK]

    def check_time(self) -> None:
        """Raise when the deadline has passed."""
        if self.pause is not None:
            self.pause()
        if self.deadline is None or self.clock is None or self.started is None:
            return
        now = self.clock()
        if now > self.deadline:
            self.stopped = "time"
            raise GroqLimitExceeded(
                f"the query ran longer than {self.timeout:g} s",
                limit="time", timeoutSeconds=self.timeout,
                elapsedSeconds=round(now - self.started, 3), scanned=self.scanned)

    def check_answer(self, value: Any) -> None:
        """Refuse an answer whose estimated size is larger than ``max_value_bytes``.

        An answer may share one value many times over (``{"a": [a, a]}`` repeated),
        so its written size can be far beyond the memory it holds: this walk counts
        every value as often as serialising the answer would write it, and stops as
        soon as the estimate passes the limit (at most ``limit / 8`` values visited).
        """
        limit = self.max_value_bytes
        if limit is None:
            return
        size = 0
        pending = [value]
        visited = 0
        while pending:
            v = pending.pop()
            visited += 1
            if visited % 4096 == 0:
                self.check()
            if type(v) is str:
                size += len(v) + 8
            elif type(v) is dict or isinstance(v, Mapping):
                size += 8 + ENTRY_BYTES * len(v)
                for key, item in v.items():
                    size += len(str(key))
                    pending.append(item)
            elif type(v) is list or type(v) is tuple:
                size += 8 + SLOT_BYTES * len(v)
                pending.extend(v)
            else:
                size += 8
            if size > limit:
                self._too_big(size, answer=True)

    def _too_big(self, size: int, answer: bool = False) -> None:
        self.stopped = "value-bytes"
        what = "an answer" if answer else "values"
        raise GroqLimitExceeded(
            f"the query builds {what} larger than {self.max_value_bytes} bytes",
            limit="value-bytes", maxValueBytes=self.max_value_bytes, valueBytes=size)

    def _cancelled(self) -> None:
        self.stopped = "cancelled"
        raise GroqCancelled("the query was cancelled", scanned=self.scanned)


def chunked(items: list[Any], budget: Budget | None) -> Iterator[list[Any]] | list[list[Any]]:
    """``items`` in checked slices under ``budget``; one slice without a budget."""
    if budget is None or len(items) <= CHUNK:
        return [items]
    return budget.chunks(items)
