"""Loads the GROQ conformance suite's YAML and expands it into flat cases.

Owns: the YAML-1.2-style loader (YAML 1.2 core-schema scalars, as the suite's own
JavaScript build reads them), node inheritance, ``~var~`` placeholder expansion and the
generated filter/fetch/join variants, version and feature gating, and the tier
definitions. Nothing here evaluates GROQ.

The suite's YAML is vendored under ``tests/conformance/groq-test-suite/`` (MIT, with
its LICENSE): only the files some tier runs, byte for byte.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

TIER1_FILES = frozenset(
    [f"type/{n}.yml" for n in ("array", "boolean", "null", "number", "object", "string", "pair",
                               "range")]
    + [f"expr/{n}.yml" for n in ("attribute", "filter", "projection", "slice")]
    + [
        f"operator/{n}.yml"
        for n in ("and", "or", "not", "equality", "comparison", "in", "plus", "minus", "star",
                  "slash", "percent", "star-star", "unary-minus", "unary-plus", "dereference",
                  "projection")
    ]
    + [f"compound/{n}.yml" for n in ("in-flatten", "misc", "nested-dereference", "precedence",
                                     "traversal")]
    + ["misc/params.yml", "misc/subqueries.yml"]
    + [
        f"function/{n}.yml"
        for n in ("count", "defined", "coalesce", "length", "lower", "select", "string",
                  "dateTime", "order", "references")
    ]
)

TIER2_EXTRA_FILES = frozenset(
    ["expr/pagination.yml", "type/path.yml", "operator/match.yml"]
    + [
        f"function/{n}.yml"
        for n in ("array-compact", "array-intersects", "array-join", "array-unique", "boost",
                  "score", "custom", "identity", "math-avg", "math-max", "math-min", "math-sum",
                  "round", "string-split", "string-startsWith")
    ]
)

TIER3_EXTRA_FILES = frozenset(["function/diff.yml"])

#: Features each tier implements; a case needing any other feature is skipped.
TIER_FEATURES: dict[int, frozenset[str]] = {
    1: frozenset(),
    2: frozenset({"customFunctions"}),
    3: frozenset({"customFunctions"}),
}

GROQ_VERSION = (1, 2)


VENDORED = Path(__file__).resolve().parent / "groq-test-suite"


def suite_dir() -> Path | None:
    """Where the suite's ``test/`` folder lives: ``KINFLOW_GROQ_SUITE`` (a full upstream
    checkout) or else the vendored copy; None when neither is there."""
    env = os.environ.get("KINFLOW_GROQ_SUITE")
    candidates = [Path(env)] if env else []
    candidates.append(VENDORED)
    for cand in candidates:
        if (cand / "test").is_dir():
            return cand / "test"
        if cand.is_dir() and cand.name == "test" and any(cand.glob("*/*.yml")):
            return cand
    return None


# --------------------------------------------------------------------------- YAML


_BaseLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_BaseLoader):  # type: ignore[misc]
    """SafeLoader with YAML 1.2 core-schema scalars, as js-yaml reads them."""


_Loader.yaml_implicit_resolvers = {}
_RESOLVERS: list[tuple[str, str, str]] = [
    ("tag:yaml.org,2002:null", r"^(?:~|null|Null|NULL|)$", "~nN"),
    ("tag:yaml.org,2002:bool", r"^(?:true|True|TRUE|false|False|FALSE)$", "tTfF"),
    ("tag:yaml.org,2002:int", r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$",
     "-+0123456789"),
    (
        "tag:yaml.org,2002:float",
        r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
        r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$",
        "-+0123456789.",
    ),
]
for _tag, _rx, _first in _RESOLVERS:
    _Loader.add_implicit_resolver(_tag, re.compile(_rx), list(_first))


def _construct_int(loader: yaml.SafeLoader, node: yaml.Node) -> int:
    text = str(loader.construct_scalar(node))  # type: ignore[arg-type]
    if text.startswith("0o"):
        return int(text[2:], 8)
    if text.startswith("0x"):
        return int(text[2:], 16)
    return int(text, 10)


def _construct_float(loader: yaml.SafeLoader, node: yaml.Node) -> float:
    text = str(loader.construct_scalar(node)).lower()  # type: ignore[arg-type]
    if text.endswith("inf"):
        return -math.inf if text.startswith("-") else math.inf
    if text.endswith("nan"):
        return math.nan
    return float(text)


def _construct_bool(loader: yaml.SafeLoader, node: yaml.Node) -> bool:
    return str(loader.construct_scalar(node)).lower() == "true"  # type: ignore[arg-type]


_Loader.add_constructor("tag:yaml.org,2002:int", _construct_int)
_Loader.add_constructor("tag:yaml.org,2002:float", _construct_float)
_Loader.add_constructor("tag:yaml.org,2002:bool", _construct_bool)


def js_string(value: Any) -> str:
    """Text of a YAML scalar as JavaScript's ``String()`` would write it."""
    if isinstance(value, str):
        return value
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value) if abs(value) < 2**53 else js_number(float(value))
    if isinstance(value, float):
        return js_number(value)
    return str(value)


def js_number(x: float) -> str:
    from kinflow.groq.values import format_number

    return format_number(x)


def _fix_keys(value: Any) -> Any:
    """Mapping keys become strings the JavaScript way (``true:`` is the key "true")."""
    if isinstance(value, dict):
        return {js_string(k): _fix_keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_fix_keys(v) for v in value]
    return value


def load_yaml(path: Path) -> Any:
    with path.open(encoding="utf-8") as fh:
        return _fix_keys(yaml.load(fh, Loader=_Loader))


# --------------------------------------------------------------------------- cases

_PLACEHOLDER = re.compile(r"~(\w+)~")


@dataclass
class Case:
    name: str
    filename: str
    query: str
    result: Any
    valid: bool
    params: dict[str, Any] | None
    #: "inline" (``documents``), "generated", "empty" or "external"
    dataset_kind: str
    documents: list[Any] = field(default_factory=list)
    version: str | None = None
    features: tuple[str, ...] = ()

    def dataset(self, generated: list[Any]) -> list[Any]:
        docs = generated if self.dataset_kind == "generated" else self.documents
        return sorted(docs, key=_id_key)


def _id_key(doc: Any) -> str:
    if isinstance(doc, dict) and isinstance(doc.get("_id"), str):
        return str(doc["_id"])
    return ""


@dataclass
class _Occ:
    name: str
    text: str


def expand_placeholders(query: str, variables: dict[str, Any]) -> Iterator[list[_Occ]]:
    """Every combination of list-valued alternatives, first occurrence varying fastest."""
    names = _PLACEHOLDER.findall(query)
    # An unknown name is pasted as JavaScript's ``undefined``, as the upstream build does.
    values = [variables.get(n, "undefined") for n in names]
    choices = [v if isinstance(v, list) else [v] for v in values]
    state = [0] * len(names)
    while True:
        yield [_Occ(n, js_string(choices[i][state[i]])) for i, n in enumerate(names)]
        i = 0
        while i < len(state):
            state[i] += 1
            if state[i] < len(choices[i]):
                break
            state[i] = 0
            i += 1
        if i == len(state):
            return


def _fill(query: str, texts: list[str]) -> str:
    it = iter(texts)
    return _PLACEHOLDER.sub(lambda _m: next(it), query)


def _strict_json(text: str) -> tuple[bool, Any]:
    def _reject(_c: str) -> Any:
        raise ValueError("not strict JSON")

    try:
        return True, json.loads(text, parse_constant=_reject)
    except ValueError:
        return False, None


class _Generated:
    """The one shared dataset behind the generated variants: one document per JSON text."""

    def __init__(self) -> None:
        self.docs: list[dict[str, Any]] = []
        self._by_text: dict[str, tuple[str, str]] = {}

    def doc_for(self, text: str, value: Any) -> tuple[str, str]:
        got = self._by_text.get(text)
        if got is None:
            n = len(self.docs) + 1
            got = (f"gen.{n:04d}", f"v{n}")
            self.docs.append({"_id": got[0], "_type": "doc", got[1]: value})
            self._by_text[text] = got
        return got


class Suite:
    """All compiled cases of the suite plus the generated dataset they share."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.cases: list[Case] = []
        self.generated = _Generated()
        for path in sorted(root.rglob("*.yml")):
            rel = path.relative_to(root).as_posix()
            data = load_yaml(path)
            if isinstance(data, dict):
                self._process(data, rel, {})

    def _process(self, node: dict[str, Any], filename: str, inherited: dict[str, Any]) -> None:
        cur = {k: v for k, v in inherited.items() if k != "tests"}
        if "documents" in node or "dataset" in node:
            cur.pop("documents", None)
            cur.pop("dataset", None)
        for k, v in node.items():
            if k == "tests":
                continue
            if k == "variables" and isinstance(v, dict) and isinstance(cur.get("variables"), dict):
                cur["variables"] = {**cur["variables"], **v}
            elif k == "name" and cur.get("name") is not None and v is not None:
                cur["name"] = f"{cur['name']} / {v}"
            else:
                cur[k] = v
        query = cur.get("query")
        valid = cur.get("valid", True) is not False
        if query is not None and ("result" in node or "result" in cur or not valid):
            self._emit(cur, filename, str(query))
        children = node.get("tests")
        if isinstance(children, list):
            for child in children:
                if isinstance(child, dict):
                    self._process(child, filename, cur)
        elif isinstance(children, dict):
            self._process(children, filename, cur)

    def _emit(self, cur: dict[str, Any], filename: str, query: str) -> None:
        variables = cur.get("variables")
        docs = cur.get("documents")
        dataset = cur.get("dataset")
        if isinstance(docs, list):
            kind = "inline"
        elif isinstance(dataset, str):
            kind = "external"
        else:
            kind = "empty"
        feats = cur.get("features")
        base = Case(
            name=str(cur.get("name") or ""),
            filename=filename,
            query=query,
            result=cur.get("result"),
            valid=cur.get("valid", True) is not False,
            params=cur.get("params") if isinstance(cur.get("params"), dict) else None,
            dataset_kind=kind,
            documents=docs if isinstance(docs, list) else [],
            version=str(cur["version"]) if cur.get("version") is not None else None,
            features=tuple(str(f) for f in feats) if isinstance(feats, list) else (),
        )
        if not isinstance(variables, dict):
            if not _PLACEHOLDER.search(query):
                self.cases.append(base)
            return
        standalone = cur.get("standaloneVariables")
        for occs in expand_placeholders(query, variables):
            texts = [o.text for o in occs]
            self.cases.append(_replace(base, query=_fill(query, texts)))
            if kind != "empty":
                continue
            self._variants(base, cur, query, occs, standalone)

    def _variants(
        self, base: Case, cur: dict[str, Any], query: str, occs: list[_Occ], standalone: Any
    ) -> None:
        texts = [o.text for o in occs]
        json_occ: list[tuple[int, str, str]] = []  # (index, id, field)
        for i, occ in enumerate(occs):
            if isinstance(standalone, list) and occ.name not in standalone:
                continue
            ok, value = _strict_json(occ.text)
            if ok:
                doc_id, fld = self.generated.doc_for(occ.text, value)
                json_occ.append((i, doc_id, fld))
        result = base.result
        for i, doc_id, fld in json_occ:
            inner = _fill(query, [fld if j == i else t for j, t in enumerate(texts)])
            sel = f'*[_id == "{doc_id}"]'
            if cur.get("genFilter", True) is not False:
                self.cases.append(_replace(
                    base, name=base.name + " (filter)", query=f"{sel}[{inner}][]._id",
                    result=[doc_id] if result is True else [], dataset_kind="generated"))
                self.cases.append(_replace(
                    base, name=base.name + " (filter, negated)",
                    query=f"{sel}[!({inner})][]._id",
                    result=[doc_id] if result is False else [], dataset_kind="generated"))
            if cur.get("genFetch", True) is not False:
                fetched = _fill(
                    query, [f"{sel}[0].{fld}" if j == i else t for j, t in enumerate(texts)])
                self.cases.append(_replace(
                    base, name=base.name + " (fetch)", query=fetched, dataset_kind="generated"))
        if cur.get("genJoin", True) is False or not (result is None or isinstance(result, bool)):
            return
        for a, (i, id1, f1) in enumerate(json_occ):
            for j, id2, f2 in json_occ[a + 1:]:
                filled = [
                    f"^.{f1}" if k == i else f2 if k == j else t for k, t in enumerate(texts)]
                inner = _fill(query, filled)
                q = (f'*[_id == "{id1}"]{{"children": *[_id == "{id2}"][{inner}][]._id}}')
                self.cases.append(_replace(
                    base, name=base.name + " (join)", query=q,
                    result=[{"children": [id2] if result is True else []}],
                    dataset_kind="generated"))


def _replace(case: Case, **kw: Any) -> Case:
    data = dict(case.__dict__)
    data.update(kw)
    return Case(**data)


# --------------------------------------------------------------------------- gating


def version_applies(version: str | None) -> bool:
    """Whether GROQ 1.2 satisfies the case's version range (``0.1`` legacy cases do not)."""
    if version is None:
        return True
    m = re.fullmatch(r"\s*(>=|>|<=|<|=)?\s*(\d+)(?:\.(\d+))?\s*", version)
    if not m:
        return False
    op = m.group(1) or "="
    want = (int(m.group(2)), int(m.group(3) or 0))
    have = GROQ_VERSION
    return {
        ">=": have >= want, ">": have > want, "<=": have <= want, "<": have < want,
        "=": have == want,
    }[op]


def tier_of(case: Case) -> int | None:
    """The lowest tier the case belongs to, or None when no tier runs it."""
    if case.dataset_kind == "external" or not version_applies(case.version):
        return None
    if case.filename in TIER1_FILES:
        tier = 1
    elif case.filename in TIER2_EXTRA_FILES or case.filename.startswith("legacy/"):
        tier = 2
    elif case.filename in TIER3_EXTRA_FILES:
        tier = 3
    else:
        return None
    while tier <= 3 and not set(case.features) <= TIER_FEATURES[tier]:
        tier += 1
    return tier if tier <= 3 else None


def cases_for_tier(suite: Suite, tier: int) -> list[Case]:
    """Every case a tier runs (cumulative: tier 2 includes tier 1)."""
    out = []
    for case in suite.cases:
        t = tier_of(case)
        if t is not None and t <= tier:
            out.append(case)
    return out
