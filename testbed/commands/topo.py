"""``testbed topo``: list topology kinds, summarize a topology, export it as JSON, dot or PNG.

Examples::

    testbed topo kinds
    testbed topo show fattree k=4
    testbed topo show clos leaves=3 spines=2 hosts_per_leaf=1,2,3 bundle_matrix=1,2;2,1;0,3
    testbed topo export abfattree k=4 --format json
    testbed topo export dsf --format png -o dsf.png
"""
import json
import os

from testbed.errors import ParameterError, TestbedError
from testbed.topologies.registry import describe_kinds, make_topology, parse_key_values

_PARAMS_HELP = "topology parameters as key=value (see `testbed topo kinds`); lists as 1,2,3, matrices as 1,2;2,1"


def register(subparsers):
    """Add the ``topo`` subcommand with its ``kinds``/``show``/``export`` actions."""
    parser = subparsers.add_parser(
        "topo", help="list, summarize and export fabric topologies",
        description="Topology generators: Clos (2 and 3 tiers), FatTree, F10's AB FatTree and DSF-like "
        "fabrics. Give the kind and key=value parameters.")
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
