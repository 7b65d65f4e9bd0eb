"""Which instances the heartbeat parked, for ``kinflow inspect`` (on the lake or a server)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kinflow.cli.backends import Backend

QUERY = """query($ids: [ID!]) { parkedInstances(ids: $ids, first: 1000) {
  instanceId kind code message until failures } }"""


async def parked_views(backend: Backend, ids: Iterable[str]) -> dict[str, dict[str, Any]]:
    """Instance id -> ``{kind, code, message, until, failures}`` for the parked ones."""
    wanted = sorted(set(ids))[:1000]
    if not wanted:
        return {}
    if backend.remote:
        from kinflow.cli.remote import RemoteBackend

        assert isinstance(backend, RemoteBackend)
        found = (await backend.call(QUERY, {"ids": wanted}))["parkedInstances"]
        return {str(p["instanceId"]): dict(p) for p in found}
    from kinflow.cli.local import LocalBackend

    assert isinstance(backend, LocalBackend)
    engine = backend.engine
    listed = await engine.parked(wanted, limit=len(wanted))
    return {p.instance: {"kind": p.kind, "code": p.code, "message": p.message,
                         "until": p.until, "failures": p.failures} for p in listed}
