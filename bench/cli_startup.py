"""How long the ``kinflow`` command takes to start and to answer, as a user types it.

Starts ``kinflow serve`` on a fresh data directory (its embedded lake is the
one the CLI shares through ``lake.json``), deploys the examples, starts a
release (a three-level family), then runs each command several times as a
separate process and prints the wall time of each (median, min, max), and what
``import kinflow.cli`` costs and loads.

Two conditions: ``cached``, as after an install (bytecode cached, here in a
temporary ``PYTHONPYCACHEPREFIX`` after one warm-up run), and ``uncached``
with ``PYTHONDONTWRITEBYTECODE=1`` and no cache for kinflow's own modules, where
every run compiles them again (some sandboxes and CI images set it). Besides the
wall time it prints the CLI process's CPU time, which a busy machine inflates
far less.

    .venv/bin/python bench/cli_startup.py [--runs 7]
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _process import free_port, launch_serve, stop_group, wait_healthy

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
KINFLOW = str(Path(sys.executable).with_name("kinflow"))
HEAVY = ("kinflow.engine", "kinflow.schema", "strawberry", "pymongo", "httpx", "uvicorn")


def cli(env: dict[str, str], *args: str) -> str:
    done = subprocess.run([KINFLOW, *args], env=env, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise SystemExit(f"kinflow {' '.join(args)} failed:\n{done.stdout}{done.stderr}")
    return done.stdout


def timed(env: dict[str, str], args: list[str], runs: int) -> tuple[list[float], list[float]]:
    """Wall seconds and CPU seconds (user + system) of each run: on a busy machine the
    wall time waits for a core, the CPU time much less so."""
    wall, cpu = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        began = time.perf_counter()
        cli(env, *args)
        wall.append(time.perf_counter() - began)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return wall, cpu


def import_cost(env: dict[str, str]) -> tuple[float, list[str]]:
    """``import kinflow.cli`` in a fresh interpreter: seconds, and which heavy packages it
    loaded (none is the goal: commands import what they need when they run)."""
    probe = ("import sys, time; t = time.perf_counter(); import kinflow.cli; "
             "print(time.perf_counter() - t); "
             f"print(' '.join(m for m in {HEAVY!r} if m in sys.modules))")
    lines = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                           check=True, env=env).stdout.splitlines()
    return float(lines[0]), (lines[1].split() if len(lines) > 1 else [])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    runs = parser.parse_args().runs
    with tempfile.TemporaryDirectory(prefix="kinflow-cli-bench-") as tmp:
        data_dir = Path(tmp)
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        server = launch_serve(data_dir, port)
        try:
            wait_healthy(url, server)
            env = {k: v for k, v in os.environ.items() if not k.startswith("KINFLOW_")}
            env.update(KINFLOW_DATA_DIR=str(data_dir), COLUMNS="160")
            cli(env, "lake", "import", "production",
                str(EXAMPLES / "content" / "articles.ndjson"))
            cli(env, "deploy", str(EXAMPLES / "definitions"))
            started = cli(env, "start", "release", "--field", "subject=release-2026-12")
            match = re.search(r"instance\.[0-9A-Z]+", started)
            assert match, started
            release = match.group(0)
            time.sleep(3)  # the worker materialises the cohorts
            lines = len(cli(env, "inspect", release).splitlines())
            cases = {
                "kinflow --version": ["--version"],
                f"kinflow inspect ID (lake, {lines} lines)": ["inspect", release],
                "kinflow --url URL inspect ID": ["--url", url, "inspect", release],
            }
            conditions = {
                "cached": {**{k: v for k, v in env.items()
                              if k != "PYTHONDONTWRITEBYTECODE"},
                           "PYTHONPYCACHEPREFIX": str(data_dir / "pycache")},
                "uncached": {**env, "PYTHONDONTWRITEBYTECODE": "1"},
            }
            for condition, run_env in conditions.items():
                for args in cases.values():  # warm-up: fills the cache, loads the lake
                    cli(run_env, *args)
                seconds, loaded = import_cost(run_env)
                print(f"{condition}: import kinflow.cli {seconds * 1000:.0f} ms; heavy "
                      f"modules loaded: {', '.join(loaded) or 'none'}")
                print(f"  {'command':<40} {'median':>7} {'min':>7} {'max':>7} {'cpu':>7}  "
                      f"({runs} runs; wall s, and the median CPU s of the CLI process)")
                for name, args in cases.items():
                    wall, cpu = timed(run_env, args, runs)
                    print(f"  {name:<40} {statistics.median(wall):>7.2f} {min(wall):>7.2f} "
                          f"{max(wall):>7.2f} {statistics.median(cpu):>7.2f}")
        finally:
            stop_group(server)


if __name__ == "__main__":
    main()
