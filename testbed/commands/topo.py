"""``testbed topo``: list topology kinds, summarize a topology, export it as JSON, dot or PNG.

Examples::

    testbed topo kinds
    testbed topo show fattree k=4
    testbed topo show clos leaves=3 spines=2 hosts_per_leaf=1,2,3 bundle_matrix=1,2;2,1;0,3
    testbed topo export abfattree k=4 --format json
    testbed topo export dsf --format png -o dsf.png
    testbed topo export fcplus N=6 p=12 s=10 v=4 --format png -o fcplus.png
    testbed topo throughput fcplus N=100 p=32 s=18 --routing fcplus1l --k 32 --traffic worst
"""
import json
import os

from testbed.errors import ParameterError, TestbedError
from testbed.topologies.registry import describe_kinds, make_topology, parse_key_values, virtual_layer_analysis

_PARAMS_HELP = "topology parameters as key=value (see `testbed topo kinds`); lists as 1,2,3, matrices as 1,2;2,1"


def register(subparsers):
    """Add the ``topo`` subcommand with its ``kinds``/``show``/``export`` actions."""
    parser = subparsers.add_parser(
        "topo", help="list, summarize and export fabric topologies",
        description="Topology generators: Clos (2 and 3 tiers), FatTree, F10's AB FatTree, DSF-like "
        "fabrics and the FC+ / FC expanders. Give the kind and key=value parameters.")
    actions = parser.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True

    kinds = actions.add_parser("kinds", help="list the topology kinds and their parameters with defaults",
                               description="List every topology kind with its parameters and defaults.")
    kinds.add_argument("--json", action="store_true", help="print the list as JSON")
    kinds.set_defaults(func=run_kinds)

    show = actions.add_parser("show", help="print a summary table of a topology",
                              description="Build KIND with the given parameters and print a summary: "
                              "node counts per role, links and capacities per tier pair, ports used.")
    show.add_argument("kind", help="topology kind (see `testbed topo kinds`)")
    show.add_argument("params", nargs="*", metavar="key=value", help=_PARAMS_HELP)
    show.add_argument("--json", action="store_true", help="print the summary rows as a JSON object")
    show.set_defaults(func=run_show)

    export = actions.add_parser(
        "export", help="export a topology as json, dot or png",
        description="Build KIND and write it as JSON ({kind, params, nodes, links}), Graphviz dot text, "
        "or a PNG drawing with tiers in rows. json and dot go to stdout unless -o is given; png needs -o.")
    export.add_argument("kind", help="topology kind (see `testbed topo kinds`)")
    export.add_argument("params", nargs="*", metavar="key=value", help=_PARAMS_HELP)
    export.add_argument("--format", "-f", choices=("json", "dot", "png"), default="json",
                        help="output format (default: %(default)s)")
    export.add_argument("-o", "--output", metavar="FILE", help="output file (required for png)")
    export.set_defaults(func=run_export)

    throughput = actions.add_parser(
        "throughput", help="throughput of a routing on an FC+ or FC topology (multi-commodity flow LP)",
        description="Build KIND (fcplus or fc), compute the paths of a routing for a traffic pattern and "
        "print the largest theta such that theta times the traffic fits the unit link capacities over those "
        "paths (seed 001, section V-A), with the Eq. (6) upper bound, path statistics and whether the paths' "
        "channel dependency graph is acyclic on every lossless priority. The topology's random wiring takes "
        "seed=... among the key=value parameters; --seed is the seed of the uniform random traffic.")
    throughput.add_argument("kind", help="fcplus or fc")
    throughput.add_argument("params", nargs="*", metavar="key=value", help=_PARAMS_HELP)
    throughput.add_argument("--routing", choices=virtual_layer_analysis()[0].ROUTINGS, default="fcplus1l",
                            help="ksp: K shortest paths (may deadlock); dfksp: deadlock-free KSP with --nlp "
                            "priorities; fcplus1l / fcplus2l: FC+ (1L-K) / (2L-K); fc: FC's edge-disjoint "
                            "up-down paths (default: %(default)s)")
    throughput.add_argument("--k", type=int, default=32,
                            help="paths per ToR pair (default: %(default)s; fc ignores it)")
    throughput.add_argument("--nlp", type=int, default=2,
                            help="lossless priorities N_lp of dfksp, 1..3 (default: %(default)s)")
    throughput.add_argument("--traffic", choices=virtual_layer_analysis()[1].TRAFFIC_PATTERNS, default="worst",
                            help="all-to-all, uniform (12.5%% of the ToRs per ToR) or worst (near-worst-case "
                            "longest matching) (default: %(default)s)")
    throughput.add_argument("--seed", type=int, default=1,
                            help="seed of the uniform random traffic (default: %(default)s)")
    throughput.add_argument("--json", action="store_true", help="print the result as JSON")
    throughput.set_defaults(func=run_throughput)


def _build(args):
    """Build the topology named on the command line."""
    return make_topology(args.kind, **parse_key_values(args.params))


def format_table(rows):
    """Format ``(label, value)`` rows as two aligned columns."""
    width = max(len(str(label)) for label, _ in rows)
    return "\n".join(f"{str(label):<{width}}  {value}" for label, value in rows)


def run_kinds(args):
    """Print every kind with its parameters and defaults."""
    kinds = describe_kinds()
    if args.json:
        print(json.dumps([{"kind": kind, "description": text,
                           "parameters": [{"name": n, "default": d, "help": h} for n, d, h in params]}
                          for kind, text, params in kinds], indent=2))
        return 0
    for kind, text, params in kinds:
        print(f"{kind}: {text}")
        width = max(len(name) for name, _, _ in params)
        for name, default, help_text in params:
            shown = "(unset)" if default is None else default
            print(f"  {name:<{width}}  default {shown!s:<8}  {help_text}")
        print()
    return 0


def run_show(args):
    """Print the summary table of a topology."""
    topo = _build(args)
    rows = topo.summary()
    if args.json:
        print(json.dumps({str(label): value for label, value in rows}, indent=2))
    else:
        print(format_table(rows))
    return 0


def check_output_path(path):
    """Refuse an output file that is a directory or whose directory does not exist.

    Raises:
        ParameterError: naming ``-o/--output``.
    """
    if os.path.isdir(path):
        raise ParameterError("--output", path, "a file name", "it is a directory")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise ParameterError("--output", path, "a file in an existing directory", f"{folder} does not exist")


def run_export(args):
    """Export a topology to stdout or a file."""
    from testbed.topologies.export import export

    if args.format == "png" and not args.output:
        raise ParameterError("--output", "(none)", "a file name given with -o FILE", "png cannot go to stdout")
    if args.output:
        check_output_path(args.output)
    topo = _build(args)
    try:
        text = export(topo, args.format, args.output)
    except OSError as error:
        raise TestbedError(f"cannot write {args.output}: {error.strerror or error}") from None
    if text is not None:
        print(text, end="")
    else:
        print(f"wrote {args.output} ({args.format}, {len(topo.hosts())} hosts, {len(topo.switches())} switches)")
    return 0


def run_throughput(args):
    """Print the throughput of a routing on an FC+ or FC topology."""
    routing, throughput = virtual_layer_analysis()
    for option, value, check in (("--k", args.k, routing.check_k), ("--nlp", args.nlp, routing.check_n_lp)):
        try:
            check(value)
        except ParameterError as error:
            raise ParameterError(option, value, error.allowed) from None
    topo = _build(args)
    if not callable(getattr(topo, "tor_graph", None)):
        raise ParameterError("kind", args.kind, "fcplus or fc (topologies on virtual layers)")
    graph = topo.tor_graph()
    result = throughput.routing_throughput(graph, args.routing, args.traffic, k=args.k, n_lp=args.nlp, seed=args.seed)
    report = {"kind": topo.kind, "params": {key: value for key, value in topo.params.items() if "mbps" not in key},
              "routing": args.routing, "k": args.k, "n_lp": args.nlp, "traffic": args.traffic,
              "traffic_seed": args.seed, **{key: value for key, value in result.items() if key != "cycles"},
              "cycles_found": len(result["cycles"]),
              "first_cycle": [[list(hop), priority] for hop, priority in result["cycles"][0]]
              if result["cycles"] else None}
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    rows = [("topology", f"{topo.kind} " + " ".join(f"{key}={value}" for key, value in report["params"].items()
                                                   if value is not None)),
            ("routing", f"{args.routing} (K={args.k}" + (f", N_lp={args.nlp}" if args.routing == "dfksp" else "")
             + ")"),
            ("traffic", args.traffic + (f" (seed {args.seed})" if args.traffic == "uniform" else "")),
            ("throughput theta", f"{result['theta']:.4f}"),
            ("upper bound (Eq. 6)", f"{result['upper_bound']:.4f}"),
            ("ToR pairs with traffic", result["pairs"]),
            ("paths per pair (mean)", f"{result['mean_paths']:.2f}"),
            ("hops per path (mean)", f"{result['mean_hops']:.2f}"),
            ("pairs with fewer than K paths", result["pairs_short"]),
            ("lossless priorities used", result["priorities"]),
            ("deadlock-free (CDG acyclic)", "yes" if result["deadlock_free"] else
             f"no (dependency cycles in {len(result['cycles'])} cyclic components; at most 10 are looked at)"),
            ("seconds (paths, LP)", f"{result['path_seconds']:.1f}, {result['lp_seconds']:.1f}")]
    print(format_table(rows))
    return 0
