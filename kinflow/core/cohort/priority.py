"""Priority admission on a sparse registry, from the summary's priority levels (pure).

A prioritised cohort starts its waiting rows highest ``priority`` first, ties in
registry order (core/cohort/admission.py). On a dense parent the fill sorts every
waiting row; a sparse parent holds a few chunks only, so its summary entry keeps,
per priority value, how many rows wait and the chunks holding them
(``tallies.PRIORITIES``). From those levels:

* ``chunks_for`` names the chunks a commit reads for a window's room: the highest
  levels' chunks first, in registry order, as many as the room needs by each
  level's rows per chunk, at most a given number;
* ``Frontier`` is, per cohort, the first waiting row that is not held: the first
  chunk not held of the highest level that has one. A held row may start only if
  no row before it in start order waits in a chunk not held (``blocks``); otherwise
  that chunk is read first, or, when the commit's chunk bound is spent, the cohort
  starts nothing more in this commit and the next commit goes on.

The levels describe the rows as stored; a chunk this commit changed is held, and
the held rows are read as they are now, so the rule never needs the summary to
follow this commit's own changes.
"""

from __future__ import annotations

import math
from collections.abc import Container
from dataclasses import dataclass
from typing import Any

from kinflow.core.cohort import places, tallies

CHUNK = tallies.CHUNK


def levels(entry: dict[str, Any] | None) -> list[tuple[float, int, list[Any]]] | None:
    """``(priority, rows waiting, chunk runs)`` of a cohort's entry, highest first;
    ``None`` when the entry does not keep them."""
    if entry is None or entry.get(tallies.PRIORITIES) is None:
        return None
    found = [(float(name), int(level[0]), list(level[1]))
             for name, level in (entry[tallies.PRIORITIES] or {}).items() if int(level[0]) > 0]
    return sorted(found, key=lambda level: -level[0])


def chunks_for(entry: dict[str, Any], room: int, at_most: int, held: Container[int] = ()
               ) -> list[int]:
    """The chunks not ``held`` to read so that ``room`` rows can start in priority order:
    each level's chunks in registry order, highest level first, counting each chunk
    (held or not) as the level's rows per chunk, until the room is covered; at most
    ``at_most`` chunks."""
    found: list[int] = []
    need = float(room)
    for _, waiting, runs in levels(entry) or []:
        spread = sum(last - first + 1 for first, last in map(places.bounds, runs))
        per_chunk = waiting / spread if spread else float(CHUNK)
        for chunk in places.expand(runs):
            if need <= 0 or len(found) >= at_most:
                return found
            if chunk not in held and chunk not in found:
                found.append(chunk)
            need -= per_chunk
    return found


@dataclass(frozen=True, slots=True)
class Frontier:
    """The first waiting row of a cohort not held: its level and its chunk."""

    priority: float
    chunk: int

    def blocks(self, priority: float | None, place: int) -> bool:
        """Whether a held waiting row (``priority``, registry ``place``) must wait for
        the rows of this frontier (a higher level, or its own level earlier)."""
        mine = float(priority or 0.0)
        return self.priority > mine or (self.priority == mine and self.chunk < place // CHUNK)


def frontier(entry: dict[str, Any], held: Container[int]) -> Frontier | None:
    """The cohort's ``Frontier`` (``None``: every waiting row is held)."""
    for priority, _, runs in levels(entry) or []:
        for chunk in places.expand(runs):
            if chunk not in held:
                return Frontier(priority, chunk)
    return None


def read_budget(read: int, bound: int) -> int:
    """How many more chunks a commit that read ``read`` may ask for (``bound``: the
    commit's chunk bound)."""
    return max(0, bound - read)


def pre_read(bound: int) -> int:
    """Chunks a commit reads up front for a prioritised cohort's room: half its bound (the
    rest for the rows it observes and the chunks the fill asks for after)."""
    return max(1, math.floor(bound / 2))
