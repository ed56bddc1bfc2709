"""``testbed cleanup``: remove what testbed runs left behind (like Mininet's ``mn -c``, for this testbed only)."""
import json

from testbed.emulation.cleanup import cleanup, cleanup_plan, server_cleanup, server_marks


def register(subparsers):
    """Add the ``cleanup`` subcommand."""
    parser = subparsers.add_parser(
        "cleanup", help="remove leftover processes, interfaces, namespaces and state files of testbed runs",
        description="Kill the processes, delete the interfaces and remove the /run/testbed state that testbed "
        "runs which are gone (crashed, killed) left behind. Only what carries the testbed's marks is touched "
        "(the TESTBED_OWNER mark of processes, the owner's interface group); other processes and interfaces "
        "on the machine are left alone, whatever their names.")
    parser.add_argument("--all", action="store_true",
                        help="also remove the networks whose owner still runs")
    parser.add_argument("--dry-run", action="store_true", help="only list what would be removed")
    parser.add_argument("--servers", metavar="S1,S2", default=None,
                        help="also clean the other servers of runs over several servers (names as in "
                        "`testbed net up --servers`): what runs started here and now gone left there")
    parser.add_argument("--server-marks", metavar="NAME", default=None,
                        help="(run on a server over ssh by --servers and at stop) act only on what runs from "
                        "another machine left on this one as server NAME: list it as JSON, or remove that of "
                        "--owners")
    parser.add_argument("--owners", metavar="PID,PID", default=None,
                        help="with --server-marks: the runs (their pids where they started) to remove")
    parser.set_defaults(func=run)


def run(args):
    """Clean up (or list, with --dry-run); returns 0."""
    if args.server_marks:
        if args.owners is None:
            print(json.dumps({str(owner): found for owner, found in server_marks(args.server_marks).items()}))
            return 0
        owners = [int(owner) for owner in args.owners.split(",") if owner.strip()]
        server_cleanup(args.server_marks, owners)
        return 0
    if args.servers:
        from testbed.emulation.cluster.cleanup import clean_servers

        status = _local(args)
        clean_servers(args.servers, include_running=args.all, dry_run=args.dry_run)
        return status
    return _local(args)


def _local(args):
    if args.dry_run:
        plan = cleanup_plan(include_running=args.all)
        for pid, cmdline in plan["processes"]:
            print(f"process: {pid} {cmdline}")
        for group, names in sorted(plan["interface_groups"].items()):
            print(f"interfaces (group {group}): {' '.join(sorted(names))}")
        for kind in ("netns", "state_files", "temp_paths"):
            for item in plan[kind]:
                print(f"{kind}: {item}")
        for name in plan["servers"]:
            print(f"simulated server (the process it was up for is gone): {name}")
        for owner in plan["running_owners"]:
            print(f"running (left alone): network of owner {owner}")
        if not _anything(plan):
            print("nothing left behind")
        return 0
    plan = cleanup(log=print, include_running=args.all)
    if not _anything(plan):
        print("nothing left behind")
    return 0


def _anything(plan):
    return any(plan[kind] for kind in ("processes", "interface_groups", "netns", "state_files", "temp_paths",
                                        "servers"))
