"""What one commit's planning may know about the world: the plan context.

The core never does I/O, reads no clock and draws no randomness, so
everything a planner reads besides the instance itself arrives here, captured
by the shell (``kinflow.engine.transact``) before planning: one clock reading
(every timestamp of a commit is the same instant), the acting identity, the
snapshot of lake documents the instance's conditions may read, the results of
lake queries the plan asked for, the key and claim-token factories
(``kinflow.engine.ids``), and limits. A context is input only: what a plan
produces goes on its ``Mutation``.

When a plan needs a lake read it has not been given (an ``initialValue``
query at stage entry), it raises ``NeedsLakeQuery``; the shell runs the
query, adds the result and plans again from scratch. That is the one
"sans-I/O" handshake between core and shell.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from kinflow.core.state import ActorModel
from kinflow.groq.budget import Budget
from kinflow.timestamps import iso as iso  # re-exported: engine modules import it here
from kinflow.timestamps import parse_iso as parse_iso

ActorKind = Literal["person", "agent", "system"]


@dataclass(frozen=True, slots=True)
class Actor:
    """Who is acting: a person, an agent, or the engine itself (``system``)."""

    kind: ActorKind
    id: str
    roles: tuple[str, ...] = ()

    @classmethod
    def system(cls, id: str = "kinflow") -> Actor:
        return cls("system", id, ())

    @classmethod
    def person(cls, id: str, *roles: str) -> Actor:
        return cls("person", id, tuple(roles))

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "id": self.id, "roles": list(self.roles)}

    @property
    def key(self) -> str:
        """``kind:id``: whose work this is (GROQ evaluations queue per key)."""
        return f"{self.kind}:{self.id}"

    def model(self) -> ActorModel:
        return ActorModel(kind=self.kind, id=self.id, roles=list(self.roles))


@dataclass(frozen=True, slots=True)
class Limits:
    cascade_moves: int = 100
    idempotency_ttl_seconds: float = 24 * 3600
    effect_lease_seconds: float = 300
    spawn_depth: int = 6
    fan_out: int = 1_000_000  # rows one spawn may register (a windowed lake forEach)
    max_active_children: int = 10_000  # rows of a cohort without a window
    registration_batch: int = 1_000  # documents a registration batch reads (batches.py)
    spawn_txn: int = 256  # children created inside the spawning transaction
    # a cohort this large may not be read as ``$subworkflows`` (core/cohort/counts.py)
    condition_rows: int = 10_000
    # a parent with this many rows loads only the chunks a commit needs (core/cohort/sparse.py)
    sparse_rows: int = 10_000
    sparse_chunks: int = 320  # chunks one commit of a sparse parent may read
    # caller inputs and instance size (kinflow.core.inputs, kinflow.core.sizes)
    key_bytes: int = 256
    reason_bytes: int = 4096
    value_bytes: int = 256 * 1024
    instance_bytes: int = 12 * 1024 * 1024
    # GROQ over the lake (API and engine alike) and deploys (docs/security.md)
    groq_timeout: float | None = 10.0
    groq_max_scanned: int | None = 5_000_000
    groq_max_length: int | None = 100_000
    groq_max_fetched: int | None = 100_000
    groq_max_value_bytes: int | None = 64 * 1024 * 1024
    groq_max_params_bytes: int | None = 256 * 1024
    definition_bytes: int = 1024 * 1024
    row_output_bytes: int = 16 * 1024  # a finished child's outputs on its row (outcomes.py)
    bulk_batch: int = 64  # rows one commit of a bulk cohort verb applies (core/cohort/selection.py)
    cancel_timeout_seconds: int = 3600  # a cancellation's default timeout (core/cancellation.py)
    # the monotonic clock a GROQ timeout is measured on: the shell sets it (the
    # core reads no clock); without it a query has no deadline
    budget_clock: Callable[[], float] | None = None

    @classmethod
    def from_settings(cls, settings: Any) -> Limits:
        """Limits from ``kinflow.settings.Settings`` (``KINFLOW_*``)."""
        return cls(spawn_depth=settings.max_spawn_depth, fan_out=settings.max_fan_out,
                   cascade_moves=settings.max_cascade_moves,
                   max_active_children=settings.max_active_children,
                   sparse_rows=settings.sparse_registry_rows,
                   sparse_chunks=settings.sparse_commit_chunks,
                   spawn_txn=settings.spawn_txn_limit,
                   key_bytes=settings.max_idempotency_key_bytes,
                   reason_bytes=settings.max_reason_bytes, value_bytes=settings.max_value_bytes,
                   instance_bytes=settings.max_instance_bytes,
                   groq_timeout=settings.groq_timeout or None,
                   groq_max_scanned=settings.groq_max_scanned or None,
                   groq_max_length=settings.groq_max_query_length or None,
                   groq_max_fetched=settings.groq_max_fetched or None,
                   groq_max_value_bytes=settings.groq_max_value_bytes or None,
                   groq_max_params_bytes=settings.groq_max_params_bytes or None,
                   definition_bytes=settings.max_definition_bytes,
                   row_output_bytes=settings.max_row_output_bytes,
                   bulk_batch=settings.bulk_batch_rows,
                   cancel_timeout_seconds=settings.cancel_timeout)

    def groq_budget(self, *, caller: bool = False) -> Budget:
        """A fresh budget for one lake query, timed on ``budget_clock`` if one is set;
        an API caller's (``caller``) also bounds the parameters it sends."""
        timeout = self.groq_timeout if self.budget_clock is not None else None
        return Budget(max_scanned=self.groq_max_scanned, timeout=timeout,
                      clock=self.budget_clock, max_length=self.groq_max_length,
                      max_fetched=self.groq_max_fetched,
                      max_value_bytes=self.groq_max_value_bytes,
                      max_params_bytes=self.groq_max_params_bytes if caller else None)


class NeedsIO(Exception):
    """Raised by a planner that needs something from the lake it was not given."""


class NeedsDocuments(NeedsIO):
    """The plan reads documents (by GDR URI) that are not in the snapshot yet."""

    def __init__(self, uris: list[str]) -> None:
        super().__init__(", ".join(uris))
        self.uris = uris


class NeedsLakeQuery(NeedsIO):
    """The plan needs the result of a lake query it was not given."""

    def __init__(self, query: str, params: dict[str, Any]) -> None:
        super().__init__(query)
        self.query = query
        self.params = params
        self.cache_key = query_key(query, params)


class NeedsDefinition(NeedsIO):
    """The plan needs a deployed definition (a spawn's child) it was not given."""

    def __init__(self, name: str, version: int | None) -> None:
        super().__init__(f"{name} v{version or 'latest'}")
        self.name = name
        self.version = version


@dataclass(frozen=True, slots=True)
class BatchRequest:
    """One batch of a registering cohort's rows (core/cohort/batches.py): the ``forEach``
    matches after the ``_id`` ``after``, among the next ``size`` documents in ``_id``
    order, leaving out documents created after ``at`` (``None``: the spawn's first batch,
    ``at`` is the lake's clock as it reads; documents carry the lake's stamps)."""

    query: str
    params: dict[str, Any]
    after: str | None
    at: str | None
    size: int
    scale: int | None = None  # the key range the last batch found about right (the reader's)

    @property
    def key(self) -> str:
        return "\x1frows\x00" + json.dumps([self.query, self.params, self.after, self.at,
                                              self.size, self.scale], sort_keys=True,
                                             default=str)


@dataclass(frozen=True, slots=True)
class RowBatch:
    """What a ``BatchRequest`` read: its rows in ``_id`` order, the last ``_id`` examined
    (where the next batch resumes) and whether the dataset has no document after it."""

    rows: list[Any]
    last: str | None
    done: bool
    at: str  # the membership moment it applied
    scale: int | None = None  # for the next request (engine/registration.py)


class NeedsRowBatch(NeedsIO):
    """The plan needs a batch of a registering cohort's rows."""

    def __init__(self, request: BatchRequest) -> None:
        super().__init__(request.query)
        self.request = request
        self.cache_key = request.key


class NeedsKeyChunks(NeedsIO):
    """The plan needs to know which chunks of a sparse parent's registry hold rows with
    these row keys (a spawn's identity check, core/cohort/sparse.py)."""

    def __init__(self, parent_id: str, keys: Iterable[str]) -> None:
        self.parent_id = parent_id
        self.keys = tuple(sorted(set(keys)))
        super().__init__(f"{len(self.keys)} row keys of {parent_id}")
        self.cache_key = key_chunks_key(parent_id, self.keys)


def key_chunks_key(parent_id: str, keys: tuple[str, ...]) -> str:
    return "\x00".join(("rowKeys", parent_id, *keys))


class NeedsChunks(NeedsIO):
    """The plan touches registry rows of a sparse parent in chunks it was not given
    (core/cohort/sparse.py): the shell reads them into the state and plans again."""

    def __init__(self, chunks: set[int] | frozenset[int]) -> None:
        super().__init__(f"{len(chunks)} registry chunks")
        self.chunks = frozenset(chunks)


def query_key(query: str, params: dict[str, Any]) -> str:
    return query + "\x00" + json.dumps(params, sort_keys=True, default=str)


@dataclass(slots=True)
class PlanContext:
    """Everything a planner reads besides the instance."""

    now: datetime
    actor: Actor
    dataset: str
    documents: dict[str, dict[str, Any]] = field(default_factory=dict)  # GDR uri -> doc
    absent: set[str] = field(default_factory=set)  # GDR uris known not to exist
    query_results: dict[str, Any] = field(default_factory=dict)
    limits: Limits = field(default_factory=Limits)
    # row keys and claim tokens: the shell's entropy (kinflow.engine.ids), or a
    # test's counter; the core draws none itself
    new_key: Callable[[], str] = field(kw_only=True)
    new_token: Callable[[], str] = field(kw_only=True)
    # deployed child definitions by (name, version or None for the latest); None = absent
    definitions: dict[tuple[str, int | None], dict[str, Any] | None] = field(
        default_factory=dict)
    # ``now`` as stored text, made once: a child fire's plan asks for it about 15 times
    _now_iso: str | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def now_iso(self) -> str:
        text = self._now_iso
        if text is None:
            text = self._now_iso = iso(self.now)
        return text

    def key_chunks(self, parent_id: str, keys: Iterable[str]) -> list[int]:
        """The chunks of ``parent_id``'s stored registry holding a row with one of
        ``keys`` (asked of the shell: ``NeedsKeyChunks``)."""
        need = NeedsKeyChunks(parent_id, keys)
        if need.cache_key not in self.query_results:
            raise need
        return list(self.query_results[need.cache_key])

    def lake_query(self, query: str, params: dict[str, Any]) -> Any:
        key = query_key(query, params)
        if key not in self.query_results:
            raise NeedsLakeQuery(query, params)
        return self.query_results[key]

    def row_batch(self, request: BatchRequest) -> RowBatch:
        if request.key not in self.query_results:
            raise NeedsRowBatch(request)
        found: RowBatch = self.query_results[request.key]
        return found

    def definition(self, name: str, version: int | None) -> dict[str, Any] | None:
        """A deployed definition document; ``None`` if it is not deployed."""
        key = (name, version)
        if key not in self.definitions:
            raise NeedsDefinition(name, version)
        return self.definitions[key]

    def document(self, uri: str) -> dict[str, Any] | None:
        """A snapshot document by GDR URI; ``None`` if it does not exist."""
        if uri in self.documents:
            return self.documents[uri]
        if uri in self.absent:
            return None
        raise NeedsDocuments([uri])

    def gdr(self, document_id: str) -> str:
        return f"lake:{self.dataset}:{document_id}"
