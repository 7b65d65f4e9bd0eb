"""Every mutation and query of the API over HTTP, against the real app and lake."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.testclient import TestClient

from tests.api.conftest import data, error_code, gql
from tests.engine.definitions import simple

pytestmark = pytest.mark.lake

KITCHEN: dict[str, Any] = simple("kitchen", [
    {"name": "a", "activities": [{"name": "w", "actions": [
        {"name": "bump", "ops": [{"type": "field.inc", "target": "n"}]},
        {"name": "send", "effects": [{"name": "notify", "bindings": {"who": "$actor.id"},
                                      "input": {"channel": "x"},
                                      "outputs": [{"name": "id", "type": "string"}]}]},
        {"name": "needs", "params": [{"type": "number", "name": "p", "required": True}]},
        {"name": "go", "status": "done"},
    ]}], "transitions": [{"name": "t", "to": "b"}]},
    {"name": "b", "activities": [{"name": "x", "actions": [{"name": "fin", "status": "done"}]},
                                 {"name": "y", "actions": [{"name": "hold", "status": "done"}]}],
     "transitions": [{"name": "u", "to": "c"}]},
    {"name": "c"},
], fields=[
    {"name": "n", "type": "number", "editable": True,
     "initialValue": {"type": "literal", "value": 0}},
    {"name": "title", "type": "string", "required": True, "initialValue": {"type": "input"}},
])  # fmt: skip

DEPLOY = """mutation($d: [JSON!]!) { deployDefinitions(definitions: $d) {
  definitions { name version status } warnings } }"""
START = """mutation($def: String!, $f: JSON, $id: ID) {
  startInstance(definition: $def, fields: $f, instanceId: $id) {
    changed cascaded instance { id gdr status currentStage fields version definition } } }"""
FIRE = """mutation($i: ID!, $a: String!, $x: String!, $p: JSON, $k: String) {
  fireAction(instanceId: $i, activity: $a, action: $x, params: $p, idempotencyKey: $k) {
    changed cascaded instance { currentStage status fields
      pendingEffects { key name params queuedAt claimed } } } }"""
INSTANCE = """query($i: ID!) { instance(id: $i) { id status currentStage fields revision
  activities { name status firedActions } stages { key name enteredAt exitedAt }
  availableActions { activity action enabled reason params }
  history(last: 3) { type at data } startedAt completedAt abortedAt lastChangedAt } }"""


def deploy(client: TestClient, *definitions: dict[str, Any], token: str | None = None
           ) -> dict[str, Any]:
    return gql(client, DEPLOY, {"d": list(definitions)}, token)


def start(client: TestClient, **variables: Any) -> dict[str, Any]:
    body = data(gql(client, START, {"def": "kitchen", "f": {"title": "t"}, **variables}))
    result: dict[str, Any] = body["startInstance"]
    return result


def fire(client: TestClient, iid: str, activity: str, action: str, **extra: Any
         ) -> dict[str, Any]:
    return gql(client, FIRE, {"i": iid, "a": activity, "x": action, **extra})


def test_deploy_reports_created_then_unchanged_and_definitions_are_queryable(
    client: TestClient,
) -> None:
    first = data(deploy(client, KITCHEN))["deployDefinitions"]
    assert first == {"definitions": [{"name": "kitchen", "version": 1, "status": "created"}],
                     "warnings": []}  # fmt: skip
    again = data(deploy(client, KITCHEN))["deployDefinitions"]
    assert again["definitions"][0]["status"] == "unchanged"
    changed = {**KITCHEN, "title": "Kitchen sink"}
    assert data(deploy(client, changed))["deployDefinitions"]["definitions"][0]["version"] == 2

    listed = data(gql(client, "{ definitions { name version title lifecycle initialStage stages"
                              " contentHash } }"))["definitions"]  # fmt: skip
    assert [(d["name"], d["version"], d["title"]) for d in listed] == [
        ("kitchen", 2, "Kitchen sink")]
    assert listed[0]["stages"] == ["a", "b", "c"] and listed[0]["lifecycle"] == "standalone"
    every = data(gql(client, "{ definitions(allVersions: true) { version } }"))["definitions"]
    assert sorted(d["version"] for d in every) == [1, 2]
    one = data(gql(client, '{ definition(name: "kitchen", version: 1) { version document } }'))
    assert one["definition"]["version"] == 1
    assert one["definition"]["document"]["name"] == "kitchen"
    missing = data(gql(client, '{ definition(name: "nope") { version } }'))
    assert missing["definition"] is None


def test_start_fire_edit_tick_and_the_instance_view(client: TestClient) -> None:
    data(deploy(client, KITCHEN))
    started = start(client, id="kitchen-1")
    assert started["changed"] is True
    instance = started["instance"]
    assert instance["id"] == "kitchen-1" and instance["gdr"] == "lake:production:kitchen-1"
    assert instance["status"] == "ACTIVE" and instance["currentStage"] == "a"
    assert instance["fields"] == {"n": 0, "title": "t"}
    assert (instance["definition"], instance["version"]) == ("kitchen", 1)

    bumped = data(fire(client, "kitchen-1", "w", "bump", k="key-1"))["fireAction"]
    assert bumped["changed"] and bumped["instance"]["fields"]["n"] == 1
    replay = data(fire(client, "kitchen-1", "w", "bump", k="key-1"))["fireAction"]
    assert replay["changed"] is False and replay["instance"]["fields"]["n"] == 1

    edited = data(gql(client, """mutation { editField(instanceId: "kitchen-1", field: "n",
        value: 41) { changed instance { fields } } }"""))["editField"]  # fmt: skip
    assert edited["instance"]["fields"]["n"] == 41
    ticked = data(gql(client, 'mutation { tick(instanceId: "kitchen-1") { changed cascaded '
                              "nextEvaluationAt } }"))["tick"]  # fmt: skip
    assert ticked["cascaded"] == 0

    view = data(gql(client, INSTANCE, {"i": "kitchen-1"}))["instance"]
    assert view["activities"] == [{"name": "w", "status": "active", "firedActions": []}]
    assert [s["name"] for s in view["stages"]] == ["a"] and view["stages"][0]["exitedAt"] is None
    verdicts = {v["action"]: v for v in view["availableActions"]}
    assert verdicts["go"]["enabled"] is True
    assert verdicts["needs"]["params"][0]["name"] == "p"
    assert len(view["history"]) == 3 and view["history"][-1]["type"]
    assert view["completedAt"] is None and view["revision"]

    moved = data(fire(client, "kitchen-1", "w", "go"))["fireAction"]
    assert moved["cascaded"] == 1 and moved["instance"]["currentStage"] == "b"


def test_effects_complete_through_the_api(client: TestClient) -> None:
    data(deploy(client, KITCHEN))
    iid = start(client)["instance"]["id"]
    fired = data(fire(client, iid, "w", "send"))["fireAction"]["instance"]
    (effect,) = fired["pendingEffects"]
    assert effect["name"] == "notify" and effect["params"] == {"who": "local", "channel": "x"}
    assert effect["claimed"] is False
    done = data(gql(client, """mutation($i: ID!, $k: String!) { completeEffect(instanceId: $i,
        effectKey: $k, status: DONE, outputs: {id: "m-1"}) { changed instance {
        pendingEffects { key } history(last: 1) { type data } } } }""",
                    {"i": iid, "k": effect["key"]}))["completeEffect"]  # fmt: skip
    assert done["changed"] and done["instance"]["pendingEffects"] == []
    assert done["instance"]["history"][0]["type"] == "effectCompleted"
    again = gql(client, """mutation($i: ID!, $k: String!) { completeEffect(instanceId: $i,
        effectKey: $k, status: FAILED, error: "late") { changed } }""",
                {"i": iid, "k": effect["key"]})  # fmt: skip
    assert error_code(again) == "effect-not-found"


def test_set_stage_reset_activity_and_abort(client: TestClient) -> None:
    data(deploy(client, KITCHEN))
    iid = start(client)["instance"]["id"]
    moved = data(gql(client, """mutation($i: ID!) { setStage(instanceId: $i, stage: "b",
        reason: "skip ahead") { changed instance { currentStage } } }""",
                     {"i": iid}))["setStage"]  # fmt: skip
    assert moved["instance"]["currentStage"] == "b"
    data(fire(client, iid, "x", "fin"))
    data(fire(client, iid, "y", "hold"))  # b's activities are done: the cascade moves to c
    view = data(gql(client, INSTANCE, {"i": iid}))["instance"]
    assert view["status"] == "COMPLETED" and view["completedAt"]

    other = start(client)["instance"]["id"]
    data(gql(client, 'mutation($i: ID!) { setStage(instanceId: $i, stage: "b") { changed } }',
             {"i": other}))  # fmt: skip
    wrong = gql(client, """mutation($i: ID!) { resetActivity(instanceId: $i, activity: "x",
        to: "done") { changed } }""", {"i": other})  # fmt: skip
    assert error_code(wrong) == "contract-violation"
    data(fire(client, other, "x", "fin"))
    reset = gql(client, """mutation($i: ID!) { resetActivity(instanceId: $i, activity: "x")
        { changed instance { currentStage activities { name status } } } }""",
                {"i": other})  # fmt: skip
    assert data(reset)["resetActivity"]["changed"] is True
    assert data(reset)["resetActivity"]["instance"]["activities"] == [
        {"name": "x", "status": "active"}, {"name": "y", "status": "active"}]
    third = start(client)["instance"]["id"]
    aborted = data(gql(client, """mutation($i: ID!) { abortInstance(instanceId: $i,
        reason: "no longer needed", idempotencyKey: "abort-1") { changed
        instance { status abortedAt } } }""", {"i": third}))["abortInstance"]  # fmt: skip
    assert aborted["instance"]["status"] == "ABORTED" and aborted["instance"]["abortedAt"]
    refused = fire(client, third, "w", "go")
    assert error_code(refused) == "action-disabled"
    assert refused["errors"][0]["extensions"]["details"]["reason"] == "instance-aborted"


def test_instances_filter_and_paginate(client: TestClient) -> None:
    data(deploy(client, KITCHEN))
    ids = [start(client, id=f"k-{n:02d}")["instance"]["id"] for n in range(5)]
    data(fire(client, ids[0], "w", "go"))
    data(gql(client, 'mutation { abortInstance(instanceId: "k-01") { changed } }'))
    page = """query($w: InstanceFilter, $first: Int, $after: String) {
      instances(where: $w, first: $first, after: $after) {
        totalCount pageInfo { hasNextPage endCursor } nodes { id currentStage status } } }"""
    first = data(gql(client, page, {"first": 2}))["instances"]
    assert first["totalCount"] == 5 and [n["id"] for n in first["nodes"]] == ["k-00", "k-01"]
    assert first["pageInfo"]["hasNextPage"] is True
    second = data(gql(client, page, {"first": 10, "after": first["pageInfo"]["endCursor"]}))
    assert [n["id"] for n in second["instances"]["nodes"]] == ["k-02", "k-03", "k-04"]
    assert second["instances"]["pageInfo"]["hasNextPage"] is False

    def ids_where(where: dict[str, Any]) -> list[str]:
        found = data(gql(client, page, {"w": where}))["instances"]["nodes"]
        return [n["id"] for n in found]

    assert ids_where({"status": "ABORTED"}) == ["k-01"]
    assert ids_where({"status": "ACTIVE", "stage": "b"}) == ["k-00"]
    assert ids_where({"status": "COMPLETED"}) == []
    assert ids_where({"definition": "other"}) == []
    assert ids_where({"parentId": "k-00"}) == []
    bad = gql(client, page, {"after": "not-a-cursor"})
    assert error_code(bad) == "invalid-input"
    too_many = gql(client, page, {"first": 100_000})
    assert error_code(too_many) == "invalid-input"


def test_content_documents_and_groq(client: TestClient) -> None:
    put = data(gql(client, """mutation { putDocument(document: {_id: "article-9",
        _type: "article", title: "Hello", locales: ["de"]}) }"""))["putDocument"]  # fmt: skip
    assert put["_id"] == "article-9" and put["_rev"]
    found = data(gql(client, """query($p: JSON) { groq(query: "*[_type == $t]{_id, title}",
        params: $p) }""", {"p": {"t": "article"}}))["groq"]  # fmt: skip
    assert found == [{"_id": "article-9", "title": "Hello"}]
    stale = gql(client, """mutation { putDocument(document: {_id: "article-9",
        _type: "article", _rev: "stale", title: "x"}) }""")  # fmt: skip
    assert error_code(stale) == "revision-conflict"
    data(deploy(client, KITCHEN))
    iid = start(client)["instance"]["id"]
    owned = gql(client, """mutation($d: JSON!) { putDocument(document: $d) }""",
                {"d": {"_id": iid, "_type": "article"}})  # fmt: skip
    assert error_code(owned) == "reserved-id"  # the id decides, whatever the type
    forged = gql(client, """mutation { putDocument(document: {_id: "x",
        _type: "kinflow.instance"}) }""")  # fmt: skip
    assert error_code(forged) == "reserved-type"
    assert error_code(gql(client, f'mutation {{ deleteDocument(id: "{iid}") }}')) == (
        "reserved-id")
    assert data(gql(client, 'mutation { deleteDocument(id: "article-9") }'))["deleteDocument"]
    assert not data(gql(client, 'mutation { deleteDocument(id: "article-9") }'))[
        "deleteDocument"]
    syntax = gql(client, '{ groq(query: "*[_type == ") }')
    assert error_code(syntax) == "groq-syntax"
    assert "position" in syntax["errors"][0]["extensions"]["details"]


def test_graphiql_is_served_to_a_browser(client: TestClient) -> None:
    page = client.get("/graphql", headers={"Accept": "text/html"})
    assert page.status_code == 200 and "graphiql" in page.text.lower()
    assert client.get("/healthz").json()["status"] == "ok"


def test_integers_past_64_bits_are_refused_not_crashed(client: TestClient) -> None:
    """A JSON number a document cannot store is the caller's mistake: invalid-input."""
    data(deploy(client, KITCHEN))
    iid = start(client)["instance"]["id"]
    huge = 10**40
    assert error_code(fire(client, iid, "w", "bump", p={"words": huge})) == "invalid-input"
    edited = gql(client, """mutation($v: JSON) { editField(instanceId: $i, field: "n",
        value: $v) { changed } }""".replace("$i", f'"{iid}"'), {"v": huge})  # fmt: skip
    assert error_code(edited) == "invalid-input"
    put = gql(client, """mutation($d: JSON!) { putDocument(document: $d) }""",
              {"d": {"_id": "big-1", "_type": "article", "n": [1, {"deep": huge}]}})
    assert error_code(put) == "invalid-input"
    assert data(gql(client, '{ groq(query: "*[_id == \\"big-1\\"]") }'))["groq"] == []
    view = data(gql(client, INSTANCE, {"i": iid}))["instance"]
    assert view["fields"]["n"] == 0  # nothing was written


ANSWER_FIELDS = ("id gdr definition version status currentStage fields startedAt completedAt "
                 "abortedAt lastChangedAt revision nextEvaluationAt "
                 "activities { name status firedActions } stages { key name enteredAt exitedAt }")


def test_a_mutations_answer_reads_as_the_instance_does(client: TestClient) -> None:
    deploy(client, KITCHEN)
    iid = start(client)["instance"]["id"]
    for activity, action in (("w", "bump"), ("w", "go"), ("x", "fin")):
        answer = data(gql(client, f"""mutation($i: ID!, $a: String!, $x: String!) {{
            fireAction(instanceId: $i, activity: $a, action: $x) {{
              instance {{ {ANSWER_FIELDS} }} }} }}""",
                          {"i": iid, "a": activity, "x": action}))["fireAction"]["instance"]
        read = data(gql(client, f"query($i: ID!) {{ instance(id: $i) {{ {ANSWER_FIELDS} }} }}",
                        {"i": iid}))["instance"]
        assert answer == read
