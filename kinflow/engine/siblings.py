"""An engine over another dataset, built like the one it is asked of.

The API serves extra datasets with an engine per dataset. Built from scratch
it had the limits but no effect handlers and the default propagation, so an
effect queued in another dataset was never run by the handler the default
dataset's engine runs it with. A sibling shares the handlers
(one registry: a handler registered later reaches every dataset), the clock,
the limits and the propagation mode.
"""

from __future__ import annotations

from kinflow.engine.facade import Engine


def sibling(engine: Engine, dataset: str) -> Engine:
    """An engine over ``dataset`` with ``engine``'s handlers, clock, limits and propagation."""
    other = Engine(engine.lake, dataset=dataset, clock=engine.clock, limits=engine.limits,
                   propagation=engine.driver.propagator.mode)
    other.handlers = engine.handlers
    return other
