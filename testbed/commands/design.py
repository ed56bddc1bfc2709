"""``testbed design``: size a two-level fat-tree with the primer's method (seed 003).

Examples::

    testbed design --nodes 128 --edge-ports 36 --core-ports 36 --blocking 1
    testbed design --nodes 128 --edge-ports 36 --core-ports 36 --uniform --json
    testbed design --nodes 200 --edge-ports 36 --core-ports 36 --expand-to 600
    testbed design --nodes 900 --example-db          # cheapest switches of the example database
    testbed design --nodes 90 --edge-ports 24 --core-ports 24 --blocking 4 --emit-topology clos90.json
"""
import json
import math
from itertools import groupby

from testbed.errors import ParameterError, TestbedError
from testbed.topologies.designer import (BUNDLE_SPLITS, DISTRIBUTIONS, design_fat_tree,
                                         effective_blocking, expansion_stages)
from testbed.topologies.switch_db import choose_design, load_switch_db


def register(subparsers):
    """Add the ``design`` subcommand."""
    parser = subparsers.add_parser(
        "design", help="size a two-level fat-tree (edge/core switches, bundles, cost)",
        description="Design a two-level fat-tree (folded Clos) for N nodes with the method of the "
        "fat-tree design primer: Eptn = trunc(Pe*Bl/(1+Bl)), Eptc = Pe - Eptn, E = ceil(N/Eptn), "
        "B = Pc div E, C = ceil(Eptc/B). Give the port counts, or a switch database (--db / "
        "--example-db) to choose the cheapest edge and core switches.")
    parser.add_argument("--nodes", type=int, required=True, metavar="N", help="number of nodes to connect")
    parser.add_argument("--edge-ports", type=int, metavar="PE",
                        help="ports per edge switch (with a database: only models with this many ports)")
    parser.add_argument("--core-ports", type=int, metavar="PC",
                        help="ports per core switch (with a database: only models with this many ports)")
    parser.add_argument("--blocking", default="1", metavar="BL",
                        help="allowed blocking factor, >= 1 (1 = non-blocking; 2.6 or 13/5 allowed); default 1")
    parser.add_argument("--uniform", action="store_true",
                        help="spread nodes uniformly over the edge switches (may save core switches)")
    parser.add_argument("--distribution", choices=DISTRIBUTIONS, default=None,
                        help="node distribution: dense (default: fill edge switches in order), uniform "
                        "(same as --uniform), auto (uniform only if it saves core switches)")
    parser.add_argument("--bundle-split", choices=BUNDLE_SPLITS, default="even",
                        help="uplinks per core switch: even (default, e.g. 3+2, the primer's recommendation) "
                        "or dense (B, B, ..., remainder, e.g. 4+1)")
    parser.add_argument("--expand-to", type=int, metavar="M",
                        help="size the core level for M nodes so later stages only add edge switches")
    parser.add_argument("--db", metavar="FILE", help="switch database (JSON) to choose the cheapest models from")
    parser.add_argument("--example-db", action="store_true",
                        help="use the shipped example switch database (made-up prices)")
    parser.add_argument("--max-rack-units", type=float, metavar="U", help="with a database: limit on rack units")
    parser.add_argument("--max-watts", type=float, metavar="W", help="with a database: limit on power")
    parser.add_argument("--max-cost", type=float, metavar="COST", help="with a database: limit on cost")
    parser.add_argument("--json", action="store_true", help="print the design as JSON")
    parser.add_argument("--emit-topology", metavar="FILE",
                        help="also write the designed Clos (edge = leaves, core = spines, bundles = parallel "
                        "links) as topology JSON, the format of `testbed topo export --format json`")
    parser.add_argument("--hosts-link-mbps", type=float, metavar="MBPS",
                        help="with --emit-topology: capacity of host links")
    parser.add_argument("--fabric-link-mbps", type=float, metavar="MBPS",
                        help="with --emit-topology: capacity of edge-core links")
    parser.set_defaults(func=run)


MAX_DESIGN_NODES = 10_000_000  # the design lists every edge switch; larger N would take minutes and gigabytes


def check_numbers(args):
    """Refuse NaN, infinite or negative limits and capacities, and node counts too large to design.

    Raises:
        ParameterError: naming the option.
    """
    for option, value in (("--max-rack-units", args.max_rack_units), ("--max-watts", args.max_watts),
                          ("--max-cost", args.max_cost), ("--hosts-link-mbps", args.hosts_link_mbps),
                          ("--fabric-link-mbps", args.fabric_link_mbps)):
        if value is not None and not 0 <= value < math.inf:
            raise ParameterError(option, value, "a finite number >= 0")
    for option, value in (("--nodes", args.nodes), ("--expand-to", args.expand_to)):
        if value is not None and value > MAX_DESIGN_NODES:
            raise ParameterError(option, value, f"an integer from 1 to {MAX_DESIGN_NODES}")


def _distribution(args):
    """Resolve --uniform / --distribution into one distribution name."""
    if args.uniform and args.distribution not in (None, "uniform"):
        raise ParameterError("--distribution", args.distribution, "uniform (or leave it out) with --uniform")
    if args.uniform:
        return "uniform"
    return args.distribution or "dense"


def make_design(args):
    """Build the Design the parsed arguments ask for.

    Args:
        args: the parsed ``testbed design`` arguments.

    Returns:
        tuple: (Design, SwitchDatabase or None).

    Raises:
        ParameterError: for a missing or invalid option.
        TestbedError: if the database file cannot be read.
    """
    check_numbers(args)
    distribution = _distribution(args)
    if args.db and args.example_db:
        raise ParameterError("--db", args.db, "either --db FILE or --example-db, not both")
    if args.db or args.example_db:
        db = load_switch_db(args.db if args.db else None)
        design = choose_design(db, args.nodes, args.blocking, args.edge_ports, args.core_ports, distribution,
                               args.bundle_split, args.expand_to, args.max_rack_units, args.max_watts,
                               args.max_cost)
        return design, db
    for option, value in (("--max-rack-units", args.max_rack_units), ("--max-watts", args.max_watts),
                          ("--max-cost", args.max_cost)):
        if value is not None:
            raise ParameterError(option, value, "only with --db FILE or --example-db")
    if args.edge_ports is None:
        raise ParameterError("--edge-ports", None, "an integer >= 2 (or give --db FILE / --example-db)")
    if args.core_ports is None:
        raise ParameterError("--core-ports", None, "an integer >= 2 (or give --db FILE / --example-db)")
    design = design_fat_tree(args.nodes, args.edge_ports, args.core_ports, args.blocking, distribution,
                             args.bundle_split, args.expand_to)
    return design, None


def _runs(values):
    """Compress a list into 'value x count' runs: [18, 18, 2] -> '2 x 18, 1 x 2'."""
    return ", ".join(f"{len(list(group))} x {value}" for value, group in groupby(values))


def _bundles(sizes):
    """Bundle sizes per core switch: '4 + 4 + 3' for a few, '18 x 1' style runs for many."""
    if len(sizes) <= 8:
        return " + ".join(map(str, sizes))
    return _runs(sizes) + " (core switches x links)"


def _number(value):
    """Format a total without a useless '.0'."""
    return f"{value:g}" if isinstance(value, float) else str(value)


def render_text(design, db=None):
    """Return the human-readable report of a design.

    Args:
        design: a Design.
        db: the SwitchDatabase the models came from, or None.

    Returns:
        str: the report (several lines, no trailing newline).
    """
    lines = [f"Two-level fat-tree for N={design.nodes} nodes",
             f"  edge switches Pe={design.edge_ports} ports, core switches Pc={design.core_ports} ports, "
             f"blocking Bl={_number(float(design.blocking)) if design.blocking.denominator != 1 else design.blocking}",
             "Formulas"]
    lines += [f"  {step}" for step in design.steps]
    blocking_now = effective_blocking(design.eptn, design.eptc)
    lines += [
        "Result",
        f"  edge switches E = {design.edge_switches}, core switches C = {design.core_switches}, "
        f"bundle B = {design.bundle}, total E + C = {design.total_switches}",
        f"  edge ports to nodes Eptn = {design.eptn}, edge ports to core Eptc = {design.eptc} "
        f"(blocking {float(blocking_now):.3g}), {design.distribution} node distribution",
        f"  nodes per edge switch: {_runs(design.node_distribution)}",
        f"  links from every edge switch to core switch 1..{design.core_switches} ({design.bundle_split} split): "
        + _bundles(design.core_bundle_sizes),
        "Wasted (unconnected) ports",
        f"  edge: {design.total_wasted_edge_ports} (per edge switch: {_runs(design.wasted_edge_ports)})",
        f"  core: {design.total_wasted_core_ports} (per core switch: {_runs(design.wasted_core_ports)})"
        + (f", of which {(design.max_edge_switches - design.edge_switches) * design.eptc} kept for expansion"
           if design.max_edge_switches > design.edge_switches else ""),
        f"Capacity: {design.capacity} nodes on the {design.edge_switches} installed edge switches",
    ]
    if design.expand_to is not None:
        stage = expansion_stages(design, [design.expand_to])[0]
        lines.append(f"Expansion: core level built for M={design.expand_to} nodes "
                     f"(E_max={design.max_edge_switches} edge switches, {design.max_capacity} nodes); "
                     f"growing to {design.expand_to} nodes adds {stage['added_edge_switches']} edge switches "
                     f"and their cables, no rewiring")
    if design.edge_model is not None:
        currency = f" {db.currency}" if db is not None and db.currency else ""
        lines += [
            f"Switches (database {db.source if db is not None else ''})",
            f"  edge: {design.edge_switches} x {design.edge_model}, core: {design.core_switches} x {design.core_model}",
            f"  cost {_number(design.cost)}{currency}, rack units {_number(design.rack_units)}, "
            f"watts {_number(design.watts)}",
        ]
        if db is not None and "EXAMPLE DATA" in db.description:
            lines.append("  (example database: made-up prices)")
    if design.nodes <= design.edge_ports:
        lines.append(f"Note: N <= Pe, so a single {design.edge_ports}-port switch (a star) could connect "
                     f"all nodes without a fat-tree")
    return "\n".join(lines)


def emit_topology(design, path, hosts_link_mbps=None, fabric_link_mbps=None):
    """Write the design's Clos topology as topology JSON ({"kind", "params", "nodes", "links"}).

    Args:
        design: a Design.
        path: output file.
        hosts_link_mbps, fabric_link_mbps: link capacities (ClosTopo defaults when None).

    Returns:
        ClosTopo: the topology written.

    Raises:
        ParameterError: if ClosTopo rejects the design (e.g. more than 254 hosts per leaf).
        TestbedError: if the file cannot be written.
    """
    topo = design.to_topology(hosts_link_mbps=hosts_link_mbps, fabric_link_mbps=fabric_link_mbps)
    try:
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(topo.to_dict(), handle, indent=2)
            handle.write("\n")
    except OSError as error:
        raise TestbedError(f"cannot write topology file {path}: {error.strerror or error}") from None
    return topo


def run(args):
    """Design the fat-tree and print it (text or --json); returns 0."""
    design, db = make_design(args)
    if args.emit_topology is None:
        for option, value in (("--hosts-link-mbps", args.hosts_link_mbps),
                              ("--fabric-link-mbps", args.fabric_link_mbps)):
            if value is not None:
                raise ParameterError(option, value, "only with --emit-topology FILE")
    else:
        emit_topology(design, args.emit_topology, args.hosts_link_mbps, args.fabric_link_mbps)
    if args.json:
        data = design.to_dict()
        if db is not None:
            data["database"] = db.source
            data["currency"] = db.currency
        print(json.dumps(data, indent=2, sort_keys=True))
    else:
        print(render_text(design, db))
        if args.emit_topology is not None:
            print(f"Topology written to {args.emit_topology} (Clos: {design.edge_switches} leaves, "
                  f"{design.core_switches} spines, {design.nodes} hosts)")
    return 0
