"""The CLI's verbs run with an in-process engine on the configured lake.

The views it returns are the GraphQL API's shapes, built from the same read
model (``kinflow.core.readmodel`` and the registry rows), so a command prints
the same here as through a server.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kinflow.core import readmodel
from kinflow.core.state import INSTANCE_TYPE
from kinflow.engine import Actor, Engine, OperationResult
from kinflow.engine.registry_cache import registry_rows
from kinflow.jsonvalues import jsonable
from kinflow.plugins import build_engine
from kinflow.settings import Settings
from kinflow.storage import LakeConnection

CLI_ACTOR = Actor("person", "cli", ("admin",))

def instance_view(doc: dict[str, Any]) -> dict[str, Any]:
    """The GraphQL ``WorkflowInstance`` fields the CLI shows, from a stored instance.

    Built from the same read model as the API (``kinflow.core.readmodel`` and
    the registry rows), so local and remote commands print the same thing.
    """
    rows = [{
        "rowKey": row.row_key, "activity": row.activity, "action": row.action,
        "definition": row.definition, "current": row.current, "status": row.status.upper(),
        "stage": row.stage, "childId": row.child_id, "condemned": row.condemned,
        "abortReason": row.abort_reason, "outcome": row.outcome,
        "outputs": jsonable(row.outputs) if row.outputs is not None else None,
        "outputsError": row.outputs_error,
    } for row in registry_rows(doc)]  # fmt: skip
    return {
        "id": doc["_id"],
        "definition": doc.get("definition"),
        "version": doc.get("pinnedVersion"),
        "status": readmodel.instance_status(doc).upper(),
        "currentStage": doc.get("currentStage"),
        "nextEvaluationAt": doc.get("nextEvaluationAt"),
        "revision": doc.get("_rev"),
        "activities": [
            {"name": a["name"], "status": a["status"],
             "firedActions": list(a.get("firedActions") or [])}
            for a in readmodel.activities(doc)
        ],
        "subworkflows": rows,
    }


def result_view(result: OperationResult) -> dict[str, Any]:
    return {
        "instance": instance_view(result.instance.to_json()),
        "changed": result.changed,
        "cascaded": result.cascaded,
        "nextEvaluationAt": result.next_evaluation_at,
    }


class LocalBackend:
    """Runs verbs with an in-process ``Engine`` on the configured lake."""

    remote = False

    def __init__(self, connection: LakeConnection, settings: Settings) -> None:
        self.connection = connection
        self.engine: Engine = build_engine(connection.lake, settings)

    async def deploy(self, definitions: list[Any]) -> dict[str, Any]:
        outcome = await self.engine.deploy(definitions, actor=CLI_ACTOR)
        return {
            "definitions": [
                {"name": d.name, "version": d.version, "status": d.status}
                for d in outcome.definitions
            ],
            "warnings": outcome.warnings,
        }

    async def start(
        self, definition: str, fields: dict[str, Any], instance_id: str | None
    ) -> dict[str, Any]:
        result = await self.engine.start_instance(
            definition, fields=fields, instance_id=instance_id, actor=CLI_ACTOR
        )
        return result_view(result)

    async def fire(
        self, instance_id: str, activity: str, action: str,
        params: dict[str, Any] | None, key: str | None,
    ) -> dict[str, Any]:  # fmt: skip
        result = await self.engine.fire_action(
            instance_id, activity, action, params=params, idempotency_key=key, actor=CLI_ACTOR
        )
        return result_view(result)

    async def edit(self, instance_id: str, field: str, value: Any, mode: str) -> dict[str, Any]:
        result = await self.engine.edit_field(instance_id, field, value, mode=mode,
                                              actor=CLI_ACTOR)  # fmt: skip
        return result_view(result)

    async def abort(self, instance_id: str, reason: str | None) -> dict[str, Any]:
        result = await self.engine.abort_instance(instance_id, reason=reason, actor=CLI_ACTOR)
        return result_view(result)

    async def cancel(self, instance_id: str, reason: str | None) -> dict[str, Any]:
        result = await self.engine.cancel_instance(instance_id, reason=reason, actor=CLI_ACTOR)
        return result_view(result)

    async def tick(self, instance_id: str) -> dict[str, Any]:
        return result_view(await self.engine.tick(instance_id, actor=CLI_ACTOR))

    async def instance(self, instance_id: str) -> dict[str, Any]:
        return instance_view((await self.engine.get_instance(instance_id)).to_json())

    async def instances(self, ids: Iterable[str]) -> dict[str, dict[str, Any]]:
        found = await self.connection.lake.get_many(list(ids))
        return {
            doc_id: instance_view(await self.engine.assemble(doc))
            for doc_id, doc in found.items()
            if doc.get("_type") == INSTANCE_TYPE
        }

    async def groq(self, query: str, params: dict[str, Any]) -> Any:
        return await self.engine.query(query, params)
