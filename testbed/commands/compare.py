"""``testbed compare SPEC.yaml --modes ecmp,eecmp,spray,flowlet``: one spec under several modes.

Runs the spec once per mode (same seed: same flows and failures), each into
``<out>/<mode>/``, and writes one side-by-side table (comparison.txt, .csv,
.json) and one plot (comparison.png) into ``--out``.  With ``--repeat N`` each
mode runs N times (seeds derived from the spec's), and every metric is shown
as mean with a 95% confidence interval and min/max, flagged where the modes
cannot be told apart at N runs.
"""
from testbed.commands.net import add_server_arguments
from testbed.emulation.progress import print_line
from testbed.modes import MODES


def register(subparsers):
    """Add the ``compare`` subcommand."""
    parser = subparsers.add_parser("compare", help="run a spec under several modes, side by side",
                                   description=__doc__.split("\n\n")[1])
    parser.add_argument("spec", metavar="SPEC.yaml", help="experiment spec (its mode is replaced)")
    parser.add_argument("--modes", required=True,
                        help="comma-separated modes (" + ", ".join(MODES) + "); with --sweep, one mode")
    parser.add_argument("--sweep", metavar="PARAM=V1,V2,...", default=None,
                        help="instead of modes side by side, run the one mode once per value of a mode "
                        "parameter, e.g. flowlet_interval_us=50,100,250,500,1000,5000")
    parser.add_argument("--repeat", type=int, default=None, metavar="N",
                        help="run each mode (or sweep value) N times with seeds derived from the spec's "
                        "(default: the spec's repeat, 1); metrics as mean, 95%% interval, min/max")
    parser.add_argument("--same-seed", action="store_true",
                        help="with --repeat: every run with the spec's own seed (the emulator's run-to-run noise "
                        "alone) instead of seeds derived from it")
    parser.add_argument("--target", choices=("auto", "embedded", "bmv2"), default=None,
                        help="P4 target (default: the spec's target)")
    parser.add_argument("--out", default=None, metavar="DIR",
                        help="output folder (default: the spec's out_dir + '-compare')")
    parser.add_argument("-q", "--quiet", action="store_true", help="no per-run progress output")
    add_server_arguments(parser, default_link=None)
    parser.set_defaults(func=run)


def run(args):
    """Check the modes, run them, print the table; returns the exit status."""
    from testbed.errors import ParameterError
    from testbed.experiment.compare import compare_modes
    from testbed.experiment.spec import MAX_REPEAT, load_spec, on_servers
    from testbed.modes import PARAMETERS

    modes = [mode.strip() for mode in args.modes.split(",") if mode.strip()]
    if not modes:
        raise ParameterError("--modes", args.modes, "a comma-separated list of modes")
    if len(set(modes)) != len(modes):
        raise ParameterError("--modes", args.modes, "each mode once")
    # with --target the machine check waits for run_experiment, against the target actually used
    spec = load_spec(args.spec, check_machine=args.target is None)
    if args.servers:
        spec = on_servers(spec, args.servers, args.cross_link)
    sweep = None
    if args.sweep is not None:
        param, sep, text = args.sweep.partition("=")
        param = param.strip()
        if not sep or param not in PARAMETERS:
            raise ParameterError("--sweep", args.sweep, "PARAM=V1,V2,... with PARAM one of: " + ", ".join(PARAMETERS))
        values = [PARAMETERS[param].check(value, f"--sweep {param}", text=True)
                  for value in text.split(",") if value.strip()]
        if not values:
            raise ParameterError("--sweep", args.sweep, f"PARAM=V1,V2,... with values {PARAMETERS[param].allowed()}")
        if len(modes) != 1:
            raise ParameterError("--modes", args.modes, "exactly one mode with --sweep")
        sweep = (param, values)
    if args.repeat is not None and not 1 <= args.repeat <= MAX_REPEAT:
        raise ParameterError("--repeat", args.repeat, f"an integer in [1, {MAX_REPEAT}]")
    progress = _headlines_only if args.quiet else print_line
    if sweep is not None:
        from testbed.experiment.compare import sweep_mode_param

        rows = sweep_mode_param(spec, sweep[0], sweep[1], mode=modes[0], out_dir=args.out, target=args.target,
                                progress=progress, repeat=args.repeat,
                                same_seed=args.same_seed)
    else:
        rows = compare_modes(spec, modes, args.out, target=args.target, progress=progress, repeat=args.repeat,
                             same_seed=args.same_seed)
    statuses = {single["status"] for row in rows for single in row.get("repeats") or [row]}
    if statuses <= {"ok"}:
        return 0
    return 3 if statuses <= {"ok", "warning"} else 1


def _headlines_only(line):
    """Progress printer for --quiet: only the run headlines and the comparison."""
    if line.startswith(("===", "---", "\n", "comparison", "sweep")):
        print_line(line)
