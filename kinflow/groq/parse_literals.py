"""Parser rules for array and object literals, and object-key inference.

Objects are also projections' bodies, so :mod:`kinflow.groq.parse_postfix` builds on
these rules. Arrays of plain numbers and strings take a fast path: JSON and GeoJSON
pasted into a query are mostly that.
"""

from __future__ import annotations

from typing import Any

from kinflow.groq import nodes as n
from kinflow.groq.parse_cursor import OR, Cursor
from kinflow.groq.values import num


class LiteralRules(Cursor):
    def parse_array(self) -> n.Node:
        elems: list[n.ArrayElement] = []
        toks = self.toks
        while not self.at("]"):
            t, nxt = toks[self.i], toks[self.i + 1]
            if (t[0] == "num" or t[0] == "str") and nxt[0] == "op" and nxt[1] in (",", "]"):
                # fast path for literal-heavy arrays (JSON, GeoJSON)
                self.i += 1
                lit: Any = t[1]
                elems.append(n.ArrayElement(n.Value(num(lit) if t[0] == "num" else lit), False))
                if nxt[1] == ",":
                    self.i += 1
                continue
            splat = False
            if self.at("..."):
                self.next()
                splat = True
            elems.append(n.ArrayElement(self.parse_expr(0), splat))
            if not self.at(","):
                break
            self.next()
        self.expect("]")
        return n.ArrayNode(tuple(elems))

    def parse_object(self) -> n.ObjectNode:
        entries: list[n.ObjAttr | n.ObjSplat | n.ObjCond] = []
        while not self.at("}"):
            tok = self.peek()
            if self.at("..."):
                self.next()
                if self.at(",") or self.at("}"):
                    entries.append(n.ObjSplat(n.This()))
                else:
                    entries.append(n.ObjSplat(self.parse_expr(OR)))
            else:
                e = self.parse_expr(0)
                if isinstance(e, n.Pair):
                    entries.append(n.ObjCond(e.left, e.right))
                elif self.at(":"):
                    if not (tok.kind == "str" and isinstance(e, n.Value)
                            and isinstance(e.value, str)):
                        raise self.error("an object key must be a string", tok)
                    self.next()
                    entries.append(n.ObjAttr(e.value, self.parse_expr(0)))
                else:
                    key = infer_key(e)
                    if key is None:
                        raise self.error("cannot determine the key of this object entry", tok)
                    entries.append(n.ObjAttr(key, e))
            if not self.at(","):
                break
            self.next()
        self.expect("}")
        return n.ObjectNode(tuple(entries))


def infer_key(node: n.Node) -> str | None:
    """Key of an object entry written without ``"key":``: the plain attribute it reads
    (through derefs, filters, projections and pipes), or None when there is none."""
    while True:
        if isinstance(node, n.Attr):
            return node.name if node.base is None else None
        if isinstance(node, (n.PipeCall, n.Deref, n.Projection, n.MapNode, n.FlatMap,
                             n.Filter, n.Slice, n.Element, n.ArrayCoerce, n.Group)):
            node = node.base
            continue
        return None
