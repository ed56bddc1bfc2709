"""Random failure traces drawn from log-normal distributions (seed 002, section 7.2).

F10's evaluation draws, after Gill et al.'s study of data-center failures,
log-normal distributions for the time between failures and the time to
repair, separately for switches and for individual links, and never fails
edge (ToR) switches.  :func:`lognormal_trace` does the same on a topology:
one failure process for links and one for switches, each a sequence of
failures whose gaps and repair times are log-normal, on components drawn
uniformly among the eligible ones that are up at that moment.  A switch
failure takes down all of its links to other switches at once and brings
them back together (how a dead switch looks to its neighbours), so it is
repaired like a link; its links stay down as long as one of its failures or
a link failure holds them.

The paper gives no parameters (they come from Gill et al.'s measurements),
so the caller gives the medians and the log-scale spreads; every draw comes
from ``seed``, so a spec's trace is the same on every run and mode.
"""
import itertools
import math
import random
from dataclasses import dataclass

from testbed.errors import ParameterError
from testbed.topologies.graph import is_host
from testbed.traffic.sender import MAX_SIGMA

#: switch roles that never fail (F10 leaves ToR failures to the cloud software)
NEVER_FAILING_ROLES = ("edge", "leaf", "host")
#: a distribution's median in seconds: from a millisecond (the runner's time resolution) to a day
MIN_MEDIAN_S, MAX_MEDIAN_S = 0.001, 86_400.0
#: most failures one process may draw in a trace (each may be a link change the run carries out)
MAX_TRACE_FAILURES = 10_000


@dataclass(frozen=True)
class LogNormal:
    """A log-normal distribution by its median (``exp(mu)``) and log-scale spread ``sigma``.

    >>> LogNormal(2.0, 0.0).draw(random.Random(1))
    2.0
    """

    median: float
    sigma: float

    def check(self, field):
        """Refuse a median outside [MIN_MEDIAN_S, MAX_MEDIAN_S] or a spread outside [0, MAX_SIGMA], naming ``field``.

        >>> LogNormal(1.0, 1e6).check("repair_s")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        testbed.errors.ParameterError: invalid repair_s.sigma=1000000.0: allowed values are a number in [0, 4.0] ...
        """
        if isinstance(self.median, bool) or not (isinstance(self.median, (int, float)) and
                                                 MIN_MEDIAN_S <= self.median <= MAX_MEDIAN_S):
            raise ParameterError(f"{field}.median", self.median, f"a number of seconds in [{MIN_MEDIAN_S}, "
                                                                 f"{MAX_MEDIAN_S}]")
        if isinstance(self.sigma, bool) or not (isinstance(self.sigma, (int, float)) and 0 <= self.sigma <= MAX_SIGMA):
            raise ParameterError(f"{field}.sigma", self.sigma, f"a number in [0, {MAX_SIGMA}] (log-scale spread)")

    def draw(self, rng):
        """One value."""
        return rng.lognormvariate(math.log(self.median), self.sigma)


@dataclass(frozen=True)
class FailureProcess:
    """Failures of one kind of component: gaps between failures and repair times."""

    between_failures_s: LogNormal
    repair_s: LogNormal


def _switch_links(graph, switch):
    return sorted(tuple(sorted((switch, other))) for other in graph[switch]
                  if not is_host(graph, other))


def lognormal_trace(graph, seed, start_s, end_s, links=None, switches=None):
    """Failure and repair events between ``start_s`` and ``end_s``.

    Args:
        graph: the topology multigraph (nodes with ``role``).
        seed: the trace's seed (derive it from the spec's).
        start_s, end_s: the window in which failures start (repairs may fall later and are
            kept only when before ``end_s``).
        links: a :class:`FailureProcess` for switch-to-switch links, or None (no link failures).
        switches: a :class:`FailureProcess` for switches other than edge switches, or None.

    Returns:
        list: ``(at_s, action, (a, b), cause)`` sorted by time, ``action`` ``link_down`` or
        ``link_up``, ``cause`` ``"link a-b"`` or ``"switch s"``; a link is brought down only
        when it was up and up only when nothing holds it down any more.

    Raises:
        ParameterError: a bad window or distribution, named.

    >>> from testbed.topologies.fattree import FatTree
    >>> process = FailureProcess(LogNormal(1.0, 0.5), LogNormal(0.3, 0.5))
    >>> events = lognormal_trace(FatTree(k=4).graph(), 7, 1.0, 5.0, links=process)
    >>> events == lognormal_trace(FatTree(k=4).graph(), 7, 1.0, 5.0, links=process)
    True
    >>> all(1.0 <= at < 5.0 for at, _, _, _ in events), events[0][1]
    (True, 'link_down')
    """
    if not (math.isfinite(start_s) and math.isfinite(end_s) and 0 <= start_s < end_s):
        raise ParameterError("failure_trace.window", (start_s, end_s), "0 <= start_s < end_s, finite")
    failures = []  # (at_s, until_s, links held, cause)
    rng_links = random.Random(f"{seed}/links")
    rng_switches = random.Random(f"{seed}/switches")
    switch_links = sorted({tuple(sorted((u, v))) for u, v in graph.edges()
                           if not is_host(graph, u) and not is_host(graph, v)})
    candidates = sorted(node for node, data in graph.nodes(data=True)
                        if data.get("role") not in NEVER_FAILING_ROLES)
    for name, process, rng, pool in (("links", links, rng_links, switch_links),
                                     ("switches", switches, rng_switches, candidates)):
        if process is None:
            continue
        process.between_failures_s.check(f"failure_trace.{name}.between_failures_s")
        process.repair_s.check(f"failure_trace.{name}.repair_s")
        if not pool:
            raise ParameterError(f"failure_trace.{name}", name, "a topology with such components")
        now = start_s
        down_until = {}  # component -> repair time
        for draws in itertools.count(1):
            now += process.between_failures_s.draw(rng)
            if now >= end_s:
                break
            if draws > MAX_TRACE_FAILURES:
                raise ParameterError(f"failure_trace.{name}.between_failures_s", process.between_failures_s.median,
                                     f"a median that draws at most {MAX_TRACE_FAILURES} failures between "
                                     f"start_s and end_s (MAX_TRACE_FAILURES)")
            up = [item for item in pool if down_until.get(item, -1.0) <= now]
            if not up:
                continue
            item = up[rng.randrange(len(up))]
            until = now + process.repair_s.draw(rng)
            down_until[item] = until
            held = [item] if name == "links" else _switch_links(graph, item)
            cause = f"link {item[0]}-{item[1]}" if name == "links" else f"switch {item}"
            failures.append((now, until, held, cause))
    return _events(failures, end_s)


def _events(failures, end_s):
    """Turn overlapping failures into link_down / link_up events (a link is held by a count)."""
    marks = []
    for at_s, until_s, held, cause in failures:
        for link in held:
            marks.append((at_s, 1, link, cause))
            if until_s < end_s:
                marks.append((until_s, -1, link, cause))
    holds = {}
    events = []
    for at_s, change, link, cause in sorted(marks, key=lambda mark: (mark[0], -mark[1], mark[2])):
        before = holds.get(link, 0)
        holds[link] = before + change
        if before == 0 and change == 1:
            events.append((at_s, "link_down", link, cause))
        elif before == 1 and change == -1:
            events.append((at_s, "link_up", link, cause))
    return events
