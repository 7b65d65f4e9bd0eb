"""Bounding the embedded lake daemon's memory: past its budget it is restarted.

SecantusDB 0.7.0b3 leaks on every transaction: its bundled WiredTiger 11.2
Python binding keeps one reference to each cursor after the cursor is closed,
and each transaction opens its cursors afresh, so every cursor a transaction
used stays in memory for good, with the last key and value written through
it. A transaction leaves about 10 KB behind, plus the largest documents it
wrote: a 6 MiB document rewritten in a transaction leaves about 13 MiB (the
document and its oplog entry). No daemon setting frees that memory
(``cache_size`` bounds WiredTiger's cache, not these Python objects); only a
new process does. See docs/performance.md for the measurements.

So the process that owns the daemon reads the daemon's resident memory from
``/proc`` every ``interval`` seconds and, past ``budget_mib``, stops it
gracefully (SIGTERM: WiredTiger checkpoints and the process exits in about
two seconds; SIGKILL if it takes longer than ``stop_timeout``). The keeper
(``keeper.py``) then starts it again on the same port, and every client,
in every process, reconnects by itself.

Given ``restart`` (``open_lake`` passes the keeper's ``restart_planned``), the
guard leaves the whole restart to it: the lake's operations are held back and
drained first, so the restart costs callers latency, not errors.

Data alone costs the daemon little (a million small documents: about
230 MiB right after a restart, measured), but one statement that reads a
whole type decodes every document of it and leaves the daemon near 1 GiB. A
restart while such a read runs would cut it, and the read, run again, would
grow the daemon the same way: so a long read postpones the restart
(``restart_gate.py``) and the guard asks again at its next look. Should a
daemon still come back large, the RSS at the first look after a restart this
guard made is its floor, and the next restart waits until the daemon has
grown past the budget *and* by half the budget above that floor (the leak,
not the data); a floor near the budget is logged once, with the setting to
raise.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from kinflow.storage.embedded import EmbeddedLake

log = logging.getLogger("kinflow.lake")

MIN_CACHE_MIB = 256  # a transaction writing one 16 MB document needs ~230 MiB of cache
MIN_BUDGET_MIB = 512


def cache_mib_for(budget_mib: int) -> int:
    """The WiredTiger cache for a daemon memory budget: a quarter of it, at least 256 MiB.

    The daemon refuses a transaction whose writes exceed 15% of its cache
    (``TransactionTooLargeForCache``, counting each document twice), so below
    about 230 MiB an instance near MongoDB's 16 MB limit could not be written.
    """
    return max(MIN_CACHE_MIB, budget_mib // 4)


def rss_mib(pid: int) -> float | None:
    """A process's resident set size in MiB (``VmRSS``), or None once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


@dataclass
class MemoryGuard:
    """Restarts the daemon this process owns once its memory passes ``budget_mib``."""

    embedded: EmbeddedLake
    budget_mib: float
    interval: float = 1.0
    stop_timeout: float = 10.0
    recycles: int = 0
    last_rss_mib: float | None = None
    restart: Callable[[], Awaitable[bool]] | None = None
    _stopping: tuple[int, float] | None = field(default=None, repr=False)
    _floor: tuple[int, float] | None = field(default=None, repr=False)  # (pid, MiB)
    _restarted: bool = field(default=False, repr=False)
    _warned: bool = field(default=False, repr=False)  # this episode past the budget is logged
    _task: asyncio.Task[None] | None = field(default=None, repr=False)

    def start(self) -> None:
        if self._task is None and self.budget_mib > 0:
            self._task = asyncio.create_task(self._run(), name="lake-memory-guard")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.wait({task}, timeout=5.0)

    async def _run(self) -> None:
        while True:
            try:
                if self.restart is None:
                    self.check()
                elif self.over_budget() and await self.restart():
                    self.recycles += 1
                    self.note_restart()
            except Exception:  # a failed look must not end the watch
                log.exception("checking the embedded lake's memory failed")
            await asyncio.sleep(self.interval)

    def over_budget(self) -> bool:
        """The daemon this process owns is past its budget (logged when it is)."""
        pid = self.embedded.pid
        if pid is None or not self.embedded.owned:
            return False
        rss = self.last_rss_mib = rss_mib(pid)
        if rss is None or not self._past(pid, rss):
            return False
        if not self._warned:  # once: a restart a long read postpones is asked for each look
            self._warned = True
            log.warning("the embedded lake uses %.0f MiB, past its budget of %.0f MiB "
                        "(KINFLOW_EMBEDDED_MEMORY_MB); restarting it once no long read "
                        "runs", rss, self.budget_mib)
        return True

    def check(self) -> bool:
        """Look once; return True when this look stopped the daemon."""
        pid = self.embedded.pid
        if pid is None or not self.embedded.owned:
            return False  # only the owner restarts the daemon
        if self._stopping is not None:
            stopping, since = self._stopping
            if stopping == pid and rss_mib(pid) is not None:
                if time.monotonic() - since > self.stop_timeout:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                return False
            self._stopping = None  # it exited; the keeper starts the next one
        rss = self.last_rss_mib = rss_mib(pid)
        if rss is None or not self._past(pid, rss):
            return False
        log.warning(
            "the embedded lake uses %.0f MiB, past its budget of %.0f MiB "
            "(KINFLOW_EMBEDDED_MEMORY_MB); restarting it", rss, self.budget_mib,
        )
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            return False
        self._stopping = (pid, time.monotonic())
        self.recycles += 1
        self.note_restart()
        return True

    def note_restart(self) -> None:
        """This guard restarted the daemon: its next look takes the new daemon's floor."""
        self._restarted, self._warned = True, False

    def _past(self, pid: int, rss: float) -> bool:
        """Past the budget, and past the floor the last restart left by half the budget."""
        if self._restarted and (self._stopping is None or self._stopping[0] != pid):
            self._restarted, self._floor = False, (pid, rss)
            if rss > self.budget_mib * 0.75:
                log.warning("the embedded lake uses %.0f MiB right after a restart, near its "
                            "budget of %.0f MiB: it holds that much data, not a leak; raise "
                            "KINFLOW_EMBEDDED_MEMORY_MB", rss, self.budget_mib)
        floor = self._floor[1] if self._floor is not None and self._floor[0] == pid else 0.0
        return rss > max(self.budget_mib, floor + self.budget_mib / 2)
