"""What a run on a DSF topology adds to its results (any mode, so the IP Clos baselines are measured alike).

During the run the counters are sampled (:class:`~testbed.mechanisms.dsf.metrics.FabricRecorder`);
after it: the DSF drop places, the ``dsf`` section (tier loads in bytes of
cells, VOQ depth, credits, host-port busy fraction, uplink rates and their
change at failures, the controller's reachability state), the two DSF plots and
the comparison columns and plot (dsf_comparison.png).
"""
from testbed.experiment.results import NUMBER, OPT_INT, OPT_NUMBER, OPT_STR, OrNull
from testbed.mechanisms.dsf.metrics import DSF_DROP_PLACES, FABRIC_DROP_PLACES, FabricRecorder, add_dsf_drop_places
from testbed.mechanisms.dsf.plots import fabric_mmr, plot_dsf, plot_dsf_comparison
from testbed.mechanisms.hooks import Column, RunHooks

DSF_SCHEMA = {
    "parameters": dict, "cell_bytes": int, "spray_policy": str,
    "tiers": dict,                        # {"rdsw>fdsw": {"loads": {link: bytes}, "mmr": float | null}, ...}
    "voq_depth": {"t_s": [NUMBER], "depth_pkts": dict,   # {rdsw: [packets]}
                  "max": {"rdsw": OPT_STR, "voq": OPT_INT, "depth_pkts": int}},
    "credits": {"t_s": [NUMBER], "grants_per_s": dict, "mean_grants_per_s": dict},   # {"rdsw:port": ...}
    # busy: the fraction of the port's capacity used over busy_window_s
    "host_ports": [{"switch": str, "port": int, "host": str, "bytes": int, "mbps": NUMBER, "busy": NUMBER}],
    "busy_window_s": [NUMBER],
    "uplink_rates": {"t_s": [NUMBER], "bytes_per_s": dict},   # {rdsw: [bytes/s]}
    "rate_changes": [{"failure_index": int, "at_s": NUMBER, "rdsw": dict, "before": NUMBER, "after": NUMBER,
                      "ratio": OPT_NUMBER}],
    # the controller's state: input_balanced, ibm_seed, withdrawals {dest: [[adv, nbr, key]]}, failed_links,
    # nodes, system_ports, reactions
    "control": dict,
    # samples: egress counters (once a second); dsf_samples: grid times at which the RDSWs' VOQ and credit
    # counters changed, noted by the switches every dsf_sample_interval_s (voq_depth and credits use them)
    "samples": int, "dsf_samples": int, "dsf_sample_interval_s": OPT_NUMBER, "sample_errors": [str],
    "switch_cpu": dict,                   # {switch: CPU share of one core over the run}
}


DROP_PLACES = DSF_DROP_PLACES + FABRIC_DROP_PLACES + ("no_reachability_in_fabric",)
# The TTL-based path dilation counts IP hops: the cell fabric is one IP hop (the ingress RDSW), so the
# metric would report "-2 extra hops" for every packet; cells spray over equal-length paths anyway.
NO_PATH_DILATION = ("the DSF fabric forwards cells, not IP packets: the IPv4 TTL counts it as one hop, so extra "
                    "hops cannot be told from it (every cell path between two RDSWs has the same length)")


def _host_port_busy(results):
    busy = [row["busy"] for row in (results.get("dsf") or {}).get("host_ports", [])]
    return max(busy) if busy else None


def _voq_max_depth(results):
    return ((results.get("dsf") or {}).get("voq_depth") or {}).get("max", {}).get("depth_pkts")


class DSFHooks(RunHooks):
    """DSF's measurements (see the module docstring)."""

    results_schema = {
        "dataplane": {"drops_by_place": dict.fromkeys(DROP_PLACES, int)},
        "dsf": OrNull(DSF_SCHEMA),   # null: the run stopped before it was measured
    }
    initial_results = {"dataplane": {"drops_by_place": dict.fromkeys(DROP_PLACES, 0)}, "dsf": None}
    columns = (Column("fabric_mmr", "fabric MMR (cells)", "{:.3f}", fabric_mmr),
               Column("host_port_busy", "host busy", "{:.3f}", _host_port_busy),
               Column("voq_max_depth", "VOQ max", "{}", _voq_max_depth))

    def recorder(self, spec, fabric, readers):
        """Sample the fabric's counters during the run."""
        return FabricRecorder(spec, fabric, readers)

    def dataplane(self, record, run, before, after):
        """The DSF programs' drop places (0 on a DSF topology running IP routing)."""
        add_dsf_drop_places(record["dataplane"]["drops_by_place"], run.fabric.topo.graph(), run.readers,
                            skip=run.fabric.crashed)

    def results(self, record, run, recorder=None):
        """The ``dsf`` section; no path dilation for the cell fabric (see :data:`NO_PATH_DILATION`)."""
        if recorder is not None:
            record["dsf"] = recorder.section(record, run.controller)
        if run.spec.mode in {mode.name for mode in self.mechanism.modes}:
            record["summary"]["path_dilation"] = {"extra_hops": {}, "packets": 0, "not_measured": NO_PATH_DILATION}

    def plots(self, record, out_dir):
        """``dsf_timeline.png`` and ``dsf_fabric_load.png``."""
        return plot_dsf(record, out_dir) if record.get("dsf") else []

    def comparison_plots(self, rows, runs_by_label, out_dir, title):
        """``dsf_comparison.png`` (:func:`testbed.mechanisms.dsf.plots.plot_dsf_comparison`)."""
        return plot_dsf_comparison(rows, runs_by_label, out_dir, title)
