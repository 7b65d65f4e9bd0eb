"""The ``kinflow`` command line.

Every command that touches workflows runs either on the lake directly (the
same ``KINFLOW_*`` settings as the server; the embedded lake is shared with a
running server through its ``lake.json``) or, with ``--url``, against a
running server through its GraphQL API. Refusals print their error code and
message, never a traceback, and exit with status 1.
"""

from kinflow.cli.app import app, main

__all__ = ["app", "main"]
