"""``testbed reproduce``: rerun the experiments behind the READMEs' figures and check each within its range.

Every figure README.md and experiments/README.md quote from an experiment is
listed in :mod:`testbed.experiment.figures` with the experiment that produces
it and the range it must fall in.  This reruns those experiments (each row
``repeat`` times with the spec's own seed), prints one line per figure
(pass / FAIL / not measured, the measured mean with its 95% interval and
min/max) and writes ``reproduce.json`` and each experiment's comparison into
``--out``.  ``--ci`` runs the CI-size experiments (what the suite checks).
A run the overload check marks, or one that failed, is left out of the
figures (all runs of a figure marked: "overloaded", not judged).  Exit status: 0 when no figure
fails, 1 otherwise.
"""
from testbed.emulation.progress import print_line


def register(subparsers):
    """Add the ``reproduce`` subcommand."""
    parser = subparsers.add_parser("reproduce", help="rerun the experiments behind the READMEs' figures, check them",
                                   description=__doc__.split("\n\n")[1])
    parser.add_argument("--ci", action="store_true", help="the CI-size experiments (shorter, fewer values)")
    parser.add_argument("--only", default=None, metavar="NAME,...", help="only these experiments (see --list)")
    parser.add_argument("--list", action="store_true", help="list the experiments and their figures, run nothing")
    parser.add_argument("--repeat", type=int, default=None, metavar="N",
                        help="runs per row (default: each experiment's; all with the spec's seed)")
    parser.add_argument("--target", choices=("auto", "embedded", "bmv2"), default=None, help="P4 target")
    parser.add_argument("--repo", default=".", metavar="DIR",
                        help="the repository (its experiments/ folder; default: the current folder)")
    parser.add_argument("--out", default="results/reproduce", metavar="DIR", help="output folder")
    parser.add_argument("-q", "--quiet", action="store_true", help="no per-run progress output")
    parser.set_defaults(func=run)


def run(args):
    """Rerun, check, print; returns 0 when every figure passes."""
    import os
    import platform
    import time

    from testbed.errors import ParameterError
    from testbed.experiment import figures
    from testbed.experiment.results import write_json
    from testbed.experiment.spec import MAX_REPEAT

    names = [name.strip() for name in args.only.split(",") if name.strip()] if args.only else None
    chosen = figures.experiments_for(names, ci=args.ci)
    if args.list:
        for experiment in chosen:
            print_line(f"{experiment.name}: {experiment.command()}")
            for figure in figures.figures_of(experiment.name):
                print_line(f"    {figure.row} {figure.metric}: {figure.quoted} "
                           f"(range [{figure.low:g}, {figure.high:g}])")
        return 0
    if args.repeat is not None and not 1 <= args.repeat <= MAX_REPEAT:
        raise ParameterError("--repeat", args.repeat, f"an integer in [1, {MAX_REPEAT}]")
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    progress = (lambda line: None) if args.quiet else print_line
    checked = []
    started = time.time()
    for experiment in chosen:
        print_line(f"=== {experiment.name}: {experiment.command()} ===")
        load_before = os.getloadavg()
        rows = figures.run_experiment_figures(experiment, os.path.join(out, experiment.name), target=args.target,
                                              progress=progress, repeat=args.repeat, root=args.repo)
        for row in rows:
            row["load_average"] = [round(value, 2) for value in load_before + os.getloadavg()]
        checked += rows
        print_line(figures.format_report(rows))
    report = {"machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.platform()}",
              "seconds": round(time.time() - started, 1), "figures": checked}
    write_json(report, os.path.join(out, "reproduce.json"))
    failed = [row for row in checked if row["verdict"] not in ("pass", "overloaded")]
    judged = [row for row in checked if row["verdict"] != "overloaded"]
    print_line(f"\n{len(judged) - len(failed)} of {len(judged)} figures within their ranges, "
               f"{len(checked) - len(judged)} not judged (every run overloaded) "
               f"({report['seconds']:.0f} s; load average before/after each experiment in {out}/reproduce.json)")
    print_line(figures.format_report(checked))
    return 0 if not failed else 1
