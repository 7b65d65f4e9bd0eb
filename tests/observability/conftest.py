"""The API fixtures (a fresh database per test) for the observability tests."""

from tests.api.conftest import database

__all__ = ["database"]
