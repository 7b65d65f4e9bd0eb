"""``kinflow purge``: delete finished families whose root finished before a date.

A dry run unless ``--yes``: it prints how many families (roots) and
instances would go. Back the dataset up first with ``kinflow lake export``.
Runs on the lake directly, or against a server with ``--url`` (its
``purgeInstances`` mutation, which needs an admin token).
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import TYPE_CHECKING, Any

import typer

from kinflow.cli.console import out, run, run_sync_parse, target
from kinflow.cli.render import plural
from kinflow.errors import InvalidInput
from kinflow.timestamps import iso

if TYPE_CHECKING:
    from kinflow.cli.backends import Backend
    from kinflow.core.retention import PurgeFilter

MUTATION = """mutation($w: PurgeFilter!, $d: Boolean) {
  purgeInstances(where: $w, dryRun: $d) { dryRun roots instances kept held } }"""


def parse_moment(text: str) -> str:
    """A date (midnight UTC) or an ISO-8601 timestamp, in the lake's timestamp form."""
    try:
        if len(text) == 10:
            day = date.fromisoformat(text)
            return iso(datetime(day.year, day.month, day.day, tzinfo=UTC))
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise InvalidInput(f"--before {text!r} is not a date (YYYY-MM-DD) or an ISO timestamp",
                           argument="--before") from exc
    return iso(moment if moment.tzinfo else moment.replace(tzinfo=UTC))


async def purge_on(backend: Backend, where: PurgeFilter, dry_run: bool) -> dict[str, Any]:
    """``{dryRun, roots, instances, kept, held}`` from whichever backend the command opened."""
    if backend.remote:
        from kinflow.cli.remote import RemoteBackend

        assert isinstance(backend, RemoteBackend)
        variables = {"w": {"finishedBefore": where.finished_before,
                           "definition": where.definition}, "d": dry_run}
        return dict((await backend.call(MUTATION, variables))["purgeInstances"])
    from kinflow.cli.local import LocalBackend

    assert isinstance(backend, LocalBackend)
    engine = backend.engine
    counts = await engine.purge(where, dry_run=dry_run)
    return {"dryRun": counts.dry_run, "roots": counts.roots, "instances": counts.instances,
            "kept": counts.kept, "held": counts.held}


def purge(
    before: str = typer.Option(..., "--before", metavar="DATE",
                               help="Only families whose last member finished before DATE "
                                    "(YYYY-MM-DD, or an ISO timestamp)."),
    definition: str | None = typer.Option(None, "--definition",
                                          help="Only roots of this definition."),
    yes: bool = typer.Option(False, "--yes", help="Purge; without it, only count (dry run)."),
    url: str | None = typer.Option(None, "--url",
                                   help="Talk to a running server instead of the lake "
                                        "(default KINFLOW_URL)."),
    token: str | None = typer.Option(None, "--token",
                                     help="API token for --url (an admin's; default "
                                          "KINFLOW_TOKEN)."),
) -> None:
    """Purge finished families (a root and all its descendants, every one finished)."""
    from kinflow.cli.backends import open_backend
    from kinflow.core.retention import PurgeFilter

    url, token = target(url, token)
    where = PurgeFilter(finished_before=run_sync_parse(lambda: parse_moment(before)),
                        definition=definition)

    async def work() -> dict[str, Any]:
        async with open_backend(url, token) as backend:
            return await purge_on(backend, where, not yes)

    result = run(work)
    families = (f"{plural(result['roots'], 'family', 'families')} "
                f"({plural(result['instances'], 'instance', 'instances')})")
    if result["dryRun"]:
        out.print(f"dry run: would purge {families} finished before {where.finished_before}.\n"
                  "Back them up first: kinflow lake export <dataset> <file>. "
                  "Run again with --yes to purge.", highlight=False)
    else:
        out.print(f"purged {families} finished before {where.finished_before}",
                  highlight=False)
    kept = [(result.get("held", 0), "on hold (releaseFamily lifts a hold)"),
            (result.get("kept", 0), "with a member still live or finished since")]
    for count, why in kept:
        if count:
            out.print(f"kept {plural(count, 'family', 'families')} {why}", highlight=False)
