"""Effect handler kinds beyond plain Python callables.

``webhook(url)`` builds a handler that POSTs the effect as JSON and returns
the response's outputs. The request carries the effect key as an
``Idempotency-Key`` header because delivery is at least once: a receiver
dedupes on it. A non-2xx answer, a timeout or an unreadable body fails the
effect (the drain reports it ``failed`` with the error). The blocking HTTP
call runs in a worker thread so the event loop keeps serving.
"""

from __future__ import annotations

import asyncio
import json
import urllib.request
from collections.abc import Mapping
from typing import Any

from kinflow.engine.drain import EffectCall, EffectHandler


def webhook(url: str, *, timeout: float = 10.0,
            headers: Mapping[str, str] | None = None) -> EffectHandler:
    """A handler that POSTs ``{instanceId, effectKey, name, params}`` to ``url``.

    The JSON answer is the outputs: either ``{"outputs": {...}}`` or the object itself.
    """

    def send(call: EffectCall) -> Any:
        body = json.dumps({"instanceId": call.instance_id, "effectKey": call.effect_key,
                           "name": call.name, "params": call.params}).encode()
        request = urllib.request.Request(
            url, data=body, method="POST",
            headers={"Content-Type": "application/json", "Idempotency-Key": call.effect_key,
                     **(headers or {})},
        )
        with urllib.request.urlopen(request, timeout=timeout) as response:
            raw = response.read()
        return json.loads(raw) if raw.strip() else None

    async def handle(call: EffectCall) -> Mapping[str, Any] | None:
        answer = await asyncio.to_thread(send, call)
        if isinstance(answer, dict) and isinstance(answer.get("outputs"), dict):
            outputs: Mapping[str, Any] = answer["outputs"]
            return outputs
        return answer if isinstance(answer, dict) else None

    return handle
