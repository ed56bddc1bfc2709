"""The embedded switches' P4Runtime ports stay out of the kernel's ephemeral port range.

A port inside it can be held by an outgoing connection's source port, or by the readiness probe's own
connect to it (a TCP self-connect), at the moment the switch binds it.
"""
from testbed.emulation.p4switch import GRPC_BASE_PORT, ephemeral_ports

#: the largest fabric the shipped topologies build (k=16 FatTree: 320 switches) with room to spare
DEVICE_IDS = range(1, 4097)


def test_the_kernels_ephemeral_range_is_read():
    ephemeral = ephemeral_ports()
    with open("/proc/sys/net/ipv4/ip_local_port_range") as sysctl:
        low, high = (int(word) for word in sysctl.read().split())
    assert (ephemeral.start, ephemeral.stop - 1) == (low, high)


def test_default_ports_of_a_large_fabric_lie_outside_the_ephemeral_range():
    ephemeral = ephemeral_ports()
    assert not [GRPC_BASE_PORT + device for device in DEVICE_IDS if GRPC_BASE_PORT + device in ephemeral]
