"""Which datasets a caller may name: the configured ones and those already in the lake.

A dataset is a collection, and naming one used to create it (and open a change
stream on it), so any caller could make the process hold one collection and
one lake connection per invented name. The registry answers "does this
dataset exist?" without ever creating one: the default dataset and the extra
datasets of the settings are created at start-up (``prepare``), any other
collection of the lake's database counts once it exists, and every other name
is a ``dataset-not-found`` refusal. Only ``create`` (an admin's first write)
adds a dataset at run time.

Unknown names are looked up by re-reading the lake's collection names, at most
once per ``refresh_seconds`` and shared by concurrent callers, so a flood of
invented names costs the lake one small command per second, not one per name.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

import pymongo
from pymongo.errors import PyMongoError

from kinflow.errors import ConfigurationError, DatasetNotFound, GdrError, LakeUnavailable
from kinflow.gdr import check_dataset

if TYPE_CHECKING:
    from kinflow.storage.lake import Lake


def parse_dataset_list(spec: str | None) -> list[str]:
    """``"archive, staging"`` -> ``["archive", "staging"]``; a bad name fails at start-up."""
    names = [name.strip() for name in (spec or "").split(",") if name.strip()]
    try:
        return [check_dataset(name) for name in names]
    except GdrError as exc:
        raise ConfigurationError(
            f"KINFLOW_EXTRA_DATASETS: {exc.message} (letters, digits, '_' and '-', at most 64)",
            setting="KINFLOW_EXTRA_DATASETS", value=exc.details.get("value"),
        ) from exc


class Datasets:
    """The datasets of one lake that requests may name."""

    def __init__(
        self, lake: Lake, configured: Iterable[str] = (), *, refresh_seconds: float = 1.0
    ) -> None:
        self.lake = lake
        self.default = lake.default_dataset
        self.configured = [self.default, *(check_dataset(n) for n in configured)]
        self.refresh_seconds = refresh_seconds
        self._known: set[str] = set(self.configured)
        self._listed_at = float("-inf")
        self._listing: asyncio.Task[None] | None = None

    async def prepare(self) -> None:
        """Create every configured dataset (start-up; idempotent)."""
        for name in dict.fromkeys(self.configured):
            await self.lake.ensure_dataset(name)

    def known(self, name: str) -> bool:
        """True for a dataset already seen to exist (no lake round trip)."""
        return name in self._known

    async def require(self, name: str | None) -> str:
        """``name`` (the default when ``None``) if it is a dataset, else ``dataset-not-found``."""
        dataset = check_dataset(name or self.default)
        if dataset in self._known:
            return dataset
        await self._refresh()
        if dataset in self._known:
            return dataset
        raise DatasetNotFound(
            f"no dataset {dataset!r}: name a configured dataset or one that exists in the lake",
            dataset=dataset,
        )

    async def create(self, name: str) -> str:
        """Create ``name`` if it is missing (for a caller allowed to add datasets)."""
        dataset = check_dataset(name)
        if dataset not in self._known:
            await self.lake.ensure_dataset(dataset)
            self._known.add(dataset)
        return dataset

    async def _refresh(self) -> None:
        """Re-read the lake's collection names unless that was done very recently."""
        if self._listing is None:
            if time.monotonic() - self._listed_at < self.refresh_seconds:
                return
            self._listing = asyncio.create_task(self._list(), name="datasets-list")
        listing = self._listing
        try:
            await asyncio.shield(listing)
        finally:
            if listing.done() and self._listing is listing:
                self._listing = None

    async def _list(self) -> None:
        try:
            with pymongo.timeout(self.lake.operation_timeout):
                names = await self.lake.db.list_collection_names()
        except PyMongoError as exc:
            raise LakeUnavailable(f"listing the lake's datasets failed: {exc}") from exc
        self._known.update(n for n in names if "." not in n)  # side collections are no datasets
        self._listed_at = time.monotonic()
