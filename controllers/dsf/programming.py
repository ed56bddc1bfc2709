"""Program a DSF fabric over P4Runtime: node programs, addressing, reachability tables.

:class:`DSFProgrammer` is a :class:`~testbed.controllers.fabric_programmer.FabricProgrammer`
(its sessions, concurrency and batched writes) for the two DSF node programs:

* RDSWs run p4src/dsf_rdsw.p4 and get their node number (``MyIngress.dsf_node``),
  a /32 route per host of the fabric (``MyIngress.dsf_hosts``: egress node, system
  port, the MACs the packet leaves the fabric with), their host ports
  (``MyIngress.dsf_system_ports``: system port -> local port and rate, for the
  credit scheduler and the delivery of reassembled packets) and their reachable
  share toward every other node (``MyIngress.dsf_reach_share``);
* FDSWs and SDSWs run p4src/dsf_fabric.p4;
* every node gets its reachability table ``MyIngress.dsf_reach``: one selector
  group per destination node (id = node number) whose members (``dsf_to_link``,
  member id = port + 1) are its links with reachability to that node.

:meth:`DSFProgrammer.reroute` recomputes reachability (and Input Balanced Mode)
for the links now down and writes only the difference, in dependency order:
new members, then new and changed groups, then new entries, then the entries of
destinations that lost every link (cells toward them are dropped and counted),
then their groups.  P4Runtime lets a server apply one Write's updates in any
order, so each step is its own Write.
"""
import os
import time

from testbed.controllers.dsf.reachability import compute_reachability, fabric_addressing
from testbed.controllers.fabric_programmer import FabricProgrammer, switch_mac
from testbed.modes import MODES, P4SRC_DIR
from testbed.topologies.graph import host_ip

RDSW = "rdsw"
REACH_TABLE = "MyIngress.dsf_reach"
SPRAY_SELECTOR = "MyIngress.dsf_spray_selector"
TO_LINK = "MyIngress.dsf_to_link"


def node_program_paths(rdsw_program=None, mode="dsf"):
    """``{role: program path}`` of a DSF mode: its program (or ``rdsw_program``) for the RDSWs, its
    ``node_programs`` (testbed/modes.py) for the fabric and spine nodes."""
    entry = MODES[mode]
    paths = {RDSW: rdsw_program or os.path.join(P4SRC_DIR, entry.program)}
    for role, program in entry.node_programs:
        paths[role] = os.path.join(P4SRC_DIR, program)
    return paths


def member_id(port):
    """The selector member of a link."""
    return port + 1


class DSFProgrammer(FabricProgrammer):
    """Pushes the DSF node programs and keeps every node's tables up to date.

    Args:
        graph: the DSF topology multigraph.
        switches: ``{name: {"grpc", "device_id"}}``.
        pipelines: ``{role: PipelineConfig}`` for ``rdsw``, ``fdsw`` and ``sdsw``.
        election_id: P4Runtime election id.
        input_balanced: apply Input Balanced Mode on link events.
        ibm_seed: the seed of its random choices.

    Attributes:
        addressing: the fabric's :class:`~testbed.controllers.dsf.reachability.FabricAddressing`.
        reachability: the :class:`~testbed.controllers.dsf.reachability.Reachability` written last.
    """

    def __init__(self, graph, switches, pipelines, election_id=(0, 1), input_balanced=True, ibm_seed=0):
        super().__init__(graph, switches, pipelines[RDSW], election_id=election_id)
        self.pipelines = dict(pipelines)
        self.input_balanced = bool(input_balanced)
        self.ibm_seed = int(ibm_seed)
        self.addressing = fabric_addressing(graph)
        self.reachability = None
        self._reach = {}  # switch -> {node: tuple of ports} as written
        self._shares = {}  # rdsw -> {node: permille} as written
        self._members = {}  # switch -> set of member ports written

    def role(self, switch):
        """``rdsw``, ``fdsw`` or ``sdsw``."""
        return self.graph.nodes[switch]["role"]

    def rdsw_clients(self):
        """``{rdsw: session}``: the nodes that carry the run-time parameters."""
        return {name: client for name, client in self.clients.items() if self.role(name) == RDSW}

    # -- pipeline and static tables -----------------------------------------------------------
    def push_pipeline(self):
        """SetForwardingPipelineConfig on every node: its role's program."""
        def push(name):
            config = self.pipelines[self.role(name)]
            self.clients[name].set_pipeline(p4info=config.p4info, device_config=config.device_config,
                                            target=config.target)

        self._raise_first(self._for_each(self.clients, push, workers=max(1, len(self.pipelines))))

    def static_updates(self, switch):
        """The writes of an RDSW's node number, host routes and host ports (callables)."""
        client = self.clients[switch]
        addressing = self.addressing
        updates = [lambda: client.set_default_action("MyIngress.dsf_node", "MyIngress.set_node",
                                                     {"node": addressing.nodes[switch]})]
        for host, port in sorted(addressing.system_ports.items(), key=lambda item: item[1].number):
            params = {"node": addressing.nodes[port.rdsw], "port": port.number,
                      "dmac": self.graph.nodes[host]["mac"],
                      "smac": switch_mac(self.switches[port.rdsw]["device_id"])}
            ip = host_ip(self.graph, host)
            updates.append(lambda ip=ip, params=params: client.insert_table_entry(
                "MyIngress.dsf_hosts", {"hdr.ipv4.dstAddr": (ip, 32)}, "MyIngress.to_system_port", params))
            if port.rdsw == switch:
                updates.append(lambda port=port: client.insert_table_entry(
                    "MyIngress.dsf_system_ports", {"meta.dsf.lookup_port": port.number}, "MyIngress.local_port",
                    {"port": port.local_port, "rate_kbps": port.rate_kbps}))
        return updates

    def program(self):
        """Push the programs, write every RDSW's static tables and every node's reachability.

        Returns:
            int: updates written.
        """
        self.push_pipeline()
        outcomes = self._for_each([s for s in self.clients if self.role(s) == RDSW],
                                  lambda s: self._write_all(self.clients[s], self.static_updates(s)))
        self._raise_first(outcomes)
        written = sum(count for count, _ in outcomes.values())
        return written + self.reroute(set())["entries_written"]

    def _write_all(self, client, updates):
        self._write(client, updates, lambda _index: None)
        return len(updates)

    # -- reachability -------------------------------------------------------------------------
    def reroute(self, failed_links):
        """Recompute reachability (and Input Balanced Mode) without ``failed_links``; write the difference.

        Args:
            failed_links: node pairs whose links are down.

        Returns:
            dict: ``{"entries_written", "seconds", "compute_s", "write_s", "withdrawals"}``
            (``withdrawals``: Input Balanced Mode's, ``{dest rdsw: [[advertiser, neighbour, key]]}``).
        """
        started = time.monotonic()
        self.failed_links = {tuple(sorted(pair)) for pair in failed_links}
        state = compute_reachability(self.graph, self.failed_links, self.input_balanced, self.ibm_seed)
        computed = time.monotonic()
        outcomes = self._for_each(self.clients, lambda switch: self._write_reach(switch, state))
        self.unreachable = {}
        written = 0
        for switch, (count, error) in sorted(outcomes.items()):
            if error is not None:
                self.unreachable[switch] = f"{type(error).__name__}: {error}"
            else:
                written += count
        self.reachability = state
        done = time.monotonic()
        return {"entries_written": written, "seconds": done - started, "compute_s": computed - started,
                "write_s": done - computed,
                "withdrawals": {dest: [list(w) for w in rows] for dest, rows in state.withdrawals.items() if rows}}

    def _write_reach(self, switch, state):
        """Bring ``switch``'s reachability (and share) tables to ``state``; returns updates written."""
        client = self.clients[switch]
        wanted = {node: tuple(ports) for node, ports in state.next_hops.get(switch, {}).items() if ports}
        written = self._reach.setdefault(switch, {})
        members = self._members.setdefault(switch, set())
        new_ports = sorted({port for ports in wanted.values() for port in ports} - members)
        self._write(client, [lambda p=p: client.insert_member(SPRAY_SELECTOR, member_id(p), TO_LINK, {"port": p})
                             for p in new_ports], lambda i: members.add(new_ports[i]))
        groups = [(node, ports) for node, ports in sorted(wanted.items()) if written.get(node) != ports]

        def group_update(node, ports):
            weights = [(member_id(port), 1) for port in ports]
            if node in written:
                return lambda: client.modify_group(SPRAY_SELECTOR, node, weights)
            return lambda: client.insert_group(SPRAY_SELECTOR, node, weights)
        new_entries = [node for node, _ in groups if node not in written]
        self._write(client, [group_update(node, ports) for node, ports in groups],
                    lambda i: written.__setitem__(groups[i][0], groups[i][1]))
        self._write(client, [lambda n=n: client.insert_table_entry(REACH_TABLE, {"hdr.dsf.dst_node": n}, group_id=n)
                             for n in new_entries], lambda _i: None)
        gone = sorted(node for node in written if node not in wanted)
        self._write(client, [lambda n=n: client.delete_table_entry(REACH_TABLE, {"hdr.dsf.dst_node": n})
                             for n in gone], lambda _i: None)
        self._write(client, [lambda n=n: client.delete_group(SPRAY_SELECTOR, n) for n in gone],
                    lambda i: written.pop(gone[i], None))
        count = len(new_ports) + len(groups) + len(new_entries) + 2 * len(gone)
        if self.role(switch) == RDSW:
            count += self._write_shares(switch, client, state.shares.get(switch, {}))
        return count

    def _write_shares(self, switch, client, shares):
        written = self._shares.setdefault(switch, {})
        changed = [(node, share) for node, share in sorted(shares.items()) if written.get(node) != share]

        def update(node, share):
            write = client.modify_table_entry if node in written else client.insert_table_entry
            return lambda: write("MyIngress.dsf_reach_share", {"hdr.dsf.src_node": node}, "MyIngress.set_share",
                                 {"permille": share})
        self._write(client, [update(node, share) for node, share in changed],
                    lambda i: written.__setitem__(changed[i][0], changed[i][1]))
        return len(changed)
