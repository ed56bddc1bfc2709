"""F10 pushback in a running fabric: detector transitions in, route exclusions out.

F10 (seed 002, section 5.2): a switch that lost its way to some destinations
tells its neighbours, and those with a path around stop sending it those
destinations (PBOnly), or send it only the one subtree it still reaches
(PBExcept).  :mod:`testbed.topologies.f10.pushback` simulates that protocol
message by message on the topology graph; :class:`PushbackAgent` runs it as
the fabric's detectors report links going down and up, and installs the
resulting state in the switches.

The state travels through the controller, not as frames between switches:
installing it means changing which next hops a switch's routes use, and in a
v1model program only the control plane can change table entries and action
profile groups (P4Runtime; BMv2 has no data-plane table writes).  What the
agent records for each failure is the distributed protocol's cost, as the
simulation counts it (messages, switches that install state), next to what the
controller actually wrote (table entries) and how long computing and writing
took; the emulated pushback is therefore a controller round trip slower than
F10's switch-to-switch messages.

A link is down from the first report of one of its ends going down until
every end that reported down has reported up again (F10's detectors decide per
port, and the two ends of a link may disagree for a while).
"""
import ipaddress
import threading
import time

from testbed.topologies.f10.pushback import PushbackState, avoid_ports, pushback_state, simulate_pushback
from testbed.topologies.graph import ports_toward


class PushbackAgent:
    """Keeps the fabric's pushback state in step with the links the detectors report.

    Args:
        graph: the topology multigraph (FatTree or AB FatTree, ``topo.graph()``).
        programmer: the :class:`~testbed.controllers.fabric_programmer.FabricProgrammer`
            that wrote the primary routes (its :meth:`exclude_next_hops` installs the state).
        clock_ns: wall clock for the records.

    Attributes:
        records: one row per link change: ``{"link", "status", "at_ns", "messages",
        "starters", "switches_installed", "switches_with_state", "entries_written",
        "compute_s", "write_s", "error"}``.
    """

    def __init__(self, graph, programmer, clock_ns=time.time_ns):
        self.graph = graph
        self.programmer = programmer
        self.clock_ns = clock_ns
        self.records = []
        self.state = PushbackState()
        self._down_ends = {}  # frozenset link -> {(switch, port) reporting it down}
        self._lock = threading.Lock()

    def port_changed(self, switch, port, link, down):
        """A detector transition of ``switch``'s ``port`` on ``link`` (a pair of node names).

        Returns:
            dict or None: the record of the pushback it set off, None when the link's
            status did not change (the other end already reported it).
        """
        if not link:
            return None
        link = frozenset(link)
        with self._lock:
            ends = self._down_ends.setdefault(link, set())
            was_down = bool(ends)
            if down:
                ends.add((switch, port))
            else:
                ends.discard((switch, port))
            if bool(ends) == was_down:
                return None
            return self._link_changed(tuple(sorted(link)), down)

    def _link_changed(self, link, down):
        started_ns = self.clock_ns()
        started = time.monotonic()
        record = {"link": list(link), "status": "down" if down else "up", "at_ns": started_ns, "messages": 0,
                  "starters": [], "switches_installed": [], "switches_with_state": [], "entries_written": 0,
                  "compute_s": None, "write_s": None, "error": None}
        try:
            if down:
                result = simulate_pushback(self.graph, link, state=self.state)
                self.state = result.state
                record.update(messages=result.message_count, starters=result.starters,
                              switches_installed=sorted(result.installed))
            else:
                # state after a repair: the remaining failures replayed (F10 lifts pushback state
                # when the failure that caused it is gone)
                failed = [tuple(sorted(pair)) for pair, ends in self._down_ends.items() if ends]
                self.state = pushback_state(self.graph, failed_links=failed)
            exclusions = self.exclusions(self.state)
            computed = time.monotonic()
            record["entries_written"] = self.programmer.exclude_next_hops(exclusions)
            record.update(compute_s=computed - started, write_s=time.monotonic() - computed,
                          switches_with_state=self.state.switches_with_state())
        except Exception as error:  # noqa: BLE001 - recorded; the fabric keeps its last routes
            record["error"] = f"{type(error).__name__}: {error}"
        self.records.append(record)
        return record

    def exclusions(self, state):
        """``{switch: {host ip: ports}}`` that ``state`` forbids (PBOnly and PBExcept).

        PBOnly: the ports toward the avoided neighbours, for every host of the
        prefix.  PBExcept toward a neighbour: that neighbour's ports, for every
        host outside the one prefix still sent there.
        """
        exclusions = {}
        for switch, per_prefix in avoid_ports(self.graph, state).items():
            routes = self.programmer.routes_of(switch)
            for prefix, ports in per_prefix.items():
                for ip in _ips_in(routes, prefix):
                    exclusions.setdefault(switch, {}).setdefault(ip, set()).update(ports)
        for switch, per_neighbour in state.avoid_except.items():
            routes = self.programmer.routes_of(switch)
            for neighbour, prefix in per_neighbour.items():
                ports = set(ports_toward(self.graph, switch, [neighbour]))
                allowed = set(_ips_in(routes, prefix))
                for ip in routes:
                    if ip not in allowed:
                        exclusions.setdefault(switch, {}).setdefault(ip, set()).update(ports)
        return exclusions


def _ips_in(routes, prefix):
    """The destination ips of ``routes`` inside the CIDR ``prefix``."""
    network = ipaddress.ip_network(prefix)
    return [ip for ip in routes if ipaddress.ip_address(ip) in network]

