"""Effect handlers for the examples: a stand-in for a machine-translation service.

``kinflow demo`` loads this file (``KINFLOW_EFFECT_HANDLERS=examples/handlers.py``).
The ``machine-translate`` effect of ``machine-translation.json`` is queued when
a child enters ``translating``; the worker claims it, calls the handler, and
completes the effect with its outputs, which fires the child's ``store``
action and finishes the child.
"""

from __future__ import annotations

from typing import Any

GREETING = {"de": "Hallo", "fr": "Bonjour", "es": "Hola", "it": "Ciao", "ja": "Konnichiwa"}


async def machine_translate(call: Any) -> dict[str, Any]:
    locale = str(call.params.get("locale") or "")
    title = str(call.params.get("title") or "")
    if not locale:
        raise ValueError("no locale to translate into")
    return {"text": f"{GREETING.get(locale, locale)}: {title} [{locale}]"}


def register(engine: Any) -> None:
    engine.register_handler("machine-translate", machine_translate)
