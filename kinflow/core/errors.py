"""The engine's refusals, one class per stable code (README.md#limits-and-error-codes).

Every class is a ``KinflowError``: the API maps ``code`` to
``extensions.code`` and ``details`` to ``extensions.details``. Messages are
for people; codes and detail keys are the contract. Anything a caller can
cause surfaces as one of these, never as a bare exception.
"""

from __future__ import annotations

from kinflow.errors import ConcurrentModification, KinflowError

__all__ = [
    "ActionDisabled",
    "ActionNotFound",
    "ActionParamsInvalid",
    "ActivityNotFinished",
    "ActivityNotFound",
    "CascadeLimit",
    "ChildIdTaken",
    "CohortNotFound",
    "CohortTooLargeForRows",
    "ConcurrentModification",
    "ContractViolation",
    "DefinitionInvalid",
    "DefinitionNotFound",
    "DefinitionTooLarge",
    "EditFieldDenied",
    "EditModeInvalid",
    "EffectClaimed",
    "EffectNotFound",
    "EffectOutcomeInvalid",
    "EffectOutputsInvalid",
    "EngineBug",
    "FanOutLimit",
    "FieldNotFound",
    "FieldValueInvalid",
    "IdempotencyKeyInvalid",
    "IdempotencyKeyReused",
    "InitialFieldsInvalid",
    "InjectedFault",
    "InputTooLarge",
    "InstanceExists",
    "InstanceIdReserved",
    "InstanceNotFound",
    "InstanceTooLarge",
    "MissingEffectHandler",
    "ModelVersionAhead",
    "PersistedDocShape",
    "PlanReadLimit",
    "RedriveNotAllowed",
    "RegistryTooLarge",
    "RequiredFieldNotProvided",
    "ReservedId",
    "ReservedType",
    "ResetTargetInvalid",
    "SpawnContractsInvalid",
    "SpawnDefinitionUnresolved",
    "SpawnDepthExceeded",
    "SpawnHandoffInvalid",
    "SpawnNotSupported",
    "SpawnRowIdentity",
    "StageNotFound",
]


class DefinitionNotFound(KinflowError):
    """No deployed definition with that name (and version)."""

    code = "definition-not-found"


class DefinitionInvalid(KinflowError):
    """Deploy found problems; ``details.issues`` lists every one."""

    code = "definition-invalid"


class DefinitionTooLarge(KinflowError):
    """A definition's JSON is over ``KINFLOW_MAX_DEFINITION_BYTES``; refused unvalidated."""

    code = "definition-too-large"


class SpawnContractsInvalid(KinflowError):
    """Deploy found bad parent-to-child handoffs; ``details.issues`` lists every one."""

    code = "spawn-contracts-invalid"


class InstanceNotFound(KinflowError):
    code = "instance-not-found"


class ActionDisabled(KinflowError):
    """``fire_action`` refused; ``details.reason`` says why."""

    code = "action-disabled"


class ActionParamsInvalid(KinflowError):
    code = "action-params-invalid"


class InitialFieldsInvalid(KinflowError):
    code = "initial-fields-invalid"


class RequiredFieldNotProvided(KinflowError):
    code = "required-field-not-provided"


class EditFieldDenied(KinflowError):
    """``edit_field`` refused; ``details.reason`` says why."""

    code = "edit-field-denied"


class FieldValueInvalid(KinflowError):
    """A value written into a field does not fit the field's kind."""

    code = "field-value-shape"


class CascadeLimit(KinflowError):
    """The cascade moved ``limit`` times in one call: a transition ping-pong."""

    code = "cascade-limit"


class ContractViolation(KinflowError):
    """A caller bug: a call that can never succeed; ``details.reason`` says which.

    Each kind is a subclass that keeps the code (clients and tests match on
    ``contract-violation``); every raise site passes its stable ``reason=``
    (named in the subclass's docstring). Details stay exactly what the site
    gave, as for every ``KinflowError``.
    """

    code = "contract-violation"


class IdempotencyKeyInvalid(ContractViolation):
    """An empty idempotency key (reason ``idempotency-key-empty``)."""


class IdempotencyKeyReused(ContractViolation):
    """A key used before for another verb or other arguments (``idempotency-key-reused``)."""


class EffectClaimed(ContractViolation):
    """Another claim token holds the effect (reason ``effect-claimed``)."""


class EffectOutcomeInvalid(ContractViolation):
    """An effect completed as neither ``done`` nor ``failed`` (``effect-outcome-invalid``)."""


class FieldNotFound(ContractViolation):
    """No such field: not live (``field-not-live``) or not in the view (``field-not-in-view``)."""


class ActivityNotFound(ContractViolation):
    """The activity is not in the instance's open stage (reason ``activity-not-in-stage``)."""


class ActivityNotFinished(ContractViolation):
    """A reset of an activity that is still running (reason ``activity-not-finished``)."""


class ActionNotFound(ContractViolation):
    """The stage has no action of that name (reason ``action-not-in-stage``)."""


class StageNotFound(ContractViolation):
    """The definition has no stage of that name (reason ``stage-not-found``)."""


class ResetTargetInvalid(ContractViolation):
    """A reset to neither ``active`` nor ``skipped`` (reason ``reset-target-invalid``)."""


class EditModeInvalid(ContractViolation):
    """An edit mode the engine does not know (reason ``edit-mode-invalid``)."""


class InstanceExists(ContractViolation):
    """A start under an existing id it cannot resume (``instance-exists``, or
    ``instance-aborted-unprimed``)."""


class PlanReadLimit(KinflowError):
    """A plan asked for lake reads more than ``details.rounds`` times (a definition reading
    too many documents or queries at one stage entry): a limit, not a caller bug."""

    code = "plan-read-limit"


class EngineBug(KinflowError):
    """A state validation should have made impossible: a kinflow bug, please report it."""

    code = "internal-error"


class EffectNotFound(KinflowError):
    """No pending effect with that key; ``details.settled`` tells a duplicate from a cancel."""

    code = "effect-not-found"


class EffectOutputsInvalid(KinflowError):
    code = "effect-outputs-invalid"


class MissingEffectHandler(KinflowError):
    code = "missing-effect-handler"


class ModelVersionAhead(KinflowError):
    """The stored document needs a newer engine than this one."""

    code = "model-version-ahead"


class PersistedDocShape(KinflowError):
    """A stored instance document does not parse (corruption or a foreign writer)."""

    code = "persisted-doc-shape"


class SpawnDepthExceeded(KinflowError):
    code = "spawn-depth-exceeded"


class FanOutLimit(KinflowError):
    code = "fan-out-limit"


class SpawnNotSupported(KinflowError):
    """Kept for API compatibility; the engine spawns children now."""

    code = "spawn-not-supported"


class SpawnRowIdentity(KinflowError):
    """A ``forEach`` row has no identity, or two rows share one."""

    code = "spawn-row-identity"


class SpawnDefinitionUnresolved(KinflowError):
    """The spawn's child definition is not deployed (checked before rows are read)."""

    code = "spawn-definition-unresolved"


class SpawnHandoffInvalid(KinflowError):
    """A ``with`` or ``context`` value cannot be handed to the child."""

    code = "spawn-handoff-invalid"


class InputTooLarge(KinflowError):
    """A caller's key, text or value is over its limit; ``details`` name it, its size, the limit."""

    code = "input-too-large"


class InstanceTooLarge(KinflowError):
    """The write would leave the instance document over ``KINFLOW_MAX_INSTANCE_BYTES``."""

    code = "instance-too-large"


class ReservedId(KinflowError):
    """A content write named an id the engine owns (``instance.*``, ``definition.*``, ...)."""

    code = "reserved-id"


class InstanceIdReserved(ReservedId):
    """A caller chose an instance id of the shape the engine derives for children: taking
    it would stop the engine from ever creating that child."""

    code = "instance-id-reserved"


class ChildIdTaken(KinflowError):
    """A commit went to create a child and found a document at its id that the engine did
    not write there; a retry meets the same document, so the heartbeat parks the parent."""

    code = "child-id-taken"


class ReservedType(KinflowError):
    """Content writes may not create, replace or delete engine-owned documents."""

    code = "reserved-type"


class CohortNotFound(KinflowError):
    """No cohort of that activity: the parent never spawned for it, or its definition has
    no such activity."""

    code = "cohort-not-found"


class RedriveNotAllowed(KinflowError):
    """``redriveCohort`` on a parent that finished or left the stage visit that spawned the
    cohort (``details.reason``: ``parent-finished`` | ``stage-left``)."""

    code = "redrive-not-allowed"


class CohortClosed(KinflowError):
    """A spawn that would add rows to a cohort a ``cancelCohort`` or ``abortCohort`` without
    a filter closed (``details``: activity, stageEntry, closedBy)."""

    code = "cohort-closed"


class CohortTooLargeForRows(KinflowError):
    """A condition reads ``$subworkflows`` while the parent holds a cohort too large to
    read as rows (``Limits.condition_rows``); ``$cohort`` reads its counts instead."""

    code = "cohort-too-large-for-rows"


class RegistryTooLarge(KinflowError):
    """A commit of a sparse parent needs more registry chunks than one commit may read
    (``Limits.sparse_chunks``): the path walks every row, which a sparse parent never
    loads at once (``details``: instanceId, chunks, limit)."""

    code = "registry-too-large"


class InjectedFault(Exception):
    """Raised at an armed fault point (tests simulate crashes with it); never a refusal."""
