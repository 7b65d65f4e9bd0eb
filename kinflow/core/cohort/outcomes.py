"""How a child finished, as its parent's registry row records it (pure; no I/O).

A finished row carries ``outcome`` (``succeeded`` or ``failed`` from the
terminal stage's ``outcome`` key, ``aborted`` for an aborted child, ``cancelled``
for a child that ended its graceful cancellation) and, when
the child's definition declares ``outputs``, those workflow-scope field
values. The child's own terminal commit writes them on its document as
``result`` (``finish``); whatever stamps the row reads them back from the
child (``Finished.of``: the propagation round's projection, the spawn that
saw a child finish at once, a subscription's overlay), so the parent never
reads the child's fields itself and every path stamps the same values.

Outputs are capped at ``Limits.row_output_bytes`` of JSON
(``KINFLOW_MAX_ROW_OUTPUT_BYTES``): above it the row gets ``outputs: None``
and ``outputsError: "output-too-large"``, the child keeps its fields.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kinflow.core.state import ChildResult, Instance
from kinflow.define.models import Stage, WorkflowDefinition

SUCCEEDED = "succeeded"
FAILED = "failed"
ABORTED = "aborted"
CANCELLED = "cancelled"
TIMED_OUT = "timed-out"
"""An attempt past its deadline (core/cohort/deadlines.py): status aborted, or cancelled."""
OUTPUT_TOO_LARGE = "output-too-large"
FAILING = frozenset({FAILED, ABORTED, TIMED_OUT})
"""Outcomes a cohort counts as failed (``Cohort.failed``, the failure budget), unless
the budget or the quorum stopped the row itself (``counts_as_failed``)."""
BUDGET_STOPPED = "failure-budget-exceeded"
"""``abortReason`` of the rows a failure budget skipped or aborted (core/cohort/budget.py)."""
COMPLETE_STOPPED = "cohort-complete"
"""``abortReason`` of the rows a complete cohort skipped or stopped (core/cohort/quorum.py)."""


def stopped_by_budget(outcome: str | None, abort_reason: str | None) -> bool:
    """Whether a row ended because its cohort's budget was exceeded: skipped or aborted
    (``aborted``), or cancelled under ``cancel-rest``. Such a row is the budget's effect,
    not a failure of its own (a condemned child that reached a failed stage first, or
    finished first, keeps its own outcome and counts by it)."""
    return outcome in (ABORTED, CANCELLED) and abort_reason == BUDGET_STOPPED


def counts_as_failed(outcome: str | None, abort_reason: str | None) -> bool:
    """What ``Cohort.failed`` and a budget's ``used`` count: a failed or aborted latest
    attempt that neither the budget nor the quorum stopped itself."""
    return (outcome in FAILING and not stopped_by_budget(outcome, abort_reason)
            and not stopped_by_quorum(outcome, abort_reason))


def stopped_by_quorum(outcome: str | None, abort_reason: str | None) -> bool:
    """Whether a row ended because its cohort was complete (``completeWhen``): skipped,
    aborted or cancelled; it counts as aborted (or cancelled), never as failed."""
    return outcome in (ABORTED, CANCELLED) and abort_reason == COMPLETE_STOPPED


def capped(outputs: dict[str, Any] | None, limit: int
           ) -> tuple[dict[str, Any] | None, str | None]:
    """``(outputs, None)``, or ``(None, "output-too-large")`` past ``limit`` JSON bytes."""
    if outputs is None:
        return None, None
    size = len(json.dumps(outputs, separators=(",", ":"), ensure_ascii=False,
                          default=str).encode())
    return (None, OUTPUT_TOO_LARGE) if size > limit else (outputs, None)


def finish(instance: Instance, definition: WorkflowDefinition, stage: Stage,
           limit: int) -> ChildResult:
    """The ``result`` a commit entering the terminal ``stage`` writes on the instance."""
    outputs: dict[str, Any] | None = None
    if definition.outputs is not None:
        values = {f.name: f.value for f in instance.fields}
        outputs = {name: values.get(name) for name in definition.outputs}
    kept, error = capped(outputs, limit)
    return ChildResult(outcome=stage.outcome or SUCCEEDED, outputs=kept, outputsError=error)


@dataclass(frozen=True, slots=True)
class Finished:
    """How one child finished, ready to stamp on its row."""

    outcome: str
    outputs: dict[str, Any] | None = None
    outputs_error: str | None = None

    @classmethod
    def of(cls, document: Mapping[str, Any]) -> Finished | None:
        """From a stored child document (``result``, ``abortedAt``, ``completedAt``
        suffice); ``None`` while it is live. A child completed before outcomes existed
        reads as ``succeeded``."""
        if document.get("abortedAt"):
            return cls(ABORTED)
        if not document.get("completedAt"):
            return None
        if document.get("cancelledAt"):
            return cls(CANCELLED)
        result = document.get("result")
        if not isinstance(result, Mapping):
            return cls(SUCCEEDED)
        outputs = result.get("outputs")
        error = result.get("outputsError")
        return cls(str(result.get("outcome") or SUCCEEDED),
                   dict(outputs) if isinstance(outputs, Mapping) else None,
                   error if isinstance(error, str) else None)

    @classmethod
    def of_instance(cls, child: Instance) -> Finished | None:
        result = child.result.to_json() if child.result is not None else None
        return cls.of({"abortedAt": child.abortedAt, "completedAt": child.completedAt,
                       "cancelledAt": child.cancelledAt, "result": result})

    def row_changes(self, limit: int) -> dict[str, Any]:
        """The registry row's fields for this finish (``replace_row`` keywords); the
        cap is checked again with the parent's limit."""
        outputs, error = capped(self.outputs, limit)
        return {"outcome": self.outcome, "outputs": outputs,
                "outputsError": error or self.outputs_error}


def row_changes_of(child: Instance, limit: int) -> dict[str, Any]:
    """The row fields of a child the plan holds (a spawn's child that finished at once);
    empty while it is live."""
    finished = Finished.of_instance(child)
    return finished.row_changes(limit) if finished is not None else {}


def cancelled() -> ChildResult:
    """The ``result`` of an instance that ended its graceful cancellation (no outputs)."""
    return ChildResult(outcome=CANCELLED)


MISSING = Finished(ABORTED)
"""A row whose child document is gone resolves as aborted (``child-missing``)."""
