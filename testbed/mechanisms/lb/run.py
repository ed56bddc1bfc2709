"""What a load-balancing run adds to its results: flowlet path changes (p4src/flowlet.p4's counter);
its comparison plot."""
from testbed.experiment.counters import counter_total
from testbed.experiment.results import OPT_INT
from testbed.mechanisms.hooks import Column, RunHooks
from testbed.mechanisms.lb.plots import plot_flowlet_curve, plot_lb_comparison

PATH_CHANGES_COUNTER = "MyIngress.flowlet_path_changes"  # p4src/flowlet.p4


class LoadBalancingHooks(RunHooks):
    """``dataplane.flowlet_path_changes``: flowlet boundaries at which a flow slot moved to another port.

    Reordering can only happen at such a change (one flowlet keeps one FIFO
    path), so it bounds the out-of-sequence arrivals the program caused,
    however fast or loaded the machine was.  None for programs without the counter.
    """

    results_schema = {"dataplane": {"flowlet_path_changes": OPT_INT}}
    initial_results = {"dataplane": {"flowlet_path_changes": None}}
    columns = (Column("flowlet_path_changes", "path changes", "{}",
                      lambda results: results.get("dataplane", {}).get("flowlet_path_changes")),)

    def dataplane(self, record, run, before, after):
        """Add ``flowlet_path_changes`` (sum over every switch)."""
        record["dataplane"]["flowlet_path_changes"] = counter_total(run.readers, run.p4info, PATH_CHANGES_COUNTER,
                                                                    skip=run.fabric.crashed)

    def comparison_plots(self, rows, runs_by_label, out_dir, title):
        """``lb_comparison.png``, and for a flowlet-interval sweep ``flowlet_curve.png``
        (:mod:`testbed.mechanisms.lb.plots`)."""
        return plot_lb_comparison(rows, out_dir, title) + plot_flowlet_curve(rows, runs_by_label, out_dir, title)
