"""Loading effect handlers written by users.

An effect's ``name`` is its only link to host code. A handler module is named
by dotted path (``mycompany.handlers``) or by file path
(``examples/handlers.py``) in ``KINFLOW_EFFECT_HANDLERS`` (comma separated);
each module defines ``register(engine)``, which calls
``engine.register_handler(name, fn)`` for the effects it runs. The API
process (through its in-process worker) and ``kinflow worker`` load the same
modules, so whichever drains an effect can run it.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from kinflow.engine import Engine, Limits
from kinflow.engine.group import Grouper
from kinflow.errors import ConfigurationError
from kinflow.groq import pool


def split_specs(text: str | None) -> list[str]:
    return [part.strip() for part in (text or "").split(",") if part.strip()]


def import_module(spec: str) -> ModuleType:
    if spec.endswith(".py") or "/" in spec:
        path = Path(spec).resolve()
        if not path.is_file():
            raise ConfigurationError(f"effect handler file {spec} does not exist", spec=spec)
        name = f"kinflow_handlers_{path.stem}"
        module_spec = importlib.util.spec_from_file_location(name, path)
        if module_spec is None or module_spec.loader is None:
            raise ConfigurationError(f"cannot load effect handlers from {spec}", spec=spec)
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[name] = module
        module_spec.loader.exec_module(module)
        return module
    try:
        return importlib.import_module(spec)
    except ImportError as exc:
        raise ConfigurationError(f"cannot import effect handlers {spec!r}: {exc}",
                                 spec=spec) from exc  # fmt: skip


def load_handlers(engine: Any, specs: str | None) -> list[str]:
    """Import each handler module and let it register with ``engine``; return their names."""
    loaded = []
    for spec in split_specs(specs):
        module = import_module(spec)
        register = getattr(module, "register", None)
        if not callable(register):
            raise ConfigurationError(f"{spec} has no register(engine) function", spec=spec)
        register(engine)
        loaded.append(spec)
    return loaded


def build_engine(lake: Any, settings: Any) -> Engine:
    """The engine every process builds the same way: limits and handlers from settings."""
    pool.configure(caller_threads=settings.groq_threads,
                   engine_threads=settings.groq_engine_threads,
                   per_caller=settings.groq_caller_concurrency)
    engine = Engine(lake, limits=Limits.from_settings(settings),
                    propagation=settings.propagation)  # fmt: skip
    # concurrent verbs share lake transactions (engine/group.py, docs/performance.md)
    engine.driver.grouper = Grouper(engine.transact)
    load_handlers(engine, settings.effect_handlers)
    return engine
