"""The CLI's tree shows each finished row's outcome and outputs."""

from __future__ import annotations

from rich.console import Console

from kinflow.cli.render import build_tree, counts_line, print_result


def test_rows_show_outcome_and_outputs_or_why_not() -> None:
    row = {"activity": "translate", "current": True, "stage": "done", "condemned": False}
    view = {"id": "instance.p", "definition": "p", "version": 1, "status": "ACTIVE",
            "currentStage": "review", "activities": [], "subworkflows": [
                {**row, "rowKey": "de", "status": "DONE", "childId": "c1",
                 "outcome": "succeeded", "outputs": {"wordCount": 12}},
                {**row, "rowKey": "fr", "status": "DONE", "childId": "c2",
                 "outcome": "failed", "outputs": None, "outputsError": "output-too-large"},
                {**row, "rowKey": "es", "status": "ACTIVE", "childId": "c3", "outcome": None}]}
    console = Console(record=True, width=200)
    console.print(build_tree(view, {}))
    lines = {line.split(":")[0].strip(" │├└─"): line
             for line in console.export_text().splitlines() if "row " in line}
    assert 'succeeded {"wordCount":12}' in lines["row de"]
    assert "failed (outputs: output-too-large)" in lines["row fr"]
    assert "succeeded" not in lines["row es"] and "failed" not in lines["row es"]


def test_counts_and_results_read_as_english() -> None:
    one = {"status": "CANCELLED"}
    assert counts_line([one]) == "1 child: 0 active, 0 done, 0 aborted, 1 cancelled"
    view = {"id": "instance.p", "definition": "p", "version": 1, "status": "ACTIVE",
            "currentStage": "review"}
    console = Console(record=True, width=200)
    print_result(console, {"instance": view, "changed": True, "cascaded": 1}, "fired")
    print_result(console, {"instance": view, "changed": False, "cascaded": 0}, "ticked")
    text = console.export_text()
    assert "(changed, 1 stage move)" in text and "(no change, 0 stage moves)" in text, text
