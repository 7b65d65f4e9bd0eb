"""Content documents written many at a time: ``Engine.put_documents`` (``putDocuments``).

Every document gets the checks a single ``putDocument`` gives it, all before
anything is written: an object, an ``_id`` (a fresh one when missing) that is
a valid document id and no engine id (``reserved-id``), a ``_type`` that is a
non-empty string and no engine type (``reserved-type``), values the lake can
store (``invalid-input``: an integer past 64 bits), and no ``_id`` twice
in one call (``invalid-input``). A refusal names the document's ``index`` in
the call and writes nothing.

Then the documents are written in batches (``BATCH_SIZE``), each in one
transaction (``kinflow.storage.batch_writes``): an ``_id`` already stored is
replaced (its ``_createdAt`` kept), unless its stored type is an engine type;
a document that carries ``_rev`` is fenced on it (``revision-conflict`` when
the stored revision differs or the document is missing). A refusal met while
writing a batch rolls that whole batch back; earlier batches stay written and
the refusal says how many documents they hold (``written``).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kinflow.core.owned import check_content_write
from kinflow.errors import InvalidInput, KinflowError
from kinflow.gdr import check_document_id
from kinflow.storage.batch_writes import BATCH_SIZE, Refused, check_storable, put_batch
from kinflow.storage.documents import check_new_document
from kinflow.storage.lake import Document, Lake


@dataclass(frozen=True, slots=True)
class PutReport:
    """What a batched put wrote: the ids in the order sent, and how many were new."""

    ids: list[str] = field(default_factory=list)
    created: int = 0
    replaced: int = 0

    @property
    def count(self) -> int:
        return self.created + self.replaced


def checked(documents: Sequence[Any]) -> list[dict[str, Any]]:
    """Each document as it will be written, or the first refusal with its ``index``."""
    bodies: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    for index, document in enumerate(documents):
        try:
            if not isinstance(document, dict):
                raise InvalidInput("a document must be an object", got=type(document).__name__)
            body = dict(document)
            body.setdefault("_id", uuid.uuid4().hex)
            check_document_id(body["_id"])
            check_content_write(body["_id"], body.get("_type"))
            check_new_document(body)
            check_storable(body)
        except KinflowError as exc:
            raise at_index(exc, index) from None
        earlier = seen.setdefault(body["_id"], index)
        if earlier != index:
            raise InvalidInput(f"documents[{index}] repeats the _id of documents[{earlier}]",
                               index=index, id=body["_id"], duplicateOf=earlier)  # fmt: skip
        bodies.append(body)
    return bodies


def at_index(error: KinflowError, index: int, **more: Any) -> KinflowError:
    """``error`` (same type and code) with the document's ``index`` in its details."""
    error.details = {**error.details, "index": index, **more}
    error.message = f"documents[{index}]: {error.message}"
    error.args = (error.message,)
    return error


def _vet(index: int, stored: Document) -> None:
    try:
        check_content_write(stored["_id"], stored_type=stored.get("_type"))
    except KinflowError as exc:
        raise at_index(exc, index) from None


async def put_documents(lake: Lake, dataset: str, documents: Sequence[Any], *,
                        batch_size: int = BATCH_SIZE) -> PutReport:
    """Check every document, then create or replace them in batches (module docstring)."""
    bodies = checked(documents)
    await lake.ensure_dataset(dataset)
    created = replaced = 0
    for first in range(0, len(bodies), batch_size):
        batch = bodies[first:first + batch_size]

        async def write(session: Any, batch: list[dict[str, Any]] = batch, first: int = first
                        ) -> tuple[int, int]:
            done = await put_batch(lake, batch, dataset=dataset, session=session, fenced=True,
                                   vet=_vet, first=first)  # fmt: skip
            return done.created, done.replaced

        try:
            new, old = await lake.transaction(write, verb="putDocuments")
        except Refused as refused:
            refused.error.details["written"] = created + replaced
            raise refused.error from None
        except KinflowError as exc:
            if "index" in exc.details:
                exc.details["written"] = created + replaced
            raise
        created, replaced = created + new, replaced + old
    return PutReport([body["_id"] for body in bodies], created, replaced)
