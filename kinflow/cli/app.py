"""The commands of ``kinflow`` (see the package docstring for how they run).

Importing this module loads only Typer, rich and the CLI's own light modules:
each command imports the engine, the lake client, the HTTP client or the API
schema when it runs, so ``kinflow --version`` and ``--help`` start at once and
a command pays only for what it uses (docs/api.md, "The command line's start-up").
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import typer

from kinflow import __version__
from kinflow.cli.cohort import cohort
from kinflow.cli.console import GIVEN, err, out, run, run_sync_parse, target
from kinflow.cli.help import plain_help
from kinflow.cli.lake_commands import lake_app
from kinflow.cli.purge import purge
from kinflow.cli.render import print_result
from kinflow.cli.schema_command import schema_app

if TYPE_CHECKING:
    from kinflow.cli.backends import Backend

T = TypeVar("T")

app = typer.Typer(
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="kinflow: workflows that fan out into child workflows.",
)
plain_help()

URL = typer.Option(None, "--url", help="Talk to a running server instead of the lake "
                                       "(default KINFLOW_URL; also accepted before the command).")
TOKEN = typer.Option(None, "--token", help="API token for --url (default KINFLOW_TOKEN).")


def _print_version(asked: bool) -> None:
    if asked:
        out.print(f"kinflow {__version__}", highlight=False)
        raise typer.Exit()


@app.callback()
def _options(
    version: bool = typer.Option(
        False, "--version", callback=_print_version, is_eager=True,
        help="Print kinflow's version and exit.",
    ),
    url: str | None = typer.Option(None, "--url", envvar="KINFLOW_URL",
                                   help="Talk to a running server instead of the lake, for "
                                        "every command that can."),
    token: str | None = typer.Option(None, "--token", envvar="KINFLOW_TOKEN",
                                     help="API token for --url."),
) -> None:
    """kinflow: workflows that fan out into child workflows."""
    GIVEN.update(url=url, token=token)


def with_backend(url: str | None, token: str | None,
                 work: Callable[[Backend], Awaitable[T]]) -> T:  # fmt: skip
    url, token = target(url, token)

    async def main() -> T:
        from kinflow.cli.backends import open_backend

        async with open_backend(url, token) as backend:
            return await work(backend)

    return run(main)


# ------------------------------------------------------------------ server


@app.command()
def serve(
    host: str | None = typer.Option(None, help="Bind address (default KINFLOW_HOST)."),
    port: int | None = typer.Option(None, help="Port (default KINFLOW_PORT)."),
    worker: bool = typer.Option(True, "--worker/--no-worker",
                                help="Run the heartbeat worker in this process."),
) -> None:
    """Run the API server (on the embedded lake unless KINFLOW_MONGODB_URI is set)."""
    import os

    import uvicorn

    if not worker:
        os.environ["KINFLOW_WORKER"] = "false"  # the app factory reads the settings
    from kinflow.cli.ports import check_free, is_loopback
    from kinflow.http.tokens import load_tokens
    from kinflow.settings import Settings

    settings = Settings()
    bind_host = host or settings.host
    bind_port = port or settings.port
    tokens = run_sync_parse(lambda: load_tokens(settings))
    if not is_loopback(bind_host) and not tokens.enabled:
        err.print(
            f"[red]refusing to bind {bind_host}:[/red] without API tokens kinflow only "
            "serves 127.0.0.1 (set KINFLOW_API_TOKENS or KINFLOW_API_TOKENS_FILE, "
            "or KINFLOW_HOST=127.0.0.1)"
        )
        raise typer.Exit(2)
    run_sync_parse(lambda: check_free(bind_host, bind_port))
    from kinflow.observability import logs

    logs.announce(settings.log_format, f"kinflow listening on http://{bind_host}:{bind_port}"
                  "  (health: /healthz)", err.print)
    from kinflow.cli import stopping
    from kinflow.storage import keeper

    started = stopping.serve(uvicorn.Config(
        "kinflow.http.app:create_app",
        factory=True,
        host=bind_host,
        port=bind_port,
        log_level="info",
        **logs.uvicorn_options(settings.log_format),  # KINFLOW_LOG_FORMAT=json: JSON lines
        timeout_graceful_shutdown=stopping.GRACEFUL_SECONDS,  # all of it bounded: 10 s
        # uvicorn trusts X-Forwarded-For from loopback by default, which would let any
        # local caller pick the address the failed-token throttle counts: trust none
        # unless a proxy is named.
        proxy_headers=bool(settings.forwarded_allow_ips),
        forwarded_allow_ips=",".join(settings.forwarded_allow_ips) or "",
    ))  # fmt: skip
    if keeper.fatal_error:
        err.print(f"[red]lake-unavailable:[/red] {keeper.fatal_error}")
        raise typer.Exit(1)
    if not started:
        raise typer.Exit(3)  # uvicorn's own start-up failure code


@app.command()
def demo(
    port: int | None = typer.Option(None, help="Port (default KINFLOW_PORT)."),
) -> None:
    """Deploy the examples, import the sample content, and serve on 127.0.0.1."""
    import os

    from kinflow.cli.demo import EXAMPLES, TOUR, prepare
    from kinflow.cli.ports import check_free
    from kinflow.settings import Settings

    os.environ.setdefault("KINFLOW_EFFECT_HANDLERS", str(EXAMPLES / "handlers.py"))
    settings = Settings()
    bind_port = port or settings.port
    run_sync_parse(lambda: check_free("127.0.0.1", bind_port))  # before any output
    for line in run(lambda: prepare(settings)):
        out.print(line)
    out.print(TOUR.format(url=f"http://127.0.0.1:{bind_port}"))
    serve(host="127.0.0.1", port=bind_port, worker=True)


@app.command("worker")
def worker_command(
    once: bool = typer.Option(False, "--once", help="Run one pass, print what it did, exit."),
    interval: float | None = typer.Option(None, help="Seconds between passes."),
) -> None:
    """Run the heartbeat and effect worker (several may run against one lake)."""
    from kinflow.cli.worker import run_worker

    report = run(lambda: run_worker(once=once, interval=interval))
    if report is not None:
        out.print(report)


# ------------------------------------------------------------------ verbs


@app.command()
def deploy(
    paths: list[Path] = typer.Argument(..., help="JSON or YAML files, or directories."),
    url: str | None = URL,
    token: str | None = TOKEN,
) -> None:
    """Deploy workflow definitions (all or nothing)."""
    from kinflow.cli.inputs import load_definitions

    async def work(backend: Backend) -> dict[str, Any]:
        return await backend.deploy(load_definitions(paths))

    outcome = with_backend(url, token, work)
    for item in outcome["definitions"]:
        style = "green" if item["status"] == "created" else "dim"
        out.print(f"[{style}]{item['status']:>9}[/{style}]  {item['name']} v{item['version']}")
    for warning in outcome.get("warnings", []):
        out.print(f"[yellow]warning[/yellow] {warning}")


@app.command()
def start(
    definition: str,
    field: list[str] = typer.Option(None, "--field", "-f", help="name=value (JSON or text)."),
    instance_id: str | None = typer.Option(
        None, "--id", help="Instance id (resumes if it exists)."
    ),
    url: str | None = URL,
    token: str | None = TOKEN,
) -> None:
    """Start an instance of a definition."""
    from kinflow.cli.inputs import parse_pairs

    fields = run_sync_parse(lambda: parse_pairs(field, "--field"))
    result = with_backend(url, token, lambda b: b.start(definition, fields, instance_id))
    print_result(out, result, "started")


@app.command()
def fire(
    instance: str,
    activity: str,
    action: str,
    param: list[str] = typer.Option(None, "--param", "-p", help="name=value (JSON or text)."),
    key: str | None = typer.Option(None, "--key", help="Idempotency key."),
    url: str | None = URL,
    token: str | None = TOKEN,
) -> None:
    """Fire a caller-fired action."""
    from kinflow.cli.inputs import parse_pairs

    params = run_sync_parse(lambda: parse_pairs(param, "--param"))
    result = with_backend(
        url, token, lambda b: b.fire(instance, activity, action, params or None, key)
    )
    print_result(out, result, "fired")


@app.command()
def edit(
    instance: str,
    field: str,
    value: str = typer.Argument(None, help="JSON or text; omit with --mode unset."),
    mode: str = typer.Option("set", help="set, append or unset."),
    url: str | None = URL,
    token: str | None = TOKEN,
) -> None:
    """Edit a field of an instance."""
    from kinflow.cli.inputs import parse_value

    parsed = parse_value(value) if value is not None else None
    result = with_backend(url, token, lambda b: b.edit(instance, field, parsed, mode))
    print_result(out, result, "edited")


@app.command()
def abort(
    instance: str,
    reason: str | None = typer.Option(None, "--reason", help="Recorded in history."),
    url: str | None = URL,
    token: str | None = TOKEN,
) -> None:
    """Abort an instance and every live descendant."""
    result = with_backend(url, token, lambda b: b.abort(instance, reason))
    print_result(out, result, "aborted")


@app.command()
def cancel(
    instance: str,
    reason: str | None = typer.Option(None, "--reason", help="Recorded in history."),
    url: str | None = URL,
    token: str | None = TOKEN,
) -> None:
    """Cancel an instance gracefully: its cancel stage and its children clean up first."""
    result = with_backend(url, token, lambda b: b.cancel(instance, reason))
    print_result(out, result, "cancelling" if result["instance"].get("status") == "CANCELLING"
                 else "cancelled")


@app.command()
def tick(instance: str, url: str | None = URL, token: str | None = TOKEN) -> None:
    """Re-evaluate an instance's conditions now."""
    result = with_backend(url, token, lambda b: b.tick(instance))
    print_result(out, result, "ticked")


@app.command()
def inspect(
    instance: str,
    depth: int = typer.Option(6, help="How many levels of children to load."),
    url: str | None = URL,
    token: str | None = TOKEN,
) -> None:
    """Draw an instance, its activities and cohorts, and their children, as a tree."""
    from kinflow.cli.parked import parked_views
    from kinflow.cli.render import build_tree

    async def work(backend: Backend) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        root = await backend.instance(instance)
        children: dict[str, dict[str, Any]] = {}
        level = [root]
        for _ in range(depth):
            ids = [str(r["childId"]) for v in level for r in v.get("subworkflows", [])
                   if str(r["childId"]) not in children]  # fmt: skip
            if not ids:
                break
            found = await backend.instances(ids)
            children.update(found)
            level = list(found.values())
        parked = await parked_views(backend, [str(root["id"]), *children])
        for view in (root, *children.values()):
            if str(view["id"]) in parked:
                view["parked"] = parked[str(view["id"])]
        return root, children

    root, children = with_backend(url, token, work)
    out.print(build_tree(root, children))


@app.command()
def groq(
    query: str,
    param: list[str] = typer.Option(None, "--param", "-p", help="name=value (JSON or text)."),
    url: str | None = URL,
    token: str | None = TOKEN,
) -> None:
    """Run a read-only GROQ query and print the result as JSON."""
    import json

    from kinflow.cli.inputs import parse_pairs

    params = run_sync_parse(lambda: parse_pairs(param, "--param"))
    result = with_backend(url, token, lambda b: b.groq(query, params))
    out.print_json(json.dumps(result, default=str))


@app.command()
def tail(
    parent: str | None = typer.Option(None, "--parent", help="Only children of this instance."),
    count: int = typer.Option(0, help="Stop after this many events (0: run until Ctrl-C)."),
    url: str | None = URL,
    token: str | None = TOKEN,
) -> None:
    """Print instance changes as they commit."""
    from kinflow.cli.tail import local_events, remote_events

    url, token = target(url, token)

    async def follow() -> None:
        events = remote_events(url, token, parent) if url else local_events(parent)
        seen = 0
        async for line in events:
            out.print(line, highlight=False)
            seen += 1
            if count and seen >= count:
                break

    try:
        run(follow)
    except KeyboardInterrupt:
        pass


def main() -> None:
    app()


app.command("purge")(purge)
app.command("cohort")(cohort)
app.add_typer(lake_app, name="lake")
app.add_typer(schema_app, name="schema")
