"""``testbed cleanup``: remove what emulated networks left behind."""
from testbed.emulation.cleanup import cleanup, leftovers


def register(subparsers):
    """Add the ``cleanup`` subcommand."""
    parser = subparsers.add_parser(
        "cleanup", help="remove leftover namespaces, interfaces, processes and state files",
        description="Kill emulation processes (Mininet node shells, switch daemons, BMv2, os-ken), "
        "delete Mininet-style interfaces and remove /run/testbed state. Like `mn -c`, for this testbed.")
    parser.add_argument("--dry-run", action="store_true", help="only list what would be removed")
    parser.set_defaults(func=run)


def run(args):
    """Clean up (or list, with --dry-run); returns 0."""
    if args.dry_run:
        found = leftovers()
        for kind, items in found.items():
            for item in items:
                print(f"{kind}: {item}")
        if not any(found.values()):
            print("nothing left behind")
        return 0
    found = cleanup(log=print)
    if not any(found.values()):
        print("nothing left behind")
    return 0
