"""`kinflow inspect` draws the three-level release tree with the right statuses."""

from __future__ import annotations

import json

from .test_cli import EXAMPLES, instance_id, invoke


def groq(query: str) -> object:
    status, output = invoke("groq", query)
    assert status == 0, output
    return json.loads(output)


def child_of(parent: str, row_key: str) -> str:
    """The child of ``parent`` spawned for ``row_key`` (a locale, or an article's id its
    ``article`` field references): registry rows are not instance fields, children are
    instances that name their parent."""
    ids = groq(f"*[_type == 'kinflow.instance' && parentInstance == '{parent}' && "
               f"('{row_key}' in fields[].value || "
               f"'lake:production:{row_key}' in fields[].value.id)]._id")
    assert isinstance(ids, list) and len(ids) == 1, ids
    return str(ids[0])


def test_inspect_draws_the_release_tree(cli_env: str) -> None:
    assert (
        invoke("lake", "import", "production", str(EXAMPLES / "content" / "articles.ndjson"))[0]
        == 0
    )
    assert invoke("deploy", str(EXAMPLES / "definitions"))[0] == 0
    status, output = invoke("start", "release", "--field", "subject=release-2026-12")
    assert status == 0, output
    release = instance_id(output)

    # article-3 needs only French: translate it, then approve its review
    review3 = child_of(release, "article-3")
    french = child_of(review3, "fr")
    assert invoke("fire", french, "translate", "submit")[0] == 0
    status, output = invoke("fire", review3, "sign-off", "approve")
    assert status == 0 and "COMPLETED" in output and "stage approved" in output, output
    # article-1: one of three translations done
    review1 = child_of(release, "article-1")
    assert invoke("fire", child_of(review1, "de"), "translate", "submit")[0] == 0

    status, tree = invoke("inspect", release)
    assert status == 0, tree
    lines = tree.splitlines()
    assert release in lines[0] and "ACTIVE" in lines[0] and "stage reviewing" in lines[0]
    assert "cohort reviews: 3 children: 2 active, 1 done, 0 aborted" in tree
    assert "row article-3: DONE stage approved" in tree
    assert "cohort translate: 1 child: 0 active, 1 done, 0 aborted" in tree  # article-3
    assert "cohort translate: 3 children: 2 active, 1 done, 0 aborted" in tree  # article-1
    assert "cohort translate: 2 children: 2 active, 0 done, 0 aborted" in tree  # article-2
    assert "row de: DONE stage done" in tree and "row ja: ACTIVE stage translating" in tree
    assert tree.count("translate-article v1") == 6  # every grandchild drawn

    # aborting the release aborts every live descendant (onExit abort / cascade)
    status, output = invoke("abort", release, "--reason", "release slipped")
    assert status == 0, output
    status, tree = invoke("inspect", release)
    assert "ABORTED" in tree.splitlines()[0]
    assert "cohort reviews: 3 children: 0 active, 1 done, 2 aborted" in tree
    assert "cohort translate: 3 children: 0 active, 1 done, 2 aborted" in tree
    assert "cohort translate: 2 children: 0 active, 0 done, 2 aborted" in tree
    assert "ACTIVE" not in tree
