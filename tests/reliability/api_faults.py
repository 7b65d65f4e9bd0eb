"""An API process (with its worker) whose only way to the lake is the fault proxy.

``kinflow serve`` is pointed at the proxy with ``KINFLOW_MONGODB_URI``; the
lake daemon behind it is this module's own. Clients drive order families
through GraphQL (tests/reliability/orders.py) while the proxy injects faults;
every refusal a client gets is counted by ``extensions.code``. Afterwards, on a
connection around the proxy and with the clock past every effect lease (a
claim whose reply a fault lost is held for its lease, as after a kill), the
heartbeat settles, the checker runs and the order checks assert that nothing
acknowledged was lost, no child was stamped twice and no ``ship`` effect ran
twice.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from kinflow.storage.embedded import EmbeddedLake
from tests.reliability.audit import settle_and_check
from tests.reliability.fault_proxy import FaultPlan, ProxyThread
from tests.reliability.orders import Apis, Tally, deploy, drive
from tests.reliability.procs import Fleet

DATABASE = "kinflow"


@dataclass
class ProxiedFleet(Fleet):
    """A fleet whose processes reach the lake at ``uri`` (the proxy), not through the data
    directory's own daemon."""

    uri: str = ""

    def _env(self) -> dict[str, str]:
        return {**super()._env(), "KINFLOW_MONGODB_URI": self.uri, "KINFLOW_DATABASE": DATABASE}


@dataclass
class ApiFaults:
    tally: Tally
    faults: Counter[str] = field(default_factory=Counter)
    figures: dict[str, int] = field(default_factory=dict)
    internal_logged: list[str] = field(default_factory=list)


async def run_api_faults(data_dir: Path, *, seconds: float, clients: int, seed: int,
                         plan: FaultPlan) -> ApiFaults:
    await asyncio.to_thread(data_dir.mkdir, parents=True, exist_ok=True)
    daemon = EmbeddedLake(data_dir / "daemon", sync_on_commit=True, test_commands=False)
    uri = await asyncio.to_thread(daemon.start)
    upstream = int(uri.split("//", 1)[1].split("/", 1)[0].rsplit(":", 1)[1])
    tally = Tally()
    result = ApiFaults(tally)
    try:
        with ProxyThread(upstream, plan, seed) as proxy:
            proxy.faults(False)
            fleet = ProxiedFleet(data_dir, env={"KINFLOW_OPERATION_TIMEOUT": "10"},
                                 uri=proxy.uri())
            try:
                api = await asyncio.to_thread(fleet.api, "api", worker=True)
                assert api.base is not None
                await deploy(api.base)
                proxy.faults(True)
                await drive(Apis([api.base], random.Random(seed)), clients, seconds, tally)
                proxy.faults(False)
                await asyncio.to_thread(fleet.stop_all)
            finally:
                await asyncio.to_thread(fleet.cleanup)
            result.faults.update(proxy.counts())
            result.internal_logged = fleet.logs_mention("internal error")
        result.figures = await settle_and_check(uri, fleet.effect_log, tally, set(), seed)
    finally:
        await asyncio.to_thread(daemon.stop)
    return result
