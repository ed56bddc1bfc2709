"""The ``fcplus`` controller kind: programs p4src/fcplus.p4 on an FC+/FC fabric and sets its lossless queues.

At start, in the caller's process: push the pipeline (P4Runtime), give every
switch port its egress queues (rate, depth, 8 priorities) and the switch its
PFC settings over the embedded switch's control socket (queue and PFC
settings are the target's, as BMv2 sets queue rates over its own CLI, not
P4Runtime), then write the routing's entries (:mod:`.programming`) over
P4Runtime.  It never reroutes (the experiments are about deadlock, not failures).
"""
import time

from testbed.controllers.contract import DEFAULT_DETECTION_DELAY_MS
from testbed.controllers.fabric_programmer import programmer_for_network
from testbed.controllers.fcplus.programming import fcplus_entries
from testbed.controllers.routing import is_host, port_toward
from testbed.embedded_switch.port_control import configure
from testbed.errors import ParameterError, TestbedError
from testbed.mechanisms.fcplus import PFC_SWITCH_FIELDS
from testbed.modes import PARAMETERS
from testbed.topologies.fcplus.routing import ROUTINGS

def _param(mode_params, name):
    return mode_params.get(name, PARAMETERS[name].default)


class FCPlusController:
    """Programs fcplus.p4 from the topology's routing; sets queues and PFC.

    Args:
        detection_delay_ms: recorded only (it never reacts to failures).
        routing: one of :data:`~testbed.topologies.fcplus.routing.ROUTINGS` (a mode's controller option).
        pfc_switches: ``{switch: {pfc_lossless, pfc_buffer_packets, ...}}``: switches with their own PFC
            settings (``controller.pfc_switches``, checked by testbed/mechanisms/fcplus/checks.py); the
            others take mode_params'.

    The ``mode_params`` it reads are declared in testbed/mechanisms/fcplus.
    """

    kind = "fcplus"

    def __init__(self, detection_delay_ms=DEFAULT_DETECTION_DELAY_MS, routing="dfksp", pfc_switches=None):
        if routing not in ROUTINGS:
            raise ParameterError("routing", routing, "one of: " + ", ".join(ROUTINGS))
        self.routing_name = routing
        self.pfc_switches = dict(pfc_switches or {})
        self.pfc_settings = {}   # switch -> the PFC settings it was given
        self.detection_delay_ms = detection_delay_ms
        self.reactions = []
        self.notes = []
        self.entries_written = 0
        self.mode_params_written = {}
        self.programmer = None
        self.routing = {}

    def start(self, network, pipeline, mode_params, required_params=(), progress=None, **_options):
        """Push the pipeline, set queues and PFC, write the routing's entries.

        Raises:
            TestbedError: the topology is not FC+/FC, or a switch has no control socket (not embedded).
        """
        topo = network.topo
        if not hasattr(topo, "tor_graph"):
            raise TestbedError(f"controller.kind fcplus needs an fcplus or fc topology, not {topo.kind}")
        routing = self.routing_name
        k, n_lp = _param(mode_params, "fcplus_k"), _param(mode_params, "fcplus_n_lp")
        started = time.monotonic()
        graph = topo.graph()
        hosts = {}
        for host in graph.nodes:
            if is_host(graph, host):
                [(_, tor, data)] = list(graph.edges(host, data=True))
                hosts[host] = (tor, port_toward(data, tor), graph.nodes[host]["ip"].split("/")[0],
                               graph.nodes[host]["mac"])
        entries, paths = fcplus_entries(topo.tor_graph(), hosts, routing, k, n_lp)
        self.routing = {"routing": routing, "k": k, "n_lp": n_lp, "compute_s": time.monotonic() - started,
                        "paths_per_pair": sum(len(found) for found in paths.values()) / max(1, len(paths))}
        self.programmer = programmer_for_network(network, pipeline, progress=progress)
        self.programmer.connect()
        self.programmer.push_pipeline()
        self._configure_queues(network, graph, mode_params)
        for tor, tables in entries.items():
            self.entries_written += self._write(self.programmer.clients[tor], tables)
        self.mode_params_written = {name: _param(mode_params, name) for name in
                                    ("fcplus_k", "fcplus_n_lp", "pfc_lossless",
                                     "fabric_port_rate_pps", "host_port_rate_pps",
                                     "pfc_xoff_packets", "pfc_xon_packets",
                                     "pfc_headroom_packets", "pfc_buffer_packets")}
        self.notes.append(f"fcplus: routing {routing}, K={k}, N_lp={n_lp}, {len(paths)} ToR pairs")

    def _configure_queues(self, network, graph, mode_params):
        """Every switch port: its rate (0: unlimited), 8 priorities; PFC on the lossless classes."""
        fabric_rate = _param(mode_params, "fabric_port_rate_pps") or None
        host_rate = _param(mode_params, "host_port_rate_pps") or None
        description = network.describe()["switches"]
        unknown = sorted(set(self.pfc_switches) - set(description))
        if unknown:
            raise ParameterError("controller.pfc_switches", unknown[0], "switches of the network: "
                                 + ", ".join(sorted(description)))
        for name, entry in sorted(description.items()):
            control = entry.get("control_path")
            if not control:
                raise TestbedError(f"switch {name}: no control socket; PFC and port queues need the embedded target")
            # a switch on another server is configured there (through its server's control relay)
            via = getattr(network.net.get(name), "control_via", None)
            ports = sorted((port_toward(data, name), is_host(graph, other))
                           for _, other, data in graph.edges(name, data=True))
            for port, to_host in ports:
                configure(control, {"command": "queue", "port": port,
                                    "rate_pps": host_rate if to_host else fabric_rate,
                                    "depth_packets": _param(mode_params, "queue_depth_packets"), "priorities": 8},
                          via=via)
            settings = self.pfc_switches.get(name) or {field: _param(mode_params, field) for field in PFC_SWITCH_FIELDS}
            self.pfc_settings[name] = dict(settings)
            lossless = settings["pfc_lossless"]   # 0: PFC off, n: classes 1..n lossless
            if lossless:
                configure(control, {"command": "pfc", "lossless": list(range(1, lossless + 1)),
                                    **{field[len("pfc_"):]: settings[field] for field in PFC_SWITCH_FIELDS[1:]}},
                          via=via)
            else:
                configure(control, {"command": "pfc", "off": True}, via=via)

    @staticmethod
    def _write(client, tables):
        written = 0
        with client.batch():
            for dscp, klass in tables["classify"]:
                client.insert_table_entry("MyIngress.classify", {"hdr.ipv4.dscp": dscp},
                                          "MyIngress.set_priority", {"dscp": klass})
                written += 1
            for ip, mac, port in tables["host_route"]:
                client.insert_table_entry("MyIngress.host_route", {"hdr.ipv4.dstAddr": ip},
                                          "MyIngress.to_host", {"dmac": mac, "port": port})
                written += 1
            for src, dst, n in tables["path_count"]:
                client.insert_table_entry("MyIngress.path_count", _pair_match(src, dst),
                                          "MyIngress.set_path_count", {"n": n}, priority=1)
                written += 1
            for src, dst, index, port in tables["path_next"]:
                match = dict(_pair_match(src, dst), **{"meta.fc.path_index": index})
                client.insert_table_entry("MyIngress.path_next", match, "MyIngress.set_port", {"port": port},
                                          priority=1)
                written += 1
            for in_port, out_port, current, new in tables["priority_transition"]:
                client.insert_table_entry("MyIngress.priority_transition",
                                          {"standard_metadata.ingress_port": in_port,
                                           "standard_metadata.egress_spec": out_port, "hdr.ipv4.dscp": current},
                                          "MyIngress.set_priority", {"dscp": new})
                written += 1
        return written

    def notify(self, failure):
        """Recorded only: this controller never reroutes."""
        self.reactions.append({"failure_index": failure.index, "action": failure.action, "failed_at_s": None,
                               "reacted_at_s": None, "reaction_s": None, "compute_s": None,
                               "entries_written": None, "error": "fcplus controller does not react"})

    def client(self, switch):
        """The primary P4Runtime session to ``switch``."""
        return self.programmer.clients.get(switch) if self.programmer is not None else None

    def set_time_zero(self, t0_ns):
        """Nothing is timed against it."""

    def results(self, t0_ns):
        """The routing it installed, for results.json's ``controller`` section."""
        return {"fcplus": dict(self.routing, pfc_switches={name: self.pfc_settings[name]
                                                           for name in sorted(self.pfc_switches)})}

    def stop(self):
        """Close every session (safe to call twice)."""
        if self.programmer is not None:
            self.programmer.close()
            self.programmer = None


def _pair_match(src, dst):
    mask = lambda length: (0xFFFFFFFF << (32 - length)) & 0xFFFFFFFF  # noqa: E731
    return {"hdr.ipv4.srcAddr": (src[0], mask(src[1])), "hdr.ipv4.dstAddr": (dst[0], mask(dst[1]))}
