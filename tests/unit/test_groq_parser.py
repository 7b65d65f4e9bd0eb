"""Parser behaviour: precedence, validation, error positions and caret messages."""

from __future__ import annotations

import pytest

from kinflow.errors import KinflowError
from kinflow.groq import GroqError, GroqSyntaxError, evaluate, free_parameters, parse
from kinflow.groq import nodes as n


def syntax_error(query: str, params: dict[str, object] | None = None) -> GroqSyntaxError:
    with pytest.raises(GroqSyntaxError) as info:
        parse(query, params)
    return info.value


def test_error_hierarchy_and_codes() -> None:
    err = syntax_error("1 +")
    assert isinstance(err, GroqError)
    assert isinstance(err, KinflowError)
    assert err.code == "groq-syntax"
    assert err.details["position"] == err.position


@pytest.mark.parametrize(
    ("query", "position"),
    [
        ("1 +", 3),
        ("*[_type == ]", 11),
        ('"abc', 0),
        ("foo(1)", 0),
        ("1 < 2 < 3", 6),
        ("[1, 2", 5),
        ("a.", 2),
        ("1 # 2", 2),
        ("*[0.5]", 1),
    ],
)
def test_error_positions(query: str, position: int) -> None:
    assert syntax_error(query).position == position


def test_caret_points_at_the_position_on_its_line() -> None:
    err = syntax_error("*[\n  _type == ]")
    assert err.position == 14
    lines = err.message.splitlines()
    assert lines[1] == "    _type == ]"
    assert lines[2].index("^") == lines[1].index("]")
    assert "line 2" in lines[0]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("-2 ** 2", -4),
        ("2 ** 3 ** 2", 512),
        ("2 ** -1", 0.5),
        ("1 + 2 * 3", 7),
        ("(1 + 2) * 3", 9),
        ("!true == false", True),
        ("true || false && false", True),
        ("10 - 2 - 3", 5),
        ("-5 % 3", -2),
        ("3 in 1..5", True),
        ("5 in 1...5", False),
        ("1 // a comment", 1),
    ],
)
def test_precedence(query: str, expected: object) -> None:
    assert evaluate(query) == expected


@pytest.mark.parametrize(
    "query",
    [
        "1 => 2",
        '"a" .. "b"',
        "3 in (1 + (2 .. 3))",
        "[1] | order(@ && true asc)",
        "select(true || (true => false))",
        'select("a", "b")',
        "boost(a, 1)",
        "score(a == 1)",
        "*[0] | score(a == 1)",
        "count()",
        "unknown::fn(1)",
        "{a.b}",
        "{a->b}",
        "*[0..n]",
        ".5",
        "1 == 2 == 3",
        "fn foo::bar($a) = $a{x, $a}; 1",
    ],
)
def test_invalid_queries_are_refused(query: str) -> None:
    syntax_error(query)


def test_undefined_parameter_refused_when_params_are_known() -> None:
    err = syntax_error("$p == 1", {})
    assert err.position == 0
    with pytest.raises(GroqSyntaxError):
        evaluate("$p == 1", params={})


def test_params_optional_at_parse_time() -> None:
    tree = parse("*[$i].v")
    assert tree.needs_params
    data = [{"_id": "a", "v": 1}, {"_id": "b", "v": 2}]
    assert evaluate(tree, dataset=data, params={"i": 1}) == 2
    assert evaluate(tree, dataset=data, params={"i": "v"}) == [None, None]  # *.v.v
    assert evaluate("[{'k': 3}][0][$key]", params={"key": "k"}) == 3


def test_free_parameters() -> None:
    tree = parse("count($subworkflows[activity == $act && current]) == $n")
    assert free_parameters(tree) == {"subworkflows", "act", "n"}
    assert free_parameters(parse("fn f::g($x) = $x{a}; f::g($doc)")) == {"doc"}
    assert free_parameters(parse("*[_type == 'a']")) == set()


def test_traversal_chains_compile_to_map_and_flatmap() -> None:
    assert isinstance(parse("*[_type == 'a'].title").root, n.MapNode)
    assert isinstance(parse("*[_type == 'a'].tags[]").root, n.FlatMap)
    assert isinstance(parse("*[_type == 'a'][0].title").root, n.Attr)
    assert isinstance(parse("$rows.status").root, n.Attr)


def test_bracket_disambiguation() -> None:
    assert isinstance(parse("a[1 + 1]").root, n.Element)
    assert isinstance(parse('a["x-y"]').root, n.Attr)
    assert isinstance(parse("a[x > 1]").root, n.Filter)
    assert isinstance(parse("a[1..2]").root, n.Slice)


def test_string_escapes() -> None:
    assert evaluate(r'"\u00e9\u{1F600}\n\"" ') == "\u00e9\U0001f600\n\""
    assert evaluate(r'"\uD83D\uDE00"') == "\U0001f600"
    syntax_error(r'"\uD800"')
    syntax_error(r'"\x"')


def test_deep_nesting_is_a_groq_error() -> None:
    with pytest.raises(GroqError):
        parse("(" * 5000 + "1" + ")" * 5000)
