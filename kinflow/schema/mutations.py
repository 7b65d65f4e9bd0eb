"""The ``Mutation`` root: every engine verb, plus content-document writes.

Each resolver checks the caller's role (``roles.require``: the role table names
the least role of every mutation), calls one engine verb as that actor
and returns the verb's result; refusals propagate as ``KinflowError`` and are
shaped into GraphQL errors by ``kinflow.schema.errors``.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

import strawberry

from kinflow.core.owned import check_content_write, check_instance_id
from kinflow.engine import Instance
from kinflow.engine import OperationResult as EngineResult
from kinflow.engine.registry_cache import registry_rows
from kinflow.errors import DatasetNotFound, InvalidInput
from kinflow.gdr import check_document_id, format_gdr
from kinflow.http.tokens import has_role
from kinflow.schema import roles
from kinflow.schema.bulk import BulkResult, CohortFilter
from kinflow.schema.cohort_view import Cohort
from kinflow.schema.cohorts import cohort_rows, cohort_window
from kinflow.schema.context import KInfo
from kinflow.schema.results import OperationResult
from kinflow.schema.scalars import JSON, jsonable
from kinflow.schema.types import (
    DeployedDefinition,
    DeployResult,
    EditMode,
    EffectOutcome,
    WorkflowInstance,
)

log = logging.getLogger("kinflow.api")


def _object(value: Any, name: str) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise InvalidInput(f"{name} must be an object", argument=name)
    return value


def _result(result: EngineResult) -> OperationResult:
    return OperationResult(
        instance=WorkflowInstance.of_state(result.instance),
        changed=result.changed,
        cascaded=result.cascaded,
        next_evaluation_at=result.next_evaluation_at,
    )


@strawberry.type
class Mutation:
    @strawberry.mutation
    async def deploy_definitions(self, info: KInfo, definitions: list[JSON]) -> DeployResult:
        actor = roles.require(info)
        outcome = await info.context.engine.deploy(list(definitions), actor=actor)
        return DeployResult(
            definitions=[DeployedDefinition(name=d.name, version=d.version, status=d.status)
                         for d in outcome.definitions],
            warnings=list(outcome.warnings),
        )  # fmt: skip

    @strawberry.mutation
    async def start_instance(
        self,
        info: KInfo,
        definition: str,
        version: int | None = None,
        fields: JSON | None = None,
        instance_id: strawberry.ID | None = None,
    ) -> OperationResult:
        actor = roles.require(info)
        result = await info.context.engine.start_instance(
            definition, version=version, fields=_object(fields, "fields"),
            instance_id=check_instance_id(check_document_id(instance_id)) if instance_id else None,
            actor=actor,
        )  # fmt: skip
        return _result(result)

    @strawberry.mutation
    async def fire_action(
        self,
        info: KInfo,
        instance_id: strawberry.ID,
        activity: str,
        action: str,
        params: JSON | None = None,
        idempotency_key: str | None = None,
    ) -> OperationResult:
        actor = roles.require(info)
        return _result(await info.context.engine.fire_action(
            instance_id, activity, action, params=_object(params, "params"),
            idempotency_key=idempotency_key, actor=actor,
        ))  # fmt: skip

    @strawberry.mutation
    async def edit_field(
        self,
        info: KInfo,
        instance_id: strawberry.ID,
        field: str,
        value: JSON | None = None,
        mode: EditMode | None = EditMode.SET,
        scope: str | None = None,
        activity: str | None = None,
        idempotency_key: str | None = None,
    ) -> OperationResult:
        actor = roles.require(info)
        return _result(await info.context.engine.edit_field(
            instance_id, field, value, mode=(mode or EditMode.SET).value, scope=scope,
            activity=activity, idempotency_key=idempotency_key, actor=actor,
        ))  # fmt: skip

    @strawberry.mutation
    async def complete_effect(
        self,
        info: KInfo,
        instance_id: strawberry.ID,
        effect_key: str,
        status: EffectOutcome,
        outputs: JSON | None = None,
        error: str | None = None,
        idempotency_key: str | None = None,
    ) -> OperationResult:
        actor = roles.require(info)
        return _result(await info.context.engine.complete_effect(
            instance_id, effect_key, status.value, outputs=_object(outputs, "outputs"),
            error=error, idempotency_key=idempotency_key, actor=actor,
        ))  # fmt: skip

    @strawberry.mutation
    async def abort_instance(
        self,
        info: KInfo,
        instance_id: strawberry.ID,
        reason: str | None = None,
        idempotency_key: str | None = None,
    ) -> OperationResult:
        actor = roles.require(info)
        return _result(await info.context.engine.abort_instance(
            instance_id, reason=reason, idempotency_key=idempotency_key, actor=actor,
        ))  # fmt: skip

    @strawberry.mutation(description="Cancel gracefully: the instance turns CANCELLING, leaves "
                         "its stage, asks its children per their spawn's onCancel (cancel by "
                         "default), runs its cancelStage if it declares one, and becomes "
                         "CANCELLED once that stage finished and every child row settled "
                         "(aborted instead after cancelTimeoutSeconds). A finished instance is "
                         "refused with action-disabled.")
    async def cancel_instance(
        self,
        info: KInfo,
        instance_id: strawberry.ID,
        reason: str | None = None,
        idempotency_key: str | None = None,
    ) -> OperationResult:
        actor = roles.require(info)
        return _result(await info.context.engine.cancel_instance(
            instance_id, reason=reason, idempotency_key=idempotency_key, actor=actor,
        ))  # fmt: skip

    @strawberry.mutation(description="Change a cohort's window, failure budget, per-key "
                         "window or start rate. Raising maxActive starts queued rows at once; "
                         "lowering it lets running children finish. A failureBudget (count N "
                         "or percent P) already exceeded acts at once. maxActivePerKey and "
                         "startRate {count, perSeconds} apply in the same commit.")
    async def update_cohort(
        self,
        info: KInfo,
        parent_id: strawberry.ID,
        activity: str,
        max_active: int | None = None,
        failure_budget: JSON | None = None,
        max_active_per_key: int | None = None,
        start_rate: JSON | None = None,
    ) -> Cohort:
        actor = roles.require(info)
        parent = await info.context.engine.update_cohort(
            check_document_id(parent_id), activity, max_active=max_active,
            failure_budget=failure_budget, max_active_per_key=max_active_per_key,
            start_rate=start_rate, actor=actor)
        return _cohort_of(parent, activity)

    @strawberry.mutation(description="Pause a cohort: no queued row starts and no retry is "
                         "admitted until resumeCohort; live children run on. Pausing a paused "
                         "cohort answers it unchanged.")
    async def pause_cohort(
        self,
        info: KInfo,
        parent_id: strawberry.ID,
        activity: str,
        reason: str | None = None,
        idempotency_key: str | None = None,
    ) -> Cohort:
        actor = roles.require(info)
        parent = await info.context.engine.pause_cohort(
            check_document_id(parent_id), activity, reason=reason,
            idempotency_key=idempotency_key, actor=actor)
        return _cohort_of(parent, activity)

    @strawberry.mutation(description="Resume a paused cohort: what its window, keys and rate "
                         "admit starts at once. Resuming a running cohort answers it unchanged.")
    async def resume_cohort(
        self,
        info: KInfo,
        parent_id: strawberry.ID,
        activity: str,
        idempotency_key: str | None = None,
    ) -> Cohort:
        actor = roles.require(info)
        parent = await info.context.engine.resume_cohort(
            check_document_id(parent_id), activity, idempotency_key=idempotency_key,
            actor=actor)
        return _cohort_of(parent, activity)

    @strawberry.mutation(description="A new attempt for each matching row whose child "
                         "finished failed, aborted or cancelled; succeeded and live rows are "
                         "skipped. Retried with the same key, it applies nothing twice.")
    async def redrive_cohort(
        self,
        info: KInfo,
        parent_id: strawberry.ID,
        activity: str,
        where: CohortFilter | None = None,
        idempotency_key: str | None = None,
    ) -> BulkResult:
        actor = roles.require(info)
        return BulkResult.of(await info.context.engine.redrive_cohort(
            check_document_id(parent_id), activity,
            where=where.to_core() if where is not None else None,
            idempotency_key=idempotency_key, actor=actor))

    @strawberry.mutation(description="Fire childActivity.action on each matching live child "
                         "of the cohort, once per child under <key>:<rowKey>; a child that "
                         "refuses is listed in refusals. Retried with the same key, it applies "
                         "nothing twice.")
    async def fire_cohort(
        self,
        info: KInfo,
        parent_id: strawberry.ID,
        activity: str,
        child_activity: str,
        action: str,
        where: CohortFilter | None = None,
        params: JSON | None = None,
        idempotency_key: str | None = None,
    ) -> BulkResult:
        actor = roles.require(info)
        return BulkResult.of(await info.context.engine.fire_cohort(
            check_document_id(parent_id), activity, child_activity, action,
            where=where.to_core() if where is not None else None,
            params=_object(params, "params"), idempotency_key=idempotency_key, actor=actor))

    @strawberry.mutation(description="Abort each matching child of the cohort and skip its "
                         "matching queued rows; without where it also closes the cohort (a "
                         "later spawn into it is refused with cohort-closed).")
    async def abort_cohort(
        self,
        info: KInfo,
        parent_id: strawberry.ID,
        activity: str,
        where: CohortFilter | None = None,
        reason: str | None = None,
        idempotency_key: str | None = None,
    ) -> BulkResult:
        actor = roles.require(info)
        return BulkResult.of(await info.context.engine.abort_cohort(
            check_document_id(parent_id), activity,
            where=where.to_core() if where is not None else None, reason=reason,
            idempotency_key=idempotency_key, actor=actor))

    @strawberry.mutation(description="Gracefully cancel each matching child of the cohort "
                         "(its cancel stage runs) and skip its matching queued rows as "
                         "CANCELLED; without where it also closes the cohort (a later spawn "
                         "into it is refused with cohort-closed).")
    async def cancel_cohort(
        self,
        info: KInfo,
        parent_id: strawberry.ID,
        activity: str,
        where: CohortFilter | None = None,
        reason: str | None = None,
        idempotency_key: str | None = None,
    ) -> BulkResult:
        actor = roles.require(info)
        return BulkResult.of(await info.context.engine.cancel_cohort(
            check_document_id(parent_id), activity,
            where=where.to_core() if where is not None else None, reason=reason,
            idempotency_key=idempotency_key, actor=actor))

    @strawberry.mutation
    async def tick(self, info: KInfo, instance_id: strawberry.ID) -> OperationResult:
        actor = roles.require(info)
        return _result(await info.context.engine.tick(instance_id, actor=actor))

    @strawberry.mutation
    async def set_stage(
        self,
        info: KInfo,
        instance_id: strawberry.ID,
        stage: str,
        reason: str | None = None,
        idempotency_key: str | None = None,
    ) -> OperationResult:
        actor = roles.require(info)
        return _result(await info.context.engine.set_stage(
            instance_id, stage, reason=reason, idempotency_key=idempotency_key, actor=actor,
        ))  # fmt: skip

    @strawberry.mutation
    async def reset_activity(
        self,
        info: KInfo,
        instance_id: strawberry.ID,
        activity: str,
        to: str | None = "active",
        idempotency_key: str | None = None,
    ) -> OperationResult:
        actor = roles.require(info)
        return _result(await info.context.engine.reset_activity(
            instance_id, activity, to=to or "active", idempotency_key=idempotency_key,
            actor=actor,
        ))  # fmt: skip

    @strawberry.mutation(
        description=(
            "Create or replace a content document (an article, a product). "
            "Engine-owned ids (instance.*, definition.*, lease.*) and types (kinflow.*) "
            "are refused."
        )
    )
    async def put_document(
        self, info: KInfo, document: JSON, dataset: str | None = None
    ) -> JSON:
        actor = roles.require(info)
        body = _object(document, "document")
        if body is None:
            raise InvalidInput("document must be an object", argument="document")
        body = dict(body)
        body.setdefault("_id", uuid.uuid4().hex)
        check_document_id(body["_id"])
        check_content_write(body["_id"], body.get("_type"))
        lake = info.context.lake
        target = await _content_dataset(info, dataset, actor, create=True)
        expected = body.get("_rev")

        async def write(session: Any) -> dict[str, Any]:
            current = await lake.get(body["_id"], dataset=target, session=session)
            if current is not None:
                check_content_write(body["_id"], stored_type=current.get("_type"))
            if isinstance(expected, str):
                # Fenced: a type change since the read would also have changed _rev.
                return await lake.replace(body, expected_rev=expected, dataset=target,
                                          session=session)  # fmt: skip
            return await lake.replace(body, expected_rev=None, dataset=target, session=session)

        await lake.ensure_dataset(target)
        if isinstance(expected, str):  # a stale _rev is the caller's conflict, never retried
            stored = await write(None)
        else:
            stored = await lake.transaction(write, verb="putDocument")
        await _react(info, target, stored["_id"], actor)
        return jsonable(stored)

    @strawberry.mutation
    async def delete_document(
        self, info: KInfo, id: strawberry.ID, dataset: str | None = None
    ) -> bool:
        actor = roles.require(info)
        lake = info.context.lake
        target = await _content_dataset(info, dataset, actor, create=False)
        doc_id = check_document_id(id)
        check_content_write(doc_id)

        async def delete(session: Any) -> bool:
            current = await lake.get(doc_id, dataset=target, session=session)
            if current is None:
                return False
            check_content_write(doc_id, stored_type=current.get("_type"))
            return await lake.delete(doc_id, dataset=target, session=session)

        deleted = await lake.transaction(delete, verb="deleteDocument")
        if deleted:
            await _react(info, target, doc_id, actor)
        return deleted


async def _content_dataset(
    info: KInfo, dataset: str | None, actor: Any, *, create: bool
) -> str:
    """The dataset a content write names: one that exists; only an admin's put adds one.

    Operators write into configured or existing datasets, so a leaked operator
    token cannot fill the lake with collections; an admin (who also deploys)
    may create a dataset by writing its first document.
    """
    datasets = info.context.services.datasets
    try:
        return await datasets.require(dataset)
    except DatasetNotFound:
        if not create or dataset is None or not has_role(actor, roles.CREATE_DATASET):
            raise
        return await datasets.create(dataset)


async def _react(info: KInfo, dataset: str, doc_id: str, actor: Any) -> None:
    """Let instances that read this document re-evaluate now (best effort)."""
    engine = info.context.engine
    try:
        await engine.react_to_document_change(format_gdr(dataset, doc_id), actor=actor)
    except Exception:  # the write succeeded; the heartbeat will catch up
        log.warning("re-evaluating instances that read %s failed", doc_id, exc_info=True)


def _cohort_of(parent: Instance, activity: str) -> Cohort:
    """The answer of a cohort verb: the cohort as the parent holds it after the commit."""
    doc = parent.to_json()
    rows = cohort_rows(registry_rows(doc), activity)
    return Cohort.of(parent.id_, activity, rows, cohort_window(doc, activity, rows), doc)
