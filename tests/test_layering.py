"""The package's layers import only downward.

Lowest first: the P4 target (testbed/p4) knows nothing of P4Runtime; the
P4Runtime server and client (testbed/p4runtime) serve any target object; the
embedded switch process (testbed/embedded_switch) joins the two; controllers
never reach into the experiment runner or the CLI.  testbed.errors and
testbed.packet_sockets import nothing of the testbed: any layer may use them.

A mechanism (testbed/mechanisms/<name>/) is named only by its own folders
(testbed/mechanisms/<name>/, controllers/<name>/, topologies/<name>/) and the
registries; its declaration imports only testbed.mechanisms.base and
testbed.errors.
"""
import ast
import os
import re

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


# ------------------------------------------------------------------ mechanisms
#: the source folders of the package (what tests/ and benchmarks/ import is theirs to choose)
PACKAGE_FOLDERS = ("testbed", "controllers", "topologies", "traffic")
#: the registries: the only generic modules that learn a mechanism's name (from its folder)
REGISTRIES = ("testbed/mechanisms/__init__.py", "topologies/registry.py")
#: what a mechanism's declaration (its manifest) may import
MANIFEST_IMPORTS = ("testbed.mechanisms.base", "testbed.errors")


def mechanism_names():
    folder = os.path.join(REPO, "testbed", "mechanisms")
    return sorted(name for name in os.listdir(folder)
                  if os.path.isfile(os.path.join(folder, name, "__init__.py")))


def own_folders(name):
    """The folders of one mechanism's code, one per layer."""
    return (f"testbed/mechanisms/{name}", f"controllers/{name}", f"topologies/{name}")


def named_modules(name):
    """Import names that name the mechanism: its declaration and its controllers' and topologies' packages."""
    return (f"testbed.mechanisms.{name}", f"testbed.controllers.{name}", f"testbed.topologies.{name}")


def referenced_modules(path):
    """What a file imports, plus string constants that are exactly a module path (``importlib`` targets)."""
    with open(path) as handle:
        tree = ast.parse(handle.read(), path)
    names = imported_modules(path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and re.fullmatch(r"testbed(\.\w+)+(:\w+)?", node.value):
            names.append(node.value.split(":")[0])
    return names


def test_mechanisms_are_found():
    assert {"lb", "f10", "dsf"} <= set(mechanism_names())


@pytest.mark.parametrize("name", mechanism_names())
def test_mechanism_manifest_imports_only_the_base_and_errors(name):
    path = os.path.join(REPO, "testbed", "mechanisms", name, "__init__.py")
    wrong = [module for module in imported_modules(path)
             if module.startswith("testbed") and not _within(module, MANIFEST_IMPORTS)]
    assert not wrong, f"testbed/mechanisms/{name}/__init__.py imports {wrong}"


@pytest.mark.parametrize("name", mechanism_names())
def test_only_the_mechanism_and_the_registries_name_it(name):
    allowed = own_folders(name)
    wrong = []
    for folder in PACKAGE_FOLDERS:
        for path in python_files(folder):
            relative = os.path.relpath(path, REPO)
            if relative in REGISTRIES or any(relative.startswith(own + os.sep) for own in allowed):
                continue
            wrong += [(relative, module) for module in referenced_modules(path)
                      if _within(module, named_modules(name))]
    assert not wrong, wrong
