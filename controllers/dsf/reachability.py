"""What the DSF control plane computes from the topology and the link state.

Pure functions on the topology multigraph of a :class:`testbed.topologies.dsf.topology.DSFTopo`:

* :func:`fabric_addressing`: interface node numbers (RDSWs, 1, 2, ... in
  plane, cluster, index order) and system ports (every host port of the
  fabric, 0, 1, ... in host order), with each port's local port and rate;
* :func:`compute_reachability`: for every destination RDSW, the withdrawals of
  Input Balanced Mode (:func:`testbed.topologies.dsf.reachability.input_balanced_withdrawals`,
  one seeded generator per destination: :func:`ibm_rng`), then every node's
  links with reachability to it (:func:`~testbed.topologies.dsf.reachability.reachable_links`)
  as ports, and each RDSW's reachable share toward it (its reachable capacity
  over the same without failures, in permille).

Input Balanced Mode is stateless here: the withdrawals are a function of the
topology, the failed links and the seed, recomputed from scratch on every link
event, so the same failures always give the same withdrawals (and a repaired
link gives back what it took).
"""
import random
from dataclasses import dataclass, field
from typing import Dict, List, Tuple

from testbed.errors import ParameterError
from testbed.p4.v1model.dsf.constants import MAX_SYSTEM_PORTS, PERMILLE
from testbed.topologies.dsf.reachability import input_balanced_withdrawals, links_between, reachable_links
from testbed.topologies.graph import is_host, port_toward



@dataclass(frozen=True)
class SystemPort:
    """A host port of the fabric: its number, node, local port, rate and host."""

    number: int
    rdsw: str
    local_port: int
    rate_kbps: int
    host: str


@dataclass
class FabricAddressing:
    """Node numbers and system ports of a DSF fabric.

    Attributes:
        nodes: ``{rdsw name: node number}`` (numbers from 1).
        system_ports: ``{host name: SystemPort}``.
    """

    nodes: Dict[str, int] = field(default_factory=dict)
    system_ports: Dict[str, SystemPort] = field(default_factory=dict)


@dataclass
class Reachability:
    """The reachability state of the whole fabric for one set of failed links.

    Attributes:
        next_hops: ``{switch: {dest node number: [ports]}}``: the switch's links with
            reachability to each destination (absent or empty: none).
        shares: ``{rdsw: {dest node number: permille}}``: reachable capacity toward the
            destination over the failure-free one.
        withdrawals: ``{dest rdsw: [(advertiser, neighbour, key)]}`` of Input Balanced Mode (sorted).
        failed_links: the failed links ``(a, b, key)`` used.
    """

    next_hops: Dict[str, Dict[int, List[int]]] = field(default_factory=dict)
    shares: Dict[str, Dict[int, int]] = field(default_factory=dict)
    withdrawals: Dict[str, List[Tuple[str, str, int]]] = field(default_factory=dict)
    failed_links: List[Tuple[str, str, int]] = field(default_factory=list)


def _rdsws(graph):
    rdsws = [n for n, data in graph.nodes(data=True) if data.get("role") == "rdsw"]
    return sorted(rdsws, key=lambda n: (graph.nodes[n].get("plane", 0), graph.nodes[n].get("cluster", 0),
                                        graph.nodes[n].get("index", 0), n))


def fabric_addressing(graph):
    """Number the interface nodes and the system ports of a DSF topology.

    Raises:
        ParameterError: the topology has no RDSW, or more hosts than the programs' system ports.
    """
    rdsws = _rdsws(graph)
    if not rdsws:
        raise ParameterError("topology", "no rdsw", "a DSF topology (kind dsf)")
    addressing = FabricAddressing(nodes={name: number for number, name in enumerate(rdsws, start=1)})
    hosts = sorted((n for n in graph.nodes if is_host(graph, n)), key=lambda n: (len(n), n))
    if len(hosts) > MAX_SYSTEM_PORTS:
        raise ParameterError("topology", f"{len(hosts)} hosts", f"at most {MAX_SYSTEM_PORTS} hosts (system ports)")
    for number, host in enumerate(hosts):
        (_, rdsw, data), = [(h, other, data) for h, other, data in graph.edges(host, data=True)]
        addressing.system_ports[host] = SystemPort(number, rdsw, port_toward(data, rdsw),
                                                   int(round(float(data["capacity_mbps"]) * 1000)), host)
    return addressing


def ibm_rng(seed, dest):
    """The random generator Input Balanced Mode uses toward destination RDSW ``dest`` for ``seed``."""
    return random.Random(f"dsf-ibm/{seed}/{dest}")


def failed_link_keys(graph, failed_pairs):
    """Every link ``(a, b, key)`` between the node pairs of ``failed_pairs`` (pairs of names)."""
    links = []
    for pair in failed_pairs:
        a, b = sorted(pair)
        links += links_between(graph, a, b)
    return sorted(links)


def _capacity(graph, links):
    return sum(float(graph[a][b][key]["capacity_mbps"]) for a, b, key in links)


def compute_reachability(graph, failed_pairs=(), input_balanced=True, seed=0):
    """The reachability tables of every node for a set of failed links.

    Args:
        graph: the DSF topology multigraph.
        failed_pairs: node pairs whose links are all down (frozensets or 2-tuples).
        input_balanced: apply Input Balanced Mode (else only links that lost their
            path stop carrying reachability).
        seed: the seed of Input Balanced Mode's random choices.

    Returns:
        Reachability
    """
    failed = failed_link_keys(graph, failed_pairs)
    addressing = fabric_addressing(graph)
    state = Reachability(failed_links=failed)
    for dest, node in addressing.nodes.items():
        withdrawn = set()
        if input_balanced and failed:
            withdrawn = input_balanced_withdrawals(graph, dest, failed, rng=ibm_rng(seed, dest))
        state.withdrawals[dest] = sorted(withdrawn)
        now = reachable_links(graph, dest, failed, withdrawn)
        intact = reachable_links(graph, dest) if failed else now
        for device, links in now.items():
            ports = sorted(port_toward(graph[a][b][key], a) for a, b, key in links)
            state.next_hops.setdefault(device, {})[node] = ports
            if graph.nodes[device].get("role") == "rdsw":
                full = _capacity(graph, intact[device])
                share = int(round(PERMILLE * _capacity(graph, links) / full)) if full else 0
                state.shares.setdefault(device, {})[node] = share
    return state
