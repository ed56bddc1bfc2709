"""Congestion loss over time: the shaped links' queue drops per short interval.

A run on shaped links (``topology.shape_links``) samples the drop counters of the switch ports'
root qdiscs (:func:`testbed.emulation.network.qdisc_drops`) every :data:`INTERVAL_S` from its
time zero to its end; results.json's ``dataplane.congestion_timeline`` holds the drops of each
interval, the stream packets sent in it and their ratio.  F10's comparison with PortLand (seed
002 section 7.4, Figure 9) reports the distribution of that ratio over short intervals: 500 us
there, at 10 Gbit/s; the links here run about a thousand times slower, so an interval of the
same number of packets per link is of the order of 100 ms.

The switch ports of every server are read (:meth:`~testbed.emulation.network.FabricNetwork.queue_drops`);
those of switches in namespaces of their own (BMv2) are not, and results.json names them.
"""
import threading
import time

from testbed.errors import EmulationError

#: sampling interval of the queue drop counters (s): one ``tc`` call each, about 4 ms of CPU on a
#: k=4 FatTree (every switch port)
INTERVAL_S = 0.1


class QueueDropSampler:
    """Samples the summed queue drops ``read()`` returns every ``interval_s`` in a thread.

    Args:
        read: returns ``{port: cumulative drops}`` (:meth:`FabricNetwork.queue_drops
            <testbed.emulation.network.FabricNetwork.queue_drops>`).
        interval_s: the sampling interval.
        not_read: the switch ports whose queues ``read`` does not count (recorded with the samples).

    Attributes:
        samples: ``[(time ns, cumulative drops)]``, the first taken at :meth:`start`.
        error: why sampling stopped early (a server that stopped answering), else None.
    """

    def __init__(self, read, interval_s=INTERVAL_S, not_read=()):
        self.read = read
        self.interval_s = interval_s
        self.not_read = list(not_read)
        self.samples = []
        self.error = None
        self._stop = threading.Event()
        self._thread = None

    def _sample(self):
        if self.error is not None:
            return
        before = time.time_ns()
        try:
            drops = sum(self.read().values())
        except EmulationError as error:
            self.error = str(error)
            self._stop.set()
            return
        # the counters were read somewhere in the call, which a loaded machine stretches
        self.samples.append(((before + time.time_ns()) // 2, drops))

    def start(self, t0_ns):
        """Take the first sample now and the next ones on the interval's grid from ``t0_ns``."""
        self._sample()

        def run():
            step_ns = int(self.interval_s * 1e9)
            due = t0_ns + step_ns
            while not self._stop.wait(max(0.0, (due - time.time_ns()) / 1e9)):
                self._sample()
                due += step_ns
                while due <= time.time_ns():  # a late sample: the next one on the grid, not a burst
                    due += step_ns

        self._thread = threading.Thread(target=run, name="queue-drops", daemon=True)
        self._thread.start()

    def stop(self):
        """Stop sampling (safe to call twice); a last sample closes the last interval."""
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join()
        self._thread = None
        self._sample()


def interval_drops(samples, t0_ns):
    """Drops between consecutive samples of cumulative counters.

    Args:
        samples: ``[(time ns, cumulative drops)]`` in time order.
        t0_ns: the run's time zero.

    Returns:
        tuple: ``(ends_s, drops)``: each interval's end in seconds after ``t0_ns`` and its drops.

    >>> interval_drops([(0, 5), (100_000_000, 5), (200_000_000, 9)], 0)
    ([0.1, 0.2], [0, 4])
    """
    ends, drops = [], []
    for (_, before), (at, after) in zip(samples, samples[1:]):
        ends.append(round((at - t0_ns) / 1e9, 6))
        drops.append(max(0, after - before))
    return ends, drops


def sent_between(sent_bins, bin_ns, begin_ns, end_ns):
    """Packets of ``{bin index: packets}`` (bins of ``bin_ns`` from time 0) sent in [begin, end).

    A bin is counted in the interval that holds its start.

    >>> sent_between({0: 3, 1: 4, 2: 5}, 10, 10, 30)
    9
    """
    first = -(-begin_ns // bin_ns)
    return sum(count for index, count in sent_bins.items() if first <= index and index * bin_ns < end_ns)


def congestion_timeline(samples, t0_ns, interval_s, sent_bins, bin_ns):
    """results.json's ``dataplane.congestion_timeline``.

    Args:
        samples: :attr:`QueueDropSampler.samples`.
        t0_ns: the run's time zero.
        interval_s: the sampling interval.
        sent_bins: ``{absolute bin index: stream packets sent}`` over every sender.
        bin_ns: the senders' bin.

    Returns:
        dict: ``{"interval_s", "t_s": [interval ends], "drops": [...], "sent": [...], "rate": [...]}``;
        ``rate`` is drops / sent for the intervals that lie within the senders' active span (first to
        last bin with packets), None for the others (the traffic's start and end, and the queues
        draining after it, would divide by few packets).

    >>> congestion_timeline([(0, 0), (100_000_000, 2), (200_000_000, 2), (300_000_000, 3)], 0, 0.1,
    ...                     {0: 4, 5: 6, 10: 10, 25: 1}, 10_000_000)
    {'interval_s': 0.1, 't_s': [0.1, 0.2, 0.3], 'drops': [2, 0, 1], 'sent': [10, 10, 1], 'rate': [0.2, 0.0, None]}
    """
    ends, drops = interval_drops(samples, t0_ns)
    spans = list(zip(samples, samples[1:]))
    sent = [sent_between(sent_bins, bin_ns, begin, end) if bin_ns else 0 for (begin, _), (end, _) in spans]
    active = (min(sent_bins) * bin_ns, (max(sent_bins) + 1) * bin_ns) if sent_bins and bin_ns else (0, 0)
    rate = [lost / count if count and active[0] <= begin and end <= active[1] else None
            for lost, count, ((begin, _), (end, _)) in zip(drops, sent, spans)]
    return {"interval_s": interval_s, "t_s": ends, "drops": drops, "sent": sent, "rate": rate}


def complete(timeline):
    """True for a congestion timeline that counted every switch port's queue for the whole run.

    >>> complete({"drops": [1], "ports_not_read": [], "error": None}), complete({"ports_not_read": ["s1-eth1"]})
    (True, False)
    >>> complete(None), complete({"drops": [0], "error": "server tb-srv1: no answer"})
    (False, False)
    """
    return bool(timeline) and not timeline.get("ports_not_read") and not timeline.get("error")


def cdf(values):
    """The empirical distribution of ``values`` (None left out): sorted values and cumulative fractions.

    >>> cdf([0.2, None, 0.0, 0.1])
    ([0.0, 0.1, 0.2], [0.333333, 0.666667, 1.0])
    """
    present = sorted(value for value in values if value is not None)
    return present, [round((index + 1) / len(present), 6) for index in range(len(present))]
