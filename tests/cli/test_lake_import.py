"""``kinflow lake import`` writes in batches: every line checked first, a bad line refused by
its number with nothing written, what it wrote reported."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kinflow.cli.lake_import import import_file
from kinflow.errors import InvalidInput
from kinflow.storage import Lake
from tests.cli.test_cli import invoke, refused


def lines(count: int, start: int = 0, **extra: Any) -> list[str]:
    return [json.dumps({"_id": f"item-{n:05d}", "_type": "item", "n": n, **extra})
            for n in range(start, start + count)]


def write(path: Path, rows: list[str]) -> Path:
    path.write_text("\n".join(rows) + "\n")
    return path


def groq_count(dataset: str = "production") -> str:
    status, output = invoke("groq", 'count(*[_type == "item"])')
    assert status == 0, output
    return output.strip()


def test_an_import_reports_what_it_created_and_replaced(cli_env: str, tmp_path: Path) -> None:
    source = write(tmp_path / "items.ndjson", [*lines(1200)[:600], "", *lines(1200)[600:]])
    status, output = invoke("lake", "import", "production", str(source))
    assert status == 0, output
    assert output == "imported 1,200 documents into production (1,200 created, 0 replaced)\n"
    assert groq_count() == "1200"
    again = write(tmp_path / "again.ndjson", [*lines(2, start=1199, edited=True)])
    status, output = invoke("lake", "import", "production", str(again))
    assert output == "imported 2 documents into production (1 created, 1 replaced)\n", output
    assert groq_count() == "1201"


def test_a_bad_line_is_refused_by_number_and_nothing_is_written(
        cli_env: str, tmp_path: Path) -> None:
    rows = lines(2100)
    rows[1499] = json.dumps({"_id": "item-01499"})  # no _type, in the second batch
    output = refused(["lake", "import", "production", str(write(tmp_path / "a.ndjson", rows))],
                     "invalid-input")
    assert "a.ndjson:1500" in output and "_type" in output, output
    rows[1499] = '{"_id": "item-01499", "_type": '
    output = refused(["lake", "import", "production", str(write(tmp_path / "b.ndjson", rows))],
                     "invalid-input")
    assert "b.ndjson:1500 is not JSON" in output, output
    rows[1499] = json.dumps({"_id": "item-01499", "_type": "item", "n": 10**40})
    output = refused(["lake", "import", "production", str(write(tmp_path / "d.ndjson", rows))],
                     "invalid-input")
    assert "d.ndjson:1500 a value holds an integer outside the 64-bit range" in output, output
    rows[1499] = "[1, 2]"
    output = refused(["lake", "import", "production", str(write(tmp_path / "c.ndjson", rows))],
                     "invalid-input")
    assert "c.ndjson:1500 is not an object" in output, output
    status, _ = invoke("lake", "import", "production", str(tmp_path / "missing.ndjson"))
    assert status == 1
    assert groq_count() == "0"


async def test_lines_are_written_in_batches_per_collection(lake: Lake, tmp_path: Path) -> None:
    rows = [*lines(1), *lines(1, n=99), *lines(4, start=1),
            json.dumps({"_id": "row-1", "_type": "kinflow.registryChunk", "_side": "rows"})]
    source = write(tmp_path / "mixed.ndjson", rows)
    await lake.ensure_dataset("production.rows")
    batches: list[int] = []
    done = await import_file(lake, source, ("production", "production.rows"), "rows",
                             advance=batches.append, batch_size=2)  # fmt: skip
    assert batches == [2, 2, 2, 1]  # lines per batch; the side row in a batch of its own
    assert (done.lines, done.created, done.replaced) == (7, 6, 0)
    repeated = await lake.get("item-00000")
    assert repeated is not None and repeated["n"] == 99  # in one batch, the later line wins
    assert await lake.get("row-1", dataset="production.rows") is not None
    assert await lake.get("row-1") is None


async def test_a_line_refused_while_writing_names_what_was_written(
        lake: Lake, tmp_path: Path) -> None:
    """Without the checking pass (a file changed meanwhile): the batches before stay."""
    source = write(tmp_path / "items.ndjson", [*lines(4), json.dumps({"_type": "item"})])
    with pytest.raises(InvalidInput) as refused_line:
        await import_file(lake, source, ("production", "production.rows"), "rows",
                          batch_size=2)  # fmt: skip
    assert refused_line.value.details["line"] == 5
    assert refused_line.value.details["written"] == 4
    assert await lake.count({"_type": "item"}) == 4
