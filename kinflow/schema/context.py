"""What every resolver can reach: the engine, the lake, the hubs, the caller."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request
from starlette.websockets import WebSocket
from strawberry.types import Info

from kinflow.engine import Actor, Engine
from kinflow.engine.siblings import sibling
from kinflow.errors import DatasetNotFound
from kinflow.http.tokens import OPEN_ACTOR, TokenTable
from kinflow.schema.hubs import Hubs
from kinflow.schema.loaders import Loaders
from kinflow.schema.snapshot_gate import SnapshotGate
from kinflow.settings import Settings
from kinflow.storage import Lake
from kinflow.storage.datasets import Datasets


@dataclass
class Services:
    """Long-lived objects the app's lifespan builds once per process."""

    settings: Settings
    lake: Lake
    engine: Engine
    hubs: Hubs
    tokens: TokenTable
    engines: dict[str, Engine] = field(default_factory=dict)
    #: the process-wide budget of documents subscription snapshots hold in flight
    snapshots: SnapshotGate = field(init=False)

    def __post_init__(self) -> None:
        self.snapshots = SnapshotGate(self.settings.snapshot_max_documents,
                                      self.settings.operation_timeout)  # fmt: skip

    @property
    def datasets(self) -> Datasets:
        """The datasets requests may name (configured or existing; never created by a read)."""
        return self.hubs.datasets

    async def engine_over(self, dataset: str | None) -> Engine:
        """The engine over ``dataset``; ``dataset-not-found`` unless it exists."""
        if dataset is None or dataset == self.engine.dataset:
            return self.engine
        return self.engine_for(await self.datasets.require(dataset))

    def engine_for(self, dataset: str | None) -> Engine:
        """The engine over a dataset known to exist (the default one unless named).

        Engines are cached per dataset, so only known datasets get one: an
        invented name is ``dataset-not-found``, never a new engine.
        """
        if dataset is None or dataset == self.engine.dataset:
            return self.engine
        if dataset not in self.engines:
            if not self.datasets.known(dataset):
                raise DatasetNotFound(f"no dataset {dataset!r}", dataset=dataset)
            self.engines[dataset] = sibling(self.engine, dataset)  # same handlers and limits
        return self.engines[dataset]


@dataclass
class Context:
    """Per request (HTTP) or per connection (websocket)."""

    services: Services
    request: Request | WebSocket | None = None
    response: Any = None
    actor: Actor = OPEN_ACTOR
    connection_params: dict[str, Any] | None = None
    websocket: bool = False
    _loaders: Loaders | None = None

    @property
    def engine(self) -> Engine:
        return self.services.engine

    @property
    def lake(self) -> Lake:
        return self.services.lake

    @property
    def settings(self) -> Settings:
        return self.services.settings

    @property
    def dataset(self) -> str:
        return self.services.engine.dataset

    @property
    def loaders(self) -> Loaders:
        """Caching loaders for HTTP; batching-only loaders for a websocket connection."""
        if self._loaders is None:
            self._loaders = Loaders(self.lake, self.dataset, cache=not self.websocket)
        return self._loaders


KInfo = Info[Context, None]
