"""One text form of a moment, one time-zone rule: naive means UTC, both ways."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from kinflow.timestamps import iso, parse_iso


def test_iso_is_utc_milliseconds_with_z() -> None:
    moment = datetime(2026, 1, 2, 3, 4, 5, 678_901, tzinfo=UTC)
    assert iso(moment) == "2026-01-02T03:04:05.678Z"
    plus_two = moment.astimezone(timezone(timedelta(hours=2)))
    assert iso(plus_two) == "2026-01-02T03:04:05.678Z"


def test_naive_means_utc_both_ways() -> None:
    naive = datetime(2026, 1, 2, 3, 4, 5)
    assert iso(naive) == "2026-01-02T03:04:05.000Z"
    assert parse_iso("2026-01-02T03:04:05") == naive.replace(tzinfo=UTC)


def test_round_trip_and_order() -> None:
    text = "2026-01-02T03:04:05.678Z"
    assert iso(parse_iso(text)) == text
    assert parse_iso("2026-01-02T05:04:05+02:00") == parse_iso("2026-01-02T03:04:05Z")
    assert parse_iso(text).tzinfo is UTC
    earlier, later = iso(parse_iso(text)), iso(parse_iso(text) + timedelta(milliseconds=1))
    assert earlier < later
