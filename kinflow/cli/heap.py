"""The served process's cyclic garbage collector, kept off what start-up built.

``kinflow serve`` builds a large heap once (the modules, the GraphQL schema,
the lake client, the engine): about 90,000 objects that live as long as the
process. CPython's cyclic collector walks every object it tracks on each
full pass, though none of those will ever be garbage, and under load those
passes were about a tenth of the API's CPU (docs/performance.md, "What a
child's fireAction costs"). ``settle`` runs once the server has started:
it collects start-up's own garbage, then moves everything left out of the
collector's reach (``gc.freeze``), so later passes walk only what requests
made since. Reference counting still frees those objects as usual.
"""

from __future__ import annotations

import gc


def settle() -> None:
    """Collect once, then keep every object alive now out of later collections."""
    gc.collect()  # start-up's garbage first: a frozen cycle would never be freed
    gc.freeze()
