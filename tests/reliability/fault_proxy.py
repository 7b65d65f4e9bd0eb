"""A TCP proxy between kinflow processes and the lake that injects faults on the wire.

Bound to 127.0.0.1 only. It forwards bytes both ways and, at a configurable
rate (faults per second, at exponentially spread moments), arms one fault that
the next forwarded chunk sets off, so every fault lands where traffic is:

* ``reset:request-lost`` closes both sides of a connection instead of
  forwarding a request (preferably one that carries a transaction number, so
  most resets cut a transaction in the middle);
* ``reset:reply-lost`` forwards the request, then closes both sides before the
  reply can come back (the lake applied what the client never hears about);
* ``delay`` holds one chunk for a random fraction of a second;
* ``blackhole`` goes silent for a few seconds: every connection, new ones too,
  has its bytes accepted and held, not forwarded; then the connection that set
  it off is reset and the others carry on with what was held.

Apart from the armed faults, ``FaultPlan.idle`` closes a connection whose client has
sent nothing for that many seconds, as the embedded daemon does after 300 s
(``idle-cut``). Only connections that carried a command other than ``hello`` are
cut: the driver's monitor waits on a held ``hello`` without sending, which the
daemon, busy answering it, never counts as idle.

Each fault fired is counted by kind (``counts``). ``ProxyThread`` runs the proxy
on an event loop of its own in a thread, so the test's own loop never slows it.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import threading
from collections import Counter
from dataclasses import dataclass, field

KINDS = ("reset", "delay", "blackhole")
TXN_MARK = b"txnNumber\x00"
"""The BSON field name every command inside a transaction carries."""
TXN_PREFERENCE_SECONDS = 3.0
"""An armed reset waits this long for a request inside a transaction, then takes any."""
HELLOS = (b"hello\x00", b"isMaster\x00", b"ismaster\x00")
"""The handshake and monitoring commands, which never make a connection cuttable."""


@dataclass
class FaultPlan:
    """How often and which faults: ``rate`` per second, ``weights`` per kind."""

    rate: float = 0.5
    weights: dict[str, float] = field(default_factory=lambda: {"reset": 5, "delay": 4,
                                                               "blackhole": 1})
    delay: tuple[float, float] = (0.05, 0.6)
    blackhole: tuple[float, float] = (2.0, 4.0)
    idle: float | None = None  # seconds of client silence that close a command connection


def injected(counts: dict[str, int]) -> int:
    """Faults fired (``reset-in-transaction`` only tells which resets cut a transaction)."""
    return sum(n for kind, n in counts.items() if kind != "reset-in-transaction")


class FaultProxy:
    """Forward ``127.0.0.1:<port>`` to ``127.0.0.1:<upstream>``, injecting ``plan``'s faults."""

    def __init__(self, upstream: int, plan: FaultPlan, seed: int) -> None:
        self.upstream = upstream
        self.plan = plan
        self.rng = random.Random(seed)
        self.counts: Counter[str] = Counter()
        self.connections = 0
        self.armed: str | None = None
        self.armed_at = 0.0
        self.enabled = True
        self._silent_until = 0.0
        self._lock = threading.Lock()
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self._tasks.add(asyncio.create_task(self._schedule()))
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for writer in list(self._writers):
            writer.transport.abort()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 5)

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self.counts)

    def _count(self, kind: str) -> None:
        with self._lock:
            self.counts[kind] += 1

    async def _schedule(self) -> None:
        """Arm one fault at a time, at exponentially spread moments."""
        kinds = list(self.plan.weights)
        weights = [self.plan.weights[k] for k in kinds]
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(self.rng.expovariate(self.plan.rate))
            if self.enabled and self.armed is None:
                self.armed = self.rng.choices(kinds, weights)[0]
                self.armed_at = loop.time()

    def _take(self, upstream: bool, chunk: bytes) -> str | None:
        """The armed fault if this chunk sets it off (resets prefer a request in a
        transaction, for a while)."""
        kind = self.armed
        if kind is None or not self.enabled:
            return None
        if kind == "reset":
            waited = asyncio.get_running_loop().time() - self.armed_at
            if not upstream or (TXN_MARK not in chunk and waited < TXN_PREFERENCE_SECONDS):
                return None
        self.armed = None
        return kind

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self._writers.add(writer)
        self.connections += 1
        try:
            try:
                up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream)
            except OSError:
                return
            self._writers.add(up_writer)
            pair = (writer, up_writer)
            pumps = [asyncio.create_task(self._pump(reader, up_writer, pair, upstream=True)),
                     asyncio.create_task(self._pump(up_reader, writer, pair, upstream=False))]
            try:
                await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for pump in pumps:
                    pump.cancel()
                for pump in pumps:
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await pump
                self._writers.discard(up_writer)
                up_writer.transport.abort()
        finally:
            self._writers.discard(writer)
            writer.transport.abort()
            self._tasks.discard(task)

    async def _hold_while_silent(self) -> None:
        left = self._silent_until - asyncio.get_running_loop().time()
        if left > 0:  # one blackhole at a time: the next is armed only after this one
            await asyncio.sleep(left)

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    pair: tuple[asyncio.StreamWriter, asyncio.StreamWriter], *,
                    upstream: bool) -> None:
        loop = asyncio.get_running_loop()
        commands = False  # (upstream: the client has sent a command other than hello)
        while True:
            try:
                async with asyncio.timeout(self.plan.idle if upstream and commands else None):
                    chunk = await reader.read(65536)
            except TimeoutError:
                self._count("idle-cut")
                for side in pair:
                    side.transport.abort()
                return
            if not chunk:
                return
            commands = commands or not any(hello in chunk for hello in HELLOS)
            await self._hold_while_silent()
            kind = self._take(upstream, chunk)
            if kind == "reset":
                lost = self.rng.random() < 0.5
                if lost:
                    writer.write(chunk)
                    with contextlib.suppress(ConnectionError):
                        await writer.drain()
                    await asyncio.sleep(0)
                self._count("reset:reply-lost" if lost else "reset:request-lost")
                if TXN_MARK in chunk:
                    self._count("reset-in-transaction")
                for side in pair:
                    side.transport.abort()
                return
            if kind == "delay":
                self._count("delay")
                await asyncio.sleep(self.rng.uniform(*self.plan.delay))
            elif kind == "blackhole":
                self._count("blackhole")
                self._silent_until = loop.time() + self.rng.uniform(*self.plan.blackhole)
                await self._hold_while_silent()
                for side in pair:
                    side.transport.abort()
                return
            writer.write(chunk)
            await writer.drain()


class ProxyThread:
    """A ``FaultProxy`` on its own event loop in a daemon thread; ``with`` stops it."""

    def __init__(self, upstream: int, plan: FaultPlan, seed: int) -> None:
        self.proxy = FaultProxy(upstream, plan, seed)
        self.loop = asyncio.new_event_loop()
        self.port = 0
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fault-proxy", daemon=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.port = self.loop.run_until_complete(self.proxy.start())
        self._started.set()
        self.loop.run_forever()
        self.loop.run_until_complete(self.proxy.stop())
        self.loop.close()

    def __enter__(self) -> ProxyThread:
        self._thread.start()
        if not self._started.wait(10):
            raise RuntimeError("the fault proxy did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(15)

    def uri(self) -> str:
        return f"mongodb://127.0.0.1:{self.port}/?directConnection=true"

    def faults(self, enabled: bool) -> None:
        """Turn injection on or off (the checker's own reads go around the proxy anyway)."""
        self.loop.call_soon_threadsafe(setattr, self.proxy, "enabled", enabled)

    def counts(self) -> dict[str, int]:
        return self.proxy.snapshot()
