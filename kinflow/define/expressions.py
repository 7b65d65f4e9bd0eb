"""Static facts about one GROQ expression, as deploy validation needs them.

This module is the only place in ``kinflow.define`` that talks to the GROQ
package: it asks for a syntax verdict, the ``$variables`` an expression reads,
the ``$fields.<name>`` members it reads, and whether it scans the lake (``*``).
Answers are cached per text because one definition repeats expressions (the
default transition ``$allActivitiesDone`` appears in most stages).

String literals are blanked out before the lexical scans, so ``"$fields"``
inside a quoted string is never mistaken for a read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from kinflow import groq

_STRING = re.compile(r"\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*'")
_VARIABLE = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")
_FIELD_DOT = re.compile(r"\$fields\s*\.\s*([A-Za-z_][A-Za-z0-9_]*)")
_FIELD_INDEX = re.compile(r"\$fields\s*\[\s*(\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*')\s*\]")


@dataclass(frozen=True, slots=True)
class SyntaxProblem:
    message: str
    position: int | None


def blank_strings(text: str) -> str:
    """``text`` with every string literal replaced by an empty one of the same length."""
    return _STRING.sub(lambda m: m.group(0)[0] + " " * (len(m.group(0)) - 2) + m.group(0)[0], text)


@lru_cache(maxsize=4096)
def syntax_problem(text: str) -> SyntaxProblem | None:
    """``None`` when ``text`` parses; else the parser's message and position."""
    try:
        groq.parse(text)
    except groq.GroqSyntaxError as exc:
        return SyntaxProblem(str(exc), getattr(exc, "position", None))
    except groq.GroqError as exc:
        return SyntaxProblem(str(exc), None)
    return None


@lru_cache(maxsize=4096)
def read_variables(text: str) -> frozenset[str]:
    """Names of the ``$variables`` the expression reads (without the ``$``)."""
    try:
        return frozenset(groq.free_parameters(text))
    except groq.GroqError:
        return frozenset(_VARIABLE.findall(blank_strings(text)))


@lru_cache(maxsize=4096)
def field_reads(text: str) -> frozenset[str]:
    """Names read statically as ``$fields.<name>`` or ``$fields["<name>"]``."""
    names = set(_FIELD_DOT.findall(blank_strings(text)))
    for quoted in _FIELD_INDEX.findall(text):
        names.add(quoted[1:-1])
    return frozenset(names)


@lru_cache(maxsize=4096)
def scans_lake(text: str) -> bool:
    """Whether the expression reads the whole dataset with ``*``."""
    cleaned = blank_strings(text)
    for match in re.finditer(r"\*", cleaned):
        before = cleaned[: match.start()].rstrip()
        after = cleaned[match.end() :].lstrip()
        operand_before = bool(before) and (before[-1].isalnum() or before[-1] in "_)]}@^\"'")
        if not operand_before and (not after or after[0] in "[|{)."):
            return True
        if not before and not after:
            return True
    return False
