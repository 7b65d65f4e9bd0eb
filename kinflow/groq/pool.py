"""Where GROQ evaluations run: worker threads in two lanes, the callers' and the engine's.

An evaluation is pure Python, so it runs off the event loop in a worker thread. The
threads are split so that no caller can starve the engine or another caller:

* the **engine lane** serves the engine's own queries (a spawn's ``forEach`` over the
  lake, ``initialValue`` queries): API callers never run there, so an operator's
  spawning ``startInstance`` never waits behind anybody's ``groq`` query;
* the **callers' lane** serves what API callers ask for (the ``groq`` field, cohort
  ``where`` filters), and each caller (one actor) may hold at most ``per_caller`` of its
  threads at once: the rest of that caller's evaluations wait for its own earlier ones,
  and their deadlines run while they wait, so a flood from one caller is answered
  within the timeout instead of one timeout after another.

A thread cannot be interrupted, so stopping is cooperative: the function run must
evaluate under a budget, which raises at its next check once the awaiting task is
cancelled (the client went away) or its deadline passes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TypeVar

from kinflow.groq.budget import Budget

T = TypeVar("T")


@dataclass(slots=True)
class _Slot:
    """One caller's evaluations: a semaphore of ``per_caller`` and who holds or waits."""

    semaphore: asyncio.Semaphore
    users: int = 0


@dataclass(slots=True)
class Lanes:
    """The two thread pools and the per-caller limit; threads start on first use."""

    caller_threads: int = 2
    engine_threads: int = 2
    per_caller: int = 1
    _callers: ThreadPoolExecutor | None = None
    _engine: ThreadPoolExecutor | None = None
    _slots: dict[str, _Slot] = field(default_factory=dict)

    def executor(self, caller: str | None) -> ThreadPoolExecutor:
        if caller is None:
            if self._engine is None:
                self._engine = ThreadPoolExecutor(self.engine_threads,
                                                  thread_name_prefix="kinflow-groq-engine")
            return self._engine
        if self._callers is None:
            self._callers = ThreadPoolExecutor(self.caller_threads,
                                               thread_name_prefix="kinflow-groq")
        return self._callers

    def waiting(self, caller: str) -> int:
        """Evaluations of ``caller`` running or waiting for its turn (tests, metrics)."""
        slot = self._slots.get(caller)
        return slot.users if slot is not None else 0

    async def run(self, fn: Callable[[], T], budget: Budget | None, caller: str | None
                  ) -> T:
        """Run ``fn`` in ``caller``'s lane (``None``: the engine's); cancelling the
        awaiting task cancels ``budget``."""
        if caller is None:
            return await _in_thread(self.executor(None), fn, budget)
        slot = self._slots.get(caller)
        if slot is None:
            slot = self._slots[caller] = _Slot(asyncio.Semaphore(self.per_caller))
        slot.users += 1
        if budget is not None:  # a caller's wait for its turn counts against its deadline
            budget.start()
        try:
            async with slot.semaphore:
                return await _in_thread(self.executor(caller), fn, budget)
        finally:
            slot.users -= 1
            if slot.users == 0 and self._slots.get(caller) is slot:
                del self._slots[caller]

    def close(self) -> None:
        for pool in (self._callers, self._engine):
            if pool is not None:
                pool.shutdown(wait=False)  # work already queued still runs
        self._callers = self._engine = None


def _give_way() -> None:
    """Let the event loop take the interpreter if it is waiting for it (a CPU-bound thread
    otherwise keeps it for a whole switch interval each time the loop asks)."""
    time.sleep(0)


async def _in_thread(pool: ThreadPoolExecutor, fn: Callable[[], T], budget: Budget | None
                     ) -> T:
    if budget is not None and budget.pause is None:
        budget.pause = _give_way
    future = asyncio.get_running_loop().run_in_executor(pool, fn)
    try:
        return await future
    except asyncio.CancelledError:
        if budget is not None:
            budget.cancel()
        raise


_lanes = Lanes()


def lanes() -> Lanes:
    """The process's lanes (``configure`` replaces them)."""
    return _lanes


def configure(*, caller_threads: int, engine_threads: int, per_caller: int) -> Lanes:
    """Size the lanes (from settings, when a process builds its engine); an unchanged
    configuration keeps the running threads."""
    global _lanes
    wanted = (caller_threads, engine_threads, per_caller)
    if (_lanes.caller_threads, _lanes.engine_threads, _lanes.per_caller) != wanted:
        old = _lanes
        _lanes = Lanes(caller_threads, engine_threads, per_caller)
        old.close()
    return _lanes


async def off_loop(fn: Callable[[], T], budget: Budget | None, caller: str | None = None
                   ) -> T:
    """Run ``fn`` in an evaluation thread of ``caller``'s lane (``None``: the engine's)."""
    return await _lanes.run(fn, budget, caller)
