"""Catching a stall in the act: slow operations on a timeline, py-spy dumps while they wait.

Imported as a sibling by ``bench/live.py``. A ``StallWatch`` is told when
each timed operation begins and ends. One that took longer than
``stall_ms`` gets a timeline entry (which operation, when it began, how
long it took). While one is still in flight past ``stall_ms``, the watch
takes one ``py-spy dump`` of the API process and one of its lake daemon
(at most one pair per ``every`` seconds), so the stacks show what the
stall is waiting on, not what ran after it.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


def find_py_spy() -> str | None:
    """py-spy beside this Python (the virtualenv), else on PATH, else None."""
    beside = Path(sys.executable).with_name("py-spy")
    return str(beside) if beside.exists() else shutil.which("py-spy")


class DumpThrottle:
    """Lets one dump pair through per ``every`` seconds."""

    def __init__(self, every: float) -> None:
        self.every = every
        self.last: float | None = None

    def allow(self, now: float) -> bool:
        if self.last is not None and now - self.last < self.every:
            return False
        self.last = now
        return True


@dataclass
class Stall:
    """One operation slower than the threshold; times in seconds since the run began."""

    op: str
    start: float
    duration_ms: float
    dumps: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {"op": self.op, "start_s": round(self.start, 3),
                "duration_ms": round(self.duration_ms, 1), "dumps": self.dumps}


@dataclass
class Dump:
    """One dump pair: when, which operations were overdue then (and for how long), its files."""

    at: float
    overdue: list[tuple[str, float]]
    files: list[str]

    def as_json(self) -> dict[str, Any]:
        return {"at_s": round(self.at, 3), "files": self.files,
                "overdue": [{"op": op, "in_flight_ms": round(ms, 1)} for op, ms in self.overdue]}


class StallWatch:
    """In-flight operations, the stall timeline and the dumps taken during stalls.

    ``pids`` is asked at each dump for ``{"api": pid, "lake": pid}`` (the lake
    daemon's pid changes when kinflow restarts it). With ``stall_ms`` None
    nothing is recorded; without ``spy`` or ``dump_dir`` the timeline is kept
    but no dump taken.
    """

    def __init__(self, stall_ms: float | None, pids: Callable[[], dict[str, int | None]], *,
                 spy: str | None = None, dump_dir: Path | None = None,
                 every: float = 2.0) -> None:
        self.stall_ms = stall_ms
        self.pids = pids
        self.spy = spy if dump_dir is not None else None
        self.dump_dir = dump_dir
        self.throttle = DumpThrottle(every)
        self.began = time.monotonic()
        self.timeline: list[Stall] = []
        self.dumps: list[Dump] = []
        self._tokens = itertools.count()
        self._in_flight: dict[int, tuple[str, float]] = {}
        self._caught: dict[int, list[str]] = {}  # in-flight token -> files dumped during it

    def begin(self, op: str) -> int:
        token = next(self._tokens)
        self._in_flight[token] = (op, time.monotonic())
        return token

    def end(self, token: int) -> float:
        """The operation's duration in ms (and its timeline entry when it was a stall)."""
        op, started = self._in_flight.pop(token)
        duration_ms = (time.monotonic() - started) * 1000
        files = self._caught.pop(token, [])
        if self.stall_ms is not None and duration_ms > self.stall_ms:
            self.timeline.append(Stall(op, started - self.began, duration_ms, files))
        return duration_ms

    def overdue(self, now: float) -> list[tuple[int, str, float]]:
        """(token, op, ms in flight) of every operation in flight past the threshold."""
        if self.stall_ms is None:
            return []
        return [(token, op, (now - started) * 1000)
                for token, (op, started) in self._in_flight.items()
                if (now - started) * 1000 > self.stall_ms]  # fmt: skip

    async def run(self, stop: asyncio.Event) -> None:
        """Until ``stop``: look at the in-flight operations a few times per threshold."""
        if self.stall_ms is None or self.spy is None:
            return
        tick = min(0.1, self.stall_ms / 4000)
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=tick)
            now = time.monotonic()
            late = self.overdue(now)
            if late and self.throttle.allow(now):
                await self._dump(now, late)

    async def _dump(self, now: float, late: list[tuple[int, str, float]]) -> None:
        """One dump of each process, named by its moment. Every operation in flight then
        names the files in its timeline entry should it turn out a stall (those just under
        the threshold are usually waiting on the same thing; the throttle would skip them)."""
        assert self.spy is not None and self.dump_dir is not None
        self.dump_dir.mkdir(parents=True, exist_ok=True)
        at = now - self.began
        names = [(pid, f"{at:08.2f}s-{who}.txt")
                 for who, pid in self.pids().items() if pid is not None]  # fmt: skip
        files = [name for _, name in names]
        for token in self._in_flight:
            self._caught.setdefault(token, []).extend(files)
        self.dumps.append(Dump(at, [(op, ms) for _, op, ms in late], files))
        await asyncio.gather(*(self._dump_one(pid, self.dump_dir / name)
                               for pid, name in names))  # fmt: skip

    async def _dump_one(self, pid: int, out: Path) -> None:
        with out.open("wb") as sink:
            process = await asyncio.create_subprocess_exec(
                str(self.spy), "dump", "--pid", str(pid),
                stdout=sink, stderr=asyncio.subprocess.STDOUT)  # fmt: skip
            try:
                await asyncio.wait_for(process.wait(), timeout=30)
            except TimeoutError:
                process.kill()
                await process.wait()
