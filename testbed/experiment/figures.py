"""The figures the READMEs quote, the experiments behind them, and their check (``testbed reproduce``).

Every figure README.md and experiments/README.md quote from an experiment is a
:class:`Figure` here: the experiment that produces it (:data:`EXPERIMENTS`: a
spec and the ``testbed compare`` arguments), the row and metric it is, and
the range it must fall in.  :func:`reproduce` reruns the experiments and
checks every figure; ``testbed reproduce`` prints the table (and writes
``reproduce.json``).  The ranges are stated around what was measured here on
a loaded 2-core machine: wide where the emulator's timing enters (goodput,
reaction and recovery times), tight where the seed decides (placements, hence
MMR), and figures that depend on microsecond timing (out-of-order counts at
short flowlet intervals) are quoted as ranges over repeated runs, never as one
run's number.

Each experiment also has a CI size (``ci``: shorter traffic, fewer sweep
values) with its own ranges, run by ``testbed reproduce --ci`` and the suite
(tests/test_reproduce_mininet.py).

Figures of speed (benchmarks/) are not here: they measure the machine, and
their scripts print them.
"""
import copy
import json
import os
from dataclasses import dataclass
from typing import Optional, Tuple

from testbed.experiment import repeats



@dataclass(frozen=True)
class Experiment:
    """An experiment behind quoted figures: a spec run by ``testbed compare``.

    Attributes:
        name: its key (``testbed reproduce --only NAME``).
        spec: the spec, relative to the repository.
        modes: the modes compared (one mode with ``sweep``).
        sweep: ``(param, values)`` or None.
        repeat: runs per row (all with the spec's seed: the figures are that seed's).
        traffic_s: if given, every traffic entry lasts this long (the run one second more).
        rate_mbps: if given, every traffic entry's rate.
        target: the P4 target the figures were measured on (the READMEs quote the embedded target's).
    """

    name: str
    spec: str
    modes: Tuple[str, ...]
    sweep: Optional[Tuple[str, Tuple[int, ...]]] = None
    repeat: int = 1
    traffic_s: Optional[float] = None
    rate_mbps: Optional[float] = None
    target: str = "embedded"

    def command(self):
        """The ``testbed compare`` command line that produces the figures (at full size)."""
        words = ["testbed compare", self.spec, "--modes", ",".join(self.modes), "--target", self.target]
        if self.sweep:
            words += ["--sweep", f"{self.sweep[0]}=" + ",".join(str(value) for value in self.sweep[1])]
        if self.repeat > 1:
            words += ["--repeat", str(self.repeat), "--same-seed"]
        changed = [f"traffic {self.traffic_s:g} s"] if self.traffic_s is not None else []
        changed += [f"{self.rate_mbps:g} Mbit/s per sender"] if self.rate_mbps is not None else []
        return " ".join(words) + (f" (spec changed: {', '.join(changed)})" if changed else "")


@dataclass(frozen=True)
class Figure:
    """One quoted figure and the range it must fall in.

    Attributes:
        experiment: the :class:`Experiment`'s name.
        row: the comparison row (a mode, or ``mode@param=value``).
        metric: a column key of the comparison table, or a path into results.json
            (``"dataplane.drops_by_place.fabric_link_queue"``; averaged over the runs).
        low, high: the range (inclusive) the measured value (the mean over the runs) must lie in.
        quoted: the figure as the README states it.
        reordering: an out-of-order figure: runs whose reordering the emulator alone could have
            caused (``overload.reordering_unreliable``) are left out too.
    """

    experiment: str
    row: str
    metric: str
    low: float
    high: float
    quoted: str
    reordering: bool = False


_E = "elephants"
_F = "flowlet"
_L = "leafspine"
_P = "f10-portland"
_D = "dsf-clos"
_I = "dsf-incast"
_R = "flowlet-rtt"

#: the experiments behind the READMEs' figures (full size) and their CI sizes (``-ci``)
EXPERIMENTS = {experiment.name: experiment for experiment in (
    Experiment(_E, "experiments/elephants_lowentropy.yaml", ("ecmp", "eecmp", "spray", "flowlet")),
    Experiment(_E + "-ci", "experiments/elephants_lowentropy.yaml", ("ecmp", "eecmp", "spray"), traffic_s=3.0),
    Experiment(_F, "experiments/flowlet_sweep.yaml", ("flowlet",),
               sweep=("flowlet_interval_us", (100, 5000, 100000)), repeat=3),
    Experiment(_F + "-ci", "experiments/flowlet_sweep.yaml", ("flowlet",),
               sweep=("flowlet_interval_us", (100, 100000)), traffic_s=3.0, rate_mbps=10.0),
    Experiment(_R, "experiments/flowlet_rtt.yaml", ("flowlet",),
               sweep=("flowlet_interval_us", (300, 12000, 24000, 100000)), repeat=3),
    Experiment(_L, "experiments/leafspine_failure_ci.yaml", ("ecmp",)),
    Experiment(_L + "-ci", "experiments/leafspine_failure_ci.yaml", ("ecmp",)),
    Experiment(_P, "experiments/f10_vs_portland.yaml", ("portland", "fattree-local", "f10")),
    Experiment(_D, "experiments/dsf_vs_clos.yaml", ("dsf", "ecmp", "eecmp")),
    Experiment(_I, "experiments/dsf_incast.yaml", ("dsf",), sweep=("dsf_credits", (1, 0))),
)}

#: every checked figure; ``quoted`` is the README's wording
FIGURES = (
    # elephants_lowentropy.yaml, seed 4: placements fixed by the seed (MMR), goodput by the shaped links
    Figure(_E, "ecmp", "uplink_mmr", 2.95, 3.05, "uplink MMR ecmp 3.000"),
    Figure(_E, "eecmp", "uplink_mmr", 1.20, 1.30, "uplink MMR eecmp 1.250"),
    Figure(_E, "spray", "uplink_mmr", 0.99, 1.05, "uplink MMR spray 1.000"),
    Figure(_E, "flowlet", "uplink_mmr", 0.99, 1.10, "uplink MMR flowlet (500 us) 1.02"),
    Figure(_E, "ecmp", "goodput_mbps", 6.2, 7.1, "goodput ecmp 6.65 Mbit/s"),
    Figure(_E, "eecmp", "goodput_mbps", 10.9, 11.7, "goodput eecmp 11.37 Mbit/s"),
    Figure(_E, "spray", "goodput_mbps", 10.9, 11.7, "goodput spray 11.37 Mbit/s"),
    Figure(_E, "flowlet", "goodput_mbps", 10.9, 11.7, "goodput flowlet 11.38 Mbit/s"),
    Figure(_E, "ecmp", "loss_rate", 0.35, 0.46, "loss ecmp 40.7%"),
    Figure(_E, "eecmp", "loss_rate", 0.0, 0.01, "loss eecmp 0"),
    Figure(_E + "-ci", "ecmp", "uplink_mmr", 2.95, 3.05, "CI size: MMR ecmp 3.000"),
    Figure(_E + "-ci", "eecmp", "uplink_mmr", 1.20, 1.30, "CI size: MMR eecmp 1.250"),
    Figure(_E + "-ci", "spray", "uplink_mmr", 0.99, 1.05, "CI size: MMR spray 1.001"),
    Figure(_E + "-ci", "ecmp", "goodput_mbps", 6.0, 7.3, "CI size: goodput ecmp 6.66 Mbit/s"),
    Figure(_E + "-ci", "eecmp", "goodput_mbps", 10.7, 11.9, "CI size: goodput eecmp 11.39 Mbit/s"),
    Figure(_E + "-ci", "spray", "goodput_mbps", 10.7, 11.9, "CI size: goodput spray 11.39 Mbit/s"),
    # flowlet_sweep.yaml: pinned flows (100 ms) balance like ECMP and never reorder; short intervals
    # balance, their out-of-order counts are the emulator's timing (a range over repeats)
    Figure(_F, "flowlet@flowlet_interval_us=100", "uplink_mmr", 0.99, 1.10, "MMR at 100 us 1.01-1.05"),
    Figure(_F, "flowlet@flowlet_interval_us=5000", "uplink_mmr", 0.99, 1.15, "MMR at 5000 us 1.01-1.06"),
    # at 100 ms each QP keeps its first flowlet's port; which one that is also depends on the start-up's
    # timing (2.00 on a quiet machine, 2.50 seen under load), hence the range
    Figure(_F, "flowlet@flowlet_interval_us=100000", "uplink_mmr", 1.9, 2.6, "MMR at 100000 us 2.00-2.50"),
    Figure(_F, "flowlet@flowlet_interval_us=100000", "out_of_sequence", 0, 2, "out-of-sequence at 100000 us 0"),
    Figure(_F, "flowlet@flowlet_interval_us=100", "out_of_sequence", 0, 20,
           "out-of-sequence at 100 us 0-1 (runs the emulator could reorder left out)", reordering=True),
    Figure(_F + "-ci", "flowlet@flowlet_interval_us=100", "uplink_mmr", 0.99, 1.10, "CI size: MMR at 100 us 1.01"),
    Figure(_F + "-ci", "flowlet@flowlet_interval_us=100000", "uplink_mmr", 1.9, 2.6,
           "CI size: MMR at 100000 us 2.00-2.50"),
    Figure(_F + "-ci", "flowlet@flowlet_interval_us=100000", "out_of_sequence", 0, 2,
           "CI size: out-of-sequence at 100000 us 0"),
    # flowlet_rtt.yaml (RTT 24 ms by the links' delays, 8 s of poisson-paced streams): reordering falls by
    # 2-3 orders of magnitude from 300 us to RTT/2 and is gone (< 1 / s) at 2 x RTT/2; balance goes from
    # 1.01 to pinned flows (which port a QP pins to depends on the seed and the start-up's timing)
    Figure(_R, "flowlet@flowlet_interval_us=300", "late", 4000, 7500, "reordered at 300 us 5532-5663"),
    Figure(_R, "flowlet@flowlet_interval_us=12000", "late", 0, 80, "reordered at RTT/2 (12 ms) 18-30"),
    Figure(_R, "flowlet@flowlet_interval_us=24000", "late", 0, 8, "reordered at 2 x RTT/2 0-3 (< 1 / s)"),
    Figure(_R, "flowlet@flowlet_interval_us=100000", "late", 0, 2, "reordered at 100 ms 0"),
    Figure(_R, "flowlet@flowlet_interval_us=300", "uplink_mmr", 0.99, 1.10, "MMR at 300 us 1.01"),
    Figure(_R, "flowlet@flowlet_interval_us=100000", "uplink_mmr", 1.4, 3.1, "MMR at 100 ms 1.50-2.98"),
    # leafspine_failure_ci.yaml: a 50 ms detection delay plus the rewrite
    Figure(_L, "ecmp", "loss_window_s", 0.04, 0.12, "loss window ~60 ms"),
    Figure(_L, "ecmp", "controller_reaction_s", 0.05, 0.10, "controller reaction 61-63 ms"),
    Figure(_L + "-ci", "ecmp", "controller_reaction_s", 0.05, 0.12, "CI size: controller reaction 61-63 ms"),
    # f10_vs_portland.yaml (5 ms probes on every link, native backend): detection within t + c periods
    # (30 ms) plus the trigger's lateness; PortLand after its 65 ms keepalive
    Figure(_P, "fattree-local", "detection_s", 0.015, 0.04, "detection fattree-local 17-27 ms"),
    Figure(_P, "f10", "detection_s", 0.015, 0.04, "detection f10 21-25 ms"),
    Figure(_P, "portland", "median_flow_recovery_s", 0.065, 0.12, "median flow recovery portland 74-79 ms"),
    Figure(_P, "f10", "median_flow_recovery_s", 0.02, 0.05, "median flow recovery f10 29-43 ms"),
    Figure(_P, "f10", "pushback_messages", 3, 3, "pushback: 3 messages"),
    # dsf_vs_clos.yaml
    Figure(_D, "dsf", "fabric_mmr", 0.99, 1.02, "RDSW-FDSW MMR dsf 1.000"),
    # ECMP puts the 4 NIC pairs 1/0/1/2 on the uplinks for this seed (testbed.experiment.placement)
    Figure(_D, "ecmp", "fabric_mmr", 1.95, 2.05, "RDSW-FDSW MMR ecmp 2.000"),
    Figure(_D, "eecmp", "fabric_mmr", 1.2, 1.3, "RDSW-FDSW MMR eecmp 1.250"),
    Figure(_D, "dsf", "goodput_mbps", 5.4, 5.9, "goodput dsf 5.69 Mbit/s"),
    Figure(_D, "ecmp", "goodput_mbps", 4.4, 5.1, "goodput ecmp 4.74 Mbit/s"),
    Figure(_D, "dsf", "fabric_drops", 0, 0, "fabric drops dsf 0"),
    # dsf_incast.yaml
    Figure(_I, "dsf@dsf_credits=1", "fabric_drops", 0, 0, "credits on: fabric drops 0"),
    Figure(_I, "dsf@dsf_credits=0", "fabric_drops", 2500, 5000, "credits off: fabric drops 3476-4084"),
    # busy: bytes over the window's capacity; the window's ends make it exceed 1 slightly
    Figure(_I, "dsf@dsf_credits=1", "host_port_busy", 0.97, 1.02, "credits on: host port busy 1.00"),
    # (without credits the host port's busy fraction is not checked: 0.63, 0.73 and 1.00 in three runs,
    # as the overflowing links happen to drop cells of many packets or of few)
)


def figures_of(experiment):
    """The figures ``experiment`` (a name) produces."""
    return [figure for figure in FIGURES if figure.experiment == experiment]


def spec_of(experiment, root="."):
    """The experiment's validated spec, its traffic shortened or its rate changed as it says.

    Args:
        experiment: an :class:`Experiment`.
        root: the repository's folder (its ``spec`` is relative to it).
    """
    from testbed.experiment.spec import parse_spec
    from testbed.experiment.spec_yaml import read_spec_yaml

    path = os.path.join(root, experiment.spec)
    data = copy.deepcopy(read_spec_yaml(path))
    for entry in data.get("traffic", []):
        if experiment.traffic_s is not None:
            entry["duration_s"] = experiment.traffic_s
        if experiment.rate_mbps is not None:
            entry["rate_mbps"] = experiment.rate_mbps
    if experiment.traffic_s is not None:
        data["duration_s"] = max(float(entry.get("start_s", 0)) for entry in data["traffic"]) \
            + experiment.traffic_s + 1.0
        # failures after the shortened traffic are left out: nothing would measure them
        data["failures"] = [row for row in data.get("failures", []) if row["at_s"] < data["duration_s"]]
    return parse_spec(data, source=path, check_machine=False)


def _path_value(results, path):
    value = results
    for part in path.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


def _judged(status, overloaded):
    """Whether a run counts for a figure: it ended (ok or warning) and kept up."""
    return status in ("ok", "warning") and not overloaded


def measured(figure, rows, runs_by_label):
    """The figure's measured value over the runs of its row that ended and kept up.

    A run marked overloaded (its timings and losses are the machine's), or for a
    ``reordering`` figure one whose reordering the emulator could have caused, is left out and
    counted in ``overloaded_runs``; one that failed (its numbers are partial) in ``failed_runs``.

    Returns:
        dict: :func:`repeats.describe` of the values (``n`` 0: not measured), ``overloaded_runs``
        and ``failed_runs``.
    """
    if "." in figure.metric:
        runs = [(results, results.get("status"),
                 results.get("overload", {}).get("overloaded")
                 or figure.reordering and results.get("overload", {}).get("reordering_unreliable"))
                for results in runs_by_label.get(figure.row, [])]
        values = [_path_value(results, figure.metric) for results, status, over in runs if _judged(status, over)]
    else:
        row = next((row for row in rows if row["mode"] == figure.row), None)
        singles = (row.get("repeats") or [row]) if row is not None else []
        runs = [(single, single.get("status"), single.get("overloaded") == "YES"
                 or figure.reordering and single.get("reordering_unreliable") == "YES") for single in singles]
        values = [single.get(figure.metric) for single, status, over in runs if _judged(status, over)]
    stats = repeats.describe(values)
    stats["failed_runs"] = sum(1 for _, status, _over in runs if status not in ("ok", "warning"))
    stats["overloaded_runs"] = sum(1 for _, status, over in runs if status in ("ok", "warning") and over)
    return stats


def check(figure, stats):
    """``"pass"`` when the mean lies in the figure's range, ``"FAIL"`` when not; ``"overloaded"`` when every
    run was marked overloaded (nothing to judge), ``"not measured"`` when none measured it."""
    if not stats["n"]:
        return "overloaded" if stats.get("overloaded_runs") and not stats.get("failed_runs") else "not measured"
    return "pass" if figure.low <= stats["mean"] <= figure.high else "FAIL"


def run_experiment_figures(experiment, out_dir, target=None, progress=print, repeat=None, root="."):
    """Run one experiment and check its figures.

    Args:
        experiment: an :class:`Experiment`.
        out_dir: where its comparison goes.
        target: P4 target override (default: the experiment's).
        progress: progress callback.
        repeat: runs per row (default: the experiment's), all with the spec's seed.
        root: the repository's folder.

    Returns:
        list[dict]: one per figure: ``experiment``, ``row``, ``metric``, ``quoted``, ``low``, ``high``,
        ``measured`` (describe), ``verdict``.
    """
    from testbed.experiment.compare import compare_modes, sweep_mode_param

    spec = spec_of(experiment, root)
    runs = repeat or experiment.repeat
    target = target or experiment.target
    if experiment.sweep:
        param, values = experiment.sweep
        rows = sweep_mode_param(spec, param, list(values), mode=experiment.modes[0], out_dir=out_dir, target=target,
                                progress=progress, repeat=runs, same_seed=True)
    else:
        rows = compare_modes(spec, list(experiment.modes), out_dir=out_dir, target=target, progress=progress,
                             repeat=runs, same_seed=True)
    collected = {row["mode"]: _run_results(out_dir, row, experiment) for row in rows}
    results = []
    for figure in figures_of(experiment.name):
        stats = measured(figure, rows, collected)
        results.append({"experiment": experiment.name, "row": figure.row, "metric": figure.metric,
                        "quoted": figure.quoted, "low": figure.low, "high": figure.high, "measured": stats,
                        "verdict": check(figure, stats)})
    return results


def _run_results(out_dir, row, experiment):
    """The results.json of every run of a row (read back from the comparison's folders)."""
    if experiment.sweep:
        param = experiment.sweep[0]
        folder = os.path.join(out_dir, f"{param}-{row['mode'].split('=')[-1]}")
    else:
        folder = os.path.join(out_dir, row["mode"])
    paths = [os.path.join(folder, "results.json")]
    if not os.path.exists(paths[0]) and os.path.isdir(folder):
        paths = [os.path.join(folder, name, "results.json") for name in sorted(os.listdir(folder))
                 if name.startswith("run")]
    found = []
    for path in paths:
        if os.path.exists(path):
            with open(path) as handle:
                found.append(json.load(handle))
    return found


def format_report(checked, header=""):
    """The figures as a text table: quoted, range, measured mean ±95% [min,max] (n runs), verdict."""
    lines = [header] if header else []
    for row in checked:
        stats = row["measured"]
        if stats["n"]:
            value = (f"{stats['mean']:.4g} ±{stats['ci95']:.2g} [{stats['min']:.4g},{stats['max']:.4g}] "
                     f"(n={stats['n']})")
        else:
            value = "-"
        if stats.get("overloaded_runs"):
            value += f"; {stats['overloaded_runs']} overloaded (or reordering-unreliable) run(s) left out"
        if stats.get("failed_runs"):
            value += f"; {stats['failed_runs']} failed run(s) left out"
        lines.append(f"{row['verdict']:>12}  {row['experiment']:<16} {row['quoted']:<52} "
                     f"range [{row['low']:g}, {row['high']:g}]  measured {value}")
    return "\n".join(lines)


def experiments_for(names=None, ci=False):
    """The experiments to rerun: those named, else every full-size one (``ci``: every CI-size one).

    Raises:
        ParameterError: an unknown name (the known ones listed).
    """
    from testbed.errors import ParameterError

    if names:
        unknown = [name for name in names if name not in EXPERIMENTS]
        if unknown:
            raise ParameterError("--only", ",".join(unknown), "names of: " + ", ".join(EXPERIMENTS))
        return [EXPERIMENTS[name] for name in names]
    return [experiment for name, experiment in EXPERIMENTS.items() if name.endswith("-ci") == ci]

