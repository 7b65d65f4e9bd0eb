"""What is on in this process: metrics (default on) and tracing (off unless an exporter is set).

Process-wide, like the registry and the tracer provider they govern:
``configure`` sets them once from the settings and the environment, and every
hook reads these two flags first, so with both off a hook costs two attribute
reads. Nothing to import here: every hook module can read it.
"""

from __future__ import annotations


class Switch:
    metrics: bool = True
    tracing: bool = False


ON = Switch()
