"""Effect handlers for the examples: stand-ins for a machine-translation service
and a seat-reservation system.

``kinflow demo`` loads this file (``KINFLOW_EFFECT_HANDLERS=examples/handlers.py``).
The ``machine-translate`` effect of ``machine-translation.json`` is queued when
a child enters ``translating``; the worker claims it, calls the handler, and
completes the effect with its outputs, which fires the child's ``store``
action and finishes the child.

The ``release-seat`` effect of ``seat-booking.json`` is the cleanup of a
cancelled ``seat-hold``: its ``releasing`` stage (the definition's
``cancelStage``) queues it, and the hold is CANCELLED once it ran. Delivery is
at least once, so the handler releases by seat and remembers what it released.

The ``flaky-fetch`` effect of ``flaky-batch.json`` fails or hangs on some first
attempts; the cohort's deadline and retries settle every row anyway.
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


RELEASED: dict[str, str] = {}
"""Seats released so far, by seat, with the effect key that released each."""


async def release_seat(call: Any) -> dict[str, Any]:
    seat = str(call.params.get("seat") or "")
    if not seat:
        raise ValueError("no seat to release")
    RELEASED.setdefault(seat, call.effect_key)  # a redelivery releases nothing twice
    return {}


def attempt_of(instance_id: str) -> int:
    """Which attempt of its row a child is: a retried row's child id ends ``-a<n>``."""
    head, _, tail = instance_id.rpartition("-a")
    return int(tail) if head and tail.isdigit() else 1


async def flaky_fetch(call: Any) -> dict[str, Any]:
    """``flaky-batch.json``'s service: an item named ``fail-*`` fails on its first attempt,
    one named ``hang-*`` never answers ``ok`` on its first attempt (its child waits until
    its deadline times it out); every later attempt, and every other item, succeeds."""
    item = str(call.params.get("item") or "")
    first = attempt_of(call.instance_id) == 1
    if first and item.startswith("fail"):
        raise ConnectionError(f"the service dropped the call for {item}")
    if first and item.startswith("hang"):
        return {"state": "hung"}
    return {"state": "ok"}


def register(engine: Any) -> None:
    engine.register_handler("machine-translate", machine_translate)
    engine.register_handler("release-seat", release_seat)
    engine.register_handler("flaky-fetch", flaky_fetch)
