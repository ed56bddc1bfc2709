"""``testbed run SPEC.yaml``: run one experiment spec and write its results.

Builds the fabric with P4 switches, starts the controller, runs the traffic
and the failure schedule, collects counters and receiver reports, always tears
down, and writes results.json, link_load.csv and PNG plots into the output
folder (``--out``, default the spec's ``out_dir``).  Exit status 0 on
success, 1 when the run failed midway (results still written), 2 for an
invalid spec, 3 when it ran but its result is suspect (status ``warning``:
WARNING lines and results.json's ``warnings`` say why), 130 when interrupted.
"""
import sys

from testbed.commands.net import add_server_arguments
from testbed.emulation.progress import print_line


def register(subparsers):
    """Add the ``run`` subcommand."""
    parser = subparsers.add_parser("run", help="run an experiment spec (YAML) and write results",
                                   description=__doc__.split("\n\n")[0] + " " + __doc__.split("\n\n")[1])
    parser.add_argument("spec", metavar="SPEC.yaml", help="experiment spec (see experiments/)")
    parser.add_argument("--target", choices=("auto", "embedded", "bmv2"), default=None,
                        help="P4 target (default: the spec's target)")
    parser.add_argument("--out", default=None, metavar="DIR", help="output folder (default: the spec's out_dir)")
    parser.add_argument("--check", action="store_true", help="only validate the spec and print it")
    add_server_arguments(parser, default_link=None)
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress output")
    parser.set_defaults(func=run)


def summary_lines(results):
    """The headline lines of a run, for the spec's ``metrics`` (all of them when unset)."""
    from testbed.experiment.spec import METRICS

    wanted = set(results.get("spec", {}).get("metrics") or METRICS)
    summary = results["summary"]
    lines = [f"status {results['status']}  mode {results['mode'] or results['program']}  "
             f"target {results['target']}  seed {results['seed']}"]
    if wanted & {"loss", "goodput"}:
        lines.append(f"  packets sent {summary['sent_packets']}  received {summary['received_packets']}  "
                     f"lost {summary['lost_packets']} ({summary['loss_rate'] * 100:.2f}%)")
    if "goodput" in wanted:
        lines.append(f"  goodput {summary['goodput_mbps']:.2f} Mbit/s")
    if "out_of_order" in wanted:
        lines.append(f"  out-of-sequence {summary['out_of_sequence']} ({summary['out_of_order_rate'] * 100:.2f}%)"
                     f"  reordered {summary['late']}")
    if wanted & {"mmr", "link_load"}:
        mmr = summary.get("uplink_mmr")
        lines.append(f"  uplink MMR {'-' if mmr is None else f'{mmr:.3f}'} over {len(summary['uplink_loads'])} "
                     f"uplinks  (per-link load: link_load.csv)")
    if "recovery" in wanted:
        for row in summary.get("recovery", []):
            if row.get("loss_window_s") is not None:
                lines.append(f"  failure {row['failure_index']}: packets lost for {row['loss_window_s'] * 1000:.0f} ms "
                             f"(t={row['first_loss_at_s']:.3f}s..{row['last_loss_at_s']:.3f}s), "
                             f"{row['lost_in_window']} lost"
                             + (f"; {row['lost_later']} more lost later" if row.get("lost_later") else ""))
            if row.get("gap_s") is not None:
                lines.append(f"  failure {row['failure_index']}: longest delivery gap {row['gap_s'] * 1000:.0f} ms, "
                             f"delivery resumed at t={row['resumed_at_s']:.3f}s")
    for line in results.get("warnings", []):
        lines.append(f"  WARNING: {line}")
    if "controller" in wanted:
        for row in results["controller"]["reactions"]:
            if row.get("reaction_s") is not None:
                lines.append(f"  controller reacted to failure {row['failure_index']} after "
                             f"{row['reaction_s'] * 1000:.0f} ms ({row['entries_written']} entries)")
            elif row.get("error"):
                lines.append(f"  controller failed to react to failure {row['failure_index']}: {row['error']}")
    return lines


def print_summary(results, stream=sys.stdout):
    """Print :func:`summary_lines`."""
    for line in summary_lines(results):
        print(line, file=stream)


def run(args):
    """Validate the spec, run it, print the summary; returns the exit status."""
    import json

    from testbed.experiment.runner import ExperimentFailed, run_experiment
    from testbed.experiment.spec import load_spec, on_servers

    # with --target the machine check waits for run_experiment, against the target actually used
    spec = load_spec(args.spec, check_machine=args.target is None)
    if args.servers:
        spec = on_servers(spec, args.servers, args.cross_link)
    if args.check:
        print(json.dumps(spec.to_dict(), indent=1))
        return 0
    progress = (lambda _line: None) if args.quiet else print_line
    try:
        results = run_experiment(spec, args.out, target=args.target, progress=progress)
    except ExperimentFailed as error:
        if error.results is not None:
            print_summary(error.results)
        print(f"testbed run: error: {error}", file=sys.stderr)
        return 1
    print_summary(results)
    return 3 if results["status"] == "warning" else 0
