"""A websocket that closes while an event is on its way logs no traceback."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

import pytest
from strawberry.http.exceptions import WebSocketDisconnected

from kinflow.http.ws_quiet import QuietTransportWSHandler


class _Sink:
    async def close(self, code: int, reason: str) -> None:  # pragma: no cover
        pass


def _handler() -> QuietTransportWSHandler:
    return QuietTransportWSHandler(view=Any, websocket=_Sink(), context=None,  # type: ignore[arg-type]
                                   root_value=None, schema=Any,  # type: ignore[arg-type]
                                   connection_init_wait_timeout=timedelta(seconds=1))  # fmt: skip


async def test_a_closed_socket_is_no_worker_task_exception(caplog: pytest.LogCaptureFixture
                                                          ) -> None:  # fmt: skip
    caplog.set_level(logging.DEBUG)
    await _handler().handle_task_exception(WebSocketDisconnected())
    assert "Exception in worker task" not in caplog.text
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


async def test_other_exceptions_are_still_logged(caplog: pytest.LogCaptureFixture) -> None:
    try:
        raise RuntimeError("a real bug")
    except RuntimeError as error:
        await _handler().handle_task_exception(error)
    assert "Exception in worker task" in caplog.text
