"""Sorted runs of chunk numbers, as a cohort's summary keeps them (pure).

A run is a lone number or ``[first, last]`` (both in it), runs are sorted and do
not overlap. Rows of one kind sit together in a registry (the finished head,
the live middle, the queued tail), so a pair's chunks are a few runs however
large the cohort; a plain sorted list of numbers is a valid value too (each a
run of one), which is how summaries were written before runs.

``add`` and ``remove`` change the outer list in place and never an inner pair,
so a caller that copied the outer list (``list(runs)``) shares nothing it
changes.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from typing import Any

Run = Any  # int | list[int] (JSON: a number or a pair)


def bounds(run: Run) -> tuple[int, int]:
    if isinstance(run, int):
        return run, run
    return int(run[0]), int(run[1])


def _run(first: int, last: int) -> Run:
    return first if first == last else [first, last]


def _first(run: Run) -> int:
    return bounds(run)[0]


def add(runs: list[Run], chunk: int) -> None:
    """Put ``chunk`` among ``runs``, joining the neighbours it touches."""
    at = bisect.bisect_right(runs, chunk, key=_first)
    left = bounds(runs[at - 1]) if at else None
    if left is not None and left[0] <= chunk <= left[1]:
        return
    right = bounds(runs[at]) if at < len(runs) else None
    joins_left = left is not None and left[1] == chunk - 1
    joins_right = right is not None and right[0] == chunk + 1
    if joins_left and joins_right:
        assert left is not None and right is not None
        runs[at - 1:at + 1] = [_run(left[0], right[1])]
    elif joins_left:
        assert left is not None
        runs[at - 1] = _run(left[0], chunk)
    elif joins_right:
        assert right is not None
        runs[at] = _run(chunk, right[1])
    else:
        runs.insert(at, chunk)


def remove(runs: list[Run], chunk: int) -> None:
    """Take ``chunk`` out of ``runs`` (splitting its run); absent: nothing changes."""
    at = bisect.bisect_right(runs, chunk, key=_first) - 1
    if at < 0:
        return
    first, last = bounds(runs[at])
    if not first <= chunk <= last:
        return
    pieces = []
    if first < chunk:
        pieces.append(_run(first, chunk - 1))
    if chunk < last:
        pieces.append(_run(chunk + 1, last))
    runs[at:at + 1] = pieces


def expand(runs: list[Run], start: int = 0) -> Iterator[int]:
    """Every chunk of ``runs`` from ``start`` on, in order."""
    for run in runs:
        first, last = bounds(run)
        yield from range(max(first, start), last + 1)
