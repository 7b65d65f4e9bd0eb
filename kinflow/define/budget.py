"""Deploy rules of a spawn's failure budget (``failureBudget``, ``onBudgetExceeded``).

The model (``models.FailureBudget``) checks each key's type and range; what
needs both keys at once lives here, so deploy and ``updateCohort`` refuse
the same shapes: a budget names exactly one of ``count`` and ``percent``.
``cancel-rest`` asks the cohort's live children to cancel gracefully
(core/cancellation.py).
"""

from __future__ import annotations

from kinflow.define.models import FailureBudget, SpawnBlock


def shape_problem(budget: FailureBudget) -> str | None:
    """Why a parsed budget is unusable, else ``None``."""
    named = [key for key in ("count", "percent") if getattr(budget, key) is not None]
    if len(named) != 1:
        return 'a failure budget names exactly one of "count" and "percent"'
    return None


def budget_problems(spawn: SpawnBlock) -> list[tuple[str, str]]:
    """``(path below the spawn block, message)`` for each problem of its budget keys."""
    problems: list[tuple[str, str]] = []
    if spawn.failureBudget is not None:
        problem = shape_problem(spawn.failureBudget)
        if problem is not None:
            problems.append(("failureBudget", problem))
    if spawn.onBudgetExceeded is not None and spawn.failureBudget is None:
        problems.append(("onBudgetExceeded", "onBudgetExceeded needs a failureBudget"))
    return problems
