"""The cyclic garbage collector held off while a commit on a kept parent runs.

The process keeps a cohort parent parsed between its commits
(``Transactor.kept``); below ``Limits.sparse_rows`` that copy holds every
registry row and history entry, about 17 objects the collector tracks per
row. A commit that creates a batch of children (a registration batch whose
children finish at once starts a thousand) allocates more objects that live
through it (child documents, seeds, new rows and history) than a quarter of
the tracked heap, which sets off a full collection, and a full collection
walks every tracked object of the process, the kept rows included: each
commit paid for every row registered before it (measured in-process: 0.11 s
of collection per batch of 1,000 at 2,000 rows, 0.46 s at 10,000, against
0.5-0.6 s for the rest of the commit, flat).

A commit's own objects are freed by reference counting when it ends; only
reference cycles need the collector, and these wait a commit long. The
commit that turned the collector off turns it on again when it ends, so it is
never off longer than the longest commit in flight; a young pass then frees
the cycles that commit made, walking only what it allocated and still holds.
docs/subworkflows.md#large-parents-without-their-rows-in-memory
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def held(hold: bool) -> Iterator[None]:
    """Keep the collector off for the block when ``hold`` and it is on now."""
    if not hold or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.collect(0)  # the cycles the block made: the youngest generation only
