"""The schema extensions' lifecycle hooks, run without a context manager built per hook.

Strawberry runs each lifecycle stage (operation, parse, validate, execute) of
every operation by looking up every extension's hook, wrapping each generator
hook in ``contextlib.contextmanager`` and entering the wrappers through an
``ExitStack``: a few dozen calls per operation before any hook runs. Here
the hooks each extension class defines are looked up once per class, and a
stage drives the generators itself, with the same order and the same
exception semantics (entered in the extensions' order, left in reverse; a
failure inside the stage is thrown into each hook on the way out, a hook that
swallows it hides it from the hooks outside it, one that raises another passes
that one on). A stage whose hooks are not all generator
functions (an async hook, a plain callable) is left to strawberry's own
context manager.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Generator
from types import TracebackType
from typing import Any

from strawberry.extensions import SchemaExtension
from strawberry.extensions.context import (
    ExecutingContextManager,
    OperationContextManager,
    ParsingContextManager,
    ValidationContextManager,
)
from strawberry.extensions.runner import SchemaExtensionsRunner

Hook = Callable[[SchemaExtension], Generator[Any, None, None]]
_NOT_GENERATOR = object()  # a hook strawberry must wrap itself
_hooks: dict[tuple[type, str], Any] = {}


def _hook(kind: type, name: str) -> Any:
    """``kind``'s own hook for stage ``name``: a generator function, None, or not one."""
    key = (kind, name)
    if key in _hooks:
        return _hooks[key]
    function = getattr(kind, name)
    if function is getattr(SchemaExtension, name):
        hook: Any = None
    elif inspect.isgeneratorfunction(function):
        hook = function
    else:
        hook = _NOT_GENERATOR
    _hooks[key] = hook
    return hook


class Stage:
    """One lifecycle stage of one operation: its extensions' generator hooks, nested."""

    __slots__ = ("entered", "hooks")

    def __init__(self, hooks: list[tuple[Hook, SchemaExtension]]) -> None:
        self.hooks = hooks
        self.entered: list[Generator[Any, None, None]] = []

    def __enter__(self) -> None:
        # as strawberry's stack: a hook failing here leaves the ones entered to the collector
        for hook, extension in self.hooks:
            generator = hook(extension)
            try:
                next(generator)
            except StopIteration:
                raise RuntimeError("generator didn't yield") from None
            self.entered.append(generator)

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self._leave(error)

    async def __aenter__(self) -> None:
        self.__enter__()

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        trace: TracebackType | None) -> None:
        self._leave(error)

    def _leave(self, error: BaseException | None) -> None:
        """Resume the entered hooks innermost first. As in strawberry's stack, a hook that
        swallows ``error`` hides it from the outer hooks only: the stage still raises it."""
        pending = error
        while self.entered:
            generator = self.entered.pop()
            try:
                if pending is None:
                    next(generator)
                    raise RuntimeError("generator didn't stop")
                generator.throw(pending)
                raise RuntimeError("generator didn't stop after throw()")
            except StopIteration:
                pending = None  # finished, or swallowed the failure
            except BaseException as raised:  # the failure went on, or a hook raised another
                pending = raised
        if pending is not None and pending is not error:
            raise pending


class HookRunner(SchemaExtensionsRunner):
    """Strawberry's runner, its four operation stages run as ``Stage``s."""

    def _stage(self, name: str) -> Stage | None:
        hooks: list[tuple[Hook, SchemaExtension]] = []
        for extension in self.extensions:
            hook = _hook(type(extension), name)
            if hook is _NOT_GENERATOR:
                return None
            if hook is not None:
                hooks.append((hook, extension))
        return Stage(hooks)

    def operation(self) -> OperationContextManager:
        stage = self._stage("on_operation")
        return super().operation() if stage is None else stage  # type: ignore[return-value]

    def validation(self) -> ValidationContextManager:
        stage = self._stage("on_validate")
        return super().validation() if stage is None else stage  # type: ignore[return-value]

    def parsing(self) -> ParsingContextManager:
        stage = self._stage("on_parse")
        return super().parsing() if stage is None else stage  # type: ignore[return-value]

    def executing(self) -> ExecutingContextManager:
        stage = self._stage("on_execute")
        return super().executing() if stage is None else stage  # type: ignore[return-value]
