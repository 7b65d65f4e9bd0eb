"""purgeInstances (admin): dry run by default, whole finished families only, and a purged
instance is gone from every read the API and the inspector make."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.testclient import TestClient

from tests.api.conftest import data, error_code, gql
from tests.engine.retention_defs import family

pytestmark = pytest.mark.lake

ADMIN, OPERATOR = "admin-token-for-tests", "op-token-for-tests"
PURGE = """mutation($w: PurgeFilter!, $d: Boolean) {
  purgeInstances(where: $w, dryRun: $d) { dryRun roots instances } }"""
FUTURE = "2999-01-01T00:00:00Z"


def _start(client: TestClient) -> str:
    body = gql(client, 'mutation { startInstance(definition: "root") { instance { id } } }',
               token=OPERATOR)
    return str(data(body)["startInstance"]["instance"]["id"])


def _family(client: TestClient, root: str) -> list[str]:
    body = gql(client, "query($r: ID!) { instances(where: {rootId: $r}, first: 100) "
                       "{ nodes { id } } }", {"r": root}, token=ADMIN)
    return [n["id"] for n in data(body)["instances"]["nodes"]]


def _finish(client: TestClient, *ids: str) -> None:
    for iid in ids:
        body = gql(client, 'mutation($i: ID!) { fireAction(instanceId: $i, activity: "task", '
                           'action: "finish") { instance { status } } }', {"i": iid},
                   token=OPERATOR)
        assert data(body)["fireAction"]["instance"]["status"] == "COMPLETED"


def _purge(client: TestClient, where: dict[str, Any], dry: bool | None, token: str = ADMIN
           ) -> dict[str, Any]:
    variables: dict[str, Any] = {"w": where}
    if dry is not None:
        variables["d"] = dry
    return gql(client, PURGE, variables, token=token)


def test_purge_instances_counts_then_purges_and_the_api_never_shows_them(
        secured: TestClient) -> None:
    data(gql(secured, "mutation($d: [JSON!]!) { deployDefinitions(definitions: $d) "
                      "{ definitions { name } } }", {"d": family()}, token=ADMIN))
    done, live = _start(secured), _start(secured)
    members = _family(secured, done)
    assert len(members) == 2
    _finish(secured, *reversed(members), done)  # the grandchild first, the root last
    everything = {"finishedBefore": FUTURE}
    assert error_code(_purge(secured, everything, False, token=OPERATOR)) == "forbidden"
    dry = data(_purge(secured, everything, None))["purgeInstances"]
    assert dry == {"dryRun": True, "roots": 1, "instances": 3}
    assert len(_family(secured, done)) == 2  # the dry run changed nothing
    assert data(_purge(secured, {"finishedBefore": "2000-01-01T00:00:00Z"}, False)
                )["purgeInstances"]["roots"] == 0
    assert _purge(secured, {"finishedBefore": "yesterday"}, False)["errors"]  # a bad variable
    literal = 'mutation { purgeInstances(where: {finishedBefore: "soon"}) { roots } }'
    assert error_code(gql(secured, literal, token=ADMIN)) == "invalid-input"
    purged = data(_purge(secured, everything, False))["purgeInstances"]
    assert purged == {"dryRun": False, "roots": 1, "instances": 3}
    for iid in (done, *members):
        body = gql(secured, "query($i: ID!) { instance(id: $i) { id } }", {"i": iid},
                   token=ADMIN)
        assert body.get("data", {}).get("instance") is None
    listed = data(gql(secured, "{ instances(first: 100) { totalCount nodes { id } } }",
                      token=ADMIN))["instances"]
    assert done not in [n["id"] for n in listed["nodes"]]
    assert live in [n["id"] for n in listed["nodes"]]  # the live family stays whole
    assert len(_family(secured, live)) == 2
    count = data(gql(secured, '{ groq(query: "count(*[_type == \\"kinflow.instance\\"])") }',
                     token=ADMIN))["groq"]
    assert count == 3


HOLD = """mutation($r: ID!, $why: String!) { holdFamily(rootId: $r, reason: $why) {
  id retentionHold { reason by at } } }"""
RELEASE = """mutation($r: ID!) { releaseFamily(rootId: $r) { id retentionHold { reason } } }"""
COUNTS = """mutation($w: PurgeFilter!, $d: Boolean) {
  purgeInstances(where: $w, dryRun: $d) { dryRun roots instances kept held } }"""


def test_a_held_family_is_shown_on_its_root_and_passed_over_until_released(
        secured: TestClient) -> None:
    data(gql(secured, "mutation($d: [JSON!]!) { deployDefinitions(definitions: $d) "
                      "{ definitions { name } } }", {"d": family()}, token=ADMIN))
    root = _start(secured)
    members = _family(secured, root)
    _finish(secured, *reversed(members), root)
    refused = gql(secured, HOLD, {"r": root, "why": "audit"}, token=OPERATOR)
    assert error_code(refused) == "forbidden"
    held = data(gql(secured, HOLD, {"r": root, "why": "audit"}, token=ADMIN))["holdFamily"]
    assert held["retentionHold"]["reason"] == "audit" and held["retentionHold"]["by"] == "ada"
    shown = data(gql(secured, 'query($i: ID!) { instance(id: $i) { retentionHold { reason } } }',
                     {"i": root}, token="view-token-for-tests"))
    assert shown["instance"]["retentionHold"] == {"reason": "audit"}
    child = gql(secured, HOLD, {"r": members[0], "why": "x"}, token=ADMIN)
    assert error_code(child) == "invalid-input"
    everything = {"finishedBefore": FUTURE}
    kept = data(gql(secured, COUNTS, {"w": everything, "d": False}, token=ADMIN))
    assert kept["purgeInstances"] == {"dryRun": False, "roots": 0, "instances": 0, "kept": 0,
                                      "held": 1}
    released = data(gql(secured, RELEASE, {"r": root}, token=ADMIN))["releaseFamily"]
    assert released["retentionHold"] is None
    gone = data(gql(secured, COUNTS, {"w": everything, "d": False}, token=ADMIN))
    assert gone["purgeInstances"]["roots"] == 1 and gone["purgeInstances"]["held"] == 0
