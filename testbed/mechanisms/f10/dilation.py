"""F10's path dilation under concurrent failures (seed 002, section 7.5, Figure 10), computed.

A packet is walked through the fabric the way p4src/f10.p4 forwards it, on the
tables the F10 controller writes: the primary routes
(:func:`testbed.controllers.routing.compute_host_routes` of the intact fabric)
and each switch's :class:`~testbed.controllers.f10.routes.SwitchPlan` (backups
from the one detour algorithm, :mod:`testbed.topologies.f10.detours`, and the
detour phases).  Where the primary next hop is down the switch takes a backup;
a backup marked by a scheme sends the packet along its detour phases, after
which it routes normally and is never detoured again.  A port is down when its
neighbour switch failed or its link did (the detector's view once it has
decided).  Every selector choice (ECMP, backup group, detour phase) is a seeded
draw per flow, like the data plane's per-flow hash.

Two ways a switch may choose among a selector's members are walked:

* ``working_only=False``: as the P4 program does: the hash picks any member, and a
  member whose port is down drops the packet (``f10_no_detour``);
* ``working_only=True``: the paper's assumption: a switch picks among the members
  whose ports work (its own detector knows them).

A *reroute* is a flow that took a Scheme-1 or Scheme-2 detour; its *extra hops*
are the switches it crossed minus those of its failure-free shortest path (what
the receiver's TTL shows, :func:`testbed.topologies.f10.paths.extra_hops_from_ttl`).
Around a failed parent an upward packet simply takes another parent (no extra
hop, not counted as a reroute).
"""
import random
from collections import Counter

from testbed.controllers.f10.routes import PHASE_DOWN, PHASE_UP, plan_switch
from testbed.controllers.routing import compute_host_routes
from testbed.errors import ParameterError
from testbed.topologies.f10.detours import SCHEME_NONE
from testbed.topologies.f10.paths import switch_hops
from testbed.topologies.graph import host_ip, hosts, is_host, node_pair, port_toward, switches

MAX_SWITCHES = 64  # a walk crossing more switches than this is a loop (the TTL would end it)
_DONE = 3  # the detour's phases are over: route normally, never detour again


class FabricWalker:
    """Walks flows through one F10-programmed fabric (see the module docstring).

    Args:
        graph: the intact topology multigraph (``topo.graph()``).

    >>> from testbed.topologies.ab_fattree import ABFatTree
    >>> walker = FabricWalker(ABFatTree(k=4).graph())
    >>> walker.walk("h5", "h1", failed_switches={"a0_0"}, seed=1)["outcome"]
    'delivered'
    """

    def __init__(self, graph):
        self.graph = graph
        self.routes = compute_host_routes(graph)
        self._plans = {}
        self._ports = {}  # switch -> {port: (neighbour, neighbour's port)}
        self.edge_of = {host: next(iter(graph.neighbors(host))) for host in hosts(graph)}

    def plan(self, switch):
        """The :class:`~testbed.controllers.f10.routes.SwitchPlan` of ``switch`` (computed once)."""
        if switch not in self._plans:
            self._plans[switch] = plan_switch(self.graph, switch, self.routes)
        return self._plans[switch]

    def ports(self, switch):
        """``{port: (neighbour, neighbour's port)}`` of ``switch``."""
        if switch not in self._ports:
            self._ports[switch] = {port_toward(data, switch): (other, port_toward(data, other))
                                   for _, other, data in self.graph.edges(switch, data=True)}
        return self._ports[switch]

    def walk(self, src, dst, failed_switches=(), failed_links=(), seed=0, working_only=True):
        """Forward one flow from host ``src`` to host ``dst``.

        Args:
            src, dst: hosts (their edge switches must work).
            failed_switches: names of failed switches.
            failed_links: node pairs ``(a, b)`` of failed links.
            seed: the flow's hash: every selector choice is drawn from it.
            working_only: choose among working members only (see the module docstring).

        Returns:
            dict: ``outcome`` (``"delivered"``, ``"dropped"`` or ``"loop"``), ``switches``
            (crossed), ``scheme`` (of the detour taken, 0 for none) and ``path``.
        """
        failed_switches = set(failed_switches)
        failed_pairs = {node_pair(*link) for link in failed_links}
        rng = random.Random(f"{seed}:{src}:{dst}")
        ip = host_ip(self.graph, dst)

        def down(switch, port):
            neighbour = self.ports(switch)[port][0]
            return neighbour in failed_switches or node_pair(switch, neighbour) in failed_pairs

        def choose(switch, members, port_of, skip_down=working_only):
            members = sorted(members, key=port_of)
            working = [member for member in members if not down(switch, port_of(member))]
            pool = working if skip_down and working else members
            return rng.choice(pool) if pool else None

        node, ingress, phase, scheme, path = self.edge_of[src], None, None, SCHEME_NONE, []
        while True:
            path.append(node)
            if len(path) > MAX_SWITCHES:
                return {"outcome": "loop", "switches": len(path), "scheme": scheme, "path": path}
            plan = self.plan(node)
            if phase == PHASE_DOWN:
                port, phase = choose(node, plan.detour_down, int), PHASE_UP
            elif phase == PHASE_UP:
                port, phase = choose(node, plan.detour_up.get(ingress, ()), int), _DONE
            else:
                # the primary group knows no port state: a down primary is what takes the backup
                port = choose(node, self.routes.get(node, {}).get(ip, ()), int, skip_down=False)
                if port is not None and down(node, port):
                    backups = plan.backups.get((dst, port), ()) if phase is None else ()
                    backup = choose(node, backups, lambda item: item.port)
                    if backup is None:
                        port = None
                    else:
                        port = backup.port
                        if backup.phase:
                            phase, scheme = backup.phase, backup.scheme
            if port is None or down(node, port):
                return {"outcome": "dropped", "switches": len(path), "scheme": scheme, "path": path}
            neighbour, ingress = self.ports(node)[port]
            if is_host(self.graph, neighbour):
                outcome = "delivered" if neighbour == dst else "dropped"
                return {"outcome": outcome, "switches": len(path), "scheme": scheme, "path": path}
            node = neighbour


def failure_scenario(graph, failures, kind="switch", seed=0):
    """Draw ``failures`` failed switches (never edge switches) or switch-to-switch links, seeded.

    Args:
        graph: the topology multigraph.
        failures: how many.
        kind: ``"switch"`` or ``"link"``.
        seed: the draw's seed.

    Returns:
        tuple: ``(failed switches, failed links)`` (sorted lists; links as node pairs).

    Raises:
        ParameterError: unknown kind, or more failures than candidates.

    >>> from testbed.topologies.fattree import FatTree
    >>> failure_scenario(FatTree(k=4).graph(), 2, seed=3)
    (['c0', 'c1'], [])
    """
    if kind == "switch":
        candidates = [name for name in switches(graph) if graph.nodes[name]["level"] > 1]
    elif kind == "link":
        candidates = sorted({tuple(sorted((a, b))) for a, b in graph.edges()
                             if not is_host(graph, a) and not is_host(graph, b)})
    else:
        raise ParameterError("kind", kind, "switch or link")
    if not 0 <= failures <= len(candidates):
        raise ParameterError("failures", failures, f"an integer in [0, {len(candidates)}] ({kind}es of the topology)")
    drawn = sorted(random.Random(f"{seed}:{kind}:{failures}").sample(candidates, failures))
    return (drawn, []) if kind == "switch" else ([], drawn)


def scenario_dilation(walker, failed_switches=(), failed_links=(), flows=None, seed=0, working_only=True):
    """Walk every flow of one failure scenario and count its reroutes' extra hops.

    Args:
        walker: a :class:`FabricWalker`.
        failed_switches, failed_links: the scenario.
        flows: ``[(src, dst)]`` (default: every ordered pair of distinct hosts whose edge switches work).
        seed: the flows' hash seed.
        working_only: see :meth:`FabricWalker.walk`.

    Returns:
        dict: ``extra_hops`` ``{extra: reroutes}`` of the delivered reroutes, ``by_scheme``
        ``{scheme: reroutes}``, ``reroutes_dropped`` (detoured, then dropped), ``dropped`` and
        ``loops`` (every flow), ``flows``.
    """
    graph = walker.graph
    failed = set(failed_switches)
    if flows is None:
        every = hosts(graph)
        flows = [(src, dst) for src in every for dst in every if src != dst]
    flows = [(src, dst) for src, dst in flows
             if walker.edge_of[src] not in failed and walker.edge_of[dst] not in failed]
    extra, by_scheme, reroutes_dropped, dropped, loops = Counter(), Counter(), 0, 0, 0
    shortest = {}
    for src, dst in flows:
        result = walker.walk(src, dst, failed, failed_links, seed=seed, working_only=working_only)
        if result["outcome"] == "loop":
            loops += 1
        elif result["outcome"] == "dropped":
            dropped += 1
        if result["scheme"] == SCHEME_NONE:
            continue
        by_scheme[result["scheme"]] += 1
        if result["outcome"] != "delivered":
            reroutes_dropped += 1
            continue
        pair = (walker.edge_of[src], walker.edge_of[dst])
        if pair not in shortest:
            shortest[pair] = switch_hops(graph, src, dst)
        extra[result["switches"] - shortest[pair]] += 1
    return {"extra_hops": dict(sorted(extra.items())), "by_scheme": dict(sorted(by_scheme.items())),
            "reroutes_dropped": reroutes_dropped, "dropped": dropped, "loops": loops, "flows": len(flows)}


def dilation_table(topologies, failure_counts, trials=3, kind="switch", seed=0, max_flows=None, working_only=True):
    """Figure 10's data: for each topology and number of concurrent failures, the reroutes' extra hops.

    Args:
        topologies: ``{label: graph}`` (a standard and an AB FatTree of the same size, say).
        failure_counts: numbers of concurrent failures (1, 5, 10, 15).
        trials: scenarios drawn per count (seeds ``seed*1000 + trial``).
        kind: ``"switch"`` or ``"link"`` failures.
        seed: the experiment's seed (scenarios and flow hashes).
        max_flows: walk at most this many ordered host pairs per scenario (a seeded sample), None: all.
        working_only: see :meth:`FabricWalker.walk`.

    Returns:
        list: one row per (label, failures): ``label``, ``failures``, ``kind``, ``reroutes``,
        ``mean_extra_hops``, ``at_minimum`` (fraction at the smallest extra hops the label saw over
        every row, None without reroutes), ``minimum``, ``extra_hops``, ``reroutes_dropped``,
        ``flows``, ``dropped``, ``loops``.

    >>> from testbed.topologies.ab_fattree import ABFatTree
    >>> from testbed.topologies.fattree import FatTree
    >>> rows = dilation_table({"fattree": FatTree(k=4).graph(), "abfattree": ABFatTree(k=4).graph()}, [1],
    ...                       trials=4, seed=1)
    >>> [(row["label"], row["mean_extra_hops"]) for row in rows]
    [('fattree', 4.0), ('abfattree', 2.0)]
    """
    rows = []
    for label, graph in topologies.items():
        walker = FabricWalker(graph)
        every = hosts(graph)
        pairs = [(src, dst) for src in every for dst in every if src != dst]
        label_rows = []
        for failures in failure_counts:
            total = {"extra_hops": Counter(), "reroutes_dropped": 0, "flows": 0, "dropped": 0, "loops": 0}
            for trial in range(trials):
                trial_seed = seed * 1000 + trial
                failed_switches, failed_links = failure_scenario(graph, failures, kind, trial_seed)
                flows = pairs
                if max_flows is not None and len(pairs) > max_flows:
                    flows = random.Random(f"{trial_seed}:flows").sample(pairs, max_flows)
                result = scenario_dilation(walker, failed_switches, failed_links, flows, trial_seed, working_only)
                total["extra_hops"].update(result["extra_hops"])
                for key in ("reroutes_dropped", "flows", "dropped", "loops"):
                    total[key] += result[key]
            reroutes = sum(total["extra_hops"].values())
            mean = sum(extra * count for extra, count in total["extra_hops"].items()) / reroutes if reroutes else None
            label_rows.append({"label": label, "failures": failures, "kind": kind, "reroutes": reroutes,
                               "mean_extra_hops": mean, "extra_hops": dict(sorted(total["extra_hops"].items())),
                               "reroutes_dropped": total["reroutes_dropped"], "flows": total["flows"],
                               "dropped": total["dropped"], "loops": total["loops"]})
        seen = [extra for row in label_rows for extra in row["extra_hops"]]
        minimum = min(seen) if seen else None
        for row in label_rows:
            row["minimum"] = minimum
            row["at_minimum"] = row["extra_hops"].get(minimum, 0) / row["reroutes"] if row["reroutes"] else None
        rows += label_rows
    return rows
