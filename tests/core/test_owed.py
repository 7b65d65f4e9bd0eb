"""``owed``: the repair hints folded into one array (pure)."""

from __future__ import annotations

from kinflow.core import owed


def test_entries_follow_the_hints_in_a_fixed_order() -> None:
    assert owed.entries(due=None, completed=False, effects_due=None, owes_aborts=None,
                        materialising=None, propagate_to=None) is None
    assert owed.entries(due="2026-01-01T12:00:00.000Z", completed=False,
                        effects_due="2026-01-01T13:00:00.000Z", owes_aborts=True,
                        materialising=True, propagate_to="parent-1") == [
        "due:2026-01-01T12:00:00.000Z", {"effects": "2026-01-01T13:00:00.000Z"},
        "materialising", "owes-aborts", "propagate:parent-1"]


def test_a_finished_instance_is_never_due() -> None:
    assert owed.entries(due="2026-01-01T12:00:00.000Z", completed=True, effects_due=None,
                        owes_aborts=None, materialising=None, propagate_to="p") == [
        "propagate:p"]


def test_a_stored_document_folds_the_same_way() -> None:
    document = {"nextEvaluationAt": "2026-01-02T00:00:00.000Z", "owesAborts": True,
                "propagateTo": "p", "effectsDueAt": None, "materialising": "yes"}
    assert owed.of_document(document) == ["due:2026-01-02T00:00:00.000Z", "owes-aborts",
                                          "propagate:p"]
    assert owed.of_document({"completedAt": "x", "nextEvaluationAt": "y"}) is None


def test_every_string_kind_sorts_between_due_and_propagate() -> None:
    """The ranges stay exact under array semantics only with this order (core/owed.py)."""
    others = [owed.MATERIALISING, owed.ABORTS]
    assert all(owed.DUE < kind < owed.PROPAGATE for kind in others)
    assert all(not kind.startswith(owed.PROPAGATE) for kind in others)

