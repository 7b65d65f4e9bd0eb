"""kinflow: a workflow engine for processes that fan out into child workflows."""

__version__ = "0.1.0"
