"""``kinflow lake import``: an NDJSON file into a dataset, in batched writes.

Two passes over the file, so a million lines are never held in memory and a
bad line writes nothing at all:

1. every line is checked: JSON, an object, a non-empty string ``_id`` and
   ``_type``, values the lake can store (``invalid-input`` naming ``path``
   and ``line``);
2. the lines are written in batches of ``BATCH_SIZE`` per collection (the
   dataset, or its registry rows for lines an export marked ``_side``), each
   batch in one transaction (``kinflow.storage.batch_writes``): a new
   ``_id`` is inserted, a stored one replaced (its ``_createdAt`` kept). In
   one batch a later line with the same ``_id`` wins, as it would written
   one by one.

An import restores what an export wrote, engine documents included, so it
talks to the lake directly and refuses no engine id (docs/security.md).
Should a line change between the passes, pass 2 refuses it too, after the
batches before it (``written`` in the refusal's details).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kinflow.cli.inputs import ndjson_lines
from kinflow.errors import InvalidInput, KinflowError
from kinflow.storage.batch_writes import BATCH_SIZE, BatchWritten, check_storable, put_batch
from kinflow.storage.documents import check_new_document
from kinflow.storage.lake import Lake

SIDE_KEY = "_side"
"""Marks an exported line that belongs to a side collection of the dataset (its
registry rows, core/cohort/chunks.py): an export is the dataset and its rows, in one file."""


@dataclass
class Imported:
    """What an import wrote: lines, and documents created or replaced."""

    lines: int = 0
    created: int = 0
    replaced: int = 0


def checked_lines(path: Path, side: str) -> Iterator[tuple[int, bool, dict[str, Any]]]:
    """Each line's number, whether it is a side row, and its document; refuses a bad line."""
    try:
        handle = path.open()
    except OSError as exc:
        raise InvalidInput(f"cannot read {path}: {exc.strerror}", path=str(path)) from exc
    with handle:
        for number, doc in ndjson_lines((line.rstrip("\r\n") for line in handle), path):
            is_side = doc.pop(SIDE_KEY, None) == side
            try:
                check_new_document(doc)
                check_storable(doc)
            except InvalidInput as exc:
                raise InvalidInput(f"{path}:{number} {exc.message}", **exc.details,
                                   path=str(path), line=number) from None  # fmt: skip
            yield number, is_side, doc


async def import_file(lake: Lake, path: Path, targets: tuple[str, str], side: str, *,
                      advance: Callable[[int], None] = lambda n: None,
                      batch_size: int = BATCH_SIZE) -> Imported:
    """Write the checked lines of ``path`` into ``targets`` (the dataset, its side rows)."""
    done = Imported()
    pending: dict[bool, dict[str, dict[str, Any]]] = {False: {}, True: {}}
    lines = {False: 0, True: 0}

    async def flush(is_side: bool) -> None:
        docs = list(pending[is_side].values())
        count, pending[is_side], lines[is_side] = lines[is_side], {}, 0
        if not docs:
            return

        async def write(session: Any) -> BatchWritten:
            return await put_batch(lake, docs, dataset=targets[is_side], session=session)

        written = await lake.transaction(write, verb="lakeImport")
        done.lines += count
        done.created += written.created
        done.replaced += written.replaced
        advance(count)

    try:
        for _, is_side, doc in checked_lines(path, side):
            pending[is_side][doc["_id"]] = doc
            lines[is_side] += 1
            if lines[is_side] >= batch_size:
                await flush(is_side)
        await flush(False)
        await flush(True)
    except KinflowError as exc:
        exc.details["written"] = done.lines
        raise
    return done
