"""`kinflow tail` prints instance changes as they commit (a real subprocess)."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

from kinflow.engine import Engine
from kinflow.storage import Lake

from .test_cli import EXAMPLES, refused

ENV_KEYS = ("KINFLOW_MONGODB_URI", "KINFLOW_DATABASE")


async def test_tail_follows_instance_changes(lake: Lake, lake_uri: str, tmp_path: Path) -> None:
    engine = Engine(lake)
    from kinflow.cli.inputs import load_definitions

    await engine.deploy(load_definitions([EXAMPLES / "definitions" / "article-review.json"]))
    await lake.create({"_id": "a1", "_type": "article", "locales": []})
    env = {**os.environ, "KINFLOW_MONGODB_URI": lake_uri, "KINFLOW_DATABASE": lake.database,
           "KINFLOW_DATA_DIR": str(tmp_path), "COLUMNS": "200"}  # fmt: skip
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "kinflow.cli", "tail", "--count", "2",
        env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    started: list[str] = []
    deadline = time.monotonic() + 60
    while process.returncode is None and time.monotonic() < deadline:
        result = await engine.start_instance("article-review", fields={"subject": "a1"})
        started.append(result.instance.id_)
        try:
            await asyncio.wait_for(process.wait(), 0.5)
        except TimeoutError:
            pass
    if process.returncode is None:
        process.kill()
    raw_out, raw_err = await process.communicate()
    output, errors = raw_out.decode(), raw_err.decode()
    assert process.returncode == 0, errors
    lines = [line for line in output.splitlines() if "article-review" in line]
    assert len(lines) == 2, output
    assert all("stage=drafting" in line and "ACTIVE" in line for line in lines)
    assert all(any(iid in line for iid in started) for line in lines)


def test_tail_against_an_unreachable_server(cli_env: str) -> None:
    refused(["tail", "--url", "http://127.0.0.1:9"], "server-unreachable")
