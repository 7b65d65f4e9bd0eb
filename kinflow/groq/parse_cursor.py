"""The token cursor the parser's rule modules build on: lookahead, errors, parse-wide state.

Also owns what those modules share: the binding powers, the keyword
operators and the comma-separated argument list of calls and pipes. The rule classes
stack on :class:`Cursor` (literals, then postfix, then the expression grammar); a lower
one reaches ``parse_expr`` through the stub declared here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kinflow.groq import nodes as n
from kinflow.groq.errors import GroqSyntaxError
from kinflow.groq.lexer import Token, tokenize

PAIR, OR, AND, CMP, RANGE, ADD, MUL, NEG, POW, PREFIX = range(1, 11)

KEYWORD_OPS = frozenset({"in", "match", "asc", "desc"})

Custom = tuple[str, n.Node, int]  # a declared function: parameter name, body, body position


class Cursor:
    """Position in the token list plus what the parse learns on the way."""

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
        self.customs: dict[tuple[str, str], Custom] = {}

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

    def parse_expr(self, min_bp: int) -> n.Node:
        """One expression binding at least as tightly as ``min_bp`` (see parse_grammar)."""
        raise NotImplementedError

    def parse_args(self) -> list[n.Node]:
        """Comma-separated expressions up to and including the closing ``)``."""
        args: list[n.Node] = []
        while not self.at(")"):
            args.append(self.parse_expr(0))
            if not self.at(","):
                break
            self.next()
        self.expect(")")
        return args
