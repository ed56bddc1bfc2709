"""The package's layers import only downward.

Lowest first: the P4 target (testbed/p4) knows nothing of P4Runtime; the
P4Runtime server and client (testbed/p4runtime) serve any target object; the
embedded switch process (testbed/embedded_switch) joins the two; controllers
never reach into the experiment runner or the CLI.  testbed.errors and
testbed.packet_sockets import nothing of the testbed: any layer may use them.
"""
import ast
import os

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: folder -> the testbed modules its files may import (prefixes)
ALLOWED = {
    "testbed/p4": ("testbed.p4", "testbed.errors", "testbed.log_format"),
    "testbed/p4runtime": ("testbed.p4runtime", "testbed.p4", "testbed.errors", "testbed.log_format"),
    "testbed/embedded_switch": ("testbed.embedded_switch", "testbed.p4runtime", "testbed.p4", "testbed.errors",
                                "testbed.packet_sockets", "testbed.log_format"),
    "topologies": ("testbed.topologies", "testbed.errors", "testbed.log_format"),
}
#: leaf modules: they import nothing of the testbed
LEAVES = ("testbed/errors.py", "testbed/packet_sockets.py", "testbed/log_format.py")
#: folder -> testbed modules its files must not import (prefixes)
FORBIDDEN = {
    "controllers": ("testbed.experiment", "testbed.commands", "testbed.cli"),
    "testbed/emulation": ("testbed.experiment", "testbed.commands", "testbed.cli", "testbed.controllers"),
}


def imported_modules(path):
    """Every absolute module name a Python file imports (top level and inside functions)."""
    with open(path) as handle:
        tree = ast.parse(handle.read(), path)
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
    return names


def python_files(folder):
    for root, _dirs, files in os.walk(os.path.join(REPO, folder)):
        for name in files:
            if name.endswith(".py"):
                yield os.path.join(root, name)


def _within(name, prefixes):
    return any(name == prefix or name.startswith(prefix + ".") for prefix in prefixes)


@pytest.mark.parametrize("folder", sorted(ALLOWED))
def test_layer_imports_only_what_is_below_it(folder):
    wrong = [(os.path.relpath(path, REPO), name) for path in python_files(folder)
             for name in imported_modules(path)
             if name.startswith("testbed") and not _within(name, ALLOWED[folder])]
    assert not wrong, wrong


@pytest.mark.parametrize("folder", sorted(FORBIDDEN))
def test_layer_does_not_import_what_is_above_it(folder):
    wrong = [(os.path.relpath(path, REPO), name) for path in python_files(folder)
             for name in imported_modules(path) if _within(name, FORBIDDEN[folder])]
    assert not wrong, wrong


@pytest.mark.parametrize("leaf", LEAVES)
def test_leaf_modules_import_nothing_of_the_testbed(leaf):
    assert [name for name in imported_modules(os.path.join(REPO, leaf)) if name.startswith("testbed")] == []
