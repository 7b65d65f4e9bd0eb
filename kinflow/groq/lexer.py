"""Turns query text into tokens with 0-based source positions.

Owns GROQ's lexical rules (groq.md §2): whitespace and ``//`` comments, identifiers,
numbers without leading or trailing dots, both string quotes with every escape
form, and the operator set with longest-match. Keywords are left to the parser.
"""

from __future__ import annotations

from dataclasses import dataclass

from kinflow.groq.errors import GroqSyntaxError

WHITESPACE = frozenset("\t\n\v\f\r \u0085\u00a0")

#: Operators, longest first so that a prefix never wins over a longer match.
OPERATORS = (
    "...", "..", "->", "=>", "==", "!=", "<=", ">=", "**", "&&", "||", "::",
    ".", "|", "!", "<", ">", "=", "+", "-", "*", "/", "%", "(", ")", "[", "]", "{", "}",
    ",", ":", "@", "^", ";",
)

_ESCAPES = {"'": "'", '"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n",
            "r": "\r", "t": "\t"}


@dataclass(frozen=True, slots=True)
class Token:
    kind: str  # "num", "str", "ident", "param", "op", "eof"
    value: object
    pos: int
    end: int


def _is_ident_start(c: str) -> bool:
    return c == "_" or ("a" <= c <= "z") or ("A" <= c <= "Z")


def _is_ident_char(c: str) -> bool:
    return _is_ident_start(c) or ("0" <= c <= "9")


def tokenize(query: str) -> list[Token]:
    """All tokens of ``query``, ending with an ``eof`` token."""
    out: list[Token] = []
    i = 0
    n = len(query)
    while True:
        while i < n:
            c = query[i]
            if c in WHITESPACE:
                i += 1
            elif c == "/" and query.startswith("//", i):
                nl = query.find("\n", i)
                i = n if nl < 0 else nl + 1
            else:
                break
        if i >= n:
            out.append(Token("eof", None, n, n))
            return out
        c = query[i]
        start = i
        if "0" <= c <= "9":
            i = _scan_digits(query, i)
            is_float = False
            if i < n and query[i] == "." and i + 1 < n and "0" <= query[i + 1] <= "9":
                i = _scan_digits(query, i + 1)
                is_float = True
            if i < n and query[i] in "eE":
                j = i + 1
                if j < n and query[j] in "+-":
                    j += 1
                if j < n and "0" <= query[j] <= "9":
                    i = _scan_digits(query, j)
                    is_float = True
                else:
                    raise GroqSyntaxError("malformed number exponent", query, j)
            text = query[start:i]
            value: object = float(text) if is_float else int(text)
            out.append(Token("num", value, start, i))
        elif c == '"' or c == "'":
            value, i = _scan_string(query, i)
            out.append(Token("str", value, start, i))
        elif _is_ident_start(c):
            i += 1
            while i < n and _is_ident_char(query[i]):
                i += 1
            out.append(Token("ident", query[start:i], start, i))
        elif c == "$":
            i += 1
            while i < n and _is_ident_char(query[i]):
                i += 1
            if i == start + 1 or not _is_ident_start(query[start + 1]):
                raise GroqSyntaxError("expected a parameter name after '$'", query, start + 1)
            out.append(Token("param", query[start + 1:i], start, i))
        else:
            for op in OPERATORS:
                if query.startswith(op, i):
                    i += len(op)
                    out.append(Token("op", op, start, i))
                    break
            else:
                raise GroqSyntaxError(f"unexpected character {c!r}", query, i)


def _scan_digits(query: str, i: int) -> int:
    n = len(query)
    while i < n and "0" <= query[i] <= "9":
        i += 1
    return i


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
            j = i
            while j < n and query[j] != quote and query[j] != "\\":
                j += 1
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
