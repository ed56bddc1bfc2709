"""The embedded target's DSF traffic manager: VOQs gated by credit, segmentation, reassembly.

The fixed-function part of a DSF interface node (seed 000), declared to P4
programs by p4src/include/dsf.p4 (semantics documented there):
:mod:`.constants` (what the P4 side must agree with), :mod:`.cells` (the
fabric header, segmentation), :mod:`.voq` (VOQs and their credit),
:mod:`.scheduler` (egress port credit schedulers), :mod:`.reassembly`
(in-order reassembly with timeouts) and :mod:`.engine` (the device's interface).
"""
