"""Plain help text: ``--url URL``, ``PATHS...``, flags with no type at all.

Typer (0.2x) labels every parameter with its Python type in angle brackets
(``--worker <bool>``, ``--url <str>``) and wraps a required argument in
braces (``{paths}...``): noise to a person reading ``kinflow deploy --help``.
``plain_help()`` swaps those two labels for the conventional ones. It only
touches the labels, and only where this Typer has them; an older or newer
Typer without them keeps its own help.
"""

from __future__ import annotations

from typing import Any

try:  # Typer's own Click fork (0.2x); absent in other versions
    from typer.core import TyperArgument, TyperOption
except ImportError:  # pragma: no cover
    TyperArgument = TyperOption = None  # type: ignore[assignment,misc]


def _option_label(self: Any, ctx: Any) -> str | None:
    """``URL`` for ``--url``; nothing for a flag (``--worker/--no-worker``, ``--help``)."""
    if self.metavar is not None:
        return str(self.metavar)
    if getattr(self, "is_flag", False) or getattr(self, "count", False):
        return None
    label = str(self.name or "value").upper()
    return f"{label}..." if self.nargs != 1 else label


def _argument_label(self: Any, ctx: Any) -> str | None:
    return None  # the name column already says it (``PATHS...``)


def _argument_usage(self: Any) -> str:
    name = str(self.metavar or str(self.name).upper())
    if self.nargs != 1:
        name += "..."
    return name if self.required else f"[{name}]"


def _argument_name(self: Any) -> str:
    name = str(self.metavar or str(self.name).upper())
    return f"{name}..." if self.metavar is None and self.nargs != 1 else name


def plain_help() -> None:
    """Install the plain labels on Typer's parameter classes (idempotent)."""
    if TyperOption is not None and hasattr(TyperOption, "display_type_rich"):
        TyperOption.display_type_rich = _option_label  # type: ignore[method-assign]
    if TyperArgument is not None and hasattr(TyperArgument, "display_type_rich"):
        TyperArgument.display_type_rich = _argument_label  # type: ignore[method-assign]
        if hasattr(TyperArgument, "_usage_display_name"):
            TyperArgument._usage_display_name = _argument_usage  # type: ignore[method-assign]
        if hasattr(TyperArgument, "_rich_display_name"):
            TyperArgument._rich_display_name = _argument_name  # type: ignore[method-assign]
