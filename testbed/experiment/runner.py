"""Run one experiment spec end to end on an emulated fabric.

:func:`run_experiment` loads the P4 program, builds the fabric in Mininet
with P4 switches, starts the controller (which pushes pipeline, routes and
mode parameters), reads the per-port counters, starts the traffic entries and
the failure schedule keyed to one time zero, waits for the run's duration,
reads the counters again, and ALWAYS tears everything down (traffic
processes, controller sessions, switches, network), also on an error, Ctrl-C
or SIGTERM.  It then writes results.json, link_load.csv and the plots into
the output folder (see :mod:`testbed.experiment.results`), with
``status`` ``ok``, ``warning`` (it ran, but ``warnings`` says why its result is
suspect: a failure that could not be applied, flows that never recovered
although the fabric could route around the failure), ``error`` or
``interrupted``.
"""
import copy
import datetime
import os
import time

from testbed.emulation.signals import signals_deferred, termination_as_interrupt
from testbed.errors import EmulationError, TestbedError
from testbed.experiment import analysis, overload, plots, results as results_module
from testbed.experiment.congestion import QueueDropSampler, congestion_timeline
from testbed.experiment.counters import (dataplane_counters, drops_by_place, emulator_by_switch, ever_failed,
                                        link_loads, read_port_counters, receive_lag_delta, uplink_loads)
from testbed.experiment.failures import FailureScheduler, log_row as failure_log_row
from testbed.experiment.spec import ExperimentSpec, load_spec, resolve_spec_target
from testbed.experiment.traffic_jobs import READY_TIMEOUT_S, TimeZero, TrafficJob
from testbed.fabrics import spec_fabric
from testbed.log_format import format_timestamp
from testbed.mechanisms import controller_kind, hooks_for
from testbed.mechanisms.hooks import RunContext

PROGRESS_EVERY_S = 1.0
DRAIN_TIMEOUT_S = 120.0


class ExperimentFailed(TestbedError):
    """The run ended in an error; ``results`` holds what was recorded (also written to disk).

    Args:
        message: what went wrong.
        results: the results dict (``status`` ``"error"``).
    """

    def __init__(self, message, results=None):
        super().__init__(message)
        self.results = results


def _now_iso():
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def _base_record(spec, target, hooks):
    record = {
        "schema_version": results_module.SCHEMA_VERSION, "name": spec.name, "seed": spec.seed, "mode": spec.mode,
        "program": spec.program, "target": target, "target_note": None,
        "mechanisms": [each.mechanism.name for each in hooks], "status": "error", "error": None, "warnings": [],
        "started_at": _now_iso(), "finished_at": "", "wall_s": 0.0, "t0_ns": None, "t0_utc": None,
        "traffic_start_s": None,
        "overload": {"overloaded": False, "reasons": [], "switch_socket_drops": 0, "switch_waits_over_limit": 0,
                     "receiver_socket_drops": 0, "sender_lag_max_ms": None, "latency_p99_ms": None,
                     "stream_spacing_ms": None, "latency_spread_ms": None, "paced_frames": 0, "late_frames": 0,
                     "reordering_unreliable": False, "reordering_reasons": [], "load_average": {},
                     "by_server": None},
        "spec": spec.to_dict(),
        "topology": {"kind": spec.topology.kind, "params": dict(spec.topology.params),
                     "hosts": 0, "switches": 0, "links": 0, "link_delays_us": {},
                     "delay_mechanism": None, "rtt_us": 0.0},
        "controller": {"kind": spec.controller.kind, "detection_delay_ms": spec.controller.detection_delay_ms,
                       "entries_written": 0, "mode_params_written": {}, "notes": [], "reactions": []},
        "dataplane": results_module.empty_dataplane(),
        "failures": [], "traffic": [], "links": [], "summary": results_module.empty_summary(),
        "timeline": {"bin_s": analysis.DEFAULT_BIN_S, "t_s": [], "mbps": []},
        "files": {"results": "results.json", "link_load_csv": None, "plots": []},
        "cluster": None,
    }
    for each in hooks:
        record = results_module.merge_schema(record, copy.deepcopy(each.initial_results))
    return record


def _record_cluster(record, fabric, progress):
    """A fabric over several servers: its servers, placement and cross links, with one cross link's
    round trip and rate measured now (before the traffic), into ``record["cluster"]``."""
    summary = getattr(fabric.network, "cluster_summary", None)
    if summary is None:
        return
    try:
        measured = fabric.network.measure_cross_link()
        progress(f"cross link {'-'.join(measured['between'])} ({measured['link']}): round trip "
                 f"{measured['rtt_ms_avg']:.2f} ms (min {measured['rtt_ms_min']:.2f}), {measured['rate_mbps']:.0f} "
                 "Mbit/s TCP")
    except EmulationError as error:
        record["warnings"].append(f"cross link not measured: {error}")
    record["cluster"] = summary()


def _open_readers(fabric, skip=()):
    """A P4Runtime session to every P4 switch, for counters (the controller's, or a backup one)."""
    return {switch.name: fabric.client(switch.name) for switch in fabric.switches
            if switch.name not in skip and hasattr(switch, "grpc_address")}


def run_experiment(spec, out_dir=None, target=None, progress=print, state_file=None, log_dir=None):
    """Run an experiment and write its results.

    Args:
        spec: an :class:`~testbed.experiment.spec.ExperimentSpec` or a YAML path.
        out_dir: output folder (default: the spec's ``out_dir``).
        target: ``embedded``, ``bmv2`` or ``auto`` (default: the spec's ``target``).
        progress: called with one line of text per step (``print`` by default).
        state_file: write the running network's state file here (default: none, except for the
            ``osken`` controller, which gets ``/run/testbed/fabric-<pid>.json``; removed at the end).
        log_dir: switch logs (default: ``<out_dir>/logs``).

    Returns:
        dict: the results (also in ``<out_dir>/results.json``), ``status`` ``"ok"``.

    Raises:
        SpecError / ParameterError: invalid spec or target (nothing was started).
        ExperimentFailed: the run failed midway (results written with ``status`` ``"error"``).
        KeyboardInterrupt: Ctrl-C / SIGTERM (everything torn down, results written as ``"interrupted"``).
    """
    if not isinstance(spec, ExperimentSpec):
        spec = load_spec(spec, check_machine=False)  # checked below, for the target used
    target, target_note = resolve_spec_target(spec, target)
    if target_note:
        progress(f"[{spec.name}] {target_note}")
    out_dir = os.path.abspath(out_dir or spec.out_dir)
    os.makedirs(out_dir, exist_ok=True)
    hooks = hooks_for(spec)
    record = _base_record(spec, target, hooks)
    record["target_note"] = target_note or None
    wall_start = time.monotonic()
    fabric = scheduler = None
    recorders = {}  # mechanism name -> its recorder
    queue_drops = None  # the shaped links' queue drops over time (a QueueDropSampler)
    loads = {}  # the servers' load averages as the traffic starts and after it
    readers = {}
    jobs = []
    failure = None
    before = after = None
    end_ns = None
    with termination_as_interrupt():
        try:
            try:
                topo = spec.build_topology()
                record["topology"].update(hosts=len(topo.hosts()), switches=len(topo.switches()),
                                          links=len(topo.link_records()))
                fabric = spec_fabric(spec, target=target, log_dir=log_dir or os.path.join(out_dir, "logs"),
                                     state_file=state_file, controller_log=os.path.join(out_dir, "controller.log"),
                                     progress=lambda line: progress(f"[{spec.name}] {line}"))
                fabric.start()
                _record_cluster(record, fabric, progress=lambda line: progress(f"[{spec.name}] {line}"))
                _delay_links(record, spec, topo, fabric)
                pipeline = fabric.pipeline
                readers = _open_readers(fabric)
                before = read_port_counters(readers, pipeline.p4info)
                handles = fabric.host_handles()
                time_zero = TimeZero(sum(entry.pattern == "stream" for entry in spec.traffic))
                jobs = [TrafficJob(index, entry, handles, time_zero, spec.duration_s,
                                   os.path.join(out_dir, "traffic", f"entry-{index}"))
                        for index, entry in enumerate(spec.traffic)]
                progress(f"[{spec.name}] starting {len(jobs)} traffic entries")
                loads["start"] = fabric.network.load_averages()  # before the traffic: a command per server
                for job in jobs:
                    job.start()
                t0_ns = _wait_for_time_zero(fabric, jobs, time_zero)
                record["t0_ns"] = t0_ns
                record["t0_utc"] = format_timestamp(t0_ns)
                record["traffic_start_s"] = (t0_ns - time_zero.created_ns) / 1e9
                fabric.controller.set_time_zero(t0_ns)
                scheduler = FailureScheduler(fabric, spec.failures, t0_ns, progress)
                if spec.topology.shape_links:
                    # BMv2's ports: their queues are in the switches' namespaces, which are not read
                    queue_drops = QueueDropSampler(fabric.network.queue_drops,
                                                   not_read=fabric.network.switch_interfaces(in_namespace=True))
                    queue_drops.start(t0_ns)
                for each in hooks:
                    recorder = each.recorder(spec, fabric, readers)
                    if recorder is not None:
                        recorders[each.mechanism.name] = recorder
                        recorder.start(t0_ns)
                progress(f"[{spec.name}] running {len(jobs)} traffic entries and {len(spec.failures)} failures "
                         f"for {spec.duration_s:g} s (traffic ready after {record['traffic_start_s']:.1f} s)")
                scheduler.start()
                # after the traffic processes' start-up burst; once the failures and recorders run, as asking
                # switches on other servers takes an ssh command each
                lag_before = fabric.network.receive_lag()
                _wait_for_run(spec, fabric, jobs, t0_ns, progress)
                end_ns = time.time_ns()
                for recorder in recorders.values():
                    recorder.stop()
                if queue_drops is not None:
                    queue_drops.stop()
                after = read_port_counters(readers, pipeline.p4info, skip=fabric.crashed)
                port_drops = fabric.network.drop_counters()
                record["dataplane"] = dataplane_counters(fabric, port_drops, before, after)
                record["dataplane"]["congestion_timeline"] = None  # shaped links: filled in below
                lag_after = fabric.network.receive_lag()
                record["dataplane"]["switch_receive_lag"] = receive_lag_delta(lag_before, lag_after)
                record["dataplane"]["drops_by_place"] = drops_by_place(
                    fabric.topo.graph(), port_drops,
                    failed_pairs=ever_failed(spec.failures, scheduler.log, fabric.topo.graph()))
                record["dataplane"]["emulator_by_switch"] = emulator_by_switch(port_drops, lag_before, lag_after,
                                                                               overload.SWITCH_WAIT_MS)
                loads["end"] = fabric.network.load_averages()
                live = RunContext(spec, fabric, fabric.controller, readers, pipeline.p4info)
                for each in hooks:
                    each.dataplane(record, live, before, after)
                errors = [f"traffic[{job.index}]: {job.error}" for job in jobs if job.error]
                if errors:
                    raise ExperimentFailed("; ".join(errors))
                record["status"] = "ok"
            except KeyboardInterrupt as error:
                record["status"] = "interrupted"
                record["error"] = f"interrupted ({error})" if str(error) else "interrupted"
                failure = error
                progress(f"[{spec.name}] interrupted: tearing down")
            except Exception as error:  # noqa: BLE001 - recorded, torn down, re-raised below
                record["status"] = "error"
                record["error"] = str(error) if isinstance(error, TestbedError) else f"{type(error).__name__}: {error}"
                failure = error
                progress(f"[{spec.name}] error: {record['error']}")
        finally:
            # teardown and writing the results must finish even if Ctrl-C is pressed again
            with signals_deferred():
                controller = fabric.controller if fabric is not None else None
                for recorder in recorders.values():
                    recorder.stop()
                if queue_drops is not None:
                    queue_drops.stop()
                _teardown(scheduler, jobs, fabric, progress, spec.name)
                end_ns = end_ns or time.time_ns()
                try:
                    reports = _fill_results(record, spec, fabric, scheduler, controller, jobs, before, after,
                                            end_ns)
                    if queue_drops is not None and record["t0_ns"]:
                        bin_ns, sent_bins = analysis.sent_by_bin(reports)
                        timeline = congestion_timeline(queue_drops.samples, record["t0_ns"], queue_drops.interval_s,
                                                       sent_bins, bin_ns)
                        timeline.update(ports_not_read=queue_drops.not_read, error=queue_drops.error)
                        record["dataplane"]["congestion_timeline"] = timeline
                    run = RunContext(spec, fabric, controller, readers, fabric.pipeline if fabric else None,
                                     reports, record["t0_ns"])
                    for each in hooks:
                        each.results(record, run, recorders.get(each.mechanism.name))
                    _assess(record, reports, hooks, loads)
                except Exception as error:  # noqa: BLE001 - keep what was recorded, say what failed
                    record["controller"]["notes"].append(f"analysis failed: {type(error).__name__}: {error}")
                    if record["status"] == "ok":
                        record["status"] = "error"
                        record["error"] = f"analysis failed: {type(error).__name__}: {error}"
                        failure = error
                if record["status"] == "ok" and record.get("warnings"):
                    record["status"] = "warning"
                record["finished_at"] = _now_iso()
                record["wall_s"] = time.monotonic() - wall_start
                write_outputs(record, out_dir, hooks)
                for line in record.get("warnings", []):
                    progress(f"[{spec.name}] WARNING: {line}")
                if record.get("overload", {}).get("overloaded"):
                    progress(f"[{spec.name}] WARNING: the emulator did not keep up, timings and losses are "
                             f"not the network's: {'; '.join(record['overload']['reasons'])}")
                for reason in record.get("overload", {}).get("reordering_reasons", []):
                    progress(f"[{spec.name}] WARNING: {reason}")
                progress(f"[{spec.name}] {record['status']}: results in {out_dir}")
    if isinstance(failure, KeyboardInterrupt):
        raise failure
    if failure is not None:
        raise ExperimentFailed(record["error"], record) from failure
    return record


def _delay_links(record, spec, topo, fabric):
    """Give the spec's delayed links their delay and record them with the round trip they add."""
    delays = spec.topology.delays_us(topo)
    for (a, b), delay in delays.items():
        record["topology"]["delay_mechanism"] = fabric.network.set_link_loss(a, b, 0.0, delay / 1000.0)
    record["topology"]["link_delays_us"] = {f"{a}-{b}": delay for (a, b), delay in delays.items()}
    record["topology"]["rtt_us"] = analysis.round_trip_us(topo.graph(), delays)


def _wait_for_time_zero(fabric, jobs, time_zero):
    """Block until every traffic entry is ready and time zero is set; watch the switches meanwhile."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    try:
        while True:
            failed = [job for job in jobs if job.error and not job.is_alive()]
            if failed:
                raise ExperimentFailed(f"traffic[{failed[0].index}]: {failed[0].error}")
            try:
                t0_ns = time_zero.wait(0.1)
            except RuntimeError:
                t0_ns = None  # a job aborted it: its error is reported on a next pass
                time.sleep(0.1)
            if t0_ns is not None:
                return t0_ns
            if time.monotonic() >= deadline:
                raise EmulationError(f"the traffic processes were not ready to send after {READY_TIMEOUT_S:.0f} s")
            fabric.check_switches()
    except BaseException:
        time_zero.abort("the run stopped")
        raise


def _wait_for_run(spec, fabric, jobs, t0_ns, progress):
    """Block until the duration has passed and every job finished; watch the switches meanwhile."""
    end_ns = t0_ns + int(spec.duration_s * 1e9)
    last_report = 0.0
    hard_deadline = end_ns + int(DRAIN_TIMEOUT_S * 1e9)
    while True:
        now = time.time_ns()
        running = [job for job in jobs if job.is_alive()]
        if now >= end_ns and not running:
            return
        if now >= hard_deadline:
            raise EmulationError(f"traffic did not finish {DRAIN_TIMEOUT_S:.0f} s after the run's end")
        fabric.check_switches()
        failed = [job for job in jobs if job.error and not job.is_alive()]
        if failed:
            raise ExperimentFailed(f"traffic[{failed[0].index}]: {failed[0].error}")
        if time.monotonic() - last_report >= PROGRESS_EVERY_S:
            last_report = time.monotonic()
            elapsed = max(0.0, (now - t0_ns) / 1e9)
            progress(f"  t={elapsed:5.1f}s / {spec.duration_s:g}s  traffic running: {len(running)}/{len(jobs)}")
        time.sleep(0.1)


def _teardown(scheduler, jobs, fabric, progress, name):
    """Stop everything started, in reverse order; never raises."""
    steps = []
    if scheduler is not None:
        steps.append(("failure scheduler", lambda: (scheduler.cancel(), scheduler.join(timeout=15))))
    steps.append(("traffic", lambda: [job.cancel() for job in jobs]))
    if fabric is not None:
        steps.append(("fabric", fabric.stop))  # kills the traffic processes, then controller and network
    steps.append(("traffic threads", lambda: [job.join(timeout=15) for job in jobs if job.is_alive()]))
    for label, step in steps:
        try:
            step()
        except BaseException as error:  # noqa: BLE001 - keep tearing down the rest
            progress(f"[{name}] teardown of {label} failed: {type(error).__name__}: {error}")


def _fill_results(record, spec, fabric, scheduler, controller, jobs, before, after, end_ns):
    t0_ns = record["t0_ns"]
    if scheduler is not None:
        record["failures"] = scheduler.log
    else:
        record["failures"] = [failure_log_row(index, failure) for index, failure in enumerate(spec.failures)]
    if controller is not None:
        record["controller"].update(entries_written=int(controller.entries_written or 0),
                                    mode_params_written=dict(controller.mode_params_written),
                                    notes=list(controller.notes), reactions=list(controller.reactions))
        record["controller"].update(controller.results(t0_ns))
    by_index = {job.index: job for job in jobs}
    reports = []
    rows = []
    for index, entry in enumerate(spec.traffic):
        job = by_index.get(index)
        report = job.report if job else None
        error = job.error if job else ("not started" if record["status"] != "ok" else None)
        reports.append(report)
        rows.append(analysis.traffic_row(index, entry, report, error, t0_ns))
    record["traffic"] = rows
    uplinks = {}
    if fabric is not None and before is not None and after is not None:
        graph = fabric.topo.graph()
        record["links"] = link_loads(graph, before, after)
        uplinks = uplink_loads(graph, record["links"])
    recovery = analysis.recovery_rows(reports, record["failures"], t0_ns, end_ns) if t0_ns else []
    record["summary"] = analysis.summarize(rows, uplinks, recovery, record["controller"]["reactions"])
    if t0_ns:
        record["summary"]["flow_recovery"] = analysis.flow_recovery_rows(reports, record["failures"], t0_ns)
    record["summary"]["latency"] = analysis.latency_summary(reports)
    if fabric is not None:
        record["summary"]["path_dilation"] = analysis.path_dilation(reports, fabric.topo.graph())
        if controller_kind(spec.controller.kind).recovers:  # a no-recovery baseline's flows stay cut by design
            record["summary"]["unrecovered_flows"] = analysis.unrecovered_flows(
                reports, record["failures"], fabric.topo.graph(), fabric.failed_links, fabric.crashed, t0_ns)
    record["warnings"] = _warnings(record)
    if t0_ns:
        record["timeline"] = analysis.throughput_timeline(reports, t0_ns)
    return reports


def _assess(record, reports, hooks, loads=None):
    """results.json's ``overload``: the generic checks and each mechanism's (``loads``: the servers' load
    averages, ``{"start": ..., "end": ...}``)."""
    record["overload"] = overload.assess(record, reports, loads)
    for each in hooks:
        fields, reasons = each.overload(record)
        record["overload"].update(fields)
        record["overload"]["reasons"] += reasons
    record["overload"]["overloaded"] = bool(record["overload"]["reasons"])


def _warnings(record):
    """Why a run that ended without error may still not show what its spec asked for, one line each."""
    lines = [f"failure {row['index']} ({row['action']} {row['element']}) was not applied: {row['error']}"
             for row in record["failures"] if row.get("error")]
    cut = {}
    for row in record["summary"].get("unrecovered_flows", []):
        cut.setdefault(row["failure_index"], []).append(row)
    for index, rows in sorted(cut.items()):
        pairs = sorted({f"{row['src']}->{row['dst']}" for row in rows})
        lines.append(f"after failure {index}, {len(rows)} flow(s) never delivered again although the topology "
                     f"still connects their hosts ({', '.join(pairs[:6])}{' ...' if len(pairs) > 6 else ''}): "
                     "the control plane left them without a working path")
    return lines


def _timeline_events(record, hooks):
    """``{kind: [(time_s, label)]}`` of a run for :func:`testbed.experiment.plots.plot_timeline`."""
    events = {
        "failure": [(row["applied_at_s"], f"{row['action']} {row['element']}") for row in record["failures"]
                    if row.get("applied_at_s") is not None],
        "reaction": [(row["reacted_at_s"], "reaction") for row in record["controller"]["reactions"]
                     if row.get("reacted_at_s") is not None],
    }
    for each in hooks:
        events.update(each.timeline_events(record))
    return {kind: rows for kind, rows in events.items() if rows}


def write_outputs(record, out_dir, hooks=None):
    """Write results.json and, as the spec's ``metrics`` ask, link_load.csv/.png and throughput.png.

    results.json always holds every measurement; ``metrics`` only choose the
    extra files: ``link_load`` or ``mmr`` -> link_load.csv and link_load.png,
    ``timeline`` -> throughput.png.  Each mechanism of the run adds its own plots.

    Args:
        record: the results.
        out_dir: the run's folder.
        hooks: the run hooks of the record's mechanisms (default: found from ``record["mechanisms"]``).
    """
    if hooks is None:
        hooks = [each for each in hooks_for() if each.mechanism.name in record.get("mechanisms", [])]
    wanted = set(record.get("spec", {}).get("metrics") or ())
    plot_files = []
    if record["links"] and wanted & {"link_load", "mmr"}:
        results_module.write_link_csv(record["links"], os.path.join(out_dir, "link_load.csv"))
        record["files"]["link_load_csv"] = "link_load.csv"
    label = record["mode"] or os.path.basename(record["program"])
    try:
        if wanted & {"link_load", "mmr"}:
            plots.plot_link_load({label: record["summary"]["uplink_loads"]},
                                 os.path.join(out_dir, "link_load.png"),
                                 title=f"{record['name']}: uplink load ({label})")
            plot_files.append("link_load.png")
        if "timeline" in wanted:
            styles = dict(plots.EVENT_STYLES)
            for each in hooks:
                styles.update(each.event_styles)
            plots.plot_timeline(record["timeline"], _timeline_events(record, hooks),
                                os.path.join(out_dir, "throughput.png"),
                                title=f"{record['name']}: aggregate throughput ({label})", styles=styles)
            plot_files.append("throughput.png")
    except Exception as error:  # noqa: BLE001 - results.json matters more than a plot
        record["controller"]["notes"].append(f"plotting failed: {type(error).__name__}: {error}")
    for each in hooks:
        try:
            plot_files += each.plots(record, out_dir)
        except Exception as error:  # noqa: BLE001 - results.json matters more than a plot
            record["controller"]["notes"].append(f"{each.mechanism.name} plots failed: "
                                                 f"{type(error).__name__}: {error}")
    record["files"]["plots"] = plot_files
    results_module.write_json(record, os.path.join(out_dir, "results.json"))
    return record
