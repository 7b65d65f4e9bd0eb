"""``/healthz`` polled every 50 ms while an attack runs: the GROQ security tests and
``bench/groq_attack.py`` both ask it whether the server stayed responsive.

``Sampling`` is the background loop (one ``sample`` every ``period`` seconds from entering
the ``async with`` until leaving it); ``HealthProbe`` is that loop asking ``/healthz``.
"""

from __future__ import annotations

import asyncio
import statistics
import time

import httpx


class Sampling:
    """Calls ``sample`` every ``period`` seconds in the background until the block ends."""

    period = 0.05

    def __init__(self) -> None:
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Sampling:
        self._task = asyncio.create_task(self._run())
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._stop.set()
        assert self._task is not None
        await self._task

    async def _run(self) -> None:
        while not self._stop.is_set():
            await self.sample()
            await asyncio.sleep(self.period)

    async def sample(self) -> None:
        raise NotImplementedError


class HealthProbe(Sampling):
    """``/healthz`` every 50 ms: each answer's latency and status, and the slow ones."""

    def __init__(self, base: str, slow: float = 0.2) -> None:
        super().__init__()
        self.base, self.slow_after = base, slow
        self.latencies: list[float] = []
        self.statuses: list[int] = []
        self.slow: list[tuple[float, float]] = []  # (seconds into the probe, latency)
        self._http = httpx.AsyncClient(timeout=60.0)
        self._first: float | None = None

    async def __aenter__(self) -> HealthProbe:
        await super().__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        try:
            await super().__aexit__(*exc)
        finally:
            await self._http.aclose()

    async def sample(self) -> None:
        began = time.perf_counter()
        if self._first is None:
            self._first = began
        response = await self._http.get(f"{self.base}/healthz")
        took = time.perf_counter() - began
        self.latencies.append(took)
        self.statuses.append(response.status_code)
        if took > self.slow_after:
            self.slow.append((round(began - self._first, 2), round(took, 3)))

    @property
    def worst(self) -> float:
        return max(self.latencies)

    def summary(self) -> str:
        """How many probes, their p50, p99 and maximum, and when the slow ones came."""
        ordered = sorted(self.latencies)
        if not ordered:
            return "no probes"
        p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
        return (f"{len(ordered)} probes, p50 {statistics.median(ordered) * 1000:.0f} ms, "
                f"p99 {p99 * 1000:.0f} ms, max {ordered[-1] * 1000:.0f} ms"
                + (f" (over {self.slow_after * 1000:.0f} ms at {self.slow} s into the probe)"
                   if self.slow else ""))
