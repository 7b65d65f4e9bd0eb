"""Global document references: ``lake:<dataset>:<documentId>``.

A GDR names a document across datasets. Inside the lake references are stored
as ``{"id": "lake:<dataset>:<docId>", "type": "<_type>"}``; at the edges (API
arguments, CLI flags, ``with`` handoffs) callers may pass a bare document id,
which is converted here against the dataset it was given in. This is the only
module that knows the string format.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from kinflow.errors import GdrError

SCHEME = "lake"
_DATASET = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
_DOC_ID = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-:]{0,199}$")


@dataclass(frozen=True, slots=True)
class Gdr:
    dataset: str
    document_id: str

    def __str__(self) -> str:
        return f"{SCHEME}:{self.dataset}:{self.document_id}"

    def as_ref(self, type_: str | None = None) -> dict[str, Any]:
        """The stored reference value ``{id, type}``."""
        ref: dict[str, Any] = {"id": str(self)}
        if type_ is not None:
            ref["type"] = type_
        return ref


def check_dataset(name: str) -> str:
    if not isinstance(name, str) or not _DATASET.match(name):
        raise GdrError(f"invalid dataset name {name!r}", value=name, reason="dataset")
    return name


def check_document_id(doc_id: str) -> str:
    if not isinstance(doc_id, str) or not _DOC_ID.match(doc_id):
        raise GdrError(f"invalid document id {doc_id!r}", value=doc_id, reason="document-id")
    return doc_id


def format_gdr(dataset: str, document_id: str) -> str:
    return str(Gdr(check_dataset(dataset), check_document_id(document_id)))


def parse_gdr(value: str) -> Gdr:
    """Parse ``lake:<dataset>:<docId>``; anything else is a ``GdrError``."""
    if not isinstance(value, str):
        raise GdrError("a GDR must be a string", value=repr(value), reason="type")
    parts = value.split(":", 2)
    if len(parts) != 3 or parts[0] != SCHEME:
        raise GdrError(
            f"malformed GDR {value!r}: expected 'lake:<dataset>:<documentId>'",
            value=value,
            reason="format",
        )
    return Gdr(check_dataset(parts[1]), check_document_id(parts[2]))


def is_gdr(value: Any) -> bool:
    return isinstance(value, str) and value.startswith(f"{SCHEME}:")


def to_gdr(value: str, dataset: str) -> Gdr:
    """Accept a GDR or a bare id (resolved against ``dataset``)."""
    if is_gdr(value):
        return parse_gdr(value)
    return Gdr(check_dataset(dataset), check_document_id(value))


def to_ref(value: Any, dataset: str) -> dict[str, Any]:
    """Normalise a reference given as GDR string, bare id or ``{id, type}`` dict."""
    if isinstance(value, dict):
        raw = value.get("id", value.get("_id"))
        if raw is None:
            raise GdrError("a reference object needs an 'id'", value=value, reason="format")
        ref = to_gdr(raw, dataset).as_ref(value.get("type", value.get("_type")))
        return ref
    if isinstance(value, str):
        return to_gdr(value, dataset).as_ref()
    raise GdrError(
        "a reference must be a GDR, an id or {id, type}", value=repr(value), reason="type"
    )


def document_id(value: str) -> str:
    """The bare document id of a GDR or bare id."""
    return parse_gdr(value).document_id if is_gdr(value) else check_document_id(value)
