"""Parser rules for what follows an operand: traversals, projections, derefs and pipes.

Owns square-bracket disambiguation by constant folding: ``[1]`` is an
element, ``["a"]`` an attribute, ``[1..2]`` a slice, anything else a filter; a bracket
holding a parameter whose value is not known yet is decided when the values arrive.
The collected steps are composed by :mod:`kinflow.groq.parse_chains`.
"""

from __future__ import annotations

from typing import Any

from kinflow.groq import nodes as n
from kinflow.groq.functions import PIPE_FUNCTIONS
from kinflow.groq.lexer import Token
from kinflow.groq.operators import BINARY
from kinflow.groq.parse_chains import Step, build_chain
from kinflow.groq.parse_cursor import KEYWORD_OPS
from kinflow.groq.parse_literals import LiteralRules
from kinflow.groq.values import is_number, num

_POSTFIX_START = frozenset({".", "[", "{", "->", "|"})

_UNKNOWN = object()  # constant folding met a parameter whose value is not known yet
_NOT_CONST = object()


class PostfixRules(LiteralRules):
    def parse_postfix(self, base: n.Node, implicit: bool) -> n.Node:
        t = self.toks[self.i]
        if not implicit and (t[0] != "op" or t[1] not in _POSTFIX_START):
            return base
        steps: list[Step] = []
        while True:
            tok = self.peek()
            if tok.kind != "op":
                break
            v = tok.value
            if v == ".":
                self.next()
                name = self.next()
                if name.kind != "ident":
                    raise self.error("expected an attribute name after '.'", name)
                steps.append(("attr", str(name.value)))
            elif v == "[":
                self.next()
                steps.append(self.parse_bracket(tok))
            elif v == "{":
                self.next()
                steps.append(("proj", self.parse_object()))
            elif v == "->":
                self.next()
                nxt = self.peek()
                if nxt.kind == "ident" and nxt.value not in KEYWORD_OPS and not self.at("(", 1) \
                        and not self.at("::", 1):
                    self.next()
                    steps.append(("deref", str(nxt.value)))
                else:
                    steps.append(("deref", None))
            elif v == "|" and self.at("{", 1):
                self.next()
                self.next()
                steps.append(("proj", self.parse_object()))
            elif v == "|" and self.peek(1).kind == "ident" and (
                    self.at("(", 2) or (self.peek(1).value == "global" and self.at("::", 2)
                                        and self.peek(3).kind == "ident" and self.at("(", 4))):
                self.next()
                name_tok = self.next()
                if self.at("::"):
                    self.next()
                    name_tok = self.next()
                self.next()
                built = build_chain(base, steps, implicit)
                base = self.parse_pipe(built, str(name_tok.value), name_tok)
                steps = []
                implicit = True
            else:
                break
        return build_chain(base, steps, implicit)

    def parse_pipe(self, base: n.Node, name: str, tok: Token) -> n.Node:
        if name not in PIPE_FUNCTIONS:
            raise self.error(f"unknown pipe function {name}()", tok)
        if name == "score":
            if isinstance(base, (n.MapNode, n.FlatMap, n.Element, n.Projection, n.Attr,
                                 n.Value, n.ObjectNode)):
                raise self.error("score() needs an array of documents on its left", tok)
            self.boost_depth += 1
            try:
                args = self.parse_args()
            finally:
                self.boost_depth -= 1
        else:
            args = self.parse_args()
        if not args:
            raise self.error(f"{name}() needs at least one argument", tok)
        return n.PipeCall(base, name, tuple(args))

    def parse_bracket(self, open_tok: Token) -> Step:
        if self.at("]"):
            self.next()
            return ("arr",)
        expr = self.parse_expr(0)
        self.expect("]")
        if isinstance(expr, n.Range):
            lo = self.fold(expr.left)
            hi = self.fold(expr.right)
            if lo is _UNKNOWN or hi is _UNKNOWN:
                return ("slice", 0, 0, True)
            if not (_is_int(lo) and _is_int(hi)):
                raise self.error("slice bounds must be constant integers", open_tok)
            return ("slice", int(lo), int(hi), expr.inclusive)
        value = self.fold(expr)
        if value is _UNKNOWN:
            return ("filter", expr)
        if value is not _NOT_CONST:
            if is_number(value):
                if not _is_int(value):
                    raise self.error("an array index must be an integer", open_tok)
                return ("elem", int(value))
            if isinstance(value, str):
                return ("attr", value)
        return ("filter", expr)

    def fold(self, node: n.Node) -> Any:
        """Constant value of ``node`` for bracket decisions, or a sentinel."""
        if isinstance(node, n.Value):
            return node.value
        if isinstance(node, n.Group):
            return self.fold(node.base)
        if isinstance(node, n.Param):
            if self.params is None:
                self.needs_params = True
                return _UNKNOWN
            return self.params.get(node.name)
        if isinstance(node, (n.Neg, n.Pos)):
            v = self.fold(node.base)
            if v is _UNKNOWN or v is _NOT_CONST:
                return v
            if not is_number(v):
                return None
            return num(-v) if isinstance(node, n.Neg) else v
        if isinstance(node, n.OpCall) and node.op in ("+", "-", "*", "/", "%", "**"):
            a = self.fold(node.left)
            b = self.fold(node.right)
            if a is _UNKNOWN or b is _UNKNOWN:
                return _UNKNOWN if _NOT_CONST not in (a, b) else _NOT_CONST
            if a is _NOT_CONST or b is _NOT_CONST:
                return _NOT_CONST
            return BINARY[node.op](a, b)
        return _NOT_CONST


def _is_int(v: Any) -> bool:
    if isinstance(v, bool):
        return False
    if isinstance(v, int):
        return True
    return isinstance(v, float) and v.is_integer()
