"""The embedded switch process: the P4 target, its P4Runtime server and its ports, put together.

* :mod:`.switchd`: the process (raw-socket ports, forwarding loop, control socket);
* :mod:`.p4runtime_target`: the embedded target as the P4Runtime server sees it;
* :mod:`.port_control`: per-port loss and delay requests over a Unix socket.

It sits above both :mod:`testbed.p4` (the v1model interpreter) and
:mod:`testbed.p4runtime` (the gRPC server and client).
"""
