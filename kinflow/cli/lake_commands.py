"""``kinflow lake``: status, NDJSON export and import of a dataset.

The lake client and the engine's row store are imported when a command runs
(``import kinflow.cli`` stays light). Progress bars go to stderr and only to a
terminal: piped output holds the result line alone.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from kinflow.cli.console import err, out, run
from kinflow.cli.render import plural

if TYPE_CHECKING:
    from rich.progress import Progress

    from kinflow.cli.lake_import import Imported

lake_app = typer.Typer(no_args_is_help=True, help="Inspect, export and import the lake.")


def _progress() -> Progress:
    from rich.progress import Progress

    return Progress(console=err, transient=True, disable=not err.is_terminal)


async def _status() -> dict[str, Any]:
    from kinflow.settings import Settings
    from kinflow.storage import open_lake

    settings = Settings()
    connection = await open_lake(settings)
    try:
        lake = connection.lake
        datasets: dict[str, dict[str, int]] = {}
        for name in sorted(await lake.db.list_collection_names()):
            pipeline = [{"$group": {"_id": "$_type", "n": {"$sum": 1}}}]
            cursor = await lake.collection(name).aggregate(pipeline)
            datasets[name] = {str(row["_id"]): int(row["n"]) async for row in cursor}
        return {
            "reachable": await lake.ping(),
            "embedded": connection.embedded is not None,
            "uri": connection.uri,
            "database": lake.database,
            "datasets": datasets,
        }
    finally:
        await connection.close()


@lake_app.command("status")
def status() -> None:
    """Where the lake is and what each dataset holds, by document type."""
    from rich.table import Table

    info = run(_status)
    kind = "embedded" if info["embedded"] else "external"
    out.print(f"lake: {kind} at {info['uri']}  database [bold]{info['database']}[/bold]  "
              f"reachable: {info['reachable']}")  # fmt: skip
    table = Table("dataset", "type", "documents")
    for dataset, types in info["datasets"].items():
        for type_, count in sorted(types.items()):
            table.add_row(dataset, type_, f"{count:,}")
    out.print(table)


async def _export(dataset: str, path: Path) -> int:
    from kinflow.cli.lake_import import SIDE_KEY
    from kinflow.engine.rowstore import ROWS
    from kinflow.settings import Settings
    from kinflow.storage import open_lake
    from kinflow.storage.database import side_name

    connection = await open_lake(Settings())
    try:
        lake = connection.lake
        rows = side_name(dataset, ROWS)
        total = await lake.count({}, dataset=dataset) + await lake.count({}, dataset=rows)
        written = 0
        with path.open("w") as handle, _progress() as progress:
            task = progress.add_task(f"exporting {dataset}", total=total)
            for name, mark in ((dataset, {}), (rows, {SIDE_KEY: ROWS})):
                async for doc in lake.collection(name).find({}).sort("_id", 1):
                    handle.write(json.dumps({**doc, **mark}, default=str, sort_keys=True)
                                 + "\n")
                    written += 1
                    progress.advance(task)
        return written
    finally:
        await connection.close()


async def _import(dataset: str, path: Path) -> Imported:
    from kinflow.cli.lake_import import checked_lines, import_file
    from kinflow.engine.rowstore import ROW_INDEXES, ROWS
    from kinflow.settings import Settings
    from kinflow.storage import open_lake
    from kinflow.storage.database import side_name

    total = sum(1 for _ in checked_lines(path, ROWS))  # every line checked, nothing written
    connection = await open_lake(Settings())
    try:
        lake = connection.lake
        await lake.ensure_dataset(dataset)
        await lake.declare_indexes(ROW_INDEXES, kind=ROWS)
        await lake.ensure_dataset(side_name(dataset, ROWS))
        with _progress() as progress:
            task = progress.add_task(f"importing into {dataset}", total=total)
            return await import_file(lake, path, (dataset, side_name(dataset, ROWS)), ROWS,
                                     advance=lambda n: progress.advance(task, n))
    finally:
        await connection.close()


@lake_app.command("export")
def export(dataset: str, file: Path) -> None:
    """Write every document of DATASET, and its registry rows, to FILE as NDJSON."""
    count = run(lambda: _export(dataset, file))
    out.print(f"exported {plural(count, 'document', 'documents')} from {dataset} to {file}",
              highlight=False)


@lake_app.command("import")
def import_(dataset: str, file: Path) -> None:
    """Create or replace every document of the NDJSON FILE in DATASET, in batched writes.

    Every line is checked before anything is written: a bad line is refused with its
    line number and nothing is imported."""
    done = run(lambda: _import(dataset, file))
    out.print(f"imported {plural(done.lines, 'document', 'documents')} into {dataset} "
              f"({done.created:,} created, {done.replaced:,} replaced)", highlight=False)
