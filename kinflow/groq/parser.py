"""Pratt parser from tokens to the syntax tree, plus the validation GROQ requires.

Owns precedence and associativity (groq.md §3), the static composition of traversal
chains into ``MapNode``/``FlatMap`` (§5.3), square-bracket disambiguation by constant
folding (§5.4), object-key inference (§5.5), the context-only constructs (ranges, pairs,
``asc``/``desc``, ``boost``) and custom-function expansion. Function arity comes from
the registry in :mod:`kinflow.groq.functions`; evaluation lives elsewhere.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from kinflow.groq import nodes as n
from kinflow.groq.errors import GroqSyntaxError
from kinflow.groq.functions import FUNCTIONS, NAMESPACES, PIPE_FUNCTIONS
from kinflow.groq.lexer import Token, tokenize
from kinflow.groq.values import is_number, num

PAIR, OR, AND, CMP, RANGE, ADD, MUL, NEG, POW, PREFIX = range(1, 11)

_CMP_OPS = frozenset({"==", "!=", "<", "<=", ">", ">="})
_KEYWORD_OPS = frozenset({"in", "match", "asc", "desc"})
_NONASSOC = frozenset({PAIR, CMP, RANGE})

_INFIX: dict[object, tuple[int, str]] = {
    op: (lvl, op) for op, lvl in {
        "=>": PAIR, "||": OR, "&&": AND, "..": RANGE, "...": RANGE, "+": ADD, "-": ADD,
        "*": MUL, "/": MUL, "%": MUL, "**": POW, "==": CMP, "!=": CMP, "<": CMP, "<=": CMP,
        ">": CMP, ">=": CMP,
    }.items()
}
_POSTFIX_START = frozenset({".", "[", "{", "->", "|"})

_UNKNOWN = object()  # constant folding met a parameter whose value is not known yet
_NOT_CONST = object()


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


Step = tuple[Any, ...]
Tail = tuple[Callable[[n.Node], n.Node], str, str]


class _Parser:
    def __init__(self, query: str, params: Mapping[str, Any] | None) -> None:
        self.query = query
        self.toks: list[Token] = tokenize(query)
        self.toks.extend([self.toks[-1]] * 6)  # eof padding: peek(k) needs no bounds check
        self.last = len(self.toks) - 7
        self.i = 0
        self.params = params
        self.params_read: set[str] = set()
        self.needs_params = False
        self.boost_depth = 0
        self.fn_param: str | None = None
        self.customs: dict[tuple[str, str], tuple[str, n.Node, int]] = {}

    # ------------------------------------------------------------------ helpers

    def peek(self, k: int = 0) -> Token:
        return self.toks[self.i + k]

    def next(self) -> Token:
        t = self.toks[self.i]
        if self.i < self.last:
            self.i += 1
        return t

    def at(self, op: str, k: int = 0) -> bool:
        t = self.toks[self.i + k]
        return t[1] == op and t[0] == "op"

    def expect(self, op: str) -> Token:
        t = self.peek()
        if t.kind != "op" or t.value != op:
            raise self.error(f"expected {op!r}", t)
        return self.next()

    def error(self, msg: str, tok: Token | int) -> GroqSyntaxError:
        pos = tok if isinstance(tok, int) else tok.pos
        if not isinstance(tok, int) and tok.kind == "eof":
            msg = f"{msg}, found end of query"
        return GroqSyntaxError(msg, self.query, pos)

    # ------------------------------------------------------------------ top level

    def parse(self) -> n.Node:
        while self.peek().kind == "ident" and self.peek().value == "fn" and \
                self.peek(1).kind == "ident" and self.at("::", 2):
            self.parse_declaration()
        root = self.parse_expr(0)
        if self.peek().kind != "eof":
            raise self.error("unexpected token", self.peek())
        if self.customs or _has_custom_calls(root):
            root = self.expand_customs(root, ())
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
        self._check_custom_body(str(ptok.value), body, body_pos)
        self.customs[key] = (str(ptok.value), body, body_pos)

    def _check_custom_body(self, param: str, body: n.Node, pos: int) -> None:
        uses = [x for x in n.walk(body) if isinstance(x, n.Param) and x.name == param]
        if len(uses) != 1:
            raise self.error("a custom function must use its parameter exactly once", pos)
        ok = False
        if isinstance(body, n.Projection):
            b = body.base
            ok = b == n.Param(param, b.pos) if isinstance(b, n.Param) else (
                isinstance(b, n.Deref) and isinstance(b.base, n.Param))
        elif isinstance(body, n.MapNode) and isinstance(body.base, n.ArrayCoerce) and \
                isinstance(body.base.base, n.Param) and isinstance(body.expr, n.Projection):
            inner = body.expr.base
            ok = isinstance(inner, n.This) or (isinstance(inner, n.Deref)
                                               and isinstance(inner.base, n.This))
        if not ok:
            raise self.error("a custom function body must be a projection of its parameter", pos)
        if _parent_escapes(body, 0):
            raise self.error("'^' may not reach outside a custom function", pos)

    def expand_customs(self, node: n.Node, active: tuple[tuple[str, str], ...]) -> n.Node:
        def fn(x: n.Node) -> n.Node | None:
            if not isinstance(x, n.FuncCall):
                return None
            key = (x.namespace, x.name)
            if key in FUNCTIONS and key not in self.customs:
                return None
            decl = self.customs.get(key)
            if decl is None:
                raise self.error(f"unknown function {x.namespace}::{x.name}", x.pos)
            if len(x.args) != 1:
                raise self.error(f"{x.namespace}::{x.name} takes exactly one argument", x.pos)
            if key in active:
                raise self.error("custom functions may not recurse", x.pos)
            param, body, _ = decl
            arg = self.expand_customs(x.args[0], active)
            expanded = _rewrite(body, lambda y: arg if isinstance(y, n.Param)
                                and y.name == param else None)
            return self.expand_customs(expanded, (*active, key))

        return _rewrite(node, fn)

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

    # ------------------------------------------------------------------ expressions

    def infix(self, tok: Token) -> tuple[int, str] | None:
        kind = tok[0]
        if kind == "op":
            return _INFIX.get(tok[1])
        if kind == "ident" and tok[1] in _KEYWORD_OPS:
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

    def parse_args(self, name: str) -> list[n.Node]:
        args: list[n.Node] = []
        while not self.at(")"):
            args.append(self.parse_expr(0))
            if not self.at(","):
                break
            self.next()
        self.expect(")")
        return args

    def parse_call(self, ns: str, name: str, pos: int) -> n.Node:
        is_boost = ns == "global" and name == "boost"
        if is_boost and self.boost_depth == 0:
            raise self.error("boost() is only allowed inside score()", pos)
        args = self.parse_args(name)
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
                    key = _infer_key(e)
                    if key is None:
                        raise self.error("cannot determine the key of this object entry", tok)
                    entries.append(n.ObjAttr(key, e))
            if not self.at(","):
                break
            self.next()
        self.expect("}")
        return n.ObjectNode(tuple(entries))

    # ------------------------------------------------------------------ traversals

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
                if nxt.kind == "ident" and nxt.value not in _KEYWORD_OPS and not self.at("(", 1) \
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
                built = _build_chain(base, steps, implicit)
                base = self.parse_pipe(built, str(name_tok.value), name_tok)
                steps = []
                implicit = True
            else:
                break
        return _build_chain(base, steps, implicit)

    def parse_pipe(self, base: n.Node, name: str, tok: Token) -> n.Node:
        if name not in PIPE_FUNCTIONS:
            raise self.error(f"unknown pipe function {name}()", tok)
        if name == "score":
            if isinstance(base, (n.MapNode, n.FlatMap, n.Element, n.Projection, n.Attr,
                                 n.Value, n.ObjectNode)):
                raise self.error("score() needs an array of documents on its left", tok)
            self.boost_depth += 1
            try:
                args = self.parse_args(name)
            finally:
                self.boost_depth -= 1
        else:
            args = self.parse_args(name)
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
            from kinflow.groq.operators import BINARY

            return BINARY[node.op](a, b)
        return _NOT_CONST


def _is_int(v: Any) -> bool:
    if isinstance(v, bool):
        return False
    if isinstance(v, int):
        return True
    return isinstance(v, float) and v.is_integer()


def _fold_arith(op: str, left: n.Node, right: n.Node) -> n.Node | None:
    if isinstance(left, n.Value) and isinstance(right, n.Value) and \
            is_number(left.value) and is_number(right.value):
        from kinflow.groq.operators import BINARY

        return n.Value(BINARY[op](left.value, right.value))
    return None


_ARRAY_STEPS = frozenset({"filter", "slice", "arr"})
_SHAPES = {"attr": ("B", "B"), "deref": ("B", "B"), "elem": ("A", "B"), "filter": ("A", "A"),
           "slice": ("A", "A"), "arr": ("A", "A"), "proj": ("B", "B")}


def _make_step(step: Step, b: n.Node) -> n.Node:
    k = step[0]
    if k == "attr":
        return n.Attr(b, step[1])
    if k == "elem":
        return n.Element(b, step[1])
    if k == "slice":
        return n.Slice(b, step[1], step[2], step[3])
    if k == "filter":
        return n.Filter(b, step[1])
    if k == "arr":
        if isinstance(b, (n.Everything, n.ArrayNode, n.ArrayCoerce)):
            return b
        return n.ArrayCoerce(b)
    if k == "proj":
        return n.Projection(b, step[1])
    d = n.Deref(b)
    return n.Attr(d, step[1]) if step[1] else d


def _prepend(step: Step, tail: Tail | None) -> Tail:
    kind = step[0]

    def mk(b: n.Node) -> n.Node:
        return _make_step(step, b)

    if tail is None:
        s_in, s_out = _SHAPES[kind]
        return mk, s_in, s_out
    t_fn, t_in, t_out = tail
    if kind in _ARRAY_STEPS:
        if t_in == "A":
            return (lambda b: t_fn(mk(b))), "A", t_out
        if t_out == "B":
            return (lambda b: n.MapNode(mk(b), t_fn(n.This()))), "A", "A"
        return (lambda b: n.FlatMap(mk(b), t_fn(n.This()))), "A", "A"
    if kind == "elem":
        return (lambda b: t_fn(mk(b))), "A", t_out
    if kind == "proj" and t_in == "A":
        obj = step[1]
        return (lambda b: t_fn(n.MapNode(b, n.Projection(n.This(), obj)))), "A", t_out
    return (lambda b: t_fn(mk(b))), "B", t_out


def _build_chain(base: n.Node, steps: list[Step], implicit: bool) -> n.Node:
    if implicit:
        steps = [("arr",), *steps]
    tail: Tail | None = None
    for step in reversed(steps):
        tail = _prepend(step, tail)
    return tail[0](base) if tail is not None else base


def _infer_key(node: n.Node) -> str | None:
    while True:
        if isinstance(node, n.Attr):
            return node.name if node.base is None else None
        if isinstance(node, (n.PipeCall, n.Deref, n.Projection, n.MapNode, n.FlatMap,
                             n.Filter, n.Slice, n.Element, n.ArrayCoerce, n.Group)):
            node = node.base
            continue
        return None


def _has_custom_calls(root: n.Node) -> bool:
    return any(isinstance(x, n.FuncCall) and (x.namespace, x.name) not in FUNCTIONS
               for x in n.walk(root))



def _parent_escapes(node: n.Node, depth: int) -> bool:
    """True when some ``^`` climbs above the scopes the custom-function body opens itself."""
    if isinstance(node, n.Parent):
        return node.n > depth - 1
    if isinstance(node, n.Filter):
        return _parent_escapes(node.base, depth) or _parent_escapes(node.cond, depth + 1)
    if isinstance(node, n.Projection):
        return _parent_escapes(node.base, depth) or _parent_escapes(node.obj, depth + 1)
    if isinstance(node, n.PipeCall):
        return _parent_escapes(node.base, depth) or any(
            _parent_escapes(a, depth + 1) for a in node.args)
    return any(_parent_escapes(c, depth) for c in n.children(node))


def _rewrite(node: n.Node, fn: Callable[[n.Node], n.Node | None]) -> n.Node:
    """Bottom-up-safe tree rewrite: ``fn`` replaces a node, or returns None to recurse."""
    got = fn(node)
    if got is not None:
        return got
    if isinstance(node, n.ObjectNode):
        entries: list[n.ObjAttr | n.ObjSplat | n.ObjCond] = []
        for e in node.entries:
            if isinstance(e, n.ObjAttr):
                entries.append(n.ObjAttr(e.key, _rewrite(e.value, fn)))
            elif isinstance(e, n.ObjSplat):
                entries.append(n.ObjSplat(_rewrite(e.value, fn)))
            else:
                entries.append(n.ObjCond(_rewrite(e.cond, fn), _rewrite(e.value, fn)))
        return n.ObjectNode(tuple(entries))
    if isinstance(node, n.ArrayNode):
        return n.ArrayNode(tuple(n.ArrayElement(_rewrite(e.value, fn), e.splat)
                                 for e in node.elements))
    if isinstance(node, n.Select):
        return n.Select(
            tuple((_rewrite(c, fn), _rewrite(v, fn)) for c, v in node.alternatives),
            _rewrite(node.fallback, fn) if node.fallback is not None else None)
    if isinstance(node, (n.FuncCall, n.PipeCall)):
        args = tuple(_rewrite(a, fn) for a in node.args)
        if isinstance(node, n.PipeCall):
            return n.PipeCall(_rewrite(node.base, fn), node.name, args)
        return dataclasses.replace(node, args=args)
    changes: dict[str, Any] = {}
    for f in dataclasses.fields(node):  # type: ignore[arg-type]
        v = getattr(node, f.name)
        if isinstance(v, n.Node):
            nv = _rewrite(v, fn)
            if nv is not v:
                changes[f.name] = nv
    return dataclasses.replace(node, **changes) if changes else node  # type: ignore[type-var]
