"""Topology generators (Clos, FatTree, AB FatTree, DSF, FC+ and FC) and the fat-tree designer.

The public classes are re-exported lazily (``from testbed.topologies import
FatTree``) so that importing the package, e.g. for the designer alone, does
not import Mininet.
"""
import importlib

_EXPORTS = {
    "FabricTopo": "base",
    "ClosTopo": "clos",
    "Clos3Topo": "clos",
    "FatTree": "fattree",
    "ABFatTree": "ab_fattree",
    "DSFTopo": "dsf.topology",
    "FCPlusTopo": "fcplus.topology",
    "FCTopo": "fcplus.topology",
    "TOPOLOGY_KINDS": "registry",
    "make_topology": "registry",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name):
    """Import a re-exported name from its module on first use."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
