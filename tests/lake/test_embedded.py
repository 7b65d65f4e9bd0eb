"""The embedded lake launcher: persistence, reuse, a locked directory, clean stop."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pymongo import MongoClient

from kinflow.errors import ConfigurationError
from kinflow.storage.embedded import EmbeddedLake, _pid_alive

pytestmark = [
    pytest.mark.lake,  # starts a daemon of its own
    pytest.mark.skipif(
        bool(os.environ.get("KINFLOW_TEST_MONGODB_URI")), reason="embedded launcher only"
    ),
]


def _count(uri: str) -> int:
    client: MongoClient[dict[str, object]] = MongoClient(uri, serverSelectionTimeoutMS=5000)
    try:
        return client.kf.docs.count_documents({})
    finally:
        client.close()


def test_data_survives_stop_and_start(data_dir: Path) -> None:
    first = EmbeddedLake(data_dir)
    uri = first.start()
    client: MongoClient[dict[str, object]] = MongoClient(uri)
    client.kf.docs.insert_many([{"_id": i} for i in range(25)])
    client.close()
    first.stop()
    assert not (data_dir / "lake.json").exists()

    second = EmbeddedLake(data_dir)
    uri = second.start()
    try:
        assert second.owned and _count(uri) == 25
    finally:
        second.stop()


def test_second_process_reuses_a_running_lake(data_dir: Path) -> None:
    owner = EmbeddedLake(data_dir)
    uri = owner.start()
    try:
        state = json.loads((data_dir / "lake.json").read_text())
        assert state["port"] == owner.port
        guest = EmbeddedLake(data_dir)
        assert guest.start() == uri and not guest.owned
        guest.stop()  # a guest never stops the owner's daemon
        assert _count(uri) == 0
    finally:
        owner.stop()


def test_locked_directory_is_a_clear_error(data_dir: Path) -> None:
    owner = EmbeddedLake(data_dir)
    owner.start()
    try:
        (data_dir / "lake.json").unlink()  # hide the owner: the newcomer must hit the lock
        intruder = EmbeddedLake(data_dir, start_timeout=10)
        started = time.monotonic()
        with pytest.raises(ConfigurationError) as info:
            intruder.start()
        assert "in use by another server" in info.value.message
        assert time.monotonic() - started < 30
    finally:
        owner.stop()


def test_daemon_dies_with_its_parent(data_dir: Path) -> None:
    """A SIGKILLed starter must not leave the daemon holding the data directory."""
    script = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from kinflow.storage.embedded import EmbeddedLake\n"
        "lake = EmbeddedLake(Path(sys.argv[1]))\n"
        "lake.start()\n"
        "print(lake._process.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", script, str(data_dir)], stdout=subprocess.PIPE, text=True
    )
    assert parent.stdout is not None
    daemon_pid = int(parent.stdout.readline())
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 15
    while _pid_alive(daemon_pid) and time.monotonic() < deadline:
        try:
            os.waitpid(daemon_pid, os.WNOHANG)
        except ChildProcessError:
            pass
        time.sleep(0.2)
    assert not _pid_alive(daemon_pid)


def test_missing_extra_is_a_clear_error(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import kinflow.storage.embedded as embedded

    monkeypatch.setattr(embedded, "DAEMON", "secantusd-not-installed")
    with pytest.raises(ConfigurationError) as info:
        EmbeddedLake(data_dir).start()
    assert "pip install 'kinflow[embedded]'" in info.value.message
    assert "KINFLOW_MONGODB_URI" in info.value.message
