"""``kinflow cancel ID [--reason R]``: a graceful cancellation from the terminal."""

from __future__ import annotations

from .test_cli import EXAMPLES, instance_id, invoke, refused


def test_cancel_prints_cancelling_then_refuses_a_finished_instance(cli_env: str) -> None:
    assert invoke("deploy", str(EXAMPLES / "definitions" / "seat-booking.json"))[0] == 0
    status, output = invoke("start", "event-booking", "--field", 'seats=[{"seat": "A1"}]')
    assert status == 0, output
    booking = instance_id(output)
    status, output = invoke("cancel", booking, "--reason", "called off")
    assert status == 0 and "cancelling:" in output and "CANCELLING" in output, output
    status, output = invoke("inspect", booking)
    assert status == 0 and "CANCELLING" in output, output
    status, output = invoke("cancel", booking)  # already cancelling: nothing changes
    assert status == 0 and "no change" in output, output
    refused(["cancel", "instance.missing"], "instance-not-found")
    status, output = invoke("start", "seat-hold", "--field", "seat=B2")
    hold = instance_id(output)
    assert invoke("fire", hold, "hold", "confirm")[0] == 0
    refused(["cancel", hold], "action-disabled")
