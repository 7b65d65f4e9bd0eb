"""Tokenising and pattern matching for the ``match`` operator.

Owns the word splitting shared by the evaluator, ``score()`` relevance and the
push-down regex translation, so all three agree on what a term is. Under a budget a
match is charged every term against every token, wildcards by how far a regex may
backtrack, before any regex runs.
"""

from __future__ import annotations

import re
from typing import Any

from kinflow.groq.budget import Budget

_SEPARATORS = "!@#$%^&*(),\\/?\";:{}|[]+<>-"
_TEXT_SPLIT = re.compile("[\\s" + re.escape(_SEPARATORS) + "]+")
_PATTERN_SPLIT = re.compile("[\\s" + re.escape(_SEPARATORS.replace("*", "")) + "]+")
_PATTERN_CACHE: dict[str, re.Pattern[str]] = {}


def text_tokens(text: str) -> list[str]:
    """Words of ``text``; dots at a word's edges are dropped, inner dots kept."""
    return [w for t in _TEXT_SPLIT.split(text) if (w := t.strip("."))]


def pattern_terms(text: str) -> list[str]:
    """Like :func:`text_tokens` but ``*`` stays part of a term (a wildcard)."""
    return [w for t in _PATTERN_SPLIT.split(text) if (w := t.strip("."))]


def term_regex(term: str) -> re.Pattern[str]:
    rx = _PATTERN_CACHE.get(term)
    if rx is None:
        body = ".*".join(re.escape(part) for part in term[:1024].split("*"))
        rx = re.compile(body, re.IGNORECASE | re.DOTALL)
        if len(_PATTERN_CACHE) < 4096:
            _PATTERN_CACHE[term] = rx
    return rx


def _strings(v: Any) -> list[str] | None:
    if isinstance(v, str):
        return [v]
    if isinstance(v, (list, tuple)):
        return [x for x in v if isinstance(x, str)]
    return None


def collect_tokens(v: Any) -> list[str]:
    out: list[str] = []
    for s in _strings(v) or []:
        out.extend(text_tokens(s))
    return out


def collect_terms(v: Any) -> list[str] | None:
    """Pattern terms, or None when the pattern side is not usable (result false)."""
    if isinstance(v, str):
        return pattern_terms(v)
    if isinstance(v, (list, tuple)):
        out: list[str] = []
        for x in v:
            if not isinstance(x, str):
                return None
            out.extend(pattern_terms(x))
        return out
    return None


def wildcard_cost(text_length: int, stars: int) -> int:
    """Steps a wildcard pattern with ``stars`` stars may take over ``text_length``
    characters: a regex backtracks through every way of placing its stars."""
    return max(1, text_length) ** min(stars, 6) if stars else max(1, text_length)


def charge_match(tokens: list[str], terms: list[str], budget: Budget | None) -> None:
    """Charge the budget what testing every term against every token may cost."""
    if budget is None or not tokens or not terms:
        return
    longest = max(len(t) for t in tokens)
    budget.charge(sum(len(tokens) * wildcard_cost(longest, t.count("*")) for t in terms))


def match_values(text: Any, pattern: Any, budget: Budget | None = None) -> bool:
    tokens = collect_tokens(text)
    terms = collect_terms(pattern)
    if not tokens or not terms:
        return False
    charge_match(tokens, terms, budget)
    for term in terms:
        rx = term_regex(term)
        if not any(rx.fullmatch(tok) for tok in tokens):
            return False
    return True


def match_score(text: Any, pattern: Any, budget: Budget | None = None) -> float:
    """Relevance of ``text`` for ``pattern``: term hits weighted by frequency."""
    tokens = collect_tokens(text)
    terms = collect_terms(pattern)
    if not tokens or not terms:
        return 0.0
    charge_match(tokens, terms, budget)
    score = 0.0
    for term in terms:
        rx = term_regex(term)
        hits = sum(1 for tok in tokens if rx.fullmatch(tok))
        if hits:
            score += (hits * 2.2) / (hits + 1.2 * (0.25 + 0.75 * len(tokens) / 10))
    return score
