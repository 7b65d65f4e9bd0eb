"""The kill driver's journal: which keyed operation was under way when a SIGKILL came.

Before a keyed operation the driver appends ``{"begin": key, ...}`` to the
file, after it (applied or refused) ``{"end": key}``. Each line is one
``O_APPEND`` write, which a SIGKILL cannot cut in half, so the next driver
finds every operation begun and never ended and runs it again with the same
key, as a client retrying after a crash would. The audit reads the same file
to know which bulk calls were made.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


class Journal:
    def __init__(self, path: Path) -> None:
        self.path = path

    def _append(self, record: dict[str, Any]) -> None:
        line = (json.dumps(record, sort_keys=True) + "\n").encode()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)

    def _records(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        found = []
        for line in self.path.read_text().splitlines():
            try:
                found.append(json.loads(line))
            except ValueError:
                continue
        return found

    def begin(self, entry: dict[str, Any]) -> None:
        """``entry`` names its operation (``op``) and key (``key``)."""
        self._append({"begin": entry["key"], **entry})

    def end(self, key: str) -> None:
        self._append({"end": key})

    def begun(self) -> list[dict[str, Any]]:
        """Every operation begun, once each, in order (a retried one keeps its place)."""
        seen: dict[str, dict[str, Any]] = {}
        for record in self._records():
            if "begin" in record:
                seen.setdefault(record["begin"], record)
        return list(seen.values())

    def unfinished(self) -> list[dict[str, Any]]:
        """Operations begun and never ended: a kill cut them."""
        ended = {r["end"] for r in self._records() if "end" in r}
        return [entry for entry in self.begun() if entry["key"] not in ended]
