"""Install the fabric testbed.

The top-level folders ``topologies/``, ``controllers/`` and ``traffic/`` are
installed as subpackages of ``testbed`` (``testbed.topologies`` ...) so their
import names never collide with unrelated distributions (PyPI has a
``traffic`` package).  ``p4src/`` ships as package data of ``testbed.p4src``.
"""
from setuptools import setup

PACKAGE_DIRS = {
    "testbed": "testbed",
    "testbed.topologies": "topologies",
    "testbed.controllers": "controllers",
    "testbed.traffic": "traffic",
    "testbed.p4src": "p4src",
}


def _subpackages():
    """Every package below the mapped folders (folders holding __init__.py)."""
    import os

    found = []
    for package, folder in PACKAGE_DIRS.items():
        for root, dirs, files in os.walk(folder):
            dirs[:] = [d for d in dirs if not d.startswith((".", "__"))]
            if "__init__.py" in files:
                rel = os.path.relpath(root, folder)
                name = package if rel == "." else package + "." + rel.replace(os.sep, ".")
                found.append(name)
    return sorted(set(found))


setup(
    name="p4-fabric-testbed",
    version="0.1.0",
    description="P4/Mininet testbed for AI and data-center fabrics (Clos, AB FatTree, DSF)",
    python_requires=">=3.9",
    packages=_subpackages(),
    package_dir=PACKAGE_DIRS,
    package_data={
        "testbed.p4src": ["*.p4", "include/*.p4"],
        "testbed.p4": ["include/*.p4", "frontend/*.lark"],
        "testbed.topologies": ["data/*.json"],
    },
    install_requires=[
        # p4runtime-shell 0.0.6 pins protobuf 3.20.x; p4runtime 1.4 matches it.
        "p4runtime>=1.3,<1.5",
        "p4runtime-shell>=0.0.5,<0.1",
        "protobuf>=3.20,<3.21",
        "grpcio>=1.50,<2",
        "os-ken>=2.8,<5",
        "scapy>=2.5,<2.9",
        "lark>=1.1,<2",
        "networkx>=2.8,<4",
        "matplotlib>=3.6,<4",
        "pyyaml>=6,<7",
    ],
    extras_require={"test": ["pytest>=7", "pytest-benchmark>=4", "pytest-timeout>=2"]},
    entry_points={"console_scripts": ["testbed = testbed.cli:main"],
                  # the pytest plugin (fixtures fabric, fabric_factory, no_leftovers; markers): testbed/pytest_plugin.py
                  "pytest11": ["testbed = testbed.pytest_plugin"]},
)
