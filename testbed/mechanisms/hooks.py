"""What a mechanism adds to an experiment run: measurements, results sections, timeline marks, columns, plots.

The runner, ``testbed compare`` and the plots call these hooks for every
mechanism whose :meth:`RunHooks.applies` is true for the run and add what
they return to the generic measurements; they contain no mechanism's name.
A mechanism subclasses :class:`RunHooks` in its own package and overrides
what it needs; the defaults add nothing.
"""
from dataclasses import dataclass, field
from typing import Any, Callable, Optional


@dataclass
class RunContext:
    """What a run has when its results are written (what a hook may read; it changes none of it).

    Attributes:
        spec: the :class:`~testbed.experiment.spec.ExperimentSpec`.
        fabric: the :class:`~testbed.fabrics.Fabric` (stopped by now; its topology and failure state remain).
        controller: the run's controller (stopped).
        readers: ``{switch: P4Runtime session}`` used for counters (closed by now: read during the run).
        p4info: the pipeline's P4Info.
        reports: the traffic entries' reports.
        t0_ns: the run's time zero (None when it never started).
    """

    spec: Any
    fabric: Any = None
    controller: Any = None
    readers: dict = field(default_factory=dict)
    p4info: Any = None
    reports: list = field(default_factory=list)
    t0_ns: Optional[int] = None


@dataclass(frozen=True)
class Column:
    """A column of ``testbed compare``'s table.

    Attributes:
        key: its key in comparison.json/.csv rows.
        header: its heading in the table.
        fmt: how a value is printed (``"{:.3f}"``).
        value: ``value(results)`` -> the number or text (None: not measured) from a run's results.json.
        compared: whether rows are compared on it (the noise check of repeated runs); False for
            what the spec fixes rather than measures (packets sent).
    """

    key: str
    header: str
    fmt: str
    value: Callable
    compared: bool = True


class RunHooks:
    """The default hooks: nothing added.  Subclasses override what their mechanism measures.

    Args:
        mechanism: the :class:`~testbed.mechanisms.base.Mechanism` these hooks belong to.

    Attributes:
        results_schema: the schema of the sections :meth:`dataplane` and :meth:`results` add
            (the form of :data:`testbed.experiment.results.RESULTS_SCHEMA`, merged into it for
            runs it applies to).
        initial_results: those sections' values before anything was measured (merged into a
            run's record when it begins, so that a run that stops early still fits the schema).
        event_styles: ``{event kind: (legend label, colour, line style)}`` of the marks
            :meth:`timeline_events` returns.
        columns: the :class:`Column` objects it adds to ``testbed compare``'s table.
    """

    results_schema = {}
    initial_results = {}
    event_styles = {}
    columns = ()

    def __init__(self, mechanism):
        self.mechanism = mechanism

    def applies(self, spec):
        """True when a run of ``spec`` is this mechanism's: one of its modes, or one of its topology kinds."""
        return spec.mode in {mode.name for mode in self.mechanism.modes} \
            or spec.topology.kind in self.mechanism.topology_kinds

    def recorder(self, spec, fabric, readers):
        """An object sampling during the run (``start(t0_ns)``, ``stop()``), or None.

        Its ``section(record, run)`` is called after the run (see :meth:`results`).
        """
        return None

    def dataplane(self, record, run, before, after):
        """Add counters read at the end of the run to ``record["dataplane"]`` (sessions still open).

        Args:
            record: the results so far.
            run: the :class:`RunContext` (``readers`` open, the fabric running).
            before, after: the per-port counter snapshots of the run.
        """

    def results(self, record, run, recorder=None):
        """Add this mechanism's sections to ``record`` (after the run, analysis done)."""

    def timeline_events(self, record):
        """``{event kind: [(time_s, label)]}`` marked on the run's throughput timeline."""
        return {}

    def overload(self, record):
        """``(fields, reasons)``: figures for results.json's ``overload`` and why the emulator fell behind."""
        return {}, []

    def plots(self, record, out_dir):
        """Write this mechanism's plots of one run into ``out_dir``; return the file names."""
        return []

    def comparison_plots(self, rows, runs_by_label, out_dir, title):
        """Write this mechanism's comparison plots of several runs; return the file names.

        Draw what the comparison is about (the mechanism's own metrics), with
        :func:`testbed.experiment.plots.metric_bars` for table columns (it adds the 95%
        error bars of repeated rows).

        Args:
            rows: ``testbed compare``'s table rows (repeated rows carry ``stats``).
            runs_by_label: ``{row label: [results.json of each run of that row]}``.
            out_dir: the comparison's folder.
            title: the comparison's title.
        """
        return []
