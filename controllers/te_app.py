"""The os-ken TE application: known flows placed greedily and pinned with exact-match entries.

Centralized traffic engineering after seed 004 section 4.3: the flows the
controller knows (from ``[fabric] te_flows_file`` at start, then from
``POST /fabric/flows``) are placed by :func:`testbed.controllers.te.place_flows`
(largest first, each on the least-loaded shortest path) and every switch on a
flow's path gets an exact-match entry in the TE table (``[fabric] te_table``,
keys mapped by ``te_match_fields``: ``src_ip``/``dst_ip`` are the hosts'
addresses, other keys come from the flow's ``match``) whose action sends the
flow to its chosen next hop.  Flows without an entry, and every flow when the
program has no TE table (a note is logged and the app stays idle), follow the
ECMP routes of :class:`testbed.controllers.fabric_app.FabricRoutingApp`: ECMP is
the fallback.  On a link status event the flows are placed again without the
failed links and only the entries that changed are written.

Runs with the routing app and shares its :class:`FabricContext` (P4Runtime
sessions); started by :mod:`testbed.controllers.launcher` with routing ``te``.
"""
import json
import logging
import time

from os_ken.base import app_manager
from os_ken.controller.handler import set_ev_cls

from testbed.controllers.fabric_app import (EventFabricProgrammed, EventFlowsAnnounced, EventLinkStatus,
                                            FabricContext, find_object)
from testbed.controllers.te import Flow, place_flows
from testbed.topologies.graph import host_ip, node_pair

LOG = logging.getLogger("testbed.controllers.te_app")


def load_flows(path):
    """Read flows from a JSON file: a list of ``{name, src, dst, rate, match}`` (or ``{"flows": [...]}``).

    Raises:
        ParameterError: a flow is malformed. OSError / ValueError: unreadable file.
    """
    with open(path) as handle:
        data = json.load(handle)
    if isinstance(data, dict):
        data = data.get("flows", [])
    return [Flow.from_dict(item) for item in data]


class FabricTeApp(app_manager.OSKenApp):
    """Greedy TE placement of known flows, pinned with exact-match entries (ECMP as fallback)."""

    _CONTEXTS = {"fabric": FabricContext}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fabric = kwargs["fabric"]
        self.flows = {}  # name -> Flow
        self.failed_pairs = set()
        self.installed = {}  # (switch, match key) -> (flow name, port)
        self.enabled = False
        self.table = None
        self.version = 0

    def _match(self, flow):
        """The TE table match of ``flow`` (field name -> exact value) and a hashable key of it."""
        graph = self.fabric.graph
        values = {"src_ip": host_ip(graph, flow.src), "dst_ip": host_ip(graph, flow.dst)}
        values.update(dict(flow.match))
        match = {}
        for logical, p4_field in sorted(self.fabric.config.te_match_fields.items()):
            if logical not in values:
                raise ValueError(f"flow {flow.name}: no value for TE key {logical!r} (give it in 'match')")
            match[p4_field] = values[logical]
        return match, tuple(sorted((k, str(v)) for k, v in match.items()))

    @set_ev_cls(EventFabricProgrammed)
    def _programmed(self, _ev):
        """Enable TE if the program has the TE table; place the flows of the flows file."""
        fabric = self.fabric
        config = fabric.config
        self.table = find_object(fabric.pipeline.p4info, "tables", config.te_table)
        if self.table is None:
            fabric.add_note(f"TE disabled: program {fabric.pipeline.program_path} has no table "
                            f"{config.te_table}; flows follow ECMP")
            return
        self.enabled = True
        fabric.update_te_status(enabled=True, table=self.table)
        if config.te_flows_file:
            try:
                for flow in load_flows(config.te_flows_file):
                    self.flows[flow.name] = flow
            except Exception as error:
                LOG.exception("reading %s failed", config.te_flows_file)
                fabric.add_note(f"TE flows file {config.te_flows_file} unusable: {error}")
        self._place("start")

    @set_ev_cls(EventFlowsAnnounced)
    def _flows_announced(self, ev):
        """Replace or add known flows, then place them."""
        if ev.replace:
            self.flows = {}
        for flow in ev.flows:
            self.flows[flow.name] = flow
        LOG.info("TE: %d flows announced (replace=%s), %d known", len(ev.flows), ev.replace, len(self.flows))
        if self.enabled:
            self._place("flows announced")
        else:
            self.fabric.update_te_status(flows=len(self.flows))

    @set_ev_cls(EventLinkStatus)
    def _link_status(self, ev):
        """Place the flows again around failed links."""
        pair = node_pair(ev.a, ev.b)
        if ev.status == "down":
            self.failed_pairs.add(pair)
        else:
            self.failed_pairs.discard(pair)
        if self.enabled and self.fabric.config.routing != "route-only":
            self._place(f"link {ev.a}-{ev.b} {ev.status}")

    def _place(self, reason):
        """Compute the placement and write the difference to the TE tables."""
        fabric = self.fabric
        started = time.monotonic()
        try:
            placement = place_flows(fabric.graph, list(self.flows.values()),
                                    failed_links=[tuple(sorted(p)) for p in self.failed_pairs])
            desired = {}
            for switch, entries in placement.entries.items():
                if switch not in fabric.programmer.clients:
                    continue
                for entry in entries:
                    match, key = self._match(entry.flow)
                    if (switch, key) in desired and desired[(switch, key)][1] != entry.port:
                        fabric.add_note(f"TE: flow {entry.flow.name} shares its match with "
                                        f"{desired[(switch, key)][0]}; it follows that flow's path")
                        continue
                    desired.setdefault((switch, key), (entry.flow.name, entry.port, match))
            written = self._write(desired)
        except Exception as error:
            LOG.exception("TE placement failed (%s)", reason)
            fabric.add_note(f"TE placement failed ({reason}): {error}")
            return
        self.version += 1
        fabric.update_te_status(version=self.version, entries=len(self.installed), flows=len(self.flows),
                                unplaced=sorted(placement.unplaced), max_load=placement.max_load(),
                                paths={name: [hop.node for hop in path] + [path[-1].next_node]
                                       for name, path in sorted(placement.paths.items())})
        LOG.info("TE placement v%d (%s): %d flows, %d entries written, max link load %.2f, %.1f ms",
                 self.version, reason, len(self.flows), written, placement.max_load(),
                 (time.monotonic() - started) * 1000.0)

    def _write(self, desired):
        """Insert, modify and delete TE entries so the switches hold ``desired``; returns writes."""
        fabric = self.fabric
        config = fabric.config
        clients = fabric.programmer.clients
        written = 0
        for (switch, key) in sorted(set(self.installed) - set(desired)):
            _, _, match = self.installed[(switch, key)]
            clients[switch].delete_table_entry(self.table, match)
            del self.installed[(switch, key)]
            written += 1
        for (switch, key), (name, port, match) in sorted(desired.items()):
            current = self.installed.get((switch, key))
            if current is not None and current[1] == port:
                continue
            params = fabric.programmer.next_hop_params(switch, port)
            write = clients[switch].modify_table_entry if current is not None else \
                clients[switch].insert_table_entry
            write(self.table, match, action=config.te_action, params=params)
            self.installed[(switch, key)] = (name, port, match)
            written += 1
        return written

    def close(self):
        """Nothing to release: the routing app owns the P4Runtime sessions."""
