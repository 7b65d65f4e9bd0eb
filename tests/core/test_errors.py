"""Refusals: caller mistakes keep ``contract-violation`` with a reason; limits and bugs don't."""

from __future__ import annotations

import inspect

from kinflow.core import errors


def test_caller_mistakes_are_contract_violations_with_their_own_class() -> None:
    kinds = [c for _, c in inspect.getmembers(errors, inspect.isclass)
             if issubclass(c, errors.ContractViolation) and c is not errors.ContractViolation]
    assert len(kinds) == 12
    assert {c.code for c in kinds} == {"contract-violation"}
    assert set(errors.__all__) >= {c.__name__ for c in kinds}
    refused = errors.ActionNotFound("no", action="x", reason="action-not-in-stage")
    assert refused.to_dict()["details"] == {"action": "x", "reason": "action-not-in-stage"}


def test_a_limit_and_a_bug_are_not_contract_violations() -> None:
    assert errors.PlanReadLimit.code == "plan-read-limit"
    assert errors.EngineBug.code == "internal-error"
    for cls in (errors.PlanReadLimit, errors.EngineBug):
        assert not issubclass(cls, errors.ContractViolation)
