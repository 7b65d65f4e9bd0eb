"""The idempotency ledger: a key replays its own call until it expires, and nothing else."""

from __future__ import annotations

from datetime import timedelta

import pytest

from kinflow.core.errors import ContractViolation
from kinflow.core.ledger import fingerprint, is_replay, remember
from tests.core.support import NOW, ctx, definition, start


def test_fingerprint_ignores_absent_arguments_and_key_order() -> None:
    assert fingerprint("fireAction", {"a": 1, "b": None}) == fingerprint("fireAction", {"a": 1})
    assert fingerprint("op", {"a": 1, "b": 2}) == fingerprint("op", {"b": 2, "a": 1})
    assert fingerprint("op", {"a": 1}) != fingerprint("other", {"a": 1})
    assert fingerprint("op", {"s": "\ud800"}).startswith("sha256:")  # a lone surrogate hashes


def test_a_key_replays_only_its_own_call_until_it_expires() -> None:
    instance = start(definition("l", [{"name": "a"}]))
    c = ctx()
    assert not is_replay(instance, c, None, "fireAction", {})
    remember(instance, c, "k", "fireAction", {"a": 1})
    assert is_replay(instance, c, "k", "fireAction", {"a": 1})
    with pytest.raises(ContractViolation) as other_args:
        is_replay(instance, c, "k", "fireAction", {"a": 2})
    assert other_args.value.details["reason"] == "idempotency-key-reused"
    with pytest.raises(ContractViolation):
        is_replay(instance, c, "k", "editField", {"a": 1})
    with pytest.raises(ContractViolation):
        is_replay(instance, c, "  ", "fireAction", {})
    ttl = timedelta(seconds=c.limits.idempotency_ttl_seconds)
    expired = ctx(now=NOW + ttl)
    assert not is_replay(instance, expired, "k", "editField", {"a": 1})
    remember(instance, expired, "k2", "editField")
    assert [row.key for row in instance.processedRequests] == ["k2"]  # expired rows pruned
