"""The pure core: kinflow's rules with no I/O, no asyncio, no clock, no randomness.

Everything here plans or reads; the shell (``kinflow.engine``) loads, writes
and waits. Time and new keys come in through the plan context. Nothing here
imports ``kinflow.storage``, ``kinflow.engine`` or ``kinflow.schema``, and
``tests/unit/test_import_graph.py`` keeps it that way. This package file
imports no submodule, so importing one core module loads only what it needs.
"""
