"""py-spy on a benchmark's server: start and stop a recorder, and sum its raw stacks.

Imported as a sibling by the scripts in ``bench/``. ``summarise`` reads
py-spy's raw (collapsed) output recorded with ``--threads`` and says, per
thread, how busy it was and where its samples went (inclusive counts of the
frames named in ``MARKERS``; a stack counts once per marker).
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

# (label, frame fragment): a sample counts for a label when a frame contains the fragment
MARKERS: list[tuple[str, str]] = [
    ("HTTP request (uvicorn, middleware, GraphQL, resolvers)", "RequestResponseCycle.run_asgi"),
    ("  GraphQL parse + validate", "graphql/validation/validate.py"),
    ("  fireAction resolver", "Mutation.fire_action"),
    ("    lake transaction (pymongo)", "run_transaction"),
    ("    planning (plan_fire_action)", "plan_fire_action"),
    ("pymongo socket writes (anywhere)", "PyMongoProtocol.write"),
    ("change hub (change stream, dispatch)", "ChangeHub._run"),
    ("content reactions", "follow_content_changes"),
    ("propagation rounds", "Driver.round"),
    ("heartbeat worker", "Worker.run"),
    ("plans in worker threads (heavy instances)", "_WorkItem.run"),
    ("lake daemon: statements (dispatch)", "secantus/commands.py"),
    ("  update", "_update (secantus/commands.py"),
    ("  commitTransaction", "_commit_transaction (secantus/commands.py"),
    ("  getMore (change streams)", "_get_more (secantus/commands.py"),
    ("  find", "_find (secantus/commands.py"),
    ("lake daemon: waiting to read a request", "_recv_exactly"),
]


def start_recording(pid: int, out: Path) -> subprocess.Popen[bytes]:
    """py-spy record on ``pid`` (100 Hz, raw stacks with thread names) into ``out``."""
    out.parent.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen(
        [str(Path(sys.executable).with_name("py-spy")), "record", "--pid", str(pid),
         "--rate", "100", "--threads", "--format", "raw", "--nonblocking", "--output", str(out)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def stop_recording(recorder: subprocess.Popen[bytes]) -> None:
    recorder.send_signal(signal.SIGINT)  # py-spy writes its file on SIGINT
    try:
        recorder.wait(timeout=60)
    except subprocess.TimeoutExpired:
        recorder.kill()
        recorder.wait()


def summarise(raw: str, *, seconds: float, rate: int) -> str:
    """Per thread group: busy share of the wall time, then each marker's share of it."""
    groups: dict[str, Counter[str]] = {}
    totals: Counter[str] = Counter()
    for line in raw.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        thread, _, rest = stack.partition(";")
        name = thread.split(": ", 1)[-1].rstrip(")")
        group = "lake connections" if name.startswith("secantus-conn") else name
        n = int(count)
        totals[group] += n
        marks = groups.setdefault(group, Counter())
        for label, fragment in MARKERS:
            if fragment in rest:
                marks[label] += n
    possible = seconds * rate
    lines = []
    for group, total in totals.most_common():
        lines.append(f"    {group}: {total} samples ({100 * total / possible:.0f}% of one core)")
        for label, _ in MARKERS:
            if groups[group][label]:
                lines.append(f"      {100 * groups[group][label] / total:5.1f}%  {label}")
    return "\n".join(lines)
