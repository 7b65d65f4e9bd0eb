"""A hub subscription's states and their transitions (no lake: a recording registry)."""

from __future__ import annotations

import pytest
from bson.timestamp import Timestamp

from kinflow.storage.subscription import RESYNC, ChangeEvent, Fence, State, Subscription


class Books:
    """What a hub keeps about its subscribers: who is fenced, who is gone."""

    def __init__(self) -> None:
        self.fenced: set[Subscription] = set()
        self.forgotten: list[Subscription] = []

    def _fencing(self, sub: Subscription, fenced: bool) -> None:
        (self.fenced.add if fenced else self.fenced.discard)(sub)

    def _forget(self, sub: Subscription) -> None:
        self.fenced.discard(sub)
        self.forgotten.append(sub)


def change(doc: str, rev: str) -> ChangeEvent:
    return ChangeEvent(kind="update", document_id=doc, rev=rev)


def drained(sub: Subscription) -> list[ChangeEvent]:
    events = []
    while sub.pending():
        events.append(sub._queue.popleft())
    return events


def test_buffering_then_live_delivers_the_snapshot_first_then_what_was_buffered() -> None:
    books = Books()
    sub = Subscription("*", 10, books)
    assert sub.state is State.BUFFERING
    sub.offer(change("a", "r1"))
    assert sub.pending() == 0  # kept, not delivered, while the snapshot is read
    snapshot = ChangeEvent(kind="snapshot")
    sub.go_live([snapshot])
    assert sub.state is State.LIVE and not books.fenced
    assert [e.kind for e in drained(sub)] == ["snapshot", "update"]


def test_fenced_holds_changes_until_a_quiet_round_then_drops_what_the_snapshot_shows() -> None:
    books = Books()
    sub = Subscription("*", 10, books)
    sub.offer(change("a", "r1"))  # the snapshot shows it
    sub.offer(change("b", "r5"))  # it does not
    sub.go_live([ChangeEvent(kind="snapshot")],
                Fence({"a": "r1"}, read_at=None, lift_at_round=2))  # fmt: skip
    # read_at None: every change counts as after the read, so the fence lifts at once
    assert sub.state is State.LIVE and books.fenced == set()
    fenced = Subscription("*", 10, books)
    fenced.go_live([], Fence({"a": "r1"}, read_at=Timestamp(1, 1), lift_at_round=2))
    assert fenced.state is State.FENCED and books.fenced == {fenced}
    fenced.quiet_round(1)
    assert fenced.state is State.FENCED
    fenced.quiet_round(2)
    assert fenced.state is State.LIVE and books.fenced == set()


def test_a_subscriber_that_falls_behind_is_cut_off_and_forgotten() -> None:
    books = Books()
    sub = Subscription("*", 2, books)
    sub.go_live([])
    for n in range(3):
        sub.offer(change("a", f"r{n}"))
    assert sub.state is State.CLOSED and sub.lagged and sub.closed
    assert drained(sub) == [RESYNC] and books.forgotten == [sub]
    sub.offer(change("a", "r9"))  # closed: nothing more
    assert sub.pending() == 0


def test_close_is_once_and_no_state_comes_after_closed() -> None:
    books = Books()
    sub = Subscription("*", 10, books)
    sub.close()
    sub.close()
    assert sub.state is State.CLOSED and books.forgotten == [sub]
    sub.go_live([ChangeEvent(kind="snapshot")])  # a snapshot read after close delivers nothing
    assert sub.pending() == 0
    with pytest.raises(RuntimeError):
        sub._move(State.LIVE)
