"""``kinflow demo``: the examples deployed, sample content imported, the server up."""

from __future__ import annotations

from pathlib import Path

from kinflow.cli.inputs import load_definitions, read_ndjson
from kinflow.engine import Engine
from kinflow.settings import Settings
from kinflow.storage import open_lake

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

TOUR = """
Open GraphiQL at {url}/graphql and paste these, one at a time:

1. Start a review of article-1 (it lists three locales):

   mutation {{ startInstance(definition: "article-review", fields: {{subject: "article-1"}}) {{
     instance {{ id currentStage }} }} }}

   then submit the draft (use the id it returned):

   mutation {{ fireAction(instanceId: "<id>", activity: "write", action: "submit") {{
     instance {{ currentStage }} }} }}

2. Watch the translations complete (in a second tab):

   subscription {{ childCompleted(parentId: "<id>") {{ kind row {{ rowKey status stage }} }} }}

3. See the cohort, then submit a child (use a childId from the cohort):

   query {{ cohort(parentId: "<id>", activity: "translate") {{
     total active done settled rows {{ rowKey status childId }} }} }}

   mutation {{ fireAction(instanceId: "<childId>", activity: "translate", action: "submit") {{
     instance {{ status currentStage }} }} }}

4. Cohort control (a window of 2, a failure budget, outputs, redrive): README's
   "Cohort control in five steps" drives translation-cohort on article-4:

   mutation {{ startInstance(definition: "translation-cohort", fields: {{subject: "article-4"}}) {{
     instance {{ id currentStage }} }} }}
"""


async def prepare(settings: Settings, examples: Path = EXAMPLES) -> list[str]:
    """Deploy every example definition and import the sample content; say what happened."""
    lines: list[str] = []
    connection = await open_lake(settings)
    try:
        engine = Engine(connection.lake)  # deploying needs no handlers
        outcome = await engine.deploy(load_definitions([examples / "definitions"]))
        for item in outcome.definitions:
            lines.append(f"{item.status:>9}  {item.name} v{item.version}")
        for path in sorted((examples / "content").glob("*.ndjson")):
            docs = read_ndjson(path)
            for doc in docs:
                await connection.lake.replace(doc, expected_rev=None)
            lines.append(f"imported  {len(docs)} documents from {path.name}")
    finally:
        await connection.close()
    return lines
