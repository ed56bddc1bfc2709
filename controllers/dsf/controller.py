"""The ``dsf`` controller kind: the os-ken DSF app on a running fabric, and what it records.

:class:`DSFController` is an :class:`~testbed.controllers.kinds.OskenController`
running :mod:`testbed.controllers.dsf.app` (with the REST app) instead of the
routing app: at start it pushes the node programs, addressing, reachability and
parameters; each failure the caller reports reaches it over REST after the
detection delay, and it rewrites reachability with Input Balanced Mode.

Before the app starts, the controller also gives every shaped fabric link
(RDSW-FDSW, FDSW-SDSW) the queue of a fabric element: a tc ``pfifo`` of
``dsf_fabric_queue_frames`` frames under the link's htb class (Mininet's htb
leaves the veth's 1000-frame default, far deeper than a fabric node's buffer).

:attr:`DSFController.dsf` (read before the app stops) is what results.json's
``dsf.control`` records: Input Balanced Mode's switch and seed, the withdrawals in
force at the end, each reaction's withdrawals, node numbers and system ports.
"""
import os

from testbed.controllers.contract import DEFAULT_DETECTION_DELAY_MS
from testbed.controllers.kinds import OskenController
from testbed.controllers.launcher import APP_REST
from testbed.emulation.state import write_state
from testbed.emulation.links import set_queue_frames
from testbed.modes import PARAMETERS

APP_DSF = "testbed.controllers.dsf.app"
PRIVATE_STATE_DIR = "/run/testbed"


def fabric_link_interfaces(network):
    """``[(switch node, interface name)]`` of both ends of every switch-to-switch link."""
    switches = set(network.switches)
    ends = []
    for switch in network.switches:
        for intf in switch.intfList():
            link = getattr(intf, "link", None)
            if link is None:
                continue
            other = link.intf2 if link.intf1 is intf else link.intf1
            if other.node in switches:
                ends.append((switch, intf.name))
    return ends


def set_fabric_queues(network, frames):
    """Give every shaped fabric link a tail-drop queue of ``frames`` (tc pfifo under htb class 5:1).

    Returns:
        int: interfaces configured (0 when links are not shaped).

    Raises:
        EmulationError: tc refused.
    """
    if not network.shape_links:
        return 0
    ends = fabric_link_interfaces(network)
    set_queue_frames(ends, frames)
    return len(ends)


class DSFController(OskenController):
    """The os-ken DSF app as a fabric's controller.

    Args:
        detection_delay_ms: time between a failure and the notice the app gets.
        **options: more ``[fabric]`` options of the app.
    """

    kind = "dsf"
    apps = (APP_DSF, APP_REST)

    def __init__(self, detection_delay_ms=DEFAULT_DETECTION_DELAY_MS, **options):
        super().__init__(detection_delay_ms, **options)
        self.dsf = {}
        self._private_state = None

    def start(self, network, pipeline, mode_params, required_params=(), state_file=None, log_path=None,
              progress=None):
        """Configure the fabric links' queues, then launch the app and wait until it programmed the fabric.

        Args:
            network: the running network.
            pipeline: the RDSW pipeline (the node programs follow from testbed/modes.py).
            mode_params: ``{name: int}`` run-time parameters (the DSF ones).
            required_params: names the program must carry.
            state_file: the network's state file (unused: the app reads a private one, removed at stop).
            log_path: the controller's log.
            progress: not used: the app programs the switches in its own process.
        """
        frames = mode_params.get("dsf_fabric_queue_frames", PARAMETERS["dsf_fabric_queue_frames"].default)
        queues = set_fabric_queues(network, frames)
        if queues:
            self.notes.append(f"dsf: {queues} fabric link ends got a pfifo queue of {frames} frames")
        # the app reads the network from a state file; the fabric publishes its own only once
        # programmed, so the app gets a private one, written now
        self._private_state = os.path.join(PRIVATE_STATE_DIR, f"dsf-{os.getpid()}.json")
        write_state(network.describe(), self._private_state)
        super().start(network, pipeline, mode_params, required_params, state_file=self._private_state,
                      log_path=log_path)
        self.dsf = self._read_dsf()

    def _read_dsf(self):
        try:
            status = self.controller.client.status()
        except Exception:  # noqa: BLE001 - the app is gone; keep what was read before
            return self.dsf
        record = dict(status.get("dsf") or {})
        record["reactions"] = [{"link": r.get("link"), "status": r.get("status"),
                                "withdrawals": r.get("withdrawals") or {}} for r in status.get("reactions", [])]
        return record

    def stop(self):
        """Read the app's DSF state, stop it, remove the private state file (safe to call twice)."""
        if self.controller is not None:
            self.dsf = self._read_dsf()
        try:
            super().stop()
        finally:
            if self._private_state and os.path.exists(self._private_state):
                os.remove(self._private_state)
            self._private_state = None
