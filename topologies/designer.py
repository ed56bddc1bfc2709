"""Two-level fat-tree (folded Clos) designer, after the fat-tree design primer (seed 003).

Given the number of nodes N, the port counts of the edge switches (Pe) and of
the core switches (Pc) and the allowed blocking factor Bl, the primer sizes a
two-level fat-tree with these formulas::

    Eptn = trunc(Pe * Bl / (1 + Bl))    edge ports to nodes
    Eptc = Pe - Eptn                     edge ports to core
    E    = ceil(N / Eptn)                edge switches
    B    = Pc div E                      links per bundle (edge -> one core switch)
    C    = ceil(Eptc / B)                core switches

Variants the primer describes, all implemented here:

* **uniform node distribution**: nodes are spread evenly over the E edge
  switches, so ``Eptn = ceil(N / E)`` and ``Eptc = ceil(Eptn / Bl)``; B and C are
  then computed as usual.  The primer's tool uses it only when asked to or when
  it saves core switches (``distribution="auto"``).
* **bundle distribution**: the first C-1 core switches take bundles of B links
  and the last one the remaining ``Eptc - B*(C-1)`` ("dense"), or, as the primer
  recommends, the Eptc uplinks are split as evenly as possible over the C core
  switches ("even", e.g. 3+2 instead of 4+1).
* **expandability**: the core level is sized for the largest future size M
  (``E_max = ceil(M / Eptn)``, ``B = Pc div E_max``) while only the edge
  switches needed now are installed; later stages only add edge switches and
  new cables.
* **maximum sizes**: ``Nmax = Pe * Pc / 2`` for a non-blocking two-level tree
  and ``Nmax = 2 * (P/2)**L`` for L levels of P-port switches.

Blocking factors are handled as exact fractions (2.6 is 13/5), so
``trunc(36 * 2.6 / 3.6)`` is exactly 26 and never 25.999...
"""
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import List, Optional

from testbed.errors import ParameterError

DISTRIBUTIONS = ("dense", "uniform", "auto")
BUNDLE_SPLITS = ("even", "dense")


# --------------------------------------------------------------------------- validation helpers


def parse_blocking(value, field_name="blocking"):
    """Return a blocking factor as an exact :class:`fractions.Fraction`.

    Args:
        value: an int, float, Fraction, Decimal or a string such as ``"2.6"``,
            ``"2,6"`` (the primer writes decimal commas) or ``"13/5"``.
        field_name: name of the parameter, used in the error.

    Returns:
        Fraction: the blocking factor, >= 1.

    Raises:
        ParameterError: if the value is not a finite number >= 1.
    """
    allowed = "a number >= 1 (1 = non-blocking; 2 means 2 downlinks per uplink)"
    if isinstance(value, bool):
        raise ParameterError(field_name, value, allowed)
    try:
        if isinstance(value, Fraction):
            result = value
        elif isinstance(value, int):
            result = Fraction(value)
        elif isinstance(value, float):
            # repr() gives the shortest decimal that round-trips: 2.6 -> "2.6" -> 13/5.
            result = Fraction(Decimal(repr(value)))
        elif isinstance(value, Decimal):
            result = Fraction(value)
        elif isinstance(value, str):
            text = value.strip().replace(",", ".")
            result = Fraction(Decimal(text)) if "/" not in text else Fraction(text)
        else:
            raise TypeError(type(value).__name__)
    except (ValueError, TypeError, ZeroDivisionError, InvalidOperation, OverflowError):
        raise ParameterError(field_name, value, allowed) from None
    if result < 1:
        raise ParameterError(field_name, value, allowed,
                             "a fat-tree edge switch has at least as many downlinks as uplinks")
    return result


def blocking_for_output(blocking):
    """Return a blocking factor as a JSON-friendly number (int when whole, else float).

    Args:
        blocking: a Fraction (or anything :func:`parse_blocking` accepts).

    Returns:
        int or float.
    """
    blocking = parse_blocking(blocking)
    if blocking.denominator == 1:
        return int(blocking)
    return float(blocking)


def _format_fraction(value):
    """Short text for a Fraction: ``4``, ``2.6``, ``3.5`` or ``10/3`` when not a short decimal."""
    if value.denominator == 1:
        return str(value.numerator)
    as_float = float(value)
    text = f"{as_float:.6g}"
    if Fraction(Decimal(text)) == value:
        return text
    return f"{value.numerator}/{value.denominator}"


def _require_int(name, value, minimum, allowed=None):
    """Return ``value`` if it is an int >= minimum, else raise ParameterError naming ``name``."""
    allowed = allowed or f"an integer >= {minimum}"
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ParameterError(name, value, allowed)
    return value


def _ceil_div(numerator, denominator):
    """Exact ceiling of numerator / denominator for ints or Fractions (denominator > 0)."""
    return -((-numerator) // denominator)


# --------------------------------------------------------------------------- the primer's formulas


def edge_ports_to_nodes(edge_ports, blocking=1):
    """Eptn = trunc(Pe * Bl / (1 + Bl)): edge-switch ports connected to nodes.

    Truncation makes sure the design never blocks more than requested: for
    Pe=36 and Bl=4, Eptn=28 and Eptc=8 (blocking 3.5), because 29/7 would be 4.14.

    Args:
        edge_ports: Pe, ports of an edge switch (int >= 2).
        blocking: Bl, the allowed blocking factor (>= 1; see :func:`parse_blocking`).

    Returns:
        int: Eptn.

    Raises:
        ParameterError: if Pe or Bl is not allowed.
    """
    _require_int("edge_ports", edge_ports, 2)
    bl = parse_blocking(blocking)
    return int(edge_ports * bl / (1 + bl))  # int() of a non-negative Fraction truncates


def edge_ports_to_core(edge_ports, eptn):
    """Eptc = Pe - Eptn: edge-switch ports connected to the core level (uplinks).

    Args:
        edge_ports: Pe (int >= 2).
        eptn: Eptn, ports to nodes (1 <= Eptn < Pe).

    Returns:
        int: Eptc.

    Raises:
        ParameterError: if the counts are not allowed.
    """
    _require_int("edge_ports", edge_ports, 2)
    _require_int("eptn", eptn, 1, f"an integer from 1 to {edge_ports - 1}")
    if eptn >= edge_ports:
        raise ParameterError("eptn", eptn, f"an integer from 1 to {edge_ports - 1}",
                             "an edge switch needs at least one uplink")
    return edge_ports - eptn


def edge_switch_count(nodes, eptn):
    """E = ceil(N / Eptn): number of edge switches.

    Args:
        nodes: N (int >= 1).
        eptn: Eptn, node ports per edge switch (int >= 1).

    Returns:
        int: E.

    Raises:
        ParameterError: if N or Eptn is not a positive integer.
    """
    _require_int("nodes", nodes, 1)
    _require_int("eptn", eptn, 1)
    return _ceil_div(nodes, eptn)


def bundle_size(core_ports, edge_switches):
    """B = Pc div E: the thickest bundle of links from each edge switch to one core switch.

    Every core switch must reach every edge switch, so a two-level tree needs
    E <= Pc; when E > Pc, B would be 0 and the design cannot be built.

    Args:
        core_ports: Pc (int >= 2).
        edge_switches: E (int >= 1).

    Returns:
        int: B (>= 1).

    Raises:
        ParameterError: if Pc or E is invalid, or if E > Pc (B would be 0; names "edge_switches").
    """
    _require_int("core_ports", core_ports, 2)
    _require_int("edge_switches", edge_switches, 1)
    if edge_switches > core_ports:
        raise ParameterError("edge_switches", edge_switches, f"1..Pc = 1..{core_ports}",
                             "B = Pc div E would be 0: a core switch cannot reach every edge switch")
    return core_ports // edge_switches


def _check_buildable(field_name, value, edge_switches, core_ports, eptn):
    """Raise ParameterError naming the user's parameter when E > Pc (B would be 0)."""
    if edge_switches > core_ports:
        raise ParameterError(
            field_name, value, f"1..{core_ports * eptn} with these switches (Nmax = Pc*Eptn)",
            f"it needs E={edge_switches} edge switches but a core switch has only Pc={core_ports} "
            f"ports, so B = Pc div E = 0; use core switches with more ports, edge switches with "
            f"more ports, a higher blocking factor, or a three-level tree")


def core_switch_count(eptc, bundle):
    """C = ceil(Eptc / B): number of core switches.

    Args:
        eptc: Eptc, uplinks per edge switch (int >= 1).
        bundle: B, links per bundle (int >= 1).

    Returns:
        int: C.

    Raises:
        ParameterError: if Eptc or B is not a positive integer.
    """
    _require_int("eptc", eptc, 1)
    _require_int("bundle", bundle, 1)
    return _ceil_div(eptc, bundle)


def uniform_edge_ports(nodes, edge_switches, blocking=1):
    """Uniform node distribution: Eptn = ceil(N / E), Eptc = ceil(Eptn / Bl).

    Args:
        nodes: N (int >= 1).
        edge_switches: E from the dense formula (int >= 1).
        blocking: Bl (>= 1).

    Returns:
        tuple: (Eptn, Eptc) of the uniform distribution.

    Raises:
        ParameterError: if an argument is not allowed.
    """
    _require_int("nodes", nodes, 1)
    _require_int("edge_switches", edge_switches, 1)
    bl = parse_blocking(blocking)
    eptn = _ceil_div(nodes, edge_switches)
    eptc = _ceil_div(Fraction(eptn), bl)
    return eptn, int(eptc)


def effective_blocking(downlinks, uplinks):
    """Blocking factor of an edge switch: downlinks / uplinks (28 / 8 = 3.5).

    Args:
        downlinks: ports used by nodes (int >= 0).
        uplinks: ports to the core (int >= 1).

    Returns:
        Fraction: the exact ratio.

    Raises:
        ParameterError: if uplinks < 1 or downlinks < 0.
    """
    _require_int("downlinks", downlinks, 0)
    _require_int("uplinks", uplinks, 1)
    return Fraction(downlinks, uplinks)


def spread_evenly(total, parts):
    """Split ``total`` items over ``parts`` bins as evenly as possible, larger bins first.

    Used for the uniform node distribution (74 nodes on 4 switches: 19, 19, 18,
    18) and for the more uniform bundle split (5 uplinks over 2 core switches: 3, 2).

    Args:
        total: items to split (int >= 0).
        parts: number of bins (int >= 1).

    Returns:
        list[int]: ``parts`` counts summing to ``total``.

    Raises:
        ParameterError: if the counts are not allowed.
    """
    _require_int("total", total, 0)
    _require_int("parts", parts, 1)
    base, extra = divmod(total, parts)
    return [base + 1] * extra + [base] * (parts - extra)


def dense_node_distribution(nodes, edge_switches, eptn):
    """Fill each edge switch with Eptn nodes; the last one takes the rest (spare ports for expansion).

    Args:
        nodes: N (int >= 1).
        edge_switches: E (int >= 1).
        eptn: node ports per edge switch.

    Returns:
        list[int]: nodes on each edge switch.

    Raises:
        ParameterError: if N does not fit on E switches of Eptn node ports, or does not need all of them.
    """
    _require_int("nodes", nodes, 1)
    _require_int("edge_switches", edge_switches, 1)
    _require_int("eptn", eptn, 1)
    if not (edge_switches - 1) * eptn < nodes <= edge_switches * eptn:
        raise ParameterError("nodes", nodes,
                             f"{(edge_switches - 1) * eptn + 1}..{edge_switches * eptn}",
                             f"E={edge_switches} edge switches with Eptn={eptn} node ports each")
    return [eptn] * (edge_switches - 1) + [nodes - eptn * (edge_switches - 1)]


def core_bundle_sizes(eptc, bundle, core_switches, split="even"):
    """Links from each edge switch to each core switch (the same for every edge switch).

    ``"dense"``: the first C-1 core switches get bundles of B links and the last
    one ``Eptc - B*(C-1)`` (the primer's Fig. 3, 4+1).  ``"even"``: the Eptc
    uplinks are spread as evenly as possible (the primer's recommended Fig. 4,
    3+2); no bundle exceeds B, so no core switch runs out of ports.

    Args:
        eptc: uplinks per edge switch (int >= 1).
        bundle: B (int >= 1).
        core_switches: C (int >= 1), with B*(C-1) < Eptc <= B*C.
        split: "even" or "dense".

    Returns:
        list[int]: one bundle size per core switch.

    Raises:
        ParameterError: on an unknown split or inconsistent counts.
    """
    _require_int("eptc", eptc, 1)
    _require_int("bundle", bundle, 1)
    _require_int("core_switches", core_switches, 1)
    if split not in BUNDLE_SPLITS:
        raise ParameterError("bundle_split", split, "one of: " + ", ".join(BUNDLE_SPLITS))
    if not bundle * (core_switches - 1) < eptc <= bundle * core_switches:
        raise ParameterError("core_switches", core_switches, f"ceil(Eptc/B) = {_ceil_div(eptc, bundle)}")
    if split == "dense":
        return [bundle] * (core_switches - 1) + [eptc - bundle * (core_switches - 1)]
    return spread_evenly(eptc, core_switches)


def max_nodes_two_level(edge_ports, core_ports=None, blocking=1):
    """Largest two-level fat-tree: Nmax = Pc * Eptn (= Pe*Pc/2 when non-blocking).

    At most Pc edge switches fit (B >= 1), each with Eptn nodes.  With
    Pe = Pc = 36 this is 648; with 648-port switches 209,952.

    Args:
        edge_ports: Pe (int >= 2).
        core_ports: Pc (int >= 2); defaults to Pe.
        blocking: Bl (>= 1).

    Returns:
        int: the largest N a two-level tree of these switches connects.

    Raises:
        ParameterError: if an argument is not allowed.
    """
    core_ports = edge_ports if core_ports is None else core_ports
    _require_int("core_ports", core_ports, 2)
    return core_ports * edge_ports_to_nodes(edge_ports, blocking)


def max_nodes(ports, levels):
    """Largest non-blocking fat-tree of ``levels`` levels of P-port switches: Nmax = 2 * (P/2)**L.

    L=1 is a single switch (P nodes); L=2 gives P*P/2 (648 for P=36); L=4 with
    P=36 gives 209,952, the same as two levels of 648-port switches.

    Args:
        ports: P, an even integer >= 2.
        levels: L, an integer >= 1.

    Returns:
        int: Nmax.

    Raises:
        ParameterError: if P is odd or < 2, or L < 1.
    """
    if isinstance(ports, bool) or not isinstance(ports, int) or ports < 2 or ports % 2:
        raise ParameterError("ports", ports, "an even integer >= 2",
                             "half of the ports go down and half up")
    _require_int("levels", levels, 1)
    return 2 * (ports // 2) ** levels


# --------------------------------------------------------------------------- the design


@dataclass
class Design:
    """A two-level fat-tree designed with the primer's method.

    Attributes:
        nodes: N, nodes connected now.
        edge_ports: Pe.
        core_ports: Pc.
        blocking: Bl as requested (exact Fraction).
        eptn: edge ports to nodes used by the design (the uniform value when
            the uniform distribution is used).
        eptc: edge ports to core (uplinks per edge switch) used by the design.
        edge_switches: E, edge switches installed now.
        core_switches: C.
        bundle: B = Pc div E (E at full expansion when designing for expansion).
        distribution: "dense" or "uniform" (what was used; "auto" resolves to one of them).
        bundle_split: "even" or "dense".
        core_bundle_sizes: links from each edge switch to core switch j.
        bundle_distribution: for each core switch, the links from each edge switch to it.
        node_distribution: nodes on each edge switch.
        wasted_edge_ports: unconnected edge ports per edge switch.
        wasted_core_ports: unconnected core ports per core switch (includes ports kept for expansion).
        expand_to: the largest future size the core level is built for, or None.
        max_edge_switches: edge switches at full size (E when not designing for expansion).
        steps: the formulas with their values, as text lines.
        edge_model, core_model: switch models when chosen from a database.
        cost, rack_units, watts: totals of the installed switches when a database is used.
    """

    nodes: int
    edge_ports: int
    core_ports: int
    blocking: Fraction
    eptn: int
    eptc: int
    edge_switches: int
    core_switches: int
    bundle: int
    distribution: str
    bundle_split: str
    core_bundle_sizes: List[int]
    bundle_distribution: List[List[int]]
    node_distribution: List[int]
    wasted_edge_ports: List[int]
    wasted_core_ports: List[int]
    expand_to: Optional[int] = None
    max_edge_switches: int = 0
    steps: List[str] = field(default_factory=list)
    edge_model: Optional[str] = None
    core_model: Optional[str] = None
    cost: Optional[float] = None
    rack_units: Optional[float] = None
    watts: Optional[float] = None

    @property
    def total_switches(self):
        """E + C."""
        return self.edge_switches + self.core_switches

    @property
    def capacity(self):
        """Nodes the installed edge switches can hold: E * Eptn."""
        return self.edge_switches * self.eptn

    @property
    def max_capacity(self):
        """Nodes the design holds at full expansion: E_max * Eptn."""
        return self.max_edge_switches * self.eptn

    @property
    def total_wasted_edge_ports(self):
        """Sum of unconnected edge-switch ports."""
        return sum(self.wasted_edge_ports)

    @property
    def total_wasted_core_ports(self):
        """Sum of unconnected core-switch ports."""
        return sum(self.wasted_core_ports)

    @property
    def bundle_matrix(self):
        """Links from edge switch i to core switch j, as ``matrix[i][j]`` (ClosTopo's bundle_matrix)."""
        return [[self.bundle_distribution[j][i] for j in range(self.core_switches)]
                for i in range(self.edge_switches)]

    def to_dict(self):
        """Return the design as the stable JSON structure of ``testbed design --json``.

        Returns:
            dict: keys "nodes", "edge_switches", "core_switches", "bundle",
            "edge_ports_to_nodes", "edge_ports_to_core", "blocking",
            "total_switches", "bundle_distribution", "wasted_ports" and more;
            "cost", "rack_units", "watts", "edge_model", "core_model" when the
            design comes from a switch database.
        """
        result = {
            "nodes": self.nodes,
            "edge_ports": self.edge_ports,
            "core_ports": self.core_ports,
            "blocking": blocking_for_output(self.blocking),
            "edge_ports_to_nodes": self.eptn,
            "edge_ports_to_core": self.eptc,
            "edge_switches": self.edge_switches,
            "core_switches": self.core_switches,
            "bundle": self.bundle,
            "total_switches": self.total_switches,
            "distribution": self.distribution,
            "bundle_split": self.bundle_split,
            "core_bundle_sizes": list(self.core_bundle_sizes),
            "bundle_distribution": [list(row) for row in self.bundle_distribution],
            "node_distribution": list(self.node_distribution),
            "wasted_ports": {
                "edge": self.total_wasted_edge_ports,
                "core": self.total_wasted_core_ports,
                "edge_per_switch": list(self.wasted_edge_ports),
                "core_per_switch": list(self.wasted_core_ports),
            },
            "capacity": self.capacity,
            "expand_to": self.expand_to,
            "max_edge_switches": self.max_edge_switches,
            "max_capacity": self.max_capacity,
            "steps": list(self.steps),
        }
        if self.edge_model is not None:
            result.update({"edge_model": self.edge_model, "core_model": self.core_model,
                           "cost": self.cost, "rack_units": self.rack_units, "watts": self.watts})
        return result

    def to_topology(self, hosts_link_mbps=None, fabric_link_mbps=None, **options):
        """Build the design as a :class:`testbed.topologies.clos.ClosTopo` for emulation.

        Edge switches become leaves (with this design's node distribution as
        hosts per leaf), core switches become spines, and bundles become
        parallel links (``bundle_matrix[i][j]`` links from leaf i to spine j).

        Args:
            hosts_link_mbps: capacity of host links (ClosTopo's default when None).
            fabric_link_mbps: capacity of leaf-spine links (ClosTopo's default when None).
            **options: further ClosTopo keyword arguments (``leaf_ports`` and
                ``spine_ports`` default to Pe and Pc, so ClosTopo checks the port budget).

        Returns:
            ClosTopo: a Mininet Topo (also exports a networkx multigraph).

        Raises:
            ParameterError: if ClosTopo rejects the parameters.
        """
        from testbed.topologies.clos import ClosTopo  # imported late: the designer has no Mininet need

        if hosts_link_mbps is not None:
            options["hosts_link_mbps"] = hosts_link_mbps
        if fabric_link_mbps is not None:
            options["fabric_link_mbps"] = fabric_link_mbps
        # ClosTopo then re-checks that no switch uses more ports than the design's switches have.
        options.setdefault("leaf_ports", self.edge_ports)
        options.setdefault("spine_ports", self.core_ports)
        return ClosTopo(leaves=self.edge_switches, spines=self.core_switches,
                        hosts_per_leaf=list(self.node_distribution),
                        bundle_matrix=self.bundle_matrix, **options)


def _plan(nodes, edge_ports, core_ports, bl, distribution, expand_to):
    """Compute (eptn, eptc, E, E_max, B, C, node_distribution, distribution, steps) for one distribution."""
    steps = []
    bl_text = _format_fraction(bl)
    if "/" in bl_text:
        bl_text = f"({bl_text})"
    eptn = edge_ports_to_nodes(edge_ports, bl)
    eptc = edge_ports_to_core(edge_ports, eptn)
    steps.append(f"Eptn = trunc(Pe*Bl/(1+Bl)) = trunc({edge_ports}*{bl_text}/(1+{bl_text})) = {eptn}")
    steps.append(f"Eptc = Pe - Eptn = {edge_ports} - {eptn} = {eptc}")
    edge_switches = edge_switch_count(nodes, eptn)
    steps.append(f"E = ceil(N/Eptn) = ceil({nodes}/{eptn}) = {edge_switches}")
    if expand_to is not None:
        max_edge_switches = edge_switch_count(expand_to, eptn)
        steps.append(f"E_max = ceil(M/Eptn) = ceil({expand_to}/{eptn}) = {max_edge_switches}"
                     f" (core level sized for M={expand_to} nodes)")
        _check_buildable("expand_to", expand_to, max_edge_switches, core_ports, eptn)
        bundle = bundle_size(core_ports, max_edge_switches)
        steps.append(f"B = Pc div E_max = {core_ports} div {max_edge_switches} = {bundle}")
    else:
        max_edge_switches = edge_switches
        _check_buildable("nodes", nodes, edge_switches, core_ports, eptn)
        bundle = bundle_size(core_ports, edge_switches)
        steps.append(f"B = Pc div E = {core_ports} div {edge_switches} = {bundle}")
    core_switches = core_switch_count(eptc, bundle)
    steps.append(f"C = ceil(Eptc/B) = ceil({eptc}/{bundle}) = {core_switches}")
    nodes_per_edge = dense_node_distribution(nodes, edge_switches, eptn)
    if distribution == "dense":
        return eptn, eptc, edge_switches, max_edge_switches, bundle, core_switches, nodes_per_edge, "dense", steps

    u_eptn, u_eptc = uniform_edge_ports(nodes, edge_switches, bl)
    u_core = core_switch_count(u_eptc, bundle)
    u_steps = [
        f"uniform: Eptn = ceil(N/E) = ceil({nodes}/{edge_switches}) = {u_eptn}",
        f"uniform: Eptc = ceil(Eptn/Bl) = ceil({u_eptn}/{bl_text}) = {u_eptc}",
        f"uniform: C = ceil(Eptc/B) = ceil({u_eptc}/{bundle}) = {u_core}",
    ]
    if distribution == "auto" and u_core >= core_switches:
        steps += u_steps + [f"auto: uniform distribution saves no core switch ({u_core} >= {core_switches}); "
                            f"dense distribution kept"]
        return eptn, eptc, edge_switches, max_edge_switches, bundle, core_switches, nodes_per_edge, "dense", steps
    if distribution == "auto":
        u_steps.append(f"auto: uniform distribution saves {core_switches - u_core} core switch(es)")
    steps += u_steps
    return (u_eptn, u_eptc, edge_switches, max_edge_switches, bundle, u_core,
            spread_evenly(nodes, edge_switches), "uniform", steps)


def validate_request(nodes, blocking=1, distribution="dense", bundle_split="even", expand_to=None):
    """Check the switch-independent parameters of a design request.

    Args:
        nodes, blocking, distribution, bundle_split, expand_to: as for :func:`design_fat_tree`.

    Returns:
        tuple: (blocking as a Fraction, distribution).

    Raises:
        ParameterError: naming the first invalid parameter; also for uniform
            distribution combined with expand_to (the primer: spreading nodes
            uniformly makes spare edge ports hard to use for expansion).
    """
    _require_int("nodes", nodes, 1)
    bl = parse_blocking(blocking)
    if distribution not in DISTRIBUTIONS:
        raise ParameterError("distribution", distribution, "one of: " + ", ".join(DISTRIBUTIONS))
    if bundle_split not in BUNDLE_SPLITS:
        raise ParameterError("bundle_split", bundle_split, "one of: " + ", ".join(BUNDLE_SPLITS))
    if expand_to is not None:
        _require_int("expand_to", expand_to, nodes, f"an integer >= nodes ({nodes})")
        if distribution == "uniform":
            raise ParameterError("distribution", distribution, "dense or auto when expand_to is given",
                                 "uniform node distribution leaves spare edge ports scattered, "
                                 "which makes expansion hard")
    return bl, distribution


def design_fat_tree(nodes, edge_ports, core_ports, blocking=1, distribution="dense",
                    bundle_split="even", expand_to=None):
    """Design a two-level fat-tree for N nodes from given switch port counts.

    Args:
        nodes: N, nodes to connect now (int >= 1).
        edge_ports: Pe, ports per edge switch (int >= 2).
        core_ports: Pc, ports per core switch (int >= 2).
        blocking: Bl, allowed blocking factor (>= 1; 1 = non-blocking).
        distribution: "dense" (fill edge switches in order, the primer's first
            alternative), "uniform" (spread nodes evenly; Eptn = ceil(N/E),
            Eptc = ceil(Eptn/Bl)) or "auto" (uniform only when it needs fewer
            core switches, as the primer's tool does).
        bundle_split: "even" (uplinks spread as evenly as possible over the
            core switches, the primer's recommendation) or "dense" (B, B, ...,
            remainder).
        expand_to: M, the largest future node count, or None.  The core level
            is built for M nodes; only the edge switches N needs are installed.

    Returns:
        Design: the sized network with its wiring.

    Raises:
        ParameterError: for a value outside its allowed range (naming it),
            when the tree cannot be built (E > Pc: B would be 0, names "nodes"
            or "expand_to"), or for uniform distribution combined with
            expand_to (the primer: uniform spreading makes expansion hard).
    """
    _require_int("edge_ports", edge_ports, 2)
    _require_int("core_ports", core_ports, 2)
    bl, distribution = validate_request(nodes, blocking, distribution, bundle_split, expand_to)
    if expand_to is not None:
        distribution = "dense"  # "auto" never picks uniform for an expandable design

    (eptn, eptc, edge_switches, max_edge_switches, bundle, core_switches,
     nodes_per_edge, used_distribution, steps) = _plan(nodes, edge_ports, core_ports, bl,
                                                       distribution, expand_to)
    per_core = core_bundle_sizes(eptc, bundle, core_switches, bundle_split)
    bundle_distribution = [[size] * edge_switches for size in per_core]
    wasted_edge = [edge_ports - hosted - eptc for hosted in nodes_per_edge]
    wasted_core = [core_ports - size * edge_switches for size in per_core]
    shown = " + ".join(map(str, per_core)) if len(per_core) <= 8 else f"{len(per_core)} bundles"
    steps.append(f"bundles per core switch ({bundle_split} split): {shown} = {eptc} uplinks per edge switch")
    return Design(
        nodes=nodes, edge_ports=edge_ports, core_ports=core_ports, blocking=bl,
        eptn=eptn, eptc=eptc, edge_switches=edge_switches, core_switches=core_switches,
        bundle=bundle, distribution=used_distribution, bundle_split=bundle_split,
        core_bundle_sizes=per_core, bundle_distribution=bundle_distribution,
        node_distribution=nodes_per_edge, wasted_edge_ports=wasted_edge,
        wasted_core_ports=wasted_core, expand_to=expand_to,
        max_edge_switches=max_edge_switches, steps=steps)


def expansion_stages(design, stages):
    """Edge switches to add at each expansion stage of a design built for expansion.

    For the primer's example (200 -> 400 -> 600 nodes, 36-port switches) this
    gives 12 installed, then 11 and 11 more; the core level and existing cables stay.

    Args:
        design: a Design (its Eptn is used).
        stages: increasing node counts after the initial one, each <= the
            design's expand_to (or its nodes when not designed for expansion).

    Returns:
        list[dict]: per stage {"nodes", "edge_switches", "added_edge_switches"}.

    Raises:
        ParameterError: if a stage is smaller than the previous one or beyond the design's maximum.
    """
    limit = design.expand_to if design.expand_to is not None else design.nodes
    result = []
    previous_nodes, previous_edges = design.nodes, design.edge_switches
    for index, stage_nodes in enumerate(stages):
        name = f"stages[{index}]"
        _require_int(name, stage_nodes, previous_nodes, f"an integer from {previous_nodes} to {limit}")
        if stage_nodes > limit:
            raise ParameterError(name, stage_nodes, f"an integer from {previous_nodes} to {limit}",
                                 "the core level was not built for more nodes")
        edges = edge_switch_count(stage_nodes, design.eptn)
        result.append({"nodes": stage_nodes, "edge_switches": edges,
                       "added_edge_switches": edges - previous_edges})
        previous_nodes, previous_edges = stage_nodes, edges
    return result

