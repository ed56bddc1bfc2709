"""F10's scheduled flows in the switches: host pairs measured at their ToR, pinned on the placed path.

Seed 002, section 6.2: the scheduler places flows one by one on paths, and "the
controller informs ToRs about scheduled flows"; a scheduled flow that "runs into
a failure ... becomes unscheduled at the point of failure, and gets placed
using weighted ECMP".  p4src/f10.p4's ``MyIngress.f10_flows`` (exact on source
and destination address, applied before ``ipv4_lpm``) carries both:

* **Measuring.**  Every ToR holds one entry per pair of one of its hosts and a
  host of another ToR.  Its direct counter counts what that host sent to that
  host into the fabric (detoured packets skip the table, so a Scheme-2 detour
  through a ToR is not counted there).  The flows of an epoch are these
  counters' differences (:func:`host_flows`): a flow is a host pair, finer
  than MicroTE's ToR pairs and exact rather than estimated.
* **Pinning.**  A placed flow gets ``scheduled_nhop`` (the next hop of its
  path) at every switch of the path: the ToR's counting entry is modified (it
  goes on counting), the other switches get an entry inserted.  A flow not
  placed in an epoch (silent, or without a usable shortest path) loses its
  entries: back to ``NoAction`` at its ToR, deleted elsewhere, so it follows
  weighted ECMP.
* **Failures.**  In the data plane a pinned port that is down unpins the packet
  at that switch (it takes ``ipv4_lpm`` and the backup).  The controller hears
  of failures at once (5.3) and :meth:`ScheduledFlows.unpin` removes the pins of
  every flow placed over a failed link, so the switches before the failure
  follow ``ipv4_lpm`` again, where pushback acts, until the next epoch places
  the flow around it.

Writes use the FabricProgrammer's primary sessions; the table's entries of a
switch whose write failed (a switch restarted with empty tables) are read again
before the next use.
"""
import ipaddress
import threading

from testbed.controllers.te import Flow
from testbed.errors import ParameterError
from testbed.topologies.graph import host_ip, hosts, is_host

FLOWS_TABLE = "MyIngress.f10_flows"
SCHEDULED_ACTION = "MyIngress.scheduled_nhop"
SRC_FIELD, DST_FIELD = "hdr.ipv4.srcAddr", "hdr.ipv4.dstAddr"


def counted_pairs(graph):
    """The host pairs each ToR counts: one of its hosts to a host of another ToR.

    Args:
        graph: the topology multigraph.

    Returns:
        dict: ``{ToR: [(source host, destination host), ...]}`` sorted by name.

    >>> from testbed.topologies.registry import make_topology
    >>> g = make_topology("clos", leaves=2, spines=1, hosts_per_leaf=2).graph()
    >>> counted_pairs(g)["leaf0"]
    [('h1', 'h3'), ('h1', 'h4'), ('h2', 'h3'), ('h2', 'h4')]
    """
    tor_of = {host: next(iter(graph.neighbors(host))) for host in hosts(graph)}
    pairs = {}
    for src in sorted(tor_of):
        for dst in sorted(tor_of):
            if tor_of[dst] != tor_of[src]:
                pairs.setdefault(tor_of[src], []).append((src, dst))
    return pairs


def host_flows(before, after, seconds):
    """The flows of an epoch: what each host pair sent between two readings of its ToR's counters.

    Args:
        before, after: ``{(source host, destination host): bytes}`` (counters read at the start
            and the end of the epoch).
        seconds: time between the readings.

    Returns:
        list: :class:`testbed.controllers.te.Flow` named ``"<src>-><dst>"``, rate in Mbit/s,
        sorted by name; pairs that sent nothing, were not read twice or whose counter went back
        (the entry was written again) are left out.

    Raises:
        ParameterError: ``seconds`` is not positive.

    >>> [(f.name, f.rate) for f in host_flows({("h1", "h3"): 0, ("h2", "h3"): 5},
    ...                                        {("h1", "h3"): 1_250_000, ("h2", "h3"): 5}, 1.0)]
    [('h1->h3', 10.0)]
    """
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not seconds > 0:
        raise ParameterError("seconds", seconds, "a time > 0 between two counter readings")
    flows = []
    for pair in sorted(set(before) & set(after)):
        sent = after[pair] - before[pair]
        if sent > 0:
            flows.append(Flow(f"{pair[0]}->{pair[1]}", pair[0], pair[1], sent * 8 / seconds / 1e6))
    return flows


class ScheduledFlows:
    """The ``f10_flows`` entries of every switch: counting entries at the ToRs, pins on placed paths.

    Args:
        programmer: a connected FabricProgrammer (primary sessions, graph, next-hop parameters).

    Thread use: :meth:`read` may run for different switches at once; :meth:`pin` and
    :meth:`unpin` from one thread (the rescheduler's event loop).
    """

    def __init__(self, programmer):
        self.programmer = programmer
        graph = programmer.graph
        self.pairs = counted_pairs(graph)
        self.ips = {host: host_ip(graph, host) for host in hosts(graph)}
        self.by_ip = {ip: host for host, ip in self.ips.items()}
        self.paths = {}  # flow name -> ((src, dst), [(switch, port, link id), ...]) as last placed
        self._known = {}  # switch -> {(src, dst): pinned port or None (a counting entry)}
        self._lock = threading.Lock()

    def _match(self, src, dst):
        return {SRC_FIELD: self.ips[src], DST_FIELD: self.ips[dst]}

    def _pair(self, view):
        """The host pair of an entry read back (None for an address that is no host's)."""
        return tuple(self.by_ip.get(str(ipaddress.IPv4Address(view.match[field]))) for field in (SRC_FIELD, DST_FIELD))

    def _entries(self, switch):
        """``{(src, dst): port or None}`` of the switch's table, read once after a start or a failed write."""
        with self._lock:
            known = self._known.get(switch)
        if known is not None:
            return known
        client = self.programmer.clients[switch]
        known = {}
        for view in client.read_table_entries(FLOWS_TABLE):
            pair = self._pair(view)
            known[pair] = view.params[self.programmer.tables.port_param] if view.action == SCHEDULED_ACTION else None
        missing = [pair for pair in self.pairs.get(switch, ()) if pair not in known]
        with client.batch():
            for pair in missing:
                client.insert_table_entry(FLOWS_TABLE, self._match(*pair), action="NoAction")
        known.update(dict.fromkeys(missing))
        with self._lock:
            self._known[switch] = known
        return known

    def forget(self, switch):
        """Read the switch's entries again before the next use (after a failed read or write)."""
        with self._lock:
            self._known.pop(switch, None)

    def read(self, switch):
        """``{(src, dst): bytes sent}`` of a ToR's counting entries (installing them the first time).

        Returns an empty dict for a switch without hosts.

        Raises:
            P4RuntimeClientError: the switch could not be read or written.
        """
        if switch not in self.pairs:
            return {}
        self._entries(switch)
        counted, counts = set(self.pairs[switch]), {}
        for view, (_, nbytes) in self.programmer.clients[switch].read_direct_counter(FLOWS_TABLE):
            pair = self._pair(view)
            if pair in counted:
                counts[pair] = nbytes
        return counts

    def pin(self, flows, paths, switches):
        """Make the switches hold exactly the pins of the placed flows.

        Args:
            flows: the epoch's :class:`~testbed.controllers.te.Flow` objects (by name in ``paths``).
            paths: ``{flow name: [Hop, ...]}`` of the placed flows (:class:`Schedule.paths`).
            switches: the switches that can be written (not crashed).

        Returns:
            tuple: ``(updates written, errors)``, errors as ``"<switch>: <error>"`` (that switch's
            entries are read again before the next use).
        """
        pairs = {flow.name: (flow.src, flow.dst) for flow in flows}
        wanted = {name: (pairs[name], [(hop.node, hop.port, hop.link) for hop in path
                                       if not is_host(self.programmer.graph, hop.node)])
                  for name, path in paths.items() if name in pairs}
        return self._write(wanted, switches)

    def unpin(self, failed_links, switches):
        """Remove the pins of every flow placed over a failed link (see the module text).

        Returns:
            tuple: ``(updates written, errors)`` as :meth:`pin`.
        """
        failed = set(failed_links)
        kept = {name: placed for name, placed in self.paths.items()
                if not any(link in failed for _, _, link in placed[1])}
        if len(kept) == len(self.paths):
            return 0, []
        return self._write(kept, switches)

    def _write(self, wanted, switches):
        """Write, switch by switch, what changes from the pins the switches hold to ``wanted`` (the
        pins held are what each switch's table holds, as read or written, not the last placement)."""
        desired = {}  # switch -> {(src, dst): port}
        for pair, hops in wanted.values():
            for switch, port, _ in hops:
                desired.setdefault(switch, {})[pair] = port
        with self._lock:  # a switch not known (never read, or forgotten) may hold pins: it is read
            settled = {switch for switch, known in self._known.items()
                       if all(port is None for port in known.values())}
        written, errors = 0, []
        for switch in sorted(set(switches) - (settled - set(desired))):
            try:
                written += self._write_switch(switch, desired.get(switch, {}))
            except Exception as error:  # noqa: BLE001 - the other switches go on; this one is read again
                self.forget(switch)
                errors.append(f"{switch}: writing {FLOWS_TABLE}: {type(error).__name__}: {error}")
        self.paths = wanted
        return written, errors

    def _write_switch(self, switch, desired):
        """One switch's inserts, modifies and deletes (one batch); returns the updates written."""
        known = self._entries(switch)
        client, counted = self.programmer.clients[switch], set(self.pairs.get(switch, ()))
        changes = []
        for pair, current in known.items():
            if current is not None and pair not in desired:
                changes.append((pair, None))
        for pair, port in desired.items():
            if known.get(pair) != port:
                changes.append((pair, port))
        with client.batch():
            for pair, port in changes:
                match = self._match(*pair)
                if port is None and pair in counted:
                    client.modify_table_entry(FLOWS_TABLE, match, action="NoAction")
                elif port is None:
                    client.delete_table_entry(FLOWS_TABLE, match)
                else:
                    write = client.modify_table_entry if pair in known else client.insert_table_entry
                    write(FLOWS_TABLE, match, action=SCHEDULED_ACTION,
                          params=self.programmer.next_hop_params(switch, port))
        for pair, port in changes:
            if port is None and pair not in counted:
                known.pop(pair, None)
            else:
                known[pair] = port
        return len(changes)
