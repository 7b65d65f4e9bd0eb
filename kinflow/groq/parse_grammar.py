"""The expression grammar: a Pratt loop over binary operators, prefixes, operands and calls.

Owns precedence and associativity (the levels are in
:mod:`kinflow.groq.parse_cursor`), the non-associative operators that need parentheses
to chain, folding of arithmetic on two number literals, ``in`` over a range, the
operand forms (``*``, ``@``, ``^``, parameters, groups) and function-call arity checks
against the registry in :mod:`kinflow.groq.functions`. Each operand hands over to the
postfix rules it inherits.
"""

from __future__ import annotations

from kinflow.groq import nodes as n
from kinflow.groq.functions import FUNCTIONS, NAMESPACES
from kinflow.groq.lexer import Token
from kinflow.groq.operators import BINARY
from kinflow.groq.parse_cursor import (
    ADD,
    AND,
    CMP,
    KEYWORD_OPS,
    MUL,
    OR,
    PAIR,
    POW,
    PREFIX,
    RANGE,
)
from kinflow.groq.parse_postfix import PostfixRules
from kinflow.groq.values import is_number, num

_NONASSOC = frozenset({PAIR, CMP, RANGE})

_INFIX: dict[object, tuple[int, str]] = {
    op: (lvl, op) for op, lvl in {
        "=>": PAIR, "||": OR, "&&": AND, "..": RANGE, "...": RANGE, "+": ADD, "-": ADD,
        "*": MUL, "/": MUL, "%": MUL, "**": POW, "==": CMP, "!=": CMP, "<": CMP, "<=": CMP,
        ">": CMP, ">=": CMP,
    }.items()
}


class ExpressionRules(PostfixRules):
    def infix(self, tok: Token) -> tuple[int, str] | None:
        kind = tok[0]
        if kind == "op":
            return _INFIX.get(tok[1])
        if kind == "ident" and tok[1] in KEYWORD_OPS:
            return CMP, str(tok[1])
        return None

    def parse_expr(self, min_bp: int) -> n.Node:
        left = self.parse_prefix()
        prev_level = 0
        while True:
            tok = self.peek()
            info = self.infix(tok)
            if info is None:
                break
            level, op = info
            if level < min_bp:
                break
            if level == prev_level and level in _NONASSOC:
                raise self.error(f"{op!r} cannot be chained without parentheses", tok)
            self.next()
            prev_level = level
            if op in ("asc", "desc"):
                left = n.Asc(left, tok.pos) if op == "asc" else n.Desc(left, tok.pos)
                continue
            if level == POW:
                right = self.parse_expr(POW)
            else:
                right = self.parse_expr(level + 1)
            left = self.make_binary(op, left, right, tok)
        return left

    def make_binary(self, op: str, left: n.Node, right: n.Node, tok: Token) -> n.Node:
        if op == "=>":
            return n.Pair(left, right, tok.pos)
        if op == "||":
            return n.Or(left, right)
        if op == "&&":
            return n.And(left, right)
        if op in ("..", "..."):
            return n.Range(left, right, op == "..", tok.pos)
        if op == "in":
            inner = right
            while isinstance(inner, n.Group):
                inner = inner.base
            if isinstance(inner, n.Range):
                return n.InRange(left, inner.left, inner.right, inner.inclusive)
        if op in ("+", "-", "*", "/", "%", "**"):
            folded = _fold_arith(op, left, right)
            if folded is not None:
                return folded
        return n.OpCall(op, left, right)

    def parse_prefix(self) -> n.Node:
        tok = self.peek()
        if tok.kind == "op":
            if tok.value == "-":
                self.next()
                inner = self.parse_expr(POW)
                if isinstance(inner, n.Value) and is_number(inner.value):
                    return n.Value(num(-inner.value))
                return n.Neg(inner)
            if tok.value == "+":
                self.next()
                inner = self.parse_expr(PREFIX)
                if isinstance(inner, n.Value) and is_number(inner.value):
                    return inner
                return n.Pos(inner)
            if tok.value == "!":
                self.next()
                return n.Not(self.parse_expr(PREFIX))
        return self.parse_operand()

    def parse_operand(self) -> n.Node:
        tok = self.next()
        implicit = False
        base: n.Node
        if tok.kind == "num":
            base = n.Value(num(tok.value))  # type: ignore[arg-type]
        elif tok.kind == "str":
            base = n.Value(tok.value)
        elif tok.kind == "param":
            base = self.param(tok)
        elif tok.kind == "ident":
            base = self.parse_ident(tok)
        elif tok.kind == "op":
            v = tok.value
            if v == "*":
                base = n.Everything()
                implicit = True
            elif v == "@":
                base = n.This()
            elif v == "^":
                level = 1
                while self.at(".") and self.at("^", 1):
                    self.next()
                    self.next()
                    level += 1
                base = n.Parent(level)
            elif v == "(":
                inner = self.parse_expr(0)
                if self.at(","):
                    raise self.error("tuples are only allowed in diff selectors", self.peek())
                self.expect(")")
                base = n.Group(inner)
            elif v == "[":
                base = self.parse_array()
                implicit = True
            elif v == "{":
                base = self.parse_object()
            else:
                raise self.error("expected an expression", tok)
        else:
            raise self.error("expected an expression", tok)
        return self.parse_postfix(base, implicit)

    def param(self, tok: Token) -> n.Node:
        name = str(tok.value)
        if self.fn_param is not None and name == self.fn_param:
            return n.Param(name, tok.pos)
        self.params_read.add(name)
        if self.params is not None and name not in self.params:
            raise self.error(f"undefined parameter ${name}", tok)
        return n.Param(name, tok.pos)

    def parse_ident(self, tok: Token) -> n.Node:
        name = str(tok.value)
        if self.at("::") and self.peek(1).kind == "ident" and self.at("(", 2):
            self.next()
            fname = str(self.next().value)
            self.next()
            return self.parse_call(name, fname, tok.pos)
        if self.at("("):
            self.next()
            return self.parse_call("global", name, tok.pos)
        if name == "true":
            return n.Value(True)
        if name == "false":
            return n.Value(False)
        if name == "null":
            return n.Value(None)
        return n.Attr(None, name)

    def parse_call(self, ns: str, name: str, pos: int) -> n.Node:
        is_boost = ns == "global" and name == "boost"
        if is_boost and self.boost_depth == 0:
            raise self.error("boost() is only allowed inside score()", pos)
        args = self.parse_args()
        if ns == "global" and name == "select":
            alts: list[tuple[n.Node, n.Node]] = []
            fallback: n.Node | None = None
            for k, a in enumerate(args):
                if isinstance(a, n.Pair):
                    alts.append((a.left, a.right))
                elif k != len(args) - 1:
                    raise self.error("only the last argument of select() may be a non-pair",
                                     pos)
                else:
                    fallback = a
            return n.Select(tuple(alts), fallback)
        spec = FUNCTIONS.get((ns, name))
        if (ns, name) in self.customs:
            return n.FuncCall(ns, name, tuple(args), pos)  # declared functions win
        if spec is None:
            if ns == "global" or (ns in NAMESPACES and not self.customs_possible(ns)):
                raise self.error(f"unknown function {ns}::{name}", pos)
            return n.FuncCall(ns, name, tuple(args), pos)
        if not spec.min_args <= len(args) <= (spec.max_args if spec.max_args >= 0
                                              else len(args)):
            raise self.error(f"wrong number of arguments to {ns}::{name}()", pos)
        return n.FuncCall(ns, name, tuple(args), pos)

    def customs_possible(self, ns: str) -> bool:
        return any(k[0] == ns for k in self.customs)


def _fold_arith(op: str, left: n.Node, right: n.Node) -> n.Node | None:
    if isinstance(left, n.Value) and isinstance(right, n.Value) and \
            is_number(left.value) and is_number(right.value):
        return n.Value(BINARY[op](left.value, right.value))
    return None
