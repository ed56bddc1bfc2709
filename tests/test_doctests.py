"""Every doctest of the installed package runs in the suite.

The modules are found by their text (a ``>>>`` line), so a doctest added to any
module of testbed/, topologies/, controllers/ or traffic/ runs without being
listed here.  Examples that build topologies import Mininet's classes but start
nothing.
"""
import doctest
import importlib
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: source folder -> its import name (setup.py's package_dir)
PACKAGES = {"testbed": "testbed", "topologies": "testbed.topologies", "controllers": "testbed.controllers",
            "traffic": "testbed.traffic"}


def modules_with_doctests():
    """Import names of every module whose text holds a doctest, sorted."""
    found = []
    for folder, package in PACKAGES.items():
        for root, dirs, files in os.walk(os.path.join(ROOT, folder)):
            dirs[:] = sorted(d for d in dirs if not d.startswith((".", "__")))
            for name in sorted(files):
                if not name.endswith(".py"):
                    continue
                path = os.path.join(root, name)
                with open(path) as handle:
                    if ">>> " not in handle.read():
                        continue
                parts = os.path.relpath(path, os.path.join(ROOT, folder))[:-3].split(os.sep)
                found.append(".".join([package] + [part for part in parts if part != "__init__"]))
    return sorted(found)


MODULES = modules_with_doctests()


def test_the_doctests_are_found():
    assert "testbed.topologies.f10.detours" in MODULES and "testbed.topologies.graph" in MODULES


@pytest.mark.parametrize("name", MODULES)
def test_module_doctests_pass(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0, f"{name}: no doctest ran"
    assert result.failed == 0, f"{name}: {result.failed} of {result.attempted} doctests failed"
