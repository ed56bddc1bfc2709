"""Time of route and ECMP-group computation on large topologies (a script, not a test).

Reports, per topology: the full computation (:func:`compute_host_routes`), and the
incremental recomputation after one link fails and after it comes back
(:meth:`HostRoutes.update`) for a sample of links of every kind (host access,
edge-aggregation, aggregation-core, ...), median and worst.  With ``--old FILE``
it also times another implementation's ``compute_host_routes`` (for example the
previous version of controllers/routing.py saved with ``git show``).

Usage::

    /opt/testbed-venv/bin/python benchmarks/bench_routing.py [--k 8] [--links 40] [--old /tmp/old_routing.py]
"""
import argparse
import importlib.util
import random
import statistics
import time

from testbed.controllers.routing import HostRoutes, compute_host_routes
from testbed.topologies.graph import link_id
from testbed.topologies.registry import make_topology


def _timed(function, *args):
    started = time.perf_counter()
    result = function(*args)
    return time.perf_counter() - started, result


def _load(path):
    spec = importlib.util.spec_from_file_location("other_routing", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _link_kind(graph, data):
    return "-".join(sorted(graph.nodes[end].get("role", "?") for end in (data["a"], data["b"])))


def bench(kind, params, sample, rng, old=None):
    """Print the timings of one topology."""
    graph = make_topology(kind, **params).graph()
    hosts = sum(1 for n in graph.nodes if graph.nodes[n].get("role") == "host")
    print(f"{kind} {params}: {graph.number_of_nodes() - hosts} switches, {hosts} hosts, "
          f"{graph.number_of_edges()} links")
    full = min(_timed(compute_host_routes, graph)[0] for _ in range(3))
    print(f"  full computation: {full * 1000:.1f} ms (best of 3)")
    if old is not None:
        seconds, routes = _timed(old.compute_host_routes, graph)
        same = routes == compute_host_routes(graph)
        print(f"  other implementation: {seconds * 1000:.1f} ms, same routes: {same}")
    routes = HostRoutes(graph)
    by_kind = {}
    for _, _, data in graph.edges(data=True):
        by_kind.setdefault(_link_kind(graph, data), []).append(link_id(data))
    for link_kind, links in sorted(by_kind.items()):
        fail_times, restore_times, recomputed = [], [], []
        for lid in rng.sample(links, min(sample, len(links))):
            seconds, hosts_done = _timed(routes.update, {lid})
            fail_times.append(seconds)
            recomputed.append(len(hosts_done))
            restore_times.append(_timed(routes.update, set())[0])
        print(f"  one {link_kind} link ({len(fail_times)} tried): fail median "
              f"{statistics.median(fail_times) * 1000:.1f} ms max {max(fail_times) * 1000:.1f} ms, "
              f"restore median {statistics.median(restore_times) * 1000:.1f} ms "
              f"max {max(restore_times) * 1000:.1f} ms, destinations recomputed "
              f"{min(recomputed)}-{max(recomputed)}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k", type=int, default=8, help="FatTree arity (default 8)")
    parser.add_argument("--links", type=int, default=20, help="links tried per link kind")
    parser.add_argument("--old", help="a routing module file to time and compare as well")
    args = parser.parse_args()
    old = _load(args.old) if args.old else None
    rng = random.Random(1)
    for kind, params in (("fattree", {"k": args.k}), ("abfattree", {"k": args.k}), ("dsf", {}),
                         ("clos", {})):
        bench(kind, params, args.links, rng, old)


if __name__ == "__main__":
    main()
