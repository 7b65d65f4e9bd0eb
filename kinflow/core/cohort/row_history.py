"""Which history entries are stored on a registry row, and where each entry is (pure).

A cohort parent's history holds two entries per child (``spawned`` and
``subworkflowResolved``, more after a redrive); they are stored in the chunk
of the row they name (``chunks.py``), and the instance document keeps the
others (``inline_history``). ``history_index`` says where every entry of an
instance's history is, kept on the instance and extended as it grows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol


class Recorded(Protocol):
    """What the index reads of an instance: its history and its memo dict."""

    history: list[dict[str, Any]]
    _derived: dict[str, Any]


ROW_HISTORY = frozenset({"spawned", "subworkflowStarted", "subworkflowResolved",
                         "subworkflowRedriven"})
"""History entry types stored on the registry row they name (by ``instanceRef``)."""


def row_of_entry(entry: dict[str, Any]) -> str | None:
    """The child id of the row a history entry is stored on, else ``None`` (inline)."""
    if entry.get("_type") not in ROW_HISTORY:
        return None
    ref = entry.get("instanceRef")
    uri = ref.get("id") if isinstance(ref, dict) else None
    return uri.split(":", 2)[-1] if isinstance(uri, str) else None


def inline_history(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The history entries an instance document keeps (those not on a row)."""
    return [entry for entry in history if not _on_row(entry)]


def _on_row(entry: dict[str, Any]) -> bool:
    """``row_of_entry(entry) is not None``, without cutting the id out (hot: a cohort
    parent's history holds two entries per child)."""
    if entry.get("_type") not in ROW_HISTORY:
        return False
    ref = entry.get("instanceRef")
    return isinstance(ref, dict) and isinstance(ref.get("id"), str)


@dataclass(frozen=True, slots=True)
class HistoryIndex:
    """Where the entries of an instance's whole history are stored: the inline ones, and
    the places of those stored on a registry row, by the row's child GDR uri."""

    covered: int  # entries indexed (a prefix of the history)
    last: dict[str, Any] | None  # the last of them (the prefix is checked by identity)
    inline: tuple[dict[str, Any], ...]
    on_rows: dict[str, tuple[int, ...]]


def history_index(instance: Recorded) -> HistoryIndex:
    """The ``HistoryIndex`` of ``instance``'s history.

    A cohort parent's history holds two entries per child, and every commit
    needs the inline ones (the size guard) and the ones of the chunks it
    rewrites (core/cohort/chunks.py). History only grows and its entries are never
    edited, so the index is kept on the instance (``Instance._derived``) and
    extended by the entries added since: a round on 10,000 rows indexes its own
    few dozen entries, not 20,000.
    """
    history = instance.history
    kept: HistoryIndex | None = instance._derived.get("history")
    if kept is None or kept.covered > len(history) or (
            kept.covered and history[kept.covered - 1] is not kept.last):
        kept = HistoryIndex(0, None, (), {})
    if kept.covered == len(history):
        return kept
    inline = list(kept.inline)
    on_rows = dict(kept.on_rows)
    for n in range(kept.covered, len(history)):
        entry = history[n]
        ref = entry.get("instanceRef") if entry.get("_type") in ROW_HISTORY else None
        uri = ref.get("id") if isinstance(ref, dict) else None
        if isinstance(uri, str):
            on_rows[uri] = (*on_rows.get(uri, ()), n)
        else:
            inline.append(entry)
    kept = HistoryIndex(len(history), history[-1], tuple(inline), on_rows)
    instance._derived["history"] = kept
    return kept
