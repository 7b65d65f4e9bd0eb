import pytest

from kinflow.errors import GdrError
from kinflow.gdr import Gdr, document_id, format_gdr, parse_gdr, to_gdr, to_ref


def test_round_trip() -> None:
    text = format_gdr("production", "article-1")
    assert text == "lake:production:article-1"
    assert parse_gdr(text) == Gdr("production", "article-1")


def test_document_id_may_contain_colons_and_dots() -> None:
    assert parse_gdr("lake:prod:instance.01J:x").document_id == "instance.01J:x"


@pytest.mark.parametrize(
    "bad",
    ["", "lake", "lake:production", "sanity:production:x", "lake::x", "lake:prod:",
     "lake:pro duction:x", "lake:prod:has space", 42, None],
)  # fmt: skip
def test_malformed_gdrs_are_typed_errors(bad: object) -> None:
    with pytest.raises(GdrError) as info:
        parse_gdr(bad)  # type: ignore[arg-type]
    assert info.value.code == "gdr-invalid"
    assert "reason" in info.value.details


def test_bare_ids_are_converted_at_the_edge() -> None:
    assert str(to_gdr("article-1", "production")) == "lake:production:article-1"
    assert str(to_gdr("lake:other:a", "production")) == "lake:other:a"
    assert to_ref({"_id": "a", "_type": "article"}, "ds") == {"id": "lake:ds:a", "type": "article"}
    assert to_ref("a", "ds") == {"id": "lake:ds:a"}
    assert document_id("lake:ds:a") == "a"
    assert document_id("a") == "a"


def test_reference_without_id_is_refused() -> None:
    with pytest.raises(GdrError):
        to_ref({"type": "article"}, "ds")
    with pytest.raises(GdrError):
        to_ref(3, "ds")
