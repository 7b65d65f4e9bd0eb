"""The ``kinflow`` command line."""

from __future__ import annotations

import ipaddress

import typer
import uvicorn
from rich.console import Console

from kinflow.settings import Settings

app = typer.Typer(no_args_is_help=True, help="kinflow: workflows that fan out into children.")
console = Console(stderr=True)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@app.command()
def serve(
    host: str | None = typer.Option(None, help="Bind address (default KINFLOW_HOST)."),
    port: int | None = typer.Option(None, help="Port (default KINFLOW_PORT)."),
) -> None:
    """Run the API server (on the embedded lake unless KINFLOW_MONGODB_URI is set)."""
    settings = Settings()
    bind_host = host or settings.host
    bind_port = port or settings.port
    if not _is_loopback(bind_host):
        console.print(
            f"[red]refusing to bind {bind_host}:[/red] without API tokens kinflow only "
            "serves 127.0.0.1 (set KINFLOW_HOST=127.0.0.1)"
        )
        raise typer.Exit(2)
    console.print(f"kinflow listening on http://{bind_host}:{bind_port}  (health: /healthz)")
    uvicorn.run(
        "kinflow.app:create_app",
        factory=True,
        host=bind_host,
        port=bind_port,
        log_level="info",
        timeout_graceful_shutdown=10,
    )


@app.command()
def demo() -> None:
    """Set up the demo (embedded lake) and serve it."""
    serve(host=None, port=None)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
