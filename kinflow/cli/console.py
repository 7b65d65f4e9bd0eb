"""Where CLI commands print, and how a command's coroutine runs.

Its own module so the command groups (``app``, ``lake_commands``) share the
consoles and the refusal handling without importing each other.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

import typer
from rich.console import Console

from kinflow.cli.render import print_error
from kinflow.errors import KinflowError

T = TypeVar("T")

out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)
if not out.is_terminal:  # piped: don't crop trees at 80 columns
    out.width = max(out.width, 160)


def run(work: Callable[[], Awaitable[T]]) -> T:
    """Run a coroutine; a typed refusal prints its code and exits 1."""
    try:
        return asyncio.run(work())  # type: ignore[arg-type]
    except KinflowError as exc:
        print_error(err, exc)
        raise typer.Exit(1) from None
    except OSError as exc:
        print_error(err, KinflowError(f"{exc.strerror or exc}: {exc.filename or ''}".strip()))
        raise typer.Exit(1) from None


def run_sync_parse(parse: Callable[[], T]) -> T:
    """Run a parse step; a typed refusal prints its code and exits 1."""
    try:
        return parse()
    except KinflowError as exc:
        print_error(err, exc)
        raise typer.Exit(1) from None


GIVEN: dict[str, str | None] = {"url": None, "token": None}
"""``--url``/``--token`` given before the command name (or ``KINFLOW_URL``/``KINFLOW_TOKEN``):
set by the top-level options on every run, before the command runs."""


def target(url: str | None, token: str | None) -> tuple[str | None, str | None]:
    """The server a command talks to: its own ``--url``/``--token``, else the ones given
    before the command name (``kinflow --url URL inspect ID``) or in the environment; no
    URL means the lake."""
    return url or GIVEN["url"], token or GIVEN["token"]
