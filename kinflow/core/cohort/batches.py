"""Registration in batches: which ``forEach`` reads in batches, what a batch is (pure).

A lake ``forEach`` of a cohort with a window (``maxActive``) is not read
whole: its rows are the query's matches in ``_id`` order, read and
registered a batch at a time (docs/subworkflows.md#registration-and-limits).
Each batch is one commit of the parent, which also moves the cohort's
checkpoint (``CohortWindow.registration``), so a crash resumes where the
last committed batch ended and no row is registered twice or skipped.

The checkpoint holds what later batches need and may not read again:

* ``after``: the last ``_id`` read (the next batch reads the documents after it);
* ``at``: the spawn's moment; documents created after it (their ``_createdAt``)
  are not members. A document without ``_createdAt`` (written around the lake's
  API) counts as created before;
* ``params``: the query's variables as the spawn read them;
* ``action``, ``actor``: the spawning action and who fired it (``$actor`` of ``with``);
* ``version``: the child definition's version the spawn resolved;
* ``rows``: how many rows the cohort registered so far (the fan-out limit).

Only a query of the shape ``*[filter]`` with projections, attribute reads or
dereferences over each match can be read a batch at a time (``batchable``): an
``order``, a slice or a second ``*`` needs every match at once, and is read
whole (at most ``limits.max_active_children`` rows when the cohort has no
window, ``limits.fan_out`` with one).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kinflow import groq
from kinflow.core.context import Actor, BatchRequest, PlanContext
from kinflow.core.state import CohortWindow, Instance
from kinflow.groq import nodes as n
from kinflow.groq.pushdown import plan_store_query

Cohort = tuple[str, str]  # (activity, stage entry key)
_SPINE = (n.MapNode, n.FlatMap, n.ArrayCoerce, n.Projection, n.Attr, n.Deref)


# ---------------------------------------------------------------- the query


def batchable(text: str) -> bool:
    """Whether a ``forEach`` query maps each ``*[filter]`` match on its own (so a batch of
    documents gives that batch's rows, in ``_id`` order)."""
    try:
        root = groq.parse(text).root
    except groq.GroqError:
        return False
    if _stars(root) != 1:
        return False
    node: n.Node | None = root
    while isinstance(node, _SPINE):
        node = getattr(node, "base", None)
    while isinstance(node, n.Filter):
        node = node.base
    return isinstance(node, n.Everything)


def _stars(node: object) -> int:
    if isinstance(node, n.Everything):
        return 1
    if not isinstance(node, n.Node):
        return 0
    return sum(_stars(child) for child in n.children(node))


def pinned_type(text: str, params: Mapping[str, Any]) -> str | None:
    """The one ``_type`` a ``forEach`` keeps, when its filter says so: a batch then reads
    only documents of that type (through a ``(_type, _id)`` index where one exists)."""
    try:
        plan = plan_store_query(groq.parse(text, params), params)
    except groq.GroqError:
        return None
    found = plan.filter.get("_type") if plan is not None else None
    if isinstance(found, dict) and set(found) == {"$eq"}:
        found = found["$eq"]
    return found if isinstance(found, str) else None


def created_before(doc: Mapping[str, Any], at: str) -> bool:
    """Whether a document is a member by its creation: created at or before ``at`` (no
    ``_createdAt``: written around the lake's API, counted as before)."""
    created = doc.get("_createdAt")
    return not isinstance(created, str) or created <= at


def rows_of(request: BatchRequest, docs: Sequence[Mapping[str, Any]], now: Any,
            resolve: Callable[[str], Any] | None = None) -> list[Any]:
    """The rows a batch's documents give: the members among them, through the query."""
    at = request.at
    members = [doc for doc in docs if at is None or created_before(doc, at)]
    if not members:
        return []
    value = groq.evaluate(request.query, dataset=members, params=request.params, now=now,
                          resolve=resolve)
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [value]


# ---------------------------------------------------------------- key ranges

_BASE = 0x110000  # code points
_DEPTH = 48  # characters of an ``_id`` the arithmetic looks at
TOP = _BASE ** _DEPTH - 1


def key_number(key: str) -> int:
    """An ``_id`` as a number that orders like the text (its first ``_DEPTH`` code points)."""
    number = 0
    for place in range(_DEPTH):
        number = number * _BASE + (ord(key[place]) if place < len(key) else 0)
    return number


def key_text(number: int) -> str:
    """The text ``key_number`` maps to ``number`` (rounded up past a surrogate, which no
    stored text holds), trailing NULs dropped."""
    digits = []
    for _ in range(_DEPTH):
        number, digit = divmod(number, _BASE)
        digits.append(digit)
    digits.reverse()
    for place, digit in enumerate(digits):
        if 0xD800 <= digit <= 0xDFFF:
            digits[place:] = [0xE000] + [0] * (_DEPTH - place - 1)
            break
    return "".join(map(chr, digits)).rstrip("\x00")


def bound_after(after: str, scale: int) -> str | None:
    """The upper end of a range of about ``2**scale`` key units after ``after`` (``None``:
    past the last possible key). Always above ``after``: the arithmetic reads its first
    ``_DEPTH`` characters and adds at least one unit to the last of them."""
    number = key_number(after) + (1 << max(scale, 0))
    return None if number > TOP else key_text(number)


_NUMBERED = re.compile(r"(.*?)([0-9]+)", re.S)  # a key ending in a run of decimal digits


def numbered_bound(after: str, step: int) -> str | None:
    """The upper end of the range of ``step`` numbers after ``after`` when ``after`` ends in
    a run of decimal digits, the run read as a number of its own width (``item-0999`` and
    ``10`` give ``item-1009``): ``None`` without such a run or past its widest number. Over
    numbered ids a range holds about ``step`` of them wherever it lies, where the code point
    arithmetic (``bound_after``) sees a tenfold jump in key units at every carry of a digit.
    Always above ``after``: the same text before the run, a larger run of the same width."""
    found = _NUMBERED.fullmatch(after)
    if found is None:
        return None
    prefix, run = found.groups()
    number = int(run) + max(step, 1)
    return None if number >= 10 ** len(run) else prefix + str(number).zfill(len(run))


def number_of(key: str) -> int | None:
    """The number a key's trailing run of decimal digits spells (``numbered_bound``)."""
    found = _NUMBERED.fullmatch(key)
    return int(found.group(2)) if found is not None else None


def scale_of(first: str, last: str) -> int:
    """The scale (``bound_after``) of the key range from ``first`` to ``last``."""
    return max(0, (key_number(last) - key_number(first)).bit_length())


# ---------------------------------------------------------------- the checkpoint


def checkpoint(*, after: str | None, at: str, params: dict[str, Any], action: str,
               actor: Actor, rows: int, version: int) -> dict[str, Any]:
    return {"after": after, "at": at, "params": params, "action": action,
            "actor": actor.to_json(), "rows": rows, "version": version}


def request_of(point: Mapping[str, Any], query: str, ctx: PlanContext) -> BatchRequest:
    """The batch a checkpoint asks for next."""
    scale = point.get("scale")
    return BatchRequest(query=query, params=dict(point.get("params") or {}),
                        after=point.get("after"), at=str(point["at"]),
                        size=ctx.limits.registration_batch,
                        scale=scale if isinstance(scale, int) else None)


def actor_of(point: Mapping[str, Any]) -> Actor:
    raw = point.get("actor") or {}
    return Actor(raw.get("kind", "system"), str(raw.get("id", "kinflow")),
                 tuple(raw.get("roles") or ()))


def setting(instance: Instance, cohort: Cohort) -> CohortWindow | None:
    for entry in instance.cohorts or []:
        if (entry.activity, entry.stageEntry) == cohort:
            return entry
    return None


def set_registration(instance: Instance, cohort: Cohort, point: dict[str, Any] | None) -> None:
    """Store (or clear, ``None``) a cohort's registration checkpoint on the parent."""
    own = setting(instance, cohort)
    if own is None and point is None:
        return
    kept = [e for e in instance.cohorts or [] if (e.activity, e.stageEntry) != cohort]
    updated = (own.model_copy(update={"registration": point}) if own is not None
               else CohortWindow(activity=cohort[0], stageEntry=cohort[1], registration=point))
    instance.cohorts = [*kept, updated]
    instance.owesRegistration = True if registering(instance) else None


def registering(instance: Instance) -> list[CohortWindow]:
    """The cohorts whose rows are not all registered yet."""
    return [e for e in instance.cohorts or [] if e.registration is not None]


def is_registering(instance: Instance, activity: str, entry_key: str | None) -> bool:
    own = setting(instance, (activity, entry_key)) if entry_key is not None else None
    return own is not None and own.registration is not None
