"""bench/live.py's pure parts: its arguments, the 20-second slices, the stall watch's bookkeeping.

The benchmark is a script importing its siblings, so ``bench/`` goes on the
path here; no server, no lake, no py-spy (a stand-in command takes its place).
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture(autouse=True, scope="module")
def _bench_on_path() -> None:
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))


def test_the_defaults_are_the_issues_workload_and_a_dump_dir_needs_a_threshold() -> None:
    from live import parse_args

    args = parse_args([])
    assert (args.clients, args.minutes, args.children) == (8, 2.0, 3)
    assert args.stall_ms is None and args.json is None
    chosen = parse_args(["--stall-ms", "500", "--dump-dir", "d", "--json", "f.json"])
    assert (chosen.stall_ms, chosen.dump_dir, chosen.json) == (500.0, Path("d"), Path("f.json"))
    with pytest.raises(SystemExit):
        parse_args(["--dump-dir", "d"])
    with pytest.raises(SystemExit):
        parse_args(["--children", "0"])


def test_slices_count_whole_slices_and_the_smallest_is_a_share_of_the_mean() -> None:
    from live import slices, smallest_share

    completions = [1.0, 5.0, 19.9, 20.0, 45.0, 61.0]  # 61 s lies past the last whole slice
    assert slices(completions, seconds=61.0) == [3 / 20, 1 / 20, 1 / 20]
    assert smallest_share([0.15, 0.05, 0.1]) == pytest.approx(50.0)
    assert smallest_share([]) is None and smallest_share([0.0, 0.0]) is None


def test_the_order_spawns_one_line_per_child() -> None:
    from _orders import definitions, line_names

    line, order = definitions(4)
    assert (line["name"], order["name"]) == ("order-line", "order")
    spawn = order["stages"][0]["activities"][0]["actions"][0]["spawn"]
    assert spawn["forEach"] == '["line-1", "line-2", "line-3", "line-4"]'
    assert line_names(2) == ["line-1", "line-2"]


def test_one_dump_pair_per_interval() -> None:
    from _stalls import DumpThrottle

    throttle = DumpThrottle(every=2.0)
    assert [throttle.allow(t) for t in (10.0, 11.0, 11.9, 12.0, 13.5, 14.1)] == [
        True, False, False, True, False, True]  # fmt: skip


def test_an_overdue_operation_is_dumped_and_its_timeline_entry_names_the_files(
    tmp_path: Path,
) -> None:
    from _stalls import StallWatch

    watch = StallWatch(500.0, lambda: {"api": 11, "lake": 22, "gone": None},
                       spy="true", dump_dir=tmp_path)  # fmt: skip
    slow = watch.begin("fireAction child")
    quick = watch.begin("instance read")
    now = time.monotonic()
    watch._in_flight[slow] = ("fireAction child", now - 1.0)  # a second in flight
    watch._in_flight[quick] = ("instance read", now)  # began just now
    late = watch.overdue(now)
    assert [(token, op) for token, op, _ in late] == [(slow, "fireAction child")]
    asyncio.run(watch._dump(now, late))
    files = watch.dumps[0].files
    assert [f.rsplit("-", 1)[1] for f in files] == ["api.txt", "lake.txt"]
    assert all((tmp_path / f).exists() for f in files)
    watch.end(slow)
    watch._in_flight[quick] = ("instance read", time.monotonic())  # quick, however long the dump
    watch.end(quick)
    assert [(s.op, s.dumps) for s in watch.timeline] == [("fireAction child", files)]


def test_without_a_threshold_nothing_is_recorded() -> None:
    from _stalls import StallWatch

    watch = StallWatch(None, dict)
    token = watch.begin("startInstance")
    assert watch.overdue(time.monotonic() + 3600) == []
    watch.end(token)
    assert watch.timeline == []
