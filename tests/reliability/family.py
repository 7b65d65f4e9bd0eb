"""The families the reliability tests drive: release -> reviews -> translations, and
event-booking -> seat holds.

The definitions are the shipped examples (``release.yaml``, the
``translate-article`` child of ``article-review.json`` and ``seat-booking.json``,
whose holds clean up in a ``cancelStage`` through the ``release-seat`` effect),
so the tests exercise what users deploy. A release's cohort comes from the lake:
one review per article naming the release, one translation per locale of the
article. The only addition is ``ping`` on a translation's and a hold's activity:
an action that changes nothing and can fire any number of times, so the kill test
can count how often a bulk call applied it to each child.
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


PING = "ping"
"""The repeatable action (no status, no ops) added to a translation's and a hold's activity."""


def _with_ping(definition: dict[str, Any], activity: str) -> dict[str, Any]:
    for stage in definition["stages"]:
        for found in stage.get("activities", []):
            if found["name"] == activity:
                found["actions"].append({"name": PING})
    return definition


def definitions() -> list[dict[str, Any]]:
    """The release tree, the translation child it reaches through release-review, and the
    seat-booking pair."""
    article_review = json.loads((EXAMPLES / "article-review.json").read_text())
    translate = [_with_ping(d, "translate") for d in article_review
                 if d["name"] == "translate-article"]
    booking = [_with_ping(d, "hold") if d["name"] == "seat-hold" else d
               for d in json.loads((EXAMPLES / "seat-booking.json").read_text())]
    return [*translate, *load_definitions(EXAMPLES / "release.yaml"), *booking]


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


def booking_id(n: int) -> str:
    """The event-booking instance ``n``: fixed, like a release's."""
    return f"booking-run-{n}"


def seats(n: int, shape: Shape) -> dict[str, Any]:
    """Booking ``n``'s start fields: one seat per child of the shape."""
    return {"seats": [{"seat": f"b{n}-s{j}"} for j in range(shape.children)]}


def open_lake(uri: str, database: str) -> Lake:
    settings = Settings(mongodb_uri=uri, database=database, operation_timeout=20.0)
    return Lake(make_client(uri, settings), database, default_dataset="production",
                operation_timeout=settings.operation_timeout,
                transaction_attempts=settings.transaction_attempts)
