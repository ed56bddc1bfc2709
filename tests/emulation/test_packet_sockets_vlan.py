"""VLAN tags on the embedded switch's ports: frames keep them, as with BMv2 (libpcap).

The kernel takes the 802.1Q tag out of every received frame before packet sockets see it
(``__netif_receive_skb_core`` untags, whatever the device's offloads) and hands it over
as ``PACKET_AUXDATA``; libpcap, through which BMv2 reads its ports, puts it back.  The
embedded switch must too, or a tagged frame reaches its parser as an untagged one.
Needs root (a network namespace with a veth pair); skipped otherwise.
"""
import os
import struct

import pytest

from diff_harness import Namespace
from testbed.embedded_switch.switchd import PortSocket
from testbed.packet_sockets import open_packet_socket

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root: a network namespace with a veth pair")

UNTAGGED = bytes.fromhex("ffffffffffff" "020000000001") + b"\x08\x00" + bytes(range(46))


@pytest.fixture
def veth():
    namespace = Namespace(ports=(1,))
    try:
        yield namespace
    finally:
        namespace.close()


@pytest.mark.parametrize("tpid, tci", [(0x8100, 0x0123), (0x8100, 0x0000), (0x88A8, 0xE00F)])
def test_the_switch_port_reads_a_tagged_frame_with_its_tag(veth, tpid, tci):
    tagged = UNTAGGED[:12] + struct.pack("!HH", tpid, tci) + UNTAGGED[12:]

    def exchange():
        port = PortSocket(1, "tbd-s1")
        sender = open_packet_socket()
        try:
            sender.bind(("tbd-h1", 0))
            # the first frame of a batch is read with its timestamp, the others without
            for frame in (tagged, UNTAGGED, tagged):
                sender.send(frame)
            frames = []
            for _ in range(200):
                frames += port.receive_batch()
                if len(frames) >= 3:
                    break
                os.sched_yield()
            return frames
        finally:
            port.close()
            sender.close()

    assert veth.run(exchange) == [tagged, UNTAGGED, tagged]
