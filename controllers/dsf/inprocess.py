"""A DSF fabric of embedded devices in one process, programmed like the real one (tests, benchmarks).

:func:`build_inprocess_fabric` loads the node programs, makes one
:class:`~testbed.p4.v1model.device.Device` per switch of a DSF topology on a
shared simulated clock, wires them with the topology's links
(:class:`~testbed.p4.v1model.wiring.WiredDevices`: link rate, delay, tail-drop
queue), and programs them with :class:`~testbed.controllers.dsf.programming.DSFProgrammer`
through :class:`~testbed.embedded_switch.state_client.StateClient` sessions, so the
tables are exactly those the controller writes over P4Runtime.  Host ports stay
links to sinks: what host ``h`` receives is in ``wired.delivered[h]`` (``(time ns, frame)``).
"""
from dataclasses import dataclass

from testbed.controllers.dsf.programming import DSFProgrammer, node_program_paths
from testbed.controllers.parameters import set_parameters_in_state
from testbed.embedded_switch.state_client import StateClient
from testbed.p4.loader import load_program
from testbed.p4.native import make_device
from testbed.p4.state import SwitchState
from testbed.p4.v1model.wiring import SimClock, WiredDevices
from testbed.topologies.graph import is_host


@dataclass
class InprocessFabric:
    """The pieces of an in-process DSF fabric.

    Attributes:
        wired: the devices and links (``wired.devices[name]``, ``wired.run(...)``).
        programmer: the programmer (``programmer.reroute(failed)`` applies link failures to the tables).
        states: ``{switch: SwitchState}``.
        clock: the simulated clock.
        graph: the topology graph.
    """

    wired: WiredDevices
    programmer: DSFProgrammer
    states: dict
    clock: SimClock
    graph: object

    def host_port(self, host):
        """``(rdsw, port)`` a host hangs off."""
        port = self.programmer.addressing.system_ports[host]
        return port.rdsw, port.local_port


def build_inprocess_fabric(topo, mode_params=None, input_balanced=True, ibm_seed=0, link_delay_ns=0,
                           queue_frames=1000, shape=True, on_log=None):
    """Build, wire and program a DSF fabric in this process.

    Args:
        topo: a :class:`~testbed.topologies.dsf.topology.DSFTopo`.
        mode_params: DSF run-time parameters (:data:`testbed.modes.PARAMETERS`, checked by the caller).
        input_balanced, ibm_seed: as :class:`DSFProgrammer`.
        link_delay_ns: propagation delay of every link.
        queue_frames: each link direction's queue limit.
        shape: serialise at each link's capacity, host links too (else links have no rate limit).
        on_log: the devices' log callback.

    Returns:
        InprocessFabric
    """
    graph = topo.graph()
    programs = {role: load_program(path) for role, path in node_program_paths().items()}
    clock = SimClock()
    wired = WiredDevices(clock)
    states, clients, switches = {}, {}, {}
    for device_id, name in enumerate(sorted(topo.switches()), start=1):
        role = graph.nodes[name]["role"]
        program = programs[role]
        states[name] = SwitchState(program.info)
        wired.add(name, make_device(program, states[name], clock_ns=clock, on_log=on_log, raise_errors=True))
        clients[name] = StateClient(states[name])
        switches[name] = {"grpc": None, "device_id": device_id}
    for a, b, data in graph.edges(data=True):
        rate = int(float(data["capacity_mbps"]) * 1_000_000) if shape else None
        if is_host(graph, data["a"]):
            wired.attach_host(data["a"], data["b"], data["b_port"], rate, queue_frames)
        elif is_host(graph, data["b"]):
            wired.attach_host(data["b"], data["a"], data["a_port"], rate, queue_frames)
        else:
            wired.connect(data["a"], data["a_port"], data["b"], data["b_port"], rate, link_delay_ns,
                          queue_frames)
    programmer = DSFProgrammer(graph, switches, {role: None for role in programs}, input_balanced=input_balanced,
                               ibm_seed=ibm_seed)
    programmer.clients = clients
    programmer.push_pipeline = lambda: None  # the devices were built with their programs
    programmer.program()
    if mode_params:
        for name in programmer.rdsw_clients():
            set_parameters_in_state(states[name], mode_params)
    return InprocessFabric(wired, programmer, states, clock, graph)
