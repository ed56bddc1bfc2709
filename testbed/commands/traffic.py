"""``testbed traffic``: run RoCEv2-like traffic on the running fabric.

Usage::

    testbed traffic PATTERN --hosts h1,h2,... [--size BYTES] [--qps Q] [--rate-mbps R]
                    [--qp-scaling roundrobin|split] [--udp-sport per_qp|per_nic_pair]
                    [--duration S] [--json FILE]

PATTERN is a collective (allreduce, allgather, reducescatter, alltoall,
alltoallv, incast, permutation; see :mod:`testbed.traffic.collectives`) or
``stream`` (paced point-to-point streams h1->h2, h3->h4, ... for
``--duration`` seconds; see :mod:`testbed.traffic.streams`).

The fabric is the one started by ``testbed net up``: its hosts are read from
the state file (``--state``, default ``/run/testbed/net.json``; format in
:mod:`testbed.traffic.hosts`) and the traffic processes run inside the
hosts' network namespaces.
"""
import json
import sys
import time

from testbed.errors import ParameterError
from testbed.traffic import collectives, hosts as host_module, qp as qp_module, roce

PATTERN_CHOICES = collectives.PATTERNS + ("stream",)


def register(subparsers):
    """Add the ``traffic`` subcommand."""
    parser = subparsers.add_parser(
        "traffic", help="run RoCEv2 collectives or streams on the running fabric",
        description="Run RoCEv2-like traffic on the fabric started by `testbed net up` and report it as JSON. "
        "Patterns: " + ", ".join(PATTERN_CHOICES) + " (stream: paced streams h1->h2, h3->h4, ...).")
    parser.add_argument("pattern", metavar="PATTERN", help="one of: " + ", ".join(PATTERN_CHOICES))
    parser.add_argument("--hosts", required=True, help="comma-separated host names (rank order)")
    parser.add_argument("--size", type=int, default=1 << 20,
                        help="bytes per rank (collectives) or message size (stream); default 1 MiB")
    parser.add_argument("--qps", type=int, default=1, help="queue pairs per NIC pair (default 1)")
    parser.add_argument("--rate-mbps", type=float, default=200.0, help="sending rate per host (default 200)")
    parser.add_argument("--qp-scaling", default="roundrobin", help="roundrobin (default) or split")
    parser.add_argument("--udp-sport", default=qp_module.UDP_SPORT_PER_QP,
                        help="UDP source port: per_qp (default; from the QP numbers, as Linux) or per_nic_pair "
                             "(one port for all QPs between two NICs: low entropy for 5-tuple ECMP)")
    parser.add_argument("--duration", type=float,
                        help="stream: seconds to send (default 2); collectives: repeat until this many seconds passed")
    parser.add_argument("--mtu", type=int, default=roce.DEFAULT_MTU, help="RoCE path MTU (default 1024)")
    parser.add_argument("--chunk-bytes", type=int, default=64 * 1024,
                        help="collectives: bytes per posted message / admission chunk")
    parser.add_argument("--admission", action="store_true",
                        help="collectives: receiver-driven admission (clear-to-send before each chunk)")
    parser.add_argument("--channels", type=int, default=2, help="admission: chunks granted ahead per peer")
    parser.add_argument("--no-retransmit", dest="retransmit", action="store_false",
                        help="collectives: no ACK/NAK and no retransmission (losses stay losses)")
    parser.add_argument("--ack-timeout", type=float, default=0.5,
                        help="collectives: the senders' local ACK timeout in seconds (default 0.5)")
    parser.add_argument("--seed", type=int, default=0, help="seed of random patterns")
    parser.add_argument("--state-file", default=host_module.DEFAULT_STATE_FILE,
                        help=f"state file of the running fabric (default {host_module.DEFAULT_STATE_FILE})")
    parser.add_argument("--json", help="write the full JSON report here (default: print it)")
    parser.set_defaults(func=run)


def validate(args):
    """Check the options that do not need the fabric; raise ParameterError naming the option."""
    collectives.validate_options(args.pattern, args.size, args.qps, args.rate_mbps, args.qp_scaling,
                                 udp_sport=args.udp_sport)
    if args.duration is not None and not args.duration > 0:
        raise ParameterError("--duration", args.duration, "a number of seconds > 0")
    if not roce.HEADER.size <= args.mtu <= 9000:
        raise ParameterError("--mtu", args.mtu, f"an integer in {roce.HEADER.size}..9000")
    if args.chunk_bytes < 1:
        raise ParameterError("--chunk-bytes", args.chunk_bytes, "an integer >= 1")
    if args.channels < 1:
        raise ParameterError("--channels", args.channels, "an integer >= 1")
    if not args.ack_timeout > 0:
        raise ParameterError("--ack-timeout", args.ack_timeout, "a number of seconds > 0")
    names = [name.strip() for name in args.hosts.split(",") if name.strip()]
    if len(names) < 2:
        raise ParameterError("--hosts", args.hosts, "at least two comma-separated host names")
    return names


def run(args):
    """Handler of ``testbed traffic``; returns the exit status."""
    names = validate(args)
    available = host_module.load_state(args.state_file)
    chosen = host_module.select_hosts(available, names)
    complete = True
    if args.pattern == "stream":
        from testbed.traffic import streams

        options = streams.StreamOptions(duration=args.duration or 2.0, size=args.size, qps=args.qps,
                                        qp_scaling=args.qp_scaling, rate_mbps=args.rate_mbps, mtu=args.mtu,
                                        udp_sport=args.udp_sport)
        report = streams.run_streams(chosen, options)
        line = (f"stream: {report['sent_packets']} packets sent, {report['lost_packets']} lost, "
                f"{report['out_of_sequence']} out of sequence, goodput {report['goodput_mbps']:.1f} Mbit/s")
    else:
        options = collectives.CollectiveOptions(
            qps=args.qps, qp_scaling=args.qp_scaling, rate_mbps=args.rate_mbps, mtu=args.mtu,
            chunk_bytes=args.chunk_bytes, admission=args.admission, channels=args.channels, seed=args.seed,
            retransmit=args.retransmit, ack_timeout=args.ack_timeout, udp_sport=args.udp_sport)
        runs = []
        began = time.monotonic()
        while True:
            runs.append(collectives.run_collective(chosen, args.pattern, args.size, options))
            if args.duration is None or time.monotonic() - began >= args.duration:
                break
        report = dict(runs[-1])
        report["iterations"] = len(runs)
        report["completion_times_s"] = [r["completion_time_s"] for r in runs]
        report["lost_packets_total"] = sum(r["lost_packets"] for r in runs)
        complete = all(r["complete"] for r in runs)
        line = (f"{args.pattern} over {len(chosen)} hosts: completion "
                + ", ".join(f"{t * 1000:.1f} ms" for t in report["completion_times_s"])
                + f"; complete={complete}; lost packets {report['lost_packets_total']}")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(report, handle, indent=1)
        print(line)
    else:
        json.dump(report, sys.stdout, indent=1)
        print()
        print(line, file=sys.stderr)
    return 0 if complete else 1
