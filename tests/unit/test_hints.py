from kinflow.storage.hints import choose_hint
from kinflow.storage.lake import IndexSpec

INSTANCES = {"_type": "kinflow.instance"}
INDEXES = [
    IndexSpec("type_id", (("_type", 1), ("_id", 1))),
    IndexSpec("due", (("nextEvaluationAt", 1),), partial=INSTANCES),
    IndexSpec("def_name_version", (("_type", 1), ("name", 1), ("version", -1))),
    IndexSpec("propagate", (("propagateTo", 1),), partial=INSTANCES),
]


def test_id_equality_wins() -> None:
    assert choose_hint({"_id": "x", "_type": "t", "owes": True}, INDEXES) == "_id_"
    assert choose_hint({"_id": {"$in": ["a", "b"]}}, INDEXES) == "_id_"


def test_the_index_covering_most_of_the_filter() -> None:
    assert choose_hint({"_type": "kinflow.definition", "name": "a"}, INDEXES) == "def_name_version"
    due = {**INSTANCES, "nextEvaluationAt": {"$lte": "2026"}, "completedAt": None}
    assert choose_hint(due, INDEXES) == "due"


def test_partial_indexes_only_when_the_query_implies_their_filter() -> None:
    assert choose_hint({"nextEvaluationAt": {"$lte": "2026"}}, INDEXES) is None
    assert choose_hint({"_type": "other", "propagateTo": "p"}, INDEXES) == "type_id"


def test_unseekable_predicates_are_left_to_the_server() -> None:
    assert choose_hint({"propagateTo": {"$ne": None}, **INSTANCES}, INDEXES) == "type_id"
    assert choose_hint({"$or": [{"a": 1}]}, INDEXES) is None
    assert choose_hint({"_id": {"$exists": True}}, INDEXES) is None
