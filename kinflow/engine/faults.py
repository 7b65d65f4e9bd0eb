"""Fault points: named places in the shell where a test can simulate a crash.

The shell (``transact``, ``driving``, ``materialise``) calls
``faults.check("<point>")`` at each step of a spawn's crash windows
(docs/subworkflows.md#crash-repair). Unarmed (production), a check is a
dictionary lookup that does nothing. A test arms a point to raise
``InjectedFault`` the next ``times`` it is reached, so the real code path stops
exactly there, with the lake left as a crash would leave it; then it runs the
heartbeat and checks the repair. Nothing here mocks the lake.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kinflow.core.errors import InjectedFault

POINTS = frozenset({
    "before-spawn-commit",  # window 1: the spawning commit is planned, not written
    "after-spawn-commit",  # window 2: cohort written, children not settled
    "before-child-settle",  # window 3: a child created primed, its first cascade not run
    "before-batch-stamp",  # window 4: children settled, parent rows not stamped
    "before-propagation",  # window 5: a child's commit landed, the parent not told
    "before-drain",  # window 6: rows condemned, owed aborts not carried out
    "before-drain-stamp",  # condemned rows' children aborted, the rows not stamped yet
    "mid-sweep",  # a sparse parent's sweep condemned a page of rows, not the next one
    "before-cancel-children",  # a cancellation committed, its children not asked yet
    "before-cancel-stamp",  # children asked to cancel (some already CANCELLED), rows unstamped
    "mid-materialise",  # a large cohort registered, some children not created yet
    "mid-bulk",  # a bulk cohort verb committed a batch of rows, not the next one
    "mid-registration",  # a cohort's batch of rows registered, the next one not yet
    "purge-after-marker",  # retention: the root is marked, no member deleted yet
    "purge-mid-family",  # retention: a batch of members deleted, the root not yet
})


@dataclass
class Faults:
    """Armed fault points of one engine (empty in production)."""

    armed: dict[str, int] = field(default_factory=dict)
    hits: dict[str, int] = field(default_factory=dict)
    passes: dict[str, int] = field(default_factory=dict)  # reaches let through first

    def arm(self, point: str, times: int = 1, *, after: int = 0) -> None:
        """Raise at ``point`` the next ``times`` it is reached, once ``after`` reaches of
        it went through (a crash at the third page of a drain, say)."""
        if point not in POINTS:
            raise ValueError(f"unknown fault point {point!r}")
        self.armed[point] = times
        self.passes[point] = after

    def disarm(self) -> None:
        self.armed.clear()
        self.passes.clear()

    def check(self, point: str) -> None:
        """Raise ``InjectedFault`` if ``point`` is armed (and count the hit)."""
        remaining = self.armed.get(point, 0)
        if remaining <= 0:
            return
        if self.passes.get(point):
            self.passes[point] -= 1
            return
        self.armed[point] = remaining - 1
        self.hits[point] = self.hits.get(point, 0) + 1
        raise InjectedFault(f"injected fault at {point}")
