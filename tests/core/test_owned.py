"""Engine-owned ids and types are refused to content writes (``reserved-id``/``-type``)."""

from __future__ import annotations

import pytest

from kinflow.core.errors import ReservedId, ReservedType
from kinflow.core.owned import check_content_write, check_instance_id, owned_prefix


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
