"""P4/Mininet fabric testbed: emulated AI and data-center fabrics with P4 switches.

Start here: ``testbed.fabric(...)`` starts a programmed fabric (see
:mod:`testbed.fabrics`); ``testbed.testing`` holds assertions for tests on it.

Subpackages: ``testbed.topologies`` (topology generators and the fat-tree
designer), ``testbed.p4`` (the embedded P4 target), ``testbed.p4runtime``
(P4Runtime server and client), ``testbed.embedded_switch`` (the switch process
joining them), ``testbed.emulation`` (Mininet integration),
``testbed.traffic`` (RoCEv2-like traffic), ``testbed.controllers`` (os-ken
apps and the controller kinds), ``testbed.experiment`` (specs, runner,
results), ``testbed.commands`` (the ``testbed`` CLI).
"""
__version__ = "0.1.0"

__all__ = ["Fabric", "fabric"]


def __getattr__(name):
    # imported on first use: switch processes import this package and need none of Mininet
    if name in ("Fabric", "fabric"):
        from testbed import fabrics

        return getattr(fabrics, name)
    raise AttributeError(f"module 'testbed' has no attribute {name!r}")
