"""Evaluation context and scopes.

Owns what one evaluation shares (dataset, parameters, clock, dereference lookup,
budget)
and the scope chain that ``@`` and ``^`` walk. Hidden scopes are the ones ``MapNode``
and ``FlatMap`` open: a scope nested inside a hidden one attaches to its parent, so
mapping never adds a ``^`` level.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from kinflow.groq.budget import Budget
from kinflow.groq.values import DateTime


class Context:
    """Everything one evaluation shares."""

    __slots__ = ("_dataset", "_dataset_src", "_index", "_now", "_resolve", "budget", "identity",
                 "memo", "params")

    def __init__(
        self,
        dataset: Any,
        params: Mapping[str, Any],
        now: datetime | None,
        resolve: Callable[[str], Mapping[str, Any] | None] | None,
        identity: str | None = None,
        budget: Budget | None = None,
    ) -> None:
        self._dataset_src = dataset
        self._dataset: list[Any] | None = dataset if type(dataset) is list else None
        self.params = params
        self._now = now
        self._resolve = resolve
        self._index: dict[str, Any] | None = None
        self.identity = identity
        #: charged once per pass over an array; None evaluates unbounded
        self.budget = budget
        #: results of scope-free sub-queries, computed once per evaluation
        self.memo: dict[object, Any] = {}

    @property
    def dataset(self) -> list[Any]:
        ds = self._dataset
        if ds is None:
            src = self._dataset_src
            ds = [] if src is None else list(src)
            self._dataset = ds
        return ds

    def now(self) -> DateTime:
        """One clock reading per evaluation (``now()`` and ``dateTime::now()`` agree)."""
        if self._now is None:
            from datetime import UTC

            self._now = datetime.now(UTC)
        return DateTime(self._now)

    def deref(self, ref: str) -> Any:
        if self._resolve is not None:
            return self._resolve(ref)
        if self._index is None:
            idx: dict[str, Any] = {}
            for doc in self.dataset:
                if isinstance(doc, Mapping):
                    key = doc.get("_id")
                    if isinstance(key, str) and key not in idx:
                        idx[key] = doc
            self._index = idx
        return self._index.get(ref)


class Scope:
    """One level of the ``@``/``^`` chain."""

    __slots__ = ("ctx", "hidden", "parent", "value")

    def __init__(self, value: Any, parent: Scope | None, ctx: Context, hidden: bool = False
                 ) -> None:
        self.value = value
        self.parent = parent
        self.ctx = ctx
        self.hidden = hidden

    def nested(self, value: Any) -> Scope:
        """Scope for a filter element, a projected object or a pipe-function argument."""
        return Scope(value, self.parent if self.hidden else self, self.ctx)

    def hidden_child(self, value: Any) -> Scope:
        """Scope for one element of a map/flat-map."""
        return Scope(value, self.parent if self.hidden else self, self.ctx, True)

    def pass_over(self, items: list[Any]) -> Scope | None:
        """Charge one pass over ``items`` to the budget; return the scope elements nest in.

        Every array pass (filter, map, flat-map, ``order``, ``score``) goes
        through here, so the budget sees each one exactly once.
        """
        budget = self.ctx.budget
        if budget is not None:
            budget.charge(len(items))
        return self.parent if self.hidden else self


Compiled = Callable[[Scope], Any]
