"""Effect planning: queue with bindings, claim with a lease, expiry, sweep, settle, cancel."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from kinflow.core import effects as fx
from kinflow.core import verbs
from kinflow.core.errors import ContractViolation, EffectNotFound, EffectOutputsInvalid
from kinflow.core.state import Instance
from kinflow.timestamps import iso
from tests.core.support import ALICE, NOW, ctx, definition, history_types, start


def with_effects() -> dict[str, Any]:
    return definition("fx", [
        {"name": "a", "fields": [{"name": "to", "type": "string",
                                  "initialValue": {"type": "literal", "value": "ann"}}],
         "activities": [{"name": "w", "actions": [{"name": "send", "effects": [
             {"name": "mail", "bindings": {"who": "$fields.to"}, "input": {"tpl": "t1"},
              "outputs": [{"name": "id", "type": "string"}]}]}]}],
         "transitions": [{"name": "t", "to": "b", "when": "false"}]},
        {"name": "b"},
    ])  # fmt: skip


def queued() -> Instance:
    fired = verbs.plan_fire_action(start(with_effects()), verbs.FireAction("w", "send"), ctx())
    return fired.instance


def test_an_effect_is_queued_with_its_bindings_and_input() -> None:
    instance = queued()
    [pending] = instance.pendingEffects
    assert pending.name == "mail" and pending.params == {"who": "ann", "tpl": "t1"}
    assert pending.queuedAt == iso(NOW) and "effectQueued" in history_types(instance)
    assert fx.effects_due_at(instance) == iso(NOW)


def test_a_claim_holds_a_lease_until_it_expires() -> None:
    instance = queued()
    key = instance.pendingEffects[0].key_
    claim = fx.claim(instance, ctx(actor=ALICE), key, lease_seconds=60)
    assert claim.leaseExpiresAt == iso(NOW + timedelta(seconds=60)) and claim.claimToken
    assert fx.effects_due_at(instance) == claim.leaseExpiresAt
    assert fx.claimable(instance, ctx()) == []
    with pytest.raises(ContractViolation):
        fx.claim(instance, ctx(), key, lease_seconds=60)
    later = ctx(now=NOW + timedelta(seconds=60))
    assert fx.claim_expired(instance.pendingEffects[0], later.now)
    again = fx.claim(instance, later, key, lease_seconds=60)
    assert again.claimToken and "effectClaimReleased" in history_types(instance)


def test_sweep_releases_only_expired_claims() -> None:
    instance = queued()
    fx.claim(instance, ctx(), instance.pendingEffects[0].key_, lease_seconds=60)
    assert fx.sweep_claims(instance, ctx(now=NOW + timedelta(seconds=59))) == 0
    assert fx.sweep_claims(instance, ctx(now=NOW + timedelta(seconds=61))) == 1
    assert instance.pendingEffects[0].claim is None


def test_complete_settles_once_and_checks_outputs() -> None:
    instance = queued()
    model = instance.definition_model()
    key = instance.pendingEffects[0].key_
    with pytest.raises(EffectOutputsInvalid):
        fx.complete(instance, model, ctx(), key, "done", {"nope": 1}, None)
    with pytest.raises(EffectOutputsInvalid):
        fx.complete(instance, model, ctx(), key, "failed", {"id": "x"}, "boom")
    with pytest.raises(ContractViolation):
        fx.complete(instance, model, ctx(), key, "cancelled", None, None)
    run = fx.complete(instance, model, ctx(), key, "done", {"id": "m-1"}, None)
    assert run.status == "done" and run.outputs == {"id": "m-1"}
    assert instance.pendingEffects == [] and fx.effects_due_at(instance) is None
    with pytest.raises(EffectNotFound) as settled:
        fx.complete(instance, model, ctx(), key, "done", None, None)
    assert settled.value.details["settled"]["status"] == "done"


def test_abort_cancels_every_pending_effect() -> None:
    instance = queued()
    fx.cancel_all(instance, ctx())
    assert instance.pendingEffects == []
    assert [r.status for r in instance.effectHistory] == ["cancelled"]
