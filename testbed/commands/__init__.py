"""Subcommands of the ``testbed`` CLI, one module each (see :mod:`testbed.cli`)."""
