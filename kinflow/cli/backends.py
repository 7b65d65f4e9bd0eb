"""Where CLI commands run: on the lake directly, or against a running server.

A heavy module (the engine, the lake client, httpx): commands import it when
they run, never at ``import kinflow.cli``.

Both backends offer the same coroutine methods and return plain JSON-shaped
views (the GraphQL API's shapes: ``WorkflowInstance``, ``OperationResult``),
so the commands and the renderer never care which one they talk to.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from typing import Any, Protocol

import httpx

from kinflow.core import readmodel
from kinflow.core.state import INSTANCE_TYPE
from kinflow.engine import Actor, Engine, OperationResult
from kinflow.engine.registry_cache import registry_rows
from kinflow.errors import KinflowError, ServerUnreachable
from kinflow.plugins import build_engine
from kinflow.schema.scalars import jsonable
from kinflow.settings import Settings
from kinflow.storage import LakeConnection, open_lake

CLI_ACTOR = Actor("person", "cli", ("admin",))

INSTANCE_FIELDS = """
  id definition version status currentStage nextEvaluationAt revision
  activities { name status firedActions }
  subworkflows { rowKey activity action definition current status stage childId condemned
    abortReason outcome outputs outputsError }
"""


class Backend(Protocol):
    async def deploy(self, definitions: list[Any]) -> dict[str, Any]: ...
    async def start(self, definition: str, fields: dict[str, Any],
                    instance_id: str | None) -> dict[str, Any]: ...  # fmt: skip
    async def fire(self, instance_id: str, activity: str, action: str,
                   params: dict[str, Any] | None,
                   key: str | None) -> dict[str, Any]: ...  # fmt: skip
    async def edit(self, instance_id: str, field: str, value: Any, mode: str) -> dict[str, Any]: ...
    async def abort(self, instance_id: str, reason: str | None) -> dict[str, Any]: ...
    async def cancel(self, instance_id: str, reason: str | None) -> dict[str, Any]: ...
    async def tick(self, instance_id: str) -> dict[str, Any]: ...
    async def instance(self, instance_id: str) -> dict[str, Any]: ...
    async def instances(self, ids: Iterable[str]) -> dict[str, dict[str, Any]]: ...
    async def groq(self, query: str, params: dict[str, Any]) -> Any: ...


class RemoteError(KinflowError):
    """An error the server returned, carrying its code through."""

    code = "remote-error"

    def __init__(self, code: str, message: str, details: dict[str, Any] | None) -> None:
        super().__init__(message, **(details or {}))
        self.code = code  # type: ignore[misc]


# ---------------------------------------------------------------- views


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


# ---------------------------------------------------------------- local


class LocalBackend:
    """Runs verbs with an in-process ``Engine`` on the configured lake."""

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


# ---------------------------------------------------------------- remote


class RemoteBackend:
    """Sends the same verbs to a running server as GraphQL operations."""

    def __init__(self, url: str, token: str | None, client: httpx.AsyncClient) -> None:
        self.endpoint = url.rstrip("/") + ("" if url.rstrip("/").endswith("/graphql")
                                           else "/graphql")  # fmt: skip
        self.token = token
        self.client = client

    async def call(self, query: str, variables: dict[str, Any]) -> dict[str, Any]:
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        try:
            response = await self.client.post(
                self.endpoint, json={"query": query, "variables": variables}, headers=headers
            )
        except httpx.HTTPError as exc:
            raise ServerUnreachable(f"cannot reach {self.endpoint}: {exc}",
                                  url=self.endpoint) from exc  # fmt: skip
        try:
            body = response.json()
        except json.JSONDecodeError as exc:
            raise RemoteError(
                "bad-response",
                f"the server answered {response.status_code} without JSON",
                {"status": response.status_code},
            ) from exc
        errors = body.get("errors") if isinstance(body, dict) else None
        if errors:
            first = errors[0]
            ext = first.get("extensions") or {}
            raise RemoteError(ext.get("code", "remote-error"), first.get("message", "error"),
                              ext.get("details"))  # fmt: skip
        return dict(body.get("data") or {})

    async def _result(self, mutation: str, name: str, variables: dict[str, Any]
                      ) -> dict[str, Any]:  # fmt: skip
        data = await self.call(
            mutation.replace(
                "RESULT",
                f"""{{
            changed cascaded nextEvaluationAt instance {{ {INSTANCE_FIELDS} }} }}""",
            ),
            variables,
        )
        return dict(data[name])

    async def deploy(self, definitions: list[Any]) -> dict[str, Any]:
        data = await self.call(
            """mutation($d: [JSON!]!) { deployDefinitions(definitions: $d) {
                 definitions { name version status } warnings } }""",
            {"d": definitions},
        )
        return dict(data["deployDefinitions"])

    async def start(
        self, definition: str, fields: dict[str, Any], instance_id: str | None
    ) -> dict[str, Any]:
        return await self._result(
            """mutation($d: String!, $f: JSON, $i: ID) {
                 startInstance(definition: $d, fields: $f, instanceId: $i) RESULT }""",
            "startInstance", {"d": definition, "f": fields, "i": instance_id},
        )  # fmt: skip

    async def fire(
        self, instance_id: str, activity: str, action: str,
        params: dict[str, Any] | None, key: str | None,
    ) -> dict[str, Any]:  # fmt: skip
        return await self._result(
            """mutation($i: ID!, $a: String!, $n: String!, $p: JSON, $k: String) {
                 fireAction(instanceId: $i, activity: $a, action: $n, params: $p,
                            idempotencyKey: $k) RESULT }""",
            "fireAction",
            {"i": instance_id, "a": activity, "n": action, "p": params, "k": key},
        )

    async def edit(self, instance_id: str, field: str, value: Any, mode: str) -> dict[str, Any]:
        return await self._result(
            """mutation($i: ID!, $f: String!, $v: JSON, $m: EditMode) {
                 editField(instanceId: $i, field: $f, value: $v, mode: $m) RESULT }""",
            "editField", {"i": instance_id, "f": field, "v": value, "m": mode.upper()},
        )  # fmt: skip

    async def abort(self, instance_id: str, reason: str | None) -> dict[str, Any]:
        return await self._result(
            """mutation($i: ID!, $r: String) {
                 abortInstance(instanceId: $i, reason: $r) RESULT }""",
            "abortInstance", {"i": instance_id, "r": reason},
        )  # fmt: skip

    async def cancel(self, instance_id: str, reason: str | None) -> dict[str, Any]:
        return await self._result(
            """mutation($i: ID!, $r: String) {
                 cancelInstance(instanceId: $i, reason: $r) RESULT }""",
            "cancelInstance", {"i": instance_id, "r": reason},
        )  # fmt: skip

    async def tick(self, instance_id: str) -> dict[str, Any]:
        return await self._result(
            """mutation($i: ID!) { tick(instanceId: $i) RESULT }""", "tick", {"i": instance_id}
        )

    async def instance(self, instance_id: str) -> dict[str, Any]:
        data = await self.call(
            f"query($i: ID!) {{ instance(id: $i) {{ {INSTANCE_FIELDS} }} }}", {"i": instance_id}
        )
        if data.get("instance") is None:
            raise RemoteError("instance-not-found", f"no instance {instance_id!r}",
                              {"instanceId": instance_id})  # fmt: skip
        return dict(data["instance"])

    async def instances(self, ids: Iterable[str]) -> dict[str, dict[str, Any]]:
        found: dict[str, dict[str, Any]] = {}
        for doc_id in ids:
            data = await self.call(
                f"query($i: ID!) {{ instance(id: $i) {{ {INSTANCE_FIELDS} }} }}", {"i": doc_id}
            )
            if data.get("instance"):
                found[doc_id] = data["instance"]
        return found

    async def groq(self, query: str, params: dict[str, Any]) -> Any:
        data = await self.call("query($q: String!, $p: JSON) { groq(query: $q, params: $p) }",
                               {"q": query, "p": params})  # fmt: skip
        return data.get("groq")


@asynccontextmanager
async def open_backend(url: str | None, token: str | None) -> AsyncIterator[Backend]:
    if url:
        async with httpx.AsyncClient(timeout=30.0) as client:
            yield RemoteBackend(url, token, client)
        return
    settings = Settings()
    connection = await open_lake(settings)
    try:
        yield LocalBackend(connection, settings)
    finally:
        await connection.close()
