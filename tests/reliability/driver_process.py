"""What the reliability tests that SIGKILL a driver process share, on both sides of the kill.

In the driver (``python -m tests.reliability.<name>_driver ...``): ``KillAt``, fault
points that SIGKILL the process instead of raising. In the test: a lake daemon of the
test's own with an engine on it (``engine_on_own_lake``; ``killAllSessions`` reaches
nobody else), the driver started in a session of its own with its output read line by
line (``driver``: ``ready`` once it prints it, a hook per other line), and a driver run
until it dies (``run_until_it_dies``). Whatever way a test leaves, the driver's process
group is SIGKILLed and reaped.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kinflow.core.context import Limits
from kinflow.engine import Engine
from kinflow.engine.faults import Faults
from kinflow.storage.embedded import EmbeddedLake
from tests.reliability import cleanup_handler
from tests.reliability.family import ROOT, open_lake


class KillAt(Faults):
    """Fault points that SIGKILL the process the ``nth`` time ``point`` is reached."""

    def __init__(self, point: str, nth: int = 1) -> None:
        super().__init__()
        self.point, self.left = point, nth

    def check(self, point: str) -> None:
        if point != self.point:
            return
        self.left -= 1
        if self.left <= 0:
            print(f"killing at {point}", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)


@contextlib.asynccontextmanager
async def engine_on_own_lake(data_dir: Path, database: str, definitions: list[dict[str, Any]],
                             *, limits: Limits | None = None, effect_log: Path | None = None
                             ) -> AsyncIterator[tuple[str, Engine]]:
    """A lake daemon started in ``data_dir`` (commits synced, so a kill loses nothing
    committed) and a ready engine on ``database`` with ``definitions`` deployed (and the
    holds' cleanup handler logging to ``effect_log``, when given): the daemon's URI and the
    engine. The daemon is stopped afterwards."""
    daemon = EmbeddedLake(data_dir, sync_on_commit=True, test_commands=False)
    uri = daemon.start()
    lake = open_lake(uri, database)
    try:
        engine = Engine(lake, limits=limits)
        if effect_log is not None:
            cleanup_handler.register(engine, effect_log)  # the heartbeat runs cleanups too
        await engine.ensure_ready()
        await engine.deploy(definitions)
        yield uri, engine
    finally:
        await lake.close()
        await asyncio.to_thread(daemon.stop)


@dataclass
class Driver:
    """A driver process and what it printed (the last ``lines``, ``ready`` once it said so)."""

    process: asyncio.subprocess.Process
    lines: deque[str]
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    pump: asyncio.Task[None] | None = None

    async def _read(self, on_line: Callable[[str], None]) -> None:
        assert self.process.stdout is not None
        while raw := await self.process.stdout.readline():
            line = raw.decode(errors="replace").rstrip()
            self.lines.append(line)
            if line == "ready":
                self.ready.set()
            else:
                on_line(line)

    async def finished(self) -> int:
        """Its exit status, once it exited and every line it printed was read."""
        status = await self.process.wait()
        assert self.pump is not None
        await self.pump
        return status

    def text(self) -> str:
        return "\n".join(self.lines)


@contextlib.asynccontextmanager
async def driver(module: str, *args: str, on_line: Callable[[str], None] = lambda _: None,
                 env: Mapping[str, str] | None = None, keep: int | None = None,
                 ready: asyncio.Event | None = None) -> AsyncIterator[Driver]:
    """``python -m module args...`` from the repository root, in a session of its own, its
    stdout and stderr read line by line (the last ``keep`` kept; all when None; ``ready``
    set when it prints ``ready``, every other line handed to ``on_line``)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", module, *args, cwd=ROOT, env=env, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT, start_new_session=True)
    running = Driver(process, deque(maxlen=keep), ready or asyncio.Event())
    running.pump = asyncio.create_task(running._read(on_line))
    try:
        yield running
    finally:
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            await process.wait()
        running.pump.cancel()


async def run_until_it_dies(module: str, *args: str, timeout: float) -> tuple[int, str]:
    """Run a driver that should kill itself: its exit status and everything it printed
    (killed after ``timeout`` seconds if it is still running)."""
    async with driver(module, *args) as running:
        try:
            status = await asyncio.wait_for(running.finished(), timeout)
        except TimeoutError:
            raise AssertionError(f"{module} still running after {timeout:.0f} s:\n"
                                 f"{running.text()}") from None
        return status, running.text()


async def run_until_killed_at(point: str, module: str, *args: str, timeout: float) -> str:
    """Run a driver that must SIGKILL itself at the fault point ``point``; what it printed."""
    status, text = await run_until_it_dies(module, *args, timeout=timeout)
    assert status == -signal.SIGKILL, f"driver exited {status}:\n{text}"
    assert f"killing at {point}" in text, text
    return text
