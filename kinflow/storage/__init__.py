"""The document lake: datasets, revisions, transactions, GDRs, the change hub."""

from kinflow.gdr import Gdr, document_id, format_gdr, parse_gdr, to_gdr, to_ref
from kinflow.storage.connect import LakeConnection, open_lake
from kinflow.storage.documents import utcnow
from kinflow.storage.hub import ALL, ChangeHub, doc_topic
from kinflow.storage.indexes import IndexSpec
from kinflow.storage.lake import Document, Lake
from kinflow.storage.subscription import ChangeEvent, Subscription
from kinflow.timestamps import iso, parse_iso

__all__ = [
    "ALL",
    "ChangeEvent",
    "ChangeHub",
    "Document",
    "Gdr",
    "IndexSpec",
    "Lake",
    "LakeConnection",
    "Subscription",
    "doc_topic",
    "document_id",
    "format_gdr",
    "iso",
    "open_lake",
    "parse_gdr",
    "parse_iso",
    "to_gdr",
    "to_ref",
    "utcnow",
]
