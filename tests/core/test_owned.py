"""Engine-owned ids and types are refused to content writes (``reserved-id``/``-type``)."""

from __future__ import annotations

import pytest

from kinflow.core.cohort.spawn import attempt_id, child_id
from kinflow.core.errors import InstanceIdReserved, ReservedId, ReservedType
from kinflow.core.owned import check_content_write, check_instance_id, derived_child, owned_prefix


def test_engine_ids_and_types_belong_to_the_engine() -> None:
    assert [owned_prefix(i) for i in ("instance.x", "definition.a.v1", "lease.h", "memo", 3)] \
        == ["instance.", "definition.", "lease.", None, None]  # fmt: skip
    check_content_write("memo", "article")
    with pytest.raises(ReservedId) as refused:
        check_content_write("lease.heartbeat", "article")
    assert refused.value.details == {"id": "lease.heartbeat", "prefix": "lease."}
    with pytest.raises(ReservedType):
        check_content_write("memo", "kinflow.instance")
    with pytest.raises(ReservedType):
        check_content_write("memo", "article", stored_type="kinflow.definition")


def test_an_instance_id_may_only_take_the_instance_prefix() -> None:
    assert check_instance_id("instance.mine") == "instance.mine"
    assert check_instance_id("mine") == "mine"
    with pytest.raises(ReservedId):
        check_instance_id("definition.x")


def test_every_id_the_engine_derives_for_a_child_is_refused_as_an_instance_id() -> None:
    first = child_id("instance.01JP", "e1", "translate", "go", "row-1")
    again = child_id("instance.01JP", "e1", "translate", "go", "row-1", taken={first})
    derived = [first, again, attempt_id(first, 2), attempt_id(again, 12)]
    assert again == f"{first}-2" and all(map(derived_child, derived))
    for squat in derived:
        with pytest.raises(InstanceIdReserved) as refused:
            check_instance_id(squat)
        assert refused.value.code == "instance-id-reserved"
        assert refused.value.details == {"id": squat, "prefix": "instance.c"}
    for other in ("instance.cat", "instance.c" + "0" * 23, "instance.C" + "a" * 24,
                  "instance.01JP", "order-7"):
        assert not derived_child(other)
        assert check_instance_id(other) == other
