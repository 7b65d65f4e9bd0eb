"""The public entry points: ``parse``, ``evaluate`` and ``free_parameters``.

Owns the ``Tree`` handle (syntax tree + compiled closure + facts about parameters),
the parse cache, the undefined-parameter check and the conversion of every failure
into a :class:`GroqError`. Parameters are optional at parse time: a tree whose
square brackets depend on a parameter's value is re-parsed when the values arrive.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from functools import lru_cache
from typing import Any

from kinflow.groq import nodes as n
from kinflow.groq.budget import Budget
from kinflow.groq.compiler import compile_node
from kinflow.groq.errors import GroqError, GroqSyntaxError
from kinflow.groq.parser import parse_query
from kinflow.groq.scope import Compiled, Context, Scope
from kinflow.groq.values import to_plain

Resolver = Callable[[str], Mapping[str, Any] | None]


class GroqInternalError(GroqError):
    """A bug in this implementation surfaced while parsing or evaluating; never expected."""

    code = "groq-internal-error"


class Tree:
    """A parsed, validated and compiled query. Immutable; safe to share and cache."""

    __slots__ = ("_fn", "needs_params", "params_bound", "params_read", "root", "source")

    def __init__(self, source: str, root: n.Node, params_read: frozenset[str],
                 needs_params: bool, params_bound: bool) -> None:
        self.source = source
        self.root = root
        self.params_read = params_read
        self.needs_params = needs_params
        self.params_bound = params_bound
        self._fn: Compiled | None = None

    @property
    def fn(self) -> Compiled:
        if self._fn is None:
            try:
                self._fn = compile_node(self.root)
            except RecursionError:
                raise GroqSyntaxError("query is nested too deeply", self.source, 0) from None
        return self._fn

    def __repr__(self) -> str:
        return f"Tree({self.source!r})"


def parse(query: str, params: Mapping[str, Any] | None = None) -> Tree:
    """Parse and validate ``query``.

    With ``params``, undefined parameters are refused now and square brackets holding a
    parameter are decided from its value; without, both wait for :func:`evaluate`.
    """
    if not isinstance(query, str):
        raise GroqSyntaxError("a query must be a string", "", 0)
    if params is None and len(query) <= CACHED_LENGTH:
        return _parse_cached(query)
    return _parse(query, params)


#: longest query text the parse cache keeps: what it holds stays small whatever callers send
CACHED_LENGTH = 4096


@lru_cache(maxsize=1024)
def _parse_cached(query: str) -> Tree:
    return _parse(query, None)


def _parse(query: str, params: Mapping[str, Any] | None) -> Tree:
    try:
        res = parse_query(query, params)
        tree = Tree(query, res.root, res.params_read, res.needs_params, params is not None)
        tree.fn  # noqa: B018 - compile eagerly so that errors surface at parse time
        return tree
    except GroqError:
        raise
    except RecursionError:
        raise GroqSyntaxError("query is nested too deeply", query, 0) from None
    except Exception as exc:  # pragma: no cover - a bug, reported as such
        raise GroqInternalError(f"internal error while parsing: {exc!r}",
                                query=query) from exc


def free_parameters(tree: Tree | str) -> set[str]:
    """Names of the ``$variables`` a query reads (custom-function parameters excluded)."""
    if isinstance(tree, str):
        tree = parse(tree)
    return set(tree.params_read)


def evaluate(
    query_or_tree: str | Tree,
    *,
    dataset: Iterable[Mapping[str, Any]] | None = None,
    params: Mapping[str, Any] | None = None,
    root: Any = None,
    now: datetime | None = None,
    resolve: Resolver | None = None,
    budget: Budget | None = None,
) -> Any:
    """Evaluate a query and return plain Python values (datetimes as RFC 3339 text).

    ``dataset`` is what ``*`` yields, in the given order; ``root`` is ``@`` at the top
    level; ``resolve`` fetches a document by id for ``->`` (default: scan ``dataset``);
    ``budget`` bounds the work (``groq-limit-exceeded``) and can cancel it.
    """
    tree = query_or_tree if isinstance(query_or_tree, Tree) else parse(query_or_tree)
    params = params if params is not None else {}
    if tree.needs_params and not tree.params_bound:
        tree = _parse(tree.source, params)
    missing = tree.params_read.difference(params)
    if missing:
        name = sorted(missing)[0]
        pos = tree.source.find("$" + name)
        raise GroqSyntaxError(f"undefined parameter ${name}", tree.source, max(pos, 0),
                              parameter=name)
    ctx = Context(dataset, params, now, resolve, budget=budget)
    if budget is not None:
        budget.start()
    try:
        if budget is not None:  # a deadline that passed before this round refuses it
            budget.check()
        value = tree.fn(Scope(root, None, ctx))
        if budget is not None:  # an answer sharing one value many times is written in full
            budget.check_answer(value)
        return to_plain(value)
    except GroqError:
        raise
    except RecursionError:
        raise GroqError("evaluation nested too deeply", query=tree.source) from None
    except Exception as exc:
        raise GroqInternalError(f"internal error while evaluating: {exc!r}",
                                query=tree.source) from exc
