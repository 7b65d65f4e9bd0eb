"""``kinflow inspect`` and ``kinflow cohort`` print the same on the lake and through a server
(``--url``, given before or after the command): one rendering of the same views."""

from __future__ import annotations

import re

import pytest

from kinflow.cli import app

from .test_cli import EXAMPLES, instance_id, invoke, refused, runner
from .test_remote import TOKENS
from .test_remote import server as server  # the running server fixture

ADMIN = "admin-token-for-tests"
assert ADMIN in TOKENS


def rows_of(output: str) -> dict[str, tuple[str, str]]:
    """rowKey -> (status, childId) from ``kinflow cohort``'s table."""
    found = {}
    for line in output.splitlines():
        cells = [c.strip() for c in line.split("│")]
        if len(cells) >= 6 and cells[-1].startswith("instance."):
            found[cells[0]] = (cells[1], cells[-1])
    return found


def on_both(url: str, *args: str) -> str:
    """The command's output on the lake, after checking the server prints it identically
    with --url before and after the command name."""
    status, local = invoke(*args)
    assert status == 0, local
    refused(["--url", url, *args], "unauthenticated")  # the server answers, not the lake
    status, before = invoke("--url", url, "--token", ADMIN, *args)
    assert status == 0, before
    status, after = invoke(*args, "--url", url, "--token", ADMIN)
    assert status == 0, after
    assert before == local, f"lake:\n{local}\n--url:\n{before}"
    assert after == local
    tokenless = runner.invoke(app, list(args), env={"KINFLOW_URL": url})
    assert "error unauthenticated" in tokenless.output  # KINFLOW_URL reaches the server
    from_env = runner.invoke(app, list(args), env={"KINFLOW_URL": url, "KINFLOW_TOKEN": ADMIN})
    assert from_env.exit_code == 0 and from_env.output == local, from_env.output
    return local


def test_a_cohort_with_outcomes_outputs_and_a_budget_prints_the_same(server: str) -> None:
    assert invoke("lake", "import", "production",
                  str(EXAMPLES / "content" / "articles.ndjson"))[0] == 0
    assert invoke("deploy", str(EXAMPLES / "definitions"))[0] == 0
    status, output = invoke("start", "translation-cohort", "--field", "subject=article-4")
    assert status == 0, output
    parent = instance_id(output)
    active = [child for status, child in rows_of(invoke("cohort", parent, "translate")[1])
              .values() if status == "ACTIVE"]
    assert len(active) == 2, active
    assert invoke("fire", active[0], "translate", "submit", "--param", "words=400")[0] == 0
    assert invoke("fire", active[1], "translate", "give-up")[0] == 0

    tree = on_both(server, "inspect", parent)
    assert "cohort translate: 6 children: 2 active, 2 done, 0 aborted, 2 queued" in tree, tree
    assert re.search(r'DONE stage done succeeded \{"locale":"\w+","wordCount":400\}', tree), tree
    assert re.search(r'DONE stage abandoned failed \{"locale":"\w+","wordCount":null\}', tree), \
        tree
    assert "None" not in tree

    listing = on_both(server, "cohort", parent, "translate")
    assert "total 6  active 2  queued 2  done 2  aborted 0  failed 1  cancelled 0" in listing
    assert ("maxActive 2  budget: count 1  percent null  used 1  exceeded false  stopped 0  "
            "closed false") in listing, listing
    assert '"wordCount":400}' in listing and '"wordCount":null}' in listing, listing
    assert "None" not in listing


def test_a_cancelled_family_counts_its_cancelled_children(
    server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KINFLOW_EFFECT_HANDLERS", str(EXAMPLES / "handlers.py"))
    assert invoke("deploy", str(EXAMPLES / "definitions" / "seat-booking.json"))[0] == 0
    status, output = invoke("start", "event-booking", "--field",
                            'seats=[{"seat": "A1"}, {"seat": "A2"}]')
    assert status == 0, output
    booking = instance_id(output)
    assert invoke("cancel", booking, "--reason", "called off")[0] == 0
    for _ in range(20):  # each hold's cancel stage releases its seat (an effect), then ends
        status, output = invoke("worker", "--once")
        assert status == 0, output
        if "CANCELLED" in invoke("inspect", booking)[1].splitlines()[0]:
            break
    tree = on_both(server, "inspect", booking)
    assert "CANCELLED" in tree.splitlines()[0], tree
    assert "cohort holds: 2 children: 0 active, 0 done, 0 aborted, 2 cancelled" in tree, tree
    listing = on_both(server, "cohort", booking, "holds")
    assert "total 2  active 0  queued 0  done 0  aborted 0  failed 0  cancelled 2" in listing
