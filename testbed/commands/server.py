"""``testbed server``: simulated servers on this machine for fabrics over several servers."""
import json

from testbed.errors import TestbedError


def register(subparsers):
    """Add the ``server`` subcommand and its ``sim up|down|list`` actions."""
    parser = subparsers.add_parser(
        "server", help="servers of fabrics over several servers (simulated ones on this machine)",
        description="A simulated server is a network namespace with its own sshd (root login by a key made "
        "for it), joined to this machine by a veth pair on 198.18.<index>.0/30; give its name to "
        "`testbed net up --servers`. It shares this machine's kernel, files (but /tmp) and project install.")
    actions = parser.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True
    sim = actions.add_parser("sim", help="start, stop or list simulated servers")
    sim.add_argument("what", choices=("up", "down", "list"))
    sim.add_argument("index", nargs="?", type=int, default=1, help="server index 1..250 (default 1: tb-srv1)")
    sim.add_argument("--hide", action="append", default=[], metavar="FILE",
                     help="with up: a file the server lacks (an empty one is mounted over it there), to try a "
                     "server without, say, /usr/local/bin/simple_switch_grpc; repeatable")
    sim.set_defaults(func=run_sim)


def run_sim(args):
    """Start, stop or list simulated servers; returns the exit status."""
    from testbed.emulation.cluster import simserver

    if args.what == "up":
        entry = simserver.up(args.index, hide=args.hide)
        print(json.dumps(entry, indent=1))
        print(f"simulated server {entry['name']} up at {entry['address']}: "
              f"testbed net up fattree k=4 --program ecmp --servers {entry['name']}")
        return 0
    if args.what == "down":
        if not simserver.down(args.index):
            raise TestbedError(f"no simulated server {simserver.server_name(args.index)}")
        print(f"simulated server {simserver.server_name(args.index)} down")
        return 0
    for name in simserver.running():
        print(json.dumps(simserver.load(name)))
    return 0
