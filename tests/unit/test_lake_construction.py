"""A lake is complete when built: its session ledger and transaction slots come with it."""

from __future__ import annotations

from pymongo import AsyncMongoClient

from kinflow.storage.lake import Lake
from kinflow.storage.sessions import SessionLedger
from kinflow.storage.slots import TransactionSlots


def test_the_ledger_and_slots_are_set_by_the_constructor() -> None:
    client: AsyncMongoClient = AsyncMongoClient("mongodb://127.0.0.1:9", connect=False)
    slots = TransactionSlots(2)
    lake = Lake(client, "kinflow", slots=slots, ledger=SessionLedger)
    assert isinstance(lake.sessions, SessionLedger) and lake.sessions.lake is lake
    assert lake.slots is slots
    assert Lake(client, "kinflow").sessions is None  # a tool's connection: no ledger
