"""The repair flags an instance can owe, folded into one indexed field.

Four hints tell the heartbeat that a commit left work owed for right now:
``materialising`` (a large spawn's children are still being created),
``owesBulk`` (a bulk cohort verb cut between batches), ``owesAborts``
(condemned rows not drained) and ``owesCancels`` (cancel requests not made).
Each used to have a partial index of its own. Every index on the dataset
costs every instance write, whether or not the instance carries the hint:
the embedded lake reads each index's catalogue entry on each write, and four
indexes fewer cut a child fire's commit by about 17 % of the lake's CPU
(docs/performance.md, "Fewer indexes on the dataset").

So the stored document also carries ``owing``: the names of the flags it has
set, space-separated in ``FLAGS`` order (``"owesAborts owesCancels"``), and
absent when it owes none. One partial index serves all four: the heartbeat
reads every instance that owes anything (``ANY_OWED``) and picks out those
holding the flag it repairs (``holds``). The flags stay
the instance's own fields; ``owing`` is derived from them whenever the
document is written (``Instance.stored_json``). Pure; no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

FLAGS = ("materialising", "owesBulk", "owesAborts", "owesCancels", "owesRegistration")
FIELD = "owing"


def owing_of(doc: Mapping[str, Any]) -> str | None:
    """The ``owing`` value of a document with these flags (``None``: owes nothing)."""
    return " ".join(flag for flag in FLAGS if doc.get(flag) is True) or None


def holds(value: object, flag: str) -> bool:
    """Whether an ``owing`` value names ``flag``."""
    return isinstance(value, str) and flag in value.split()


# Every instance that owes any flag. The heartbeat asks for this and picks a
# flag's instances out itself: they are few (a repair flag lives from a commit
# to the repair right after it, or to the next heartbeat after a crash), and on
# the embedded lake the range alone costs 4 ms where an ``$in`` of the eight
# values holding one flag cost 70-100 ms over 3,000 instances, plan IXSCAN or
# not (measured). The ``$gt`` is what its planner needs to use the partial index.
ANY_OWED = {FIELD: {"$gt": ""}}
