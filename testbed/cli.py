"""The ``testbed`` command line.

Each subcommand lives in its own module under :mod:`testbed.commands`; a
module joins the CLI by defining ``register(subparsers)``, which adds its
parser and sets ``func`` (called with the parsed arguments, returning an exit
status).  Errors the user caused (:class:`testbed.errors.TestbedError`) are
printed as one line without a traceback.
"""
import argparse
import importlib
import pkgutil
import sys

from testbed import __version__
from testbed import commands as commands_package
from testbed.errors import TestbedError


def build_parser():
    """Return the top-level argument parser with every subcommand registered."""
    parser = argparse.ArgumentParser(
        prog="testbed",
        description="P4/Mininet fabric testbed: build emulated fabrics, run P4 switches, "
        "drive RoCEv2-like traffic and run failure experiments.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    for module_info in sorted(pkgutil.iter_modules(commands_package.__path__), key=lambda m: m.name):
        if module_info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{commands_package.__name__}.{module_info.name}")
        module.register(subparsers)
    return parser


def main(argv=None):
    """Entry point of the ``testbed`` console script; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        status = args.func(args)
    except TestbedError as error:
        print(f"testbed {args.command}: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"testbed {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # output piped into `head` and friends: stop quietly, like other Unix tools
        sys.stderr.close()
        return 0
    return 0 if status is None else int(status)


if __name__ == "__main__":
    sys.exit(main())
