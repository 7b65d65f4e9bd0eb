"""The three-level family every reliability test drives: release -> reviews -> translations.

The definitions are the shipped examples (``release.yaml`` and the
``translate-article`` child of ``article-review.json``), so the tests exercise
what users deploy. A release's cohort comes from the lake: one review per
article naming the release, one translation per locale of the article.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kinflow.define.loading import load_definitions
from kinflow.errors import DocumentExists
from kinflow.settings import Settings
from kinflow.storage import Lake
from kinflow.storage.connect import make_client

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "definitions"
LOCALES = ("de", "fr", "es", "it", "nl", "pt", "pl", "sv")


def definitions() -> list[dict[str, Any]]:
    """The release tree plus the translation child it reaches through release-review."""
    article_review = json.loads((EXAMPLES / "article-review.json").read_text())
    translate = [d for d in article_review if d["name"] == "translate-article"]
    return [*translate, *load_definitions(EXAMPLES / "release.yaml")]


@dataclass(frozen=True)
class Shape:
    """How wide the tree is: live parents, children per parent, grandchildren per child."""

    parents: int
    children: int
    grandchildren: int

    def text(self) -> str:
        return f"{self.parents}x{self.children}x{self.grandchildren}"


def release_id(n: int) -> str:
    return f"rel-{n}"


def instance_id(n: int) -> str:
    """The release instance of subject ``n``: fixed, so a restarted driver resumes it."""
    return f"release-run-{n}"


async def seed_release(lake: Lake, n: int, shape: Shape) -> None:
    """Create release ``n`` and its articles in one transaction (all or none)."""
    docs: list[dict[str, Any]] = [{"_id": release_id(n), "_type": "release",
                                   "title": f"Release {n}"}]
    for j in range(shape.children):
        docs.append({"_id": f"art-{n}-{j}", "_type": "article", "release": release_id(n),
                     "locales": list(LOCALES[: shape.grandchildren])})

    async def write(session: Any) -> None:
        for doc in docs:
            await lake.create(dict(doc), session=session)

    try:
        await lake.transaction(write, verb="seedRelease")
    except DocumentExists:
        pass  # seeded by an earlier (killed) run


def open_lake(uri: str, database: str) -> Lake:
    settings = Settings(mongodb_uri=uri, database=database, operation_timeout=20.0)
    return Lake(make_client(uri, settings), database, default_dataset="production",
                operation_timeout=settings.operation_timeout,
                transaction_attempts=settings.transaction_attempts)
