"""The schema's hook stages behave as strawberry's own: order, failures, swallowing."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from strawberry.extensions import SchemaExtension
from strawberry.extensions.runner import SchemaExtensionsRunner

from kinflow.schema import build_schema
from kinflow.schema.hooks import HookRunner, Stage
from kinflow.settings import Settings


class Boom(Exception):
    pass


class Other(Exception):
    pass


def recording(name: str, log: list[str], *, swallow: bool = False,
              replace: bool = False) -> type[SchemaExtension]:
    class Recording(SchemaExtension):
        def on_operation(self) -> Iterator[None]:
            log.append(f"{name} in")
            try:
                yield
            except Boom as error:
                log.append(f"{name} saw {type(error).__name__}")
                if replace:
                    raise Other from error
                if not swallow:
                    raise
            else:
                log.append(f"{name} out")

        def on_execute(self) -> Iterator[None]:
            log.append(f"{name} execute")
            yield

    return Recording


def run(runner_class: type[SchemaExtensionsRunner], extensions: list[SchemaExtension],
        failure: BaseException | None) -> str:
    runner = runner_class(execution_context=None, extensions=extensions)  # type: ignore[arg-type]
    try:
        with runner.operation():
            with runner.executing():
                pass
            if failure is not None:
                raise failure
    except BaseException as error:  # the outcome is what is compared
        return type(error).__name__
    return "ok"


@pytest.mark.parametrize("failure", [None, Boom()])
@pytest.mark.parametrize("options", [{}, {"swallow": True}, {"replace": True}])
def test_a_stage_runs_as_strawberrys_does(failure: BaseException | None,
                                          options: dict[str, Any]) -> None:
    outcomes = []
    for runner_class in (SchemaExtensionsRunner, HookRunner):
        log: list[str] = []
        extensions = [recording("a", log)(), recording("b", log, **options)(),
                      recording("c", log)()]
        outcomes.append((run(runner_class, extensions, failure), log))
    assert outcomes[0] == outcomes[1]


def test_a_hook_that_is_no_generator_is_left_to_strawberry() -> None:
    class Plain(SchemaExtension):
        def on_operation(self) -> None:  # type: ignore[override]
            return None

    runner = HookRunner(execution_context=None, extensions=[Plain()])  # type: ignore[arg-type]
    assert not isinstance(runner.operation(), Stage)
    with runner.operation():
        pass


async def test_the_schema_runs_its_extensions_through_stages() -> None:
    schema = build_schema(Settings(max_query_depth=1))
    runner = schema.create_extensions_runner(None, schema.get_extensions())  # type: ignore[arg-type]
    assert isinstance(runner, HookRunner)
    result = await schema.execute("{ instances { nodes { parent { id } } } }")
    assert result.errors and result.errors[0].extensions
    assert result.errors[0].extensions["code"] == "query-too-complex"
