"""A viewer's GROQ attacks against ``kinflow serve``, with what they cost the server.

Starts ``kinflow serve`` as the README does (tokens for a viewer, an operator and an
admin; ``KINFLOW_GROQ_TIMEOUT=2``) on a fresh data directory and replays the attacks
GROQ budgets bound:

* ``array::intersects`` over two 7,000-character parameters split into characters
  (49 M pairwise comparisons), with the default bounds and with the time bound only;
* a 24-stage doubling of a string (``{"a": a + a}`` repeated), the server's RSS sampled
  every 50 ms meanwhile;
* a cohort ``where`` filter doing the same pairwise work on a 5-row cohort
  (``Cohort.page`` by the viewer, ``fireCohort`` by the operator).

Meanwhile ``/healthz`` is polled every 50 ms, and during the time-bound attack an
operator starts a parent whose first stage spawns from a lake query (the engine's own
GROQ). Prints each answer's code and time, the probe's latencies, the spawn's latency
and the RSS growth.

    .venv/bin/python bench/groq_attack.py
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from _process import free_port, launch_serve, rss_kib, stop_group, wait_healthy

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.reliability import groq_attacks as attack
from tests.reliability.health_probe import HealthProbe, Sampling

VIEWER = "bench-viewer-token-0123456789"
OPERATOR = "bench-operator-token-0123456789"
ADMIN = "bench-admin-token-0123456789"
TOKENS = f"{VIEWER}=vera:viewer,{OPERATOR}=otto:operator,{ADMIN}=ada:admin"
TIMEOUT = 2.0
PARAMS = {"a": "x" * 7000, "b": "y" * 7000}
PAGE = attack.cohort_page("work")
FIRE_COHORT = attack.fire_cohort("work")


def child() -> dict[str, Any]:
    return {"name": "c", "title": "C", "initialStage": "work", "lifecycle": "child",
            "fields": [{"name": "item", "type": "string", "initialValue": {"type": "input"}}],
            "stages": [{"name": "work", "activities": [{"name": "task", "actions": [
                {"name": "finish", "status": "done"}]}],
                "transitions": [{"name": "to-done", "to": "done"}]}, {"name": "done"}]}


def spawning(name: str, for_each: str, first: str) -> dict[str, Any]:
    """A parent whose stage ``spawn`` spawns one ``c`` per row of ``for_each``; ``first``
    is the initial stage (``spawn`` itself, or ``start`` with a ``go`` action first)."""
    stages: list[dict[str, Any]] = [
        {"name": "spawn", "activities": [{"name": "work", "actions": [
            {"name": "fan-out", "when": "true",
             "spawn": {"forEach": for_each, "definition": {"name": "c"},
                       "with": {"item": "$row"}}},
            {"name": "all-done", "status": "done"}]}],
         "transitions": [{"name": "to-end", "to": "end"}]},
        {"name": "end"}]
    if first == "start":
        stages.insert(0, {"name": "start", "activities": [{"name": "go", "actions": [
            {"name": "go", "status": "done"}]}], "transitions": [{"name": "t", "to": "spawn"}]})
    return {"name": name, "title": name.upper(), "initialStage": first, "stages": stages,
            "fields": [{"name": "items", "type": "array", "of": [{"name": "name",
                                                                  "type": "string"}],
                        "initialValue": {"type": "input"}}]}


class RssSampler(Sampling):
    """The server's RSS every 50 ms until stopped (KiB)."""

    def __init__(self, pid: int) -> None:
        super().__init__()
        self.pid = pid
        self.samples: list[int] = []

    async def sample(self) -> None:
        found = rss_kib(self.pid)
        if found is not None:
            self.samples.append(found)


#: one client for every call (creating a client costs the bench's own loop tens of ms,
#: which would show up as the server's latency)
CLIENT: list[httpx.AsyncClient] = []


async def call(base: str, token: str, query: str, variables: dict[str, Any]
               ) -> tuple[dict[str, Any], float]:
    began = time.perf_counter()
    answer = await CLIENT[0].post(f"{base}/graphql", json={"query": query,
                                                           "variables": variables},
                                  headers={"Authorization": f"Bearer {token}"})
    body: dict[str, Any] = answer.json()
    return body, time.perf_counter() - began


def outcome(body: dict[str, Any]) -> str:
    errors = body.get("errors")
    if not errors:
        return "ok"
    extensions = errors[0].get("extensions") or {}
    details = extensions.get("details") or {}
    return f"{extensions.get('code')} ({details.get('limit')})"


def serve(data_dir: Path, extra: dict[str, str]) -> tuple[Any, str]:
    port = free_port()
    env = {"KINFLOW_API_TOKENS": TOKENS, "KINFLOW_GROQ_TIMEOUT": str(TIMEOUT), **extra}
    process = launch_serve(data_dir, port, env)
    base = f"http://127.0.0.1:{port}"
    wait_healthy(base, process)
    return process, base


async def default_bounds(base: str, pid: int) -> None:
    print("server A: KINFLOW_GROQ_TIMEOUT=2, other bounds at their defaults")
    body, took = await call(base, VIEWER, attack.GROQ, {"q": attack.INTERSECTS, "p": PARAMS})
    print(f"  intersects 2 x 7,000 chars: {outcome(body)} in {took:.2f} s "
          f"(timeout {TIMEOUT:g} s)")
    await call(base, VIEWER, attack.GROQ, {"q": "count(*)"})
    before = rss_kib(pid) or 0
    async with RssSampler(pid) as rss, HealthProbe(base) as probe:
        body, took = await call(base, VIEWER, attack.GROQ, {"q": attack.DOUBLING})
    peak = max(rss.samples, default=before)
    print(f"  24-stage doubling: {outcome(body)} in {took:.2f} s; API RSS {before / 1024:.0f} "
          f"MiB before, peak {peak / 1024:.0f} MiB (+{(peak - before) / 1024:.0f} MiB); "
          f"/healthz {probe.summary()}")


async def time_bound_only(base: str) -> None:
    print("server B: KINFLOW_GROQ_TIMEOUT=2, KINFLOW_GROQ_MAX_SCANNED=0 (only the deadline)")
    await call(base, ADMIN, attack.DEPLOY, {"d": [
        child(), spawning("sp", '*[_type == "kinflow.definition"]._id', "spawn"),
        spawning("p", "$fields.items[].name", "start")]})
    async with HealthProbe(base) as idle:
        await asyncio.sleep(2)
    print(f"  idle /healthz: {idle.summary()}")
    async with HealthProbe(base) as alone:
        await asyncio.sleep(0.5)
        spawned, spawn_took = await call(base, OPERATOR, attack.START, {"d": "sp", "f": None})
        await asyncio.sleep(0.5)
    print(f"  operator's spawning startInstance, no attack: {outcome(spawned)} in "
          f"{spawn_took:.2f} s; /healthz {alone.summary()}")
    async with HealthProbe(base) as probe:
        body, took = await call(base, VIEWER, attack.GROQ, {"q": attack.INTERSECTS, "p": PARAMS})
    print(f"  intersects 2 x 7,000 chars: {outcome(body)} in {took:.2f} s; "
          f"/healthz {probe.summary()}")
    async with HealthProbe(base) as probe:
        attacks = [asyncio.ensure_future(call(base, VIEWER, attack.GROQ,
                                              {"q": attack.INTERSECTS, "p": PARAMS}))
                   for _ in range(4)]
        await asyncio.sleep(0.5)
        spawned, spawn_took = await call(base, OPERATOR, attack.START, {"d": "sp", "f": None})
        answers = await asyncio.gather(*attacks)
    rows = len(((spawned.get("data") or {}).get("startInstance") or {})
               .get("instance", {}).get("subworkflows") or [])
    codes = sorted({outcome(b) for b, _ in answers})
    print(f"  4 such queries from one viewer: {', '.join(codes)}, "
          f"answered after {', '.join(f'{t:.2f}' for _, t in answers)} s; operator's spawning "
          f"startInstance {outcome(spawned)} ({rows} children) in {spawn_took:.2f} s; "
          f"/healthz {probe.summary()}")
    begun, _ = await call(base, OPERATOR, attack.START,
                          {"d": "p", "f": {"items": [{"name": n} for n in "abcde"]}})
    parent_id = begun["data"]["startInstance"]["instance"]["id"]
    await call(base, OPERATOR, attack.GO, {"i": parent_id})
    async with HealthProbe(base) as probe:
        body, took = await call(base, VIEWER, PAGE, {"p": parent_id,
                                                     "w": {"where": attack.HEAVY_WHERE}})
    print(f"  cohort page(where:) on 5 rows: {outcome(body)} in {took:.2f} s; "
          f"/healthz {probe.summary()}")
    async with HealthProbe(base) as probe:
        body, took = await call(base, OPERATOR, FIRE_COHORT, {"p": parent_id,
                                                              "w": {"where": attack.HEAVY_WHERE}})
    print(f"  fireCohort(where:) on 5 rows: {outcome(body)} in {took:.2f} s; "
          f"/healthz {probe.summary()}")


async def main() -> None:
    CLIENT.append(httpx.AsyncClient(timeout=120))
    with tempfile.TemporaryDirectory(prefix="kinflow-groq-attack-") as tmp:
        first = Path(tmp) / "a"
        first.mkdir()
        process, base = serve(first, {})
        try:
            await default_bounds(base, process.pid)
        finally:
            stop_group(process)
        second = Path(tmp) / "b"
        second.mkdir()
        process, base = serve(second, {"KINFLOW_GROQ_MAX_SCANNED": "0"})
        try:
            await time_bound_only(base)
        finally:
            stop_group(process)
    await CLIENT[0].aclose()


if __name__ == "__main__":
    asyncio.run(main())
