"""``testbed net``: bring an emulated fabric up (Mininet CLI), or look at / stop the running one."""
import argparse
import json
import os
import signal
import sys
import time

from testbed.emulation.progress import print_line
from testbed.emulation.signals import termination_as_interrupt
from testbed.emulation.state import DEFAULT_STATE_FILE, read_state
from testbed.errors import EmulationError, ParameterError
from testbed.mechanisms import controller_kinds
from testbed.modes import MODES
from testbed.p4.native import BACKENDS
from testbed.topologies.registry import TOPOLOGY_KINDS


def register(subparsers):
    """Add the ``net`` subcommand and its ``up``/``status``/``down`` actions."""
    parser = subparsers.add_parser("net", help="run an emulated fabric in Mininet",
                                   description="Build a fabric in Mininet and keep it running.")
    actions = parser.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True

    up = actions.add_parser(
        "up", help="build a fabric and open the Mininet CLI",
        description="Build KIND with key=value parameters (see `testbed topo kinds`), start it, "
        "optionally run a test, then open the Mininet CLI (or hold until Ctrl-C with --no-cli). "
        "The network is always torn down on exit.")
    up.add_argument("kind", help="topology kind (" + ", ".join(TOPOLOGY_KINDS) + ")")
    up.add_argument("params", nargs="*", metavar="key=value", help="topology parameters")
    up.add_argument("--program", help="P4 program to run on every switch: a mode (" + ", ".join(MODES)
                    + "), p4src/NAME.p4 or a path (without it: Linux bridges, no P4)")
    up.add_argument("--target", choices=("auto", "embedded", "bmv2"), default="auto",
                    help="P4 target of the switches (default: bmv2 if installed and the program needs nothing "
                    "only the embedded target has, else embedded)")
    up.add_argument("--backend", choices=BACKENDS, default=None,
                    help="pipeline backend of embedded switches: python, native (generated C) or auto "
                    "(native, else python with a warning; default $TESTBED_BACKEND or auto)")
    up.add_argument("--switch", default=None, help=argparse.SUPPRESS)  # deprecated: --target, or no --program
    up.add_argument("--controller", choices=list(controller_kinds()), default=None,
                    help="who programs routes: " + "; ".join(f"{name}: {kind.description}"
                                                              for name, kind in controller_kinds().items())
                    + " (default: the mode's, else static)")
    up.add_argument("--shape-links", action="store_true", help="shape links to their capacity with tc htb")
    up.add_argument("--queue-frames", type=int, default=None, metavar="N",
                    help="with --shape-links: frames each link end queues before it drops (default 1000)")
    up.add_argument("--pcap", action="store_true", help="per-port pcaps next to the switch logs")
    up.add_argument("--packet-log", action="store_true", help="BMv2's per-packet log (slow; off by default)")
    up.add_argument("--log-dir", default=None, help="switch logs (default: a temporary folder removed at exit)")
    add_server_arguments(up)
    up.add_argument("--placement", default=None, metavar="NODE=SERVER,...",
                    help="with --servers: fix where nodes run (the rest by the fabric's structure)")
    up.add_argument("--test", choices=("pingall", "none"), default="none", help="run a test once up")
    up.add_argument("--no-cli", action="store_true", help="do not open the Mininet CLI")
    up.add_argument("--hold", type=float, default=None, metavar="SECONDS",
                    help="with --no-cli: stay up this long (default: until Ctrl-C)")
    up.add_argument("--state-file", default=DEFAULT_STATE_FILE,
                    help="state file of the running network (default: %(default)s)")
    up.add_argument("-v", "--verbose", action="store_true", help="Mininet info logging")
    up.add_argument("-q", "--quiet", action="store_true",
                    help="no progress lines while the fabric comes up and goes down (they still go to "
                    "fabric.log in --log-dir)")
    up.set_defaults(func=run_up)

    status = actions.add_parser("status", help="print the running fabric's description as JSON")
    status.add_argument("--state-file", default=DEFAULT_STATE_FILE,
                        help="state file of the running network (default: %(default)s)")
    status.set_defaults(func=run_status)

    down = actions.add_parser("down", help="stop the fabric started by `testbed net up`")
    down.add_argument("--state-file", default=DEFAULT_STATE_FILE,
                      help="state file of the running network (default: %(default)s)")
    down.set_defaults(func=run_down)


def run_up(args):
    """Build and program the fabric, run the optional test and the CLI, always tear down."""
    from mininet.cli import CLI

    from testbed.fabrics import Fabric
    from testbed.topologies.registry import parse_key_values

    target = args.target
    if args.switch is not None:
        print("testbed net up: --switch is deprecated: use --target embedded|bmv2 (with --program), or leave "
              "--program out for Linux bridges", file=sys.stderr)
        if args.switch == "bridge":
            if args.program is not None:
                raise ParameterError("--switch", "bridge", "embedded or bmv2 with --program")
        elif args.program is None:
            raise ParameterError("--program", None, "a P4 program (or mode) when --switch is a P4 target")
        else:
            target = args.switch
    fabric = Fabric(args.kind, program=args.program, target=target, backend=args.backend,
                    controller=args.controller, shape_links=args.shape_links, queue_frames=args.queue_frames,
                    state_file=args.state_file,
                    packet_log=args.packet_log, pcap=args.pcap, log_dir=args.log_dir,
                    progress=None if args.quiet else print_line,
                    log_level="info" if args.verbose else "warning", **cluster_options(args),
                    **parse_key_values(args.params))
    status = 0
    failure = None
    with termination_as_interrupt():
        try:
            fabric.start()
            print_line(f"{fabric.topo.kind}: {len(fabric.hosts)} hosts, {len(fabric.switches)} "
                           f"{fabric.target} switches up (state in {args.state_file})")
            if fabric.controller is not None:
                print_line(f"programmed {len(fabric.switches)} switches over P4Runtime: "
                               f"{fabric.controller.entries_written} route entries")
            if args.test == "pingall":
                pairs = len(fabric.hosts) * (len(fabric.hosts) - 1)
                unreachable = fabric.unreachable_pairs(timeout_s=2)
                print_line(f"pingall: {100.0 * len(unreachable) / max(1, pairs):.1f}% dropped "
                               f"({len(unreachable)} of {pairs} pairs unreachable)")
                status = 0 if not unreachable else 1
            if not args.no_cli:
                CLI(fabric.net)
            elif args.hold is not None:
                hold(fabric, args.hold)
            elif args.test == "none":
                print_line("holding; Ctrl-C to stop")
                hold(fabric)
        except KeyboardInterrupt as interrupt:
            print_line(f"interrupted ({interrupt.args[0] if interrupt.args else 'SIGINT'}): "
                           "tearing the network down")
        except EmulationError as error:
            failure = error  # raised once the network is down (a teardown error must not hide it)
        finally:
            try:
                fabric.stop()
            except EmulationError as error:
                if failure is None:
                    raise
                print(f"testbed: {error}", file=sys.stderr)
    if failure is not None:
        raise failure
    return status


#: how often a held network's servers and switches are checked
HOLD_CHECK_S = 0.5


def hold(fabric, seconds=None):
    """Keep ``fabric`` up for ``seconds`` (None: until a signal), checking its servers and switches.

    Raises:
        EmulationError: a server became unreachable or a switch died (named).
    """
    deadline = None if seconds is None else time.monotonic() + seconds
    while True:
        fabric.check_switches()
        left = HOLD_CHECK_S if deadline is None else deadline - time.monotonic()
        if left <= 0:
            return
        time.sleep(min(HOLD_CHECK_S, left))


def add_server_arguments(parser, default_link="vxlan"):
    """``--servers`` and ``--cross-link`` (``net up``; ``run`` and ``compare``, where they replace the spec's)."""
    parser.add_argument("--servers", default=None, metavar="S1,S2",
                        help="run the fabric over these servers and this one (Mininet's cluster edition; embedded "
                        "target): user@host, host, or a simulated server's name (`testbed server sim up`)")
    parser.add_argument("--cross-link", choices=("vxlan", "ssh"), default=default_link,
                        help="with --servers: links between servers as VXLAN (default) or SSH tunnels")


def cluster_options(args):
    """The Fabric options of ``--servers``, ``--placement`` and ``--cross-link``.

    Raises:
        ParameterError: ``--placement`` not ``node=server`` pairs, or without ``--servers``.
    """
    if not args.servers:
        if args.placement:
            raise ParameterError("--placement", args.placement, "a placement with --servers only")
        return {}
    from testbed.emulation.cluster.servers import parse_servers_option

    placement = {}
    for item in parse_servers_option(args.placement or ""):
        node, _, server = item.partition("=")
        if not node or not server:
            raise ParameterError("--placement", item, "NODE=SERVER pairs separated by commas")
        placement[node] = server
    return {"servers": parse_servers_option(args.servers), "placement": placement, "cross_link": args.cross_link}


def run_status(args):
    """Print the running network's state file."""
    print(json.dumps(read_state(args.state_file), indent=1, sort_keys=True))
    return 0


def run_down(args):
    """Ask the owner of the running network to stop it, and wait until it has."""
    state = read_state(args.state_file)
    owner = state["pid"]
    os.kill(owner, signal.SIGTERM)
    deadline = time.monotonic() + 30
    while os.path.exists(f"/proc/{owner}") and time.monotonic() < deadline:
        time.sleep(0.1)
    if os.path.exists(f"/proc/{owner}"):
        print(f"network owner {owner} did not stop; run `testbed cleanup`")
        return 1
    print("network stopped")
    return 0
