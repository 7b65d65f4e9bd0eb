"""The base of every stored part, and the parts of an instance's effects (pure shapes).

Split from ``core/state.py`` so that module keeps to the instance and its
registry; ``state`` re-exports these names, so importers need not know.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class Part(BaseModel):
    """Base of every stored part: tolerant of unknown keys, dumps camelCase by alias."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class ActorModel(Part):
    kind: Literal["person", "agent", "system"]
    id: str
    roles: list[str] = Field(default_factory=list)
    onBehalfOf: dict[str, Any] | None = None


class EffectClaim(Part):
    type_: str = Field(default="pendingEffect.claim", alias="_type")
    claimedAt: str
    claimedBy: ActorModel
    leaseExpiresAt: str | None = None
    claimToken: str


class EffectOrigin(Part):
    kind: str
    name: str
    activity: str | None = None


class PendingEffect(Part):
    key_: str = Field(alias="_key")
    type_: str = Field(default="pendingEffect", alias="_type")
    name: str
    params: dict[str, Any] = Field(default_factory=dict)
    origin: EffectOrigin
    actor: ActorModel | None = None
    queuedAt: str
    stageEntryKey: str | None = None
    claim: EffectClaim | None = None


class EffectRun(Part):
    key_: str = Field(alias="_key")
    name: str
    params: dict[str, Any] = Field(default_factory=dict)
    origin: EffectOrigin
    actor: ActorModel | None = None
    stageEntryKey: str | None = None
    ranAt: str
    durationMs: int | None = None
    status: Literal["done", "failed", "cancelled"]
    detail: str | None = None
    error: dict[str, Any] | None = None
    outputs: dict[str, Any] | None = None
