"""P4/Mininet fabric testbed: emulated AI and data-center fabrics with P4 switches.

Subpackages: ``testbed.topologies`` (topology generators and the fat-tree
designer), ``testbed.p4`` (the embedded P4 target), ``testbed.p4runtime``
(P4Runtime server and client), ``testbed.emulation`` (Mininet integration),
``testbed.traffic`` (RoCEv2-like traffic), ``testbed.controllers`` (os-ken
apps), ``testbed.commands`` (the ``testbed`` CLI).
"""
__version__ = "0.1.0"
