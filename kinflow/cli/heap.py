"""The served process's cyclic garbage collector, kept off what start-up built.

``kinflow serve`` builds a large heap once (the modules, the GraphQL schema,
the lake client, the engine): about 90,000 objects that live as long as the
process. CPython's cyclic collector walks every object it tracks on each
full pass, though none of those will ever be garbage, and under load those
passes were about a tenth of the API's CPU (docs/performance.md, "What a
child's fireAction costs"). ``settle`` runs once the server has started:
it collects start-up's own garbage, then moves everything left out of the
collector's reach (``gc.freeze``), so later passes walk only what requests
made since, and lets the young generation grow to ``YOUNG`` objects before a
pass (700 by default): a request's short-lived objects are mostly freed by
reference counting before a pass would walk them, and the older generations'
passes, which follow from the young one's, come a fourteenth as often.
Reference counting still frees every object as usual. Measured on
``bench/cohort_api.py``'s fires (perf record on the API, load 5-12): the
collector's share of the API's CPU 9.2-9.5 % before, 4.5-5.3 % frozen,
1.4-1.8 % frozen with ``YOUNG``.
"""

from __future__ import annotations

import gc

YOUNG = 10_000  # allocations net of frees before a young-generation pass


def settle() -> None:
    """Collect once, keep every object alive now out of later collections, and let the
    young generation grow to ``YOUNG`` before a pass."""
    gc.collect()  # start-up's garbage first: a frozen cycle would never be freed
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG, middle, old)
