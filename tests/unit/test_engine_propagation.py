"""The propagator's default: small cohorts wait for their parent, large ones do not."""

from __future__ import annotations

import asyncio

import pytest

from kinflow.engine.propagation import INLINE_LIVE_ROWS, Propagator, Reaction


class Rounds:
    """A fake round: records which parents it ran on and reports a live-row count."""

    def __init__(self, live: int) -> None:
        self.live = live
        self.refill: int | None = None
        self.ran: list[str] = []
        self.gate = asyncio.Event()
        self.gate.set()

    async def __call__(self, parent_id: str) -> Reaction:
        await self.gate.wait()
        self.ran.append(parent_id)
        return Reaction(self.live, self.refill)


async def test_a_parent_not_seen_yet_is_waited_for() -> None:
    rounds = Rounds(live=3)
    propagator = Propagator(rounds)
    await propagator.request("p")
    assert rounds.ran == ["p"]  # the request returned after its round


async def test_a_large_cohort_returns_before_its_round_and_stays_in_background() -> None:
    rounds = Rounds(live=INLINE_LIVE_ROWS + 1)
    propagator = Propagator(rounds)
    await propagator.request("p")  # first sight: waits, and learns the cohort is large
    assert propagator.waits_for("p") is False
    rounds.gate.clear()
    await asyncio.wait_for(propagator.request("p"), 1)  # returns with the round held
    assert rounds.ran == ["p"]
    rounds.live = 2  # the tail of the large cohort still does not wait
    rounds.gate.set()
    await propagator.idle()
    assert propagator.waits_for("p") is False
    rounds.live = 0  # the cohort ended: the next one starts small again
    await propagator.request("p")
    await propagator.idle()
    assert propagator.waits_for("p") is True


async def test_forced_modes() -> None:
    rounds = Rounds(live=INLINE_LIVE_ROWS * 10)
    inline = Propagator(rounds, mode="inline")
    await inline.request("p")
    assert inline.waits_for("p") is True
    background = Propagator(rounds, mode="background")
    assert background.waits_for("fresh") is False
    with pytest.raises(ValueError):
        Propagator(rounds, mode="sometimes")


async def test_pacing_ends_when_the_requests_stop() -> None:
    """The round for a burst's last completions does not wait out the whole pace."""

    class Slow(Rounds):
        async def __call__(self, parent_id: str) -> Reaction:
            await asyncio.sleep(0.2)
            return await super().__call__(parent_id)

    rounds = Slow(live=INLINE_LIVE_ROWS + 1)
    propagator = Propagator(rounds, mode="background", pace=40.0)  # a pace of 8 s
    await propagator.request("p")
    await asyncio.sleep(0.05)
    await propagator.request("p")  # arrives while the first round runs
    started = asyncio.get_running_loop().time()
    await asyncio.wait_for(propagator.idle(), 30)
    assert rounds.ran == ["p", "p"]
    assert asyncio.get_running_loop().time() - started < 4.0  # not the 8 s pace



async def paced(rounds: Rounds, requests: int) -> Propagator:
    """A propagator that has just finished a round while ``requests`` more arrived, so
    it is pacing its next round (with a pace of 1,000 times the round)."""
    propagator = Propagator(rounds, mode="background", pace=1000.0)
    rounds.gate.clear()
    await propagator.request("p")
    await asyncio.sleep(0.005)  # the round starts (and holds at the gate) with that one
    for _ in range(requests):
        await propagator.request("p")
    await asyncio.sleep(0.01)  # the rounds really take some time, so the pace has a length
    rounds.gate.set()
    for _ in range(1000):
        if rounds.ran:
            break
        await asyncio.sleep(0.001)
    return propagator


async def test_a_waiting_window_ends_the_pace_once_half_of_it_finished() -> None:
    """While a window has rows queued, only a round starts them: the pace must not hold
    the round back once ``refill`` children asked for it, although requests go on."""
    rounds = Rounds(live=INLINE_LIVE_ROWS + 1)
    rounds.refill = 3
    propagator = await paced(rounds, requests=1)
    for _ in range(4):
        await propagator.request("p")
        await asyncio.sleep(0.05)  # steadily, never quiet for QUIET_SECONDS
        if len(rounds.ran) == 2:
            break
    assert rounds.ran == ["p", "p"]  # it ran once the third request arrived
    rounds.refill = None
    await asyncio.wait_for(propagator.idle(), 5)


async def test_without_a_waiting_window_requests_that_go_on_keep_the_pace() -> None:
    rounds = Rounds(live=INLINE_LIVE_ROWS + 1)
    propagator = await paced(rounds, requests=1)
    for _ in range(5):
        await propagator.request("p")
        await asyncio.sleep(0.05)
    assert rounds.ran == ["p"]  # still paced
    await asyncio.wait_for(propagator.idle(), 5)  # quiet at last: the round runs
    assert rounds.ran == ["p", "p"]
