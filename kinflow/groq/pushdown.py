"""Pure translation of ``*[...]`` filters into MongoDB query documents.

Owns the superset prefilter: every document GROQ would keep must match the Mongo
filter; extra matches are fine because the real evaluator re-checks them in memory.
A translation is marked *exact* only when Mongo's answer equals GROQ's (``_id`` and
``_type`` comparisons), and only then may ``count`` and a leading slice or element
access go to the store. No I/O here; :mod:`kinflow.groq.store` does the fetching.
Avoided on purpose: ``$where``, ``$expr``, ``$text`` (not served by the embedded lake).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kinflow.groq import nodes as n
from kinflow.groq.api import Tree
from kinflow.groq.matching import collect_terms

MATCH_NOTHING: dict[str, Any] = {"_id": {"$in": []}}
#: Top-level fields every stored document has as a string, so equality on them is exact.
STRING_FIELDS = frozenset({"_id", "_type"})

_NO = object()  # not a constant


@dataclass(frozen=True)
class StorePlan:
    """How to read the store for one query.

    ``filter`` returns a superset of every document any ``*`` in the query can keep;
    ``exact`` says it is the exact set. ``skip``/``limit``/``count_only`` are set only
    for exact plans. Evaluate ``residual`` (the query minus what was pushed) over the
    fetched documents, sorted by ``sort``.
    """

    filter: dict[str, Any]
    exact: bool
    residual: n.Node
    sort: list[tuple[str, int]] = field(default_factory=lambda: [("_id", 1)])
    skip: int = 0
    limit: int | None = None
    count_only: bool = False


@dataclass(frozen=True)
class Translation:
    """A Mongo filter for one GROQ condition; ``exact`` when it is not merely a superset."""

    filter: dict[str, Any]
    exact: bool


def plan_store_query(tree: Tree | n.Node, params: Mapping[str, Any] | None = None
                     ) -> StorePlan | None:
    """Plan the store read for a query, or None when the query never reads ``*``."""
    root = tree.root if isinstance(tree, Tree) else tree
    params = params or {}
    sites: list[Translation | None] = []
    _collect_sites(root, params, sites)
    if not sites:
        return None
    if any(t is None for t in sites):
        return StorePlan({}, False, root)
    trans = [t for t in sites if t is not None]
    if len(trans) == 1:
        flt, exact = trans[0].filter, trans[0].exact
    else:
        flt, exact = _or_filters([t.filter for t in trans]), False
    plan = StorePlan(flt, exact, root)
    if exact and len(trans) == 1:
        plan = _push_paging(plan, root)
    return plan


def _push_paging(plan: StorePlan, root: n.Node) -> StorePlan:
    """``count(*[F])``, ``*[F][i]`` and ``*[F][a..b]`` (plus mapping on top) go to Mongo."""
    if isinstance(root, n.FuncCall) and root.namespace == "global" and root.name == "count" \
            and _is_star_filter(root.args[0]):
        return StorePlan(plan.filter, True, root, count_only=True)
    spine: list[n.Node] = []
    cur = root
    while isinstance(cur, (n.MapNode, n.FlatMap, n.Projection, n.Attr, n.Deref)) and \
            getattr(cur, "base", None) is not None:
        spine.append(cur)
        cur = cur.base  # type: ignore[assignment]
    replacement: n.Node | None = None
    skip, limit = 0, None
    if isinstance(cur, n.Element) and _is_star_filter(cur.base) and cur.index >= 0:
        skip, limit = cur.index, 1
        replacement = n.Element(cur.base, 0)
    elif isinstance(cur, n.Slice) and _is_star_filter(cur.base) and cur.start >= 0 \
            and cur.end >= 0:
        end = cur.end + 1 if cur.inclusive else cur.end
        skip, limit = cur.start, max(end - cur.start, 0)
        replacement = cur.base
    if replacement is None:
        return plan
    rebuilt = replacement
    for node in reversed(spine):
        rebuilt = _replace_base(node, rebuilt)
    return StorePlan(plan.filter, True, rebuilt, skip=skip, limit=limit)


def _replace_base(node: n.Node, base: n.Node) -> n.Node:
    import dataclasses

    return dataclasses.replace(node, base=base)  # type: ignore[type-var]


def _is_star_filter(node: n.Node) -> bool:
    while isinstance(node, n.Filter):
        node = node.base
    return isinstance(node, n.Everything)


def _collect_sites(node: n.Node, params: Mapping[str, Any],
                   out: list[Translation | None]) -> None:
    """One translation per ``*`` in the tree; a bare ``*`` (no filter) gives None."""
    if isinstance(node, n.Everything):
        out.append(None)
        return
    if isinstance(node, n.Filter):
        conds: list[n.Node] = []
        cur: n.Node = node
        while isinstance(cur, n.Filter):
            conds.append(cur.cond)
            cur = cur.base
        if isinstance(cur, n.Everything):
            parts = [translate(c, params) for c in conds]
            out.append(_and_all(parts))
        else:
            _collect_sites(cur, params, out)
        for c in conds:
            _collect_sites(c, params, out)
        return
    for c in n.children(node):
        _collect_sites(c, params, out)


# --------------------------------------------------------------------------- translation


def translate(cond: n.Node, params: Mapping[str, Any] | None = None) -> Translation | None:
    """Superset Mongo filter for a filter condition, or None when nothing can be pushed."""
    return _Translator(params or {}).cond(cond)


def _and_all(parts: list[Translation | None]) -> Translation:
    usable = [p for p in parts if p is not None]
    exact = len(usable) == len(parts) and all(p.exact for p in usable)
    filters = [p.filter for p in usable if p.filter]
    if not filters:
        return Translation({}, exact)
    if len(filters) == 1:
        return Translation(filters[0], exact)
    return Translation(_merge_conjunction(filters), exact)


def _merge_conjunction(filters: list[dict[str, Any]]) -> dict[str, Any]:
    """``{a: 1, b: 2}`` rather than ``{$and: [{a: 1}, {b: 2}]}`` where no key repeats.

    Both mean the same to MongoDB, but the flat form lets simpler query
    planners (the embedded server's among them) pick a compound index.
    """
    merged: dict[str, Any] = {}
    rest: list[dict[str, Any]] = []
    for part in filters:  # a filter document is itself a conjunction of its keys
        for key, value in part.items():
            if key == "$and" and isinstance(value, list):
                rest.extend(value)
            elif key in merged:
                rest.append({key: value})
            else:
                merged[key] = value
    if rest:
        merged["$and"] = rest
    return merged


def _or_filters(filters: list[dict[str, Any]]) -> dict[str, Any]:
    if any(not f for f in filters):
        return {}
    return {"$or": filters}


class _Translator:
    def __init__(self, params: Mapping[str, Any]) -> None:
        self.params = params

    def const(self, node: n.Node) -> Any:
        if isinstance(node, n.Value):
            return node.value
        if isinstance(node, n.Group):
            return self.const(node.base)
        if isinstance(node, n.Param):
            return self.params[node.name] if node.name in self.params else _NO
        if isinstance(node, n.ArrayNode) and not any(e.splat for e in node.elements):
            vals = [self.const(e.value) for e in node.elements]
            return _NO if any(v is _NO for v in vals) else vals
        return _NO

    def path(self, node: n.Node) -> str | None:
        names: list[str] = []
        cur: n.Node | None = node
        while isinstance(cur, n.Attr):
            names.append(cur.name)
            cur = cur.base
        if not names or not (cur is None or isinstance(cur, n.This)):
            return None
        if any("." in x or x.startswith("$") or not x for x in names):
            return None
        return ".".join(reversed(names))

    def cond(self, node: n.Node) -> Translation | None:
        if isinstance(node, n.Group):
            return self.cond(node.base)
        if isinstance(node, n.Value):
            return Translation({}, True) if node.value is True else Translation(
                MATCH_NOTHING, True)
        if isinstance(node, n.And):
            return _and_all([self.cond(node.left), self.cond(node.right)])
        if isinstance(node, n.Or):
            a, b = self.cond(node.left), self.cond(node.right)
            if a is None or b is None:
                return None
            return Translation(_or_filters([a.filter, b.filter]), a.exact and b.exact)
        if isinstance(node, n.Not):
            return self.negated(node.base)
        if isinstance(node, n.Attr):
            p = self.path(node)
            return Translation({p: True}, False) if p else None
        if isinstance(node, n.OpCall):
            return self.opcall(node)
        if isinstance(node, n.InRange):
            return self.in_range(node)
        if isinstance(node, n.FuncCall):
            return self.func(node)
        return None

    def negated(self, node: n.Node) -> Translation | None:
        while isinstance(node, n.Group):
            node = node.base
        if isinstance(node, n.OpCall) and node.op in ("==", "!="):
            flipped = n.OpCall("!=" if node.op == "==" else "==", node.left, node.right)
            return self.opcall(flipped)  # equality never yields null, so this is sound
        if isinstance(node, n.FuncCall) and node.namespace == "global" and \
                node.name == "defined":
            p = self.path(node.args[0])
            return Translation(self.is_null(p), False) if p else None
        if isinstance(node, n.Not):
            inner = node.base
            while isinstance(inner, n.Group):
                inner = inner.base
            if isinstance(inner, n.OpCall) and inner.op in ("==", "!="):
                return self.opcall(inner)
        return None

    def opcall(self, node: n.OpCall) -> Translation | None:
        op = node.op
        if op in ("==", "!=", "<", "<=", ">", ">="):
            p, c = self.path(node.left), self.const(node.right)
            if p is None or c is _NO:
                p, c = self.path(node.right), self.const(node.left)
                op = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}.get(op, op)
            if p is None or c is _NO:
                return None
            if op == "==":
                return self.equals(p, c)
            if op == "!=":
                return self.not_equals(p, c)
            if not _is_scalar(c) or c is None:
                return Translation(MATCH_NOTHING, p in STRING_FIELDS)  # compare → null
            mongo_op = {"<": "$lt", "<=": "$lte", ">": "$gt", ">=": "$gte"}[op]
            return Translation({p: {mongo_op: c}}, False)
        if op == "in":
            return self.in_list(node)
        if op == "match":
            return self.match(node)
        return None

    def equals(self, p: str, c: Any) -> Translation:
        if c is None:
            return Translation(self.is_null(p), False)
        if not _is_scalar(c):
            return Translation(MATCH_NOTHING, True)  # arrays/objects never equal anything
        exact = p in STRING_FIELDS and isinstance(c, str)
        return Translation({p: c}, exact)

    def not_equals(self, p: str, c: Any) -> Translation:
        if c is None:
            return Translation({"$or": [{p: {"$exists": True, "$ne": None}},
                                        {p: {"$type": "array"}}]}, False)
        if not _is_scalar(c):
            return Translation({}, False)
        if p in STRING_FIELDS:
            return Translation({p: {"$ne": c}}, isinstance(c, str))
        alts: list[dict[str, Any]] = [{p: {"$ne": c}}, {p: {"$type": "array"}}]
        alts += [{pre: {"$type": "array"}} for pre in _prefixes(p)]
        return Translation({"$or": alts}, False)

    def is_null(self, p: str) -> dict[str, Any]:
        pres = _prefixes(p)
        if not pres:
            return {p: None}
        return {"$or": [{p: None}, *[{pre: {"$type": "array"}} for pre in pres]]}

    def in_list(self, node: n.OpCall) -> Translation | None:
        p, c = self.path(node.left), self.const(node.right)
        if p is not None and c is not _NO:
            if not isinstance(c, list):
                return Translation(MATCH_NOTHING, p in STRING_FIELDS)  # `in` non-array: null
            scalars = [x for x in c if _is_scalar(x)]
            if not scalars:
                return Translation(MATCH_NOTHING, True)
            flt: dict[str, Any] = {p: {"$in": scalars}}
            if None in scalars and _prefixes(p):
                flt = {"$or": [flt, *[{pre: {"$type": "array"}} for pre in _prefixes(p)]]}
            exact = p in STRING_FIELDS and all(isinstance(x, str) for x in scalars)
            return Translation(flt, exact)
        c, p = self.const(node.left), self.path(node.right)
        if p is not None and c is not _NO and _is_scalar(c) and c is not None:
            return Translation({p: c}, False)
        return None

    def in_range(self, node: n.InRange) -> Translation | None:
        p = self.path(node.base)
        lo, hi = self.const(node.left), self.const(node.right)
        if p is None or lo is _NO or hi is _NO:
            return None
        ok = (_is_num(lo) and _is_num(hi)) or (isinstance(lo, str) and isinstance(hi, str))
        if not ok:
            return Translation(MATCH_NOTHING, False)
        return Translation({p: {"$gte": lo, "$lte" if node.inclusive else "$lt": hi}}, False)

    def match(self, node: n.OpCall) -> Translation | None:
        p, c = self.path(node.left), self.const(node.right)
        if p is None or c is _NO:
            return None
        terms = collect_terms(c)
        if not terms:
            return None
        regexes = [{p: {"$regex": ".*".join(re.escape(x) for x in t[:1024].split("*")),
                        "$options": "i"}} for t in terms]
        return Translation(regexes[0] if len(regexes) == 1 else {"$and": regexes}, False)

    def func(self, node: n.FuncCall) -> Translation | None:
        if node.namespace == "global" and node.name == "defined":
            p = self.path(node.args[0])
            if p is None:
                return None
            return Translation({"$or": [{p: {"$exists": True, "$ne": None}},
                                        {p: {"$type": "array"}}]}, False)
        if node.namespace == "string" and node.name == "startsWith":
            p, c = self.path(node.args[0]), self.const(node.args[1])
            if p is None or not isinstance(c, str):
                return None
            return Translation({p: {"$regex": "^" + re.escape(c)}}, False)
        return None


def _prefixes(p: str) -> list[str]:
    parts = p.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _is_scalar(v: Any) -> bool:
    return v is None or isinstance(v, (str, bool, int, float))
