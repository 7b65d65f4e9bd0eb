"""The API, the CLI and the HTTP edge reach the engine through ``Engine``'s public API only.

Reaching past it (``engine.transact.rows``, ``engine.lake``, a private member)
couples a caller to the shell's insides; the public surface says what a caller
may do, and ``Engine.maintenance`` is the heartbeat's, not theirs.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "kinflow"
CALLERS = ("schema", "cli", "http", "inspector")
INSIDES = {"transact", "driver", "materialiser", "reads", "bulk", "lake", "maintenance"}


def _engine_reaches(source: str, label: str) -> list[str]:
    """``<...engine>.<inside>`` and ``<...engine>._private`` attribute reads in one source."""
    found = []
    for node in ast.walk(ast.parse(source, label)):
        if not isinstance(node, ast.Attribute):
            continue
        owner = node.value
        name = owner.attr if isinstance(owner, ast.Attribute) else getattr(owner, "id", "")
        if name == "engine" and (node.attr in INSIDES or node.attr.startswith("_")):
            found.append(f"{label}:{node.lineno} engine.{node.attr}")
    return found


def test_callers_use_only_the_engines_public_api() -> None:
    reaches = [hit for part in CALLERS for path in sorted((PACKAGE / part).rglob("*.py"))
               for hit in _engine_reaches(path.read_text(), str(path.relative_to(PACKAGE)))
               ]  # fmt: skip
    assert reaches == []


def test_the_check_sees_a_reach() -> None:
    source = "async def f(info):\n    return info.context.engine.transact.rows\n"
    assert _engine_reaches(source, "probe.py") == ["probe.py:2 engine.transact"]
    assert _engine_reaches("engine._commit()\nengine.fire_action()\n", "p.py") == [
        "p.py:1 engine._commit"]
