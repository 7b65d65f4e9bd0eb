"""The definition types of the API: a deployed definition and a deploy's result.

A ``WorkflowDefinition`` is a view over the stored definition document, like
the instance views of ``kinflow.schema.types``; the deploy result types are
plain records the deploy mutation fills in.
"""

from __future__ import annotations

import strawberry

from kinflow.schema.loaders import Doc
from kinflow.schema.scalars import JSON, jsonable


@strawberry.type
class WorkflowDefinition:
    doc: strawberry.Private[Doc]

    @strawberry.field
    def name(self) -> str:
        return str(self.doc.get("name"))

    @strawberry.field
    def title(self) -> str:
        return str(self.doc.get("title") or self.doc.get("name"))

    @strawberry.field
    def version(self) -> int:
        return int(self.doc.get("version") or 0)

    @strawberry.field
    def content_hash(self) -> str:
        return str(self.doc.get("contentHash"))

    @strawberry.field(description='"standalone" | "child"')
    def lifecycle(self) -> str:
        return str(self.doc.get("lifecycle") or "standalone")

    @strawberry.field
    def initial_stage(self) -> str:
        return str(self.doc.get("initialStage"))

    @strawberry.field
    def stages(self) -> list[str]:
        return [str(s.get("name")) for s in self.doc.get("stages") or []]

    @strawberry.field(description="The stored definition, as deployed.")
    def document(self) -> JSON:
        return jsonable(self.doc)


@strawberry.type
class DeployedDefinition:
    name: str
    version: int
    status: str = strawberry.field(description='"created" | "unchanged"')


@strawberry.type
class DeployResult:
    definitions: list[DeployedDefinition]
    warnings: list[str]
