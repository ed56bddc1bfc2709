"""What an F10 run adds to its results: detections, detector transitions, pushback, rescheduling, no-detour drops.

The F10 controller (:class:`testbed.controllers.f10.controller.F10Controller`)
records the rows (its ``results``); these hooks add the data plane's
``no_detour`` drops, mark detections, pushback and rescheduling on the
timeline, judge the triggers' lateness, and give ``testbed compare`` its
detection and pushback columns.
"""
from testbed.experiment.analysis import loss_timeline
from testbed.experiment.counters import counter_total
from testbed.experiment.results import NUMBER, OPT_INT, OPT_NUMBER, OrNull
from testbed.mechanisms.f10.plots import plot_f10_comparison
from testbed.mechanisms.hooks import Column, RunHooks

NO_DETOUR_COUNTER = "MyIngress.f10_no_detour"  # p4src/f10.p4
TRIGGER_LATE_MS = 50.0  # a detector decides on the trigger: later than this, its timings are the machine's
#: a skipped trigger period sends no probe and makes no decision: above this share of the periods the
#: detectors' transitions are the machine's (a whole late period counts as skipped, not as late)
TRIGGER_SKIPPED_SHARE = 0.01


def _detection_s(results):
    rows = [row["detection_s"] for row in results.get("controller", {}).get("detections", [])]
    return max(rows) if rows else None


def _median_flow_recovery(results):
    medians = [row["median_recovery_s"] for row in results.get("summary", {}).get("flow_recovery", [])
               if row.get("median_recovery_s") is not None]
    return max(medians) if medians else None


def _pushback_messages(results):
    rows = results.get("controller", {}).get("pushbacks", [])
    return sum(row["messages"] for row in rows) if rows else None


def first_write_per_epoch(rows):
    """``[(at_s, "epoch n")]``: when each rescheduler epoch that changed something wrote first.

    >>> first_write_per_epoch([{"epoch": 2, "at_s": 1.5}, {"epoch": 2, "at_s": 1.2}, {"epoch": 3, "at_s": None}])
    [(1.2, 'epoch 2')]
    """
    first = {}
    for row in rows:
        if row.get("at_s") is not None:
            first[row["epoch"]] = min(first.get(row["epoch"], row["at_s"]), row["at_s"])
    return [(at_s, f"epoch {epoch}") for epoch, at_s in sorted(first.items())]


class F10Hooks(RunHooks):
    """F10's measurements (see the module docstring)."""

    results_schema = {
        "controller": {
            # the first transition of a failed link's port; detection_s: failure to the transition on the
            # switch's clock where the target tells its origin (clock "switch"), else to the report's arrival
            "detections": [{"failure_index": OPT_INT, "action": str, "switch": str, "port": int,
                            "detection_s": NUMBER, "reported_s": NUMBER, "clock": str}],
            # every detector transition: at_s its report's arrival, switch_at_s on the switch's clock (or null)
            "transitions": [{"switch": str, "port": int, "status": str, "at_s": OPT_NUMBER,
                             "switch_at_s": OPT_NUMBER, "switch_time_us": int, "frames": int, "holddown_us": int,
                             "backoff_level": int, "link": [str]}],
            # pushback set off by each link a detector reported down or up: the protocol's messages and
            # switches (simulated), what the controller wrote, and when
            "pushbacks": [dict],
            # embedded target, per switch: the latest a trigger went out after its due time
            "trigger_late_max_us": dict,
            # embedded target, per switch: trigger periods skipped (no probe, no decision), the most skipped
            # in a row, and triggers generated
            "trigger_skipped": dict, "trigger_skipped_run_max": dict, "trigger_generated": dict,
            # the epoch rescheduler: one row per group it wrote (or moved entries to), one per epoch
            "reschedules": [dict], "reschedule_epochs": [dict]},
        "dataplane": {"drops": {"no_detour": int}},  # next hop down and no working detour
        "overload": {"trigger_late_max_ms": OPT_NUMBER, "trigger_skipped_share": OPT_NUMBER,
                     "trigger_skipped_run_max": OPT_INT},
        # lost stream packets per transmit bin (analysis.loss_timeline); null: the run stopped before
        "f10": OrNull({"loss_timeline": {"bin_s": OPT_NUMBER, "t_s": [NUMBER], "lost": [int],
                                         "after_failure": [bool]}}),
    }
    initial_results = {"controller": {"detections": [], "transitions": [], "pushbacks": [],
                                      "trigger_late_max_us": {}, "trigger_skipped": {}, "trigger_generated": {},
                                      "trigger_skipped_run_max": {},
                                      "reschedules": [], "reschedule_epochs": []},
                       "dataplane": {"drops": {"no_detour": 0}},
                       "overload": {"trigger_late_max_ms": None, "trigger_skipped_share": None,
                                    "trigger_skipped_run_max": None},
                       "f10": None}
    event_styles = {
        "detection": ("detector: port down (local reroute)", "tab:orange", "-."),
        "pushback": ("pushback installed", "tab:purple", ":"),
        "reschedule": ("rescheduler: new weights", "tab:brown", (0, (1, 3))),
    }
    columns = (Column("detection_s", "detection s", "{:.3f}", _detection_s),
               Column("median_flow_recovery_s", "median flow recovery s", "{:.3f}", _median_flow_recovery),
               Column("pushback_messages", "pushback msgs", "{}", _pushback_messages))

    def dataplane(self, record, run, before, after):
        """``drops.no_detour``: packets whose next hop was declared down with no working detour (connectivity)."""
        no_detour = counter_total(run.readers, run.p4info, NO_DETOUR_COUNTER, skip=run.fabric.crashed) or 0
        drops = record["dataplane"]["drops"]
        drops["no_detour"] = no_detour
        drops["connectivity"] += no_detour

    def results(self, record, run, recorder=None):
        """``f10.loss_timeline``: lost packets over time, inside the failures' loss episodes or not."""
        episodes = [(row["first_loss_at_s"], row["last_loss_at_s"]) for row in record["summary"].get("recovery", [])
                    if row.get("first_loss_at_s") is not None and row.get("last_loss_at_s") is not None]
        record["f10"] = {"loss_timeline": loss_timeline(run.reports, run.t0_ns, episodes)}

    def comparison_plots(self, rows, runs_by_label, out_dir, title):
        """``f10_comparison.png`` (:func:`testbed.mechanisms.f10.plots.plot_f10_comparison`)."""
        return plot_f10_comparison(rows, runs_by_label, out_dir, title)

    def timeline_events(self, record):
        """Detections (failure time + detection), pushback installed, the rescheduler's first write per epoch."""
        controller = record["controller"]
        applied = {row["index"]: row["applied_at_s"] for row in record["failures"]}
        events = {
            "detection": [(applied[row["failure_index"]] + row["detection_s"], row["switch"])
                          for row in controller.get("detections", [])
                          if applied.get(row["failure_index"]) is not None],
            "pushback": [(row["at_s"] + (row["compute_s"] or 0) + (row["write_s"] or 0), "-".join(row["link"]))
                         for row in controller.get("pushbacks", []) if row.get("at_s") is not None
                         and not row["error"]],
            "reschedule": first_write_per_epoch(controller.get("reschedules", [])),
        }
        return {kind: rows for kind, rows in events.items() if rows}

    def overload(self, record):
        """The triggers' lateness and skipped periods: a detector decides on its trigger, as late and as rarely;
        and a switch whose trigger stopped for a window's worth of periods (less the one its neighbours'
        windows may straddle) left them a window without its probes, so their down reports may be the
        machine's."""
        late = list(record["controller"].get("trigger_late_max_us", {}).values())
        late_ms = max(late) / 1000.0 if late else None
        reasons = []
        if late_ms is not None and late_ms > TRIGGER_LATE_MS:
            reasons.append(f"a failure detector's trigger was {late_ms:.0f} ms late (limit {TRIGGER_LATE_MS:g} ms)")
        skipped = sum(record["controller"].get("trigger_skipped", {}).values())
        periods = skipped + sum(record["controller"].get("trigger_generated", {}).values())
        share = skipped / periods if periods else None
        if share is not None and share > TRIGGER_SKIPPED_SHARE:
            reasons.append(f"the failure detectors' triggers skipped {skipped} of {periods} periods ({share:.1%}, "
                           f"limit {TRIGGER_SKIPPED_SHARE:.0%}): they probed and decided too rarely")
        runs = record["controller"].get("trigger_skipped_run_max", {})
        run_max = max(runs.values()) if runs else None
        window = record["controller"].get("mode_params_written", {}).get("detector_window_periods")
        if run_max is not None and window is not None and run_max >= window - 1:
            switch = max(sorted(runs), key=runs.get)
            reasons.append(f"{switch}'s trigger skipped {run_max} periods in a row (limit {window - 2}, the "
                           f"detector's window less 2): its neighbours may have declared its links down")
        return {"trigger_late_max_ms": late_ms, "trigger_skipped_share": share,
                "trigger_skipped_run_max": run_max}, reasons
