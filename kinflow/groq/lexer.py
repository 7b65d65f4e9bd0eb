"""Turns query text into tokens with 0-based source positions.

Owns GROQ's lexical rules: whitespace and ``//`` comments, identifiers,
numbers without leading or trailing dots, both string quotes with every escape
form, and the operator set with longest-match. Keywords are left to the parser.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from kinflow.groq.errors import GroqSyntaxError

#: Operators, longest first so that a prefix never wins over a longer match.
OPERATORS = (
    "...", "..", "->", "=>", "==", "!=", "<=", ">=", "**", "&&", "||", "::",
    ".", "|", "!", "<", ">", "=", "+", "-", "*", "/", "%", "(", ")", "[", "]", "{", "}",
    ",", ":", "@", "^", ";",
)

_ESCAPES = {"'": "'", '"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n",
            "r": "\r", "t": "\t"}


class Token(NamedTuple):
    kind: str  # "num", "str", "ident", "param", "op", "eof"
    value: object
    pos: int
    end: int


_TOKEN_RE = re.compile(
    r"(?P<ws>(?:[\t\n\v\f\r \x85\xa0]+|//[^\n]*)+)"
    r"|(?P<num>[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)"
    r"|(?P<ident>[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<param>\$[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<op>" + "|".join(re.escape(op) for op in OPERATORS) + r")"
    r"|(?P<str>\"(?:[^\"\\]|\\[\s\S])*\"|'(?:[^'\\]|\\[\s\S])*')"
    r"|(?P<bad>[\s\S])"
)
_PLAIN_RUN = {'"': re.compile(r'[^"\\]*'), "'": re.compile(r"[^'\\]*")}


def tokenize(query: str) -> list[Token]:
    """All tokens of ``query``, ending with an ``eof`` token."""
    out: list[Token] = []
    append = out.append
    for m in _TOKEN_RE.finditer(query):
        kind = m.lastgroup
        if kind == "ws":
            continue
        i = m.start()
        text = m.group()
        if kind == "ident" or kind == "op":
            append(Token(kind, text, i, m.end()))
        elif kind == "num":
            is_float = "." in text or "e" in text or "E" in text
            # Numbers are doubles; long digit strings go through float() (no bignums).
            value: object = float(text) if is_float or len(text) > 15 else int(text)
            append(Token("num", value, i, m.end()))
        elif kind == "str":
            if "\\" in text:
                value, _ = _scan_string(query, i)
            else:
                value = text[1:-1]
            append(Token("str", value, i, m.end()))
        elif kind == "param":
            append(Token("param", text[1:], i, m.end()))
        elif text in "\"'":
            raise GroqSyntaxError("unterminated string", query, i)
        elif text == "$":
            raise GroqSyntaxError("expected a parameter name after '$'", query, i + 1)
        else:
            raise GroqSyntaxError(f"unexpected character {text!r}", query, i)
    n = len(query)
    append(Token("eof", None, n, n))
    return out


def _scan_string(query: str, i: int) -> tuple[str, int]:
    quote = query[i]
    start = i
    i += 1
    n = len(query)
    parts: list[str] = []
    while True:
        if i >= n:
            raise GroqSyntaxError("unterminated string", query, start)
        c = query[i]
        if c == quote:
            return "".join(parts), i + 1
        if c != "\\":
            j = _PLAIN_RUN[quote].match(query, i).end()  # type: ignore[union-attr]
            parts.append(query[i:j])
            i = j
            continue
        if i + 1 >= n:
            raise GroqSyntaxError("unterminated string", query, start)
        e = query[i + 1]
        if e in _ESCAPES:
            parts.append(_ESCAPES[e])
            i += 2
        elif e == "u":
            cp, i = _scan_unicode(query, i)
            if 0xD800 <= cp <= 0xDBFF and query.startswith("\\u", i):
                low, j = _scan_unicode(query, i)
                if 0xDC00 <= low <= 0xDFFF:
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00)
                    i = j
            if 0xD800 <= cp <= 0xDFFF or cp > 0x10FFFF:
                raise GroqSyntaxError("invalid code point in escape", query, i)
            parts.append(chr(cp))
        else:
            raise GroqSyntaxError(f"invalid escape \\{e}", query, i)


def _scan_unicode(query: str, i: int) -> tuple[int, int]:
    """Reads ``\\uXXXX`` or ``\\u{X…}`` at ``i``; returns the code point and the next index."""
    j = i + 2
    if j < len(query) and query[j] == "{":
        end = query.find("}", j)
        hexpart = query[j + 1:end] if end > 0 else ""
        if end < 0 or not hexpart or len(hexpart) > 8 or not _all_hex(hexpart):
            raise GroqSyntaxError("invalid \\u{...} escape", query, i)
        return int(hexpart, 16), end + 1
    hexpart = query[j:j + 4]
    if len(hexpart) != 4 or not _all_hex(hexpart):
        raise GroqSyntaxError("invalid \\u escape", query, i)
    return int(hexpart, 16), j + 4


def _all_hex(s: str) -> bool:
    return all(c in "0123456789abcdefABCDEF" for c in s)
