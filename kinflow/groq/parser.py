"""Parser entry point: tokens to a validated syntax tree, plus the facts the evaluator needs.

Owns the top level (custom-function declarations before the query, nothing after it)
and the validation GROQ requires once the tree is built: ranges, pairs, ``asc``/``desc``
only where their context allows them. The rules are layered by module: the token
cursor (:mod:`~kinflow.groq.parse_cursor`), literals (``parse_literals``), traversals
and pipes (``parse_postfix``, composed by ``parse_chains``), the expression grammar
(``parse_grammar``) and custom-function expansion (``parse_customs``). Evaluation
lives in :mod:`kinflow.groq.compiler`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kinflow.groq import nodes as n
from kinflow.groq.errors import GroqSyntaxError
from kinflow.groq.parse_customs import check_custom_body, expand_customs, has_custom_calls
from kinflow.groq.parse_grammar import ExpressionRules


class ParseResult:
    """What the parser hands back: the root node and facts the evaluator needs."""

    __slots__ = ("needs_params", "params_read", "root")

    def __init__(self, root: n.Node, params_read: frozenset[str], needs_params: bool) -> None:
        self.root = root
        self.params_read = params_read
        self.needs_params = needs_params


def parse_query(query: str, params: Mapping[str, Any] | None) -> ParseResult:
    """Parses and validates ``query``; raises :class:`GroqSyntaxError` with a position."""
    p = _Parser(query, params)
    try:
        root = p.parse()
    except RecursionError:
        raise GroqSyntaxError("query is nested too deeply", query, p.peek().pos) from None
    return ParseResult(root, frozenset(p.params_read), p.needs_params)


class _Parser(ExpressionRules):
    def parse(self) -> n.Node:
        while self.peek().kind == "ident" and self.peek().value == "fn" and \
                self.peek(1).kind == "ident" and self.at("::", 2):
            self.parse_declaration()
        root = self.parse_expr(0)
        if self.peek().kind != "eof":
            raise self.error("unexpected token", self.peek())
        if self.customs or has_custom_calls(root):
            root = expand_customs(self.query, self.customs, root)
        self.validate(root)
        return root

    def parse_declaration(self) -> None:
        start = self.next()  # fn
        ns = self.next().value
        self.expect("::")
        name_tok = self.next()
        if name_tok.kind != "ident":
            raise self.error("expected a function name", name_tok)
        self.expect("(")
        ptok = self.next()
        if ptok.kind != "param":
            raise self.error("a custom function takes exactly one $parameter", ptok)
        if not self.at(")"):
            raise self.error("a custom function takes exactly one $parameter", self.peek())
        self.next()
        self.expect("=")
        self.fn_param = str(ptok.value)
        body_pos = self.peek().pos
        body = self.parse_expr(0)
        self.fn_param = None
        self.expect(";")
        key = (str(ns), str(name_tok.value))
        if key in self.customs:
            raise self.error("function declared twice", start)
        check_custom_body(self.query, str(ptok.value), body, body_pos)
        self.customs[key] = (str(ptok.value), body, body_pos)

    def validate(self, root: n.Node) -> None:
        """Rejects context-only constructs that ended up outside their context."""
        stack: list[tuple[n.Node, bool]] = [(root, False)]
        while stack:
            node, allowed = stack.pop()
            if not allowed:
                if isinstance(node, n.Range):
                    raise self.error("a range is only allowed after 'in' or in a slice",
                                     node.pos)
                if isinstance(node, n.Pair):
                    raise self.error("'=>' is only allowed in select() or an object", node.pos)
                if isinstance(node, (n.Asc, n.Desc)):
                    raise self.error("asc/desc are only allowed as order() arguments",
                                     node.pos)
            if isinstance(node, n.PipeCall) and node.name == "order":
                stack.append((node.base, False))
                for a in node.args:
                    if isinstance(a, (n.Asc, n.Desc)):
                        stack.append((a.base, False))
                    else:
                        stack.append((a, False))
                continue
            for c in n.children(node):
                stack.append((c, False))
