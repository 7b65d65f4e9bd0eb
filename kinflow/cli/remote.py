"""The CLI's verbs sent to a running server as GraphQL operations (``--url``).

Only the HTTP client is loaded: a command against a server never imports the
engine or the lake client.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import httpx

from kinflow.errors import KinflowError, ServerUnreachable

INSTANCE_FIELDS = """
  id definition version status currentStage nextEvaluationAt revision
  activities { name status firedActions }
  subworkflows { rowKey activity action definition current status stage childId condemned
    abortReason outcome outputs outputsError }
"""


class RemoteError(KinflowError):
    """An error the server returned, carrying its code through."""

    code = "remote-error"

    def __init__(self, code: str, message: str, details: dict[str, Any] | None) -> None:
        super().__init__(message, **(details or {}))
        self.code = code  # type: ignore[misc]


class RemoteBackend:
    """Sends the same verbs to a running server as GraphQL operations."""

    remote = True

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
        """Many instances in one request per hundred (one aliased field each): a tree's
        level costs one round trip, not one per child."""
        wanted = list(dict.fromkeys(ids))
        found: dict[str, dict[str, Any]] = {}
        for start in range(0, len(wanted), 100):
            chunk = wanted[start:start + 100]
            names = ", ".join(f"$i{n}: ID!" for n in range(len(chunk)))
            fields = " ".join(f"i{n}: instance(id: $i{n}) {{ {INSTANCE_FIELDS} }}"
                              for n in range(len(chunk)))
            data = await self.call(f"query({names}) {{ {fields} }}",
                                   {f"i{n}": doc_id for n, doc_id in enumerate(chunk)})
            found.update({doc_id: data[f"i{n}"] for n, doc_id in enumerate(chunk)
                          if data.get(f"i{n}")})
        return found

    async def groq(self, query: str, params: dict[str, Any]) -> Any:
        data = await self.call("query($q: String!, $p: JSON) { groq(query: $q, params: $p) }",
                               {"q": query, "p": params})  # fmt: skip
        return data.get("groq")
