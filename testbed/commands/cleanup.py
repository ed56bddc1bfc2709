"""``testbed cleanup``: remove what testbed runs left behind (like Mininet's ``mn -c``, for this testbed only)."""
from testbed.emulation.cleanup import cleanup, cleanup_plan


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
    parser.set_defaults(func=run)


def run(args):
    """Clean up (or list, with --dry-run); returns 0."""
    if args.dry_run:
        plan = cleanup_plan(include_running=args.all)
        for pid, cmdline in plan["processes"]:
            print(f"process: {pid} {cmdline}")
        for group, names in sorted(plan["interface_groups"].items()):
            print(f"interfaces (group {group}): {' '.join(sorted(names))}")
        for kind in ("netns", "state_files", "temp_paths"):
            for item in plan[kind]:
                print(f"{kind}: {item}")
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
    return any(plan[kind] for kind in ("processes", "interface_groups", "netns", "state_files", "temp_paths"))
