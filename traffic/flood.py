"""Flood: one fixed UDP frame sent from a raw socket as fast as the socket takes it.

The offered load of a capacity benchmark or an overload burst: no pacing, no sequence numbers, no
report but the count. Run inside a Mininet host (or any namespace)::

    python -m testbed.traffic.flood --intf h1-eth0 --src-mac 00:00:00:00:00:01 \\
        --dst-mac 00:00:00:00:00:02 --src-ip 10.0.0.1 --dst-ip 10.0.0.2 --size 64 --seconds 3

It prints the number of frames the socket accepted (frames the kernel refused, e.g. with a full
transmit queue, are not counted).
"""
import argparse
import socket
import time

#: frames sent between two looks at the clock
CLOCK_EVERY = 100


def flood_frame(src_mac, dst_mac, src_ip, dst_ip, size=64, dscp=0, sport=1234, dport=4791):
    """The frame :func:`flood` sends: Ether / IPv4 / UDP padded with zeros to ``size`` bytes.

    Args:
        src_mac, dst_mac: Ethernet addresses ("02:00:00:00:00:01").
        src_ip, dst_ip: IPv4 addresses.
        size: frame length in bytes without FCS (the headers' 42 bytes at least).
        dscp: the IPv4 DSCP (0..63).
        sport, dport: UDP ports.

    Returns:
        bytes

    Raises:
        ValueError: ``size`` below the headers' length, or ``dscp`` outside 0..63.

    >>> frame = flood_frame("02:00:00:00:00:01", "02:00:00:00:00:02", "10.0.0.1", "10.0.0.2", size=100, dscp=26)
    >>> len(frame), frame[15] >> 2, frame[36:38].hex()
    (100, 26, '12b7')
    """
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether
    from scapy.packet import Raw

    if not 0 <= dscp <= 63:
        raise ValueError(f"dscp: {dscp} is not in 0..63")
    header = Ether(src=src_mac, dst=dst_mac) / IP(src=src_ip, dst=dst_ip, tos=dscp << 2) / UDP(sport=sport,
                                                                                                 dport=dport)
    if size < len(header):
        raise ValueError(f"size: {size} bytes is shorter than the headers ({len(header)} bytes)")
    return bytes(header / Raw(bytes(size - len(header))))


def flood(interface, frame, seconds):
    """Send ``frame`` on ``interface`` (an AF_PACKET socket) for ``seconds``; return the frames sent."""
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    try:
        sock.bind((interface, 0))
        sent, end = 0, time.monotonic() + seconds
        while time.monotonic() < end:
            for _ in range(CLOCK_EVERY):
                try:
                    sock.send(frame)
                    sent += 1
                except OSError:  # ENOBUFS: the transmit queue is full; that frame was not offered
                    pass
        return sent
    finally:
        sock.close()


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m testbed.traffic.flood", description=__doc__.split("\n")[0])
    parser.add_argument("--intf", required=True)
    parser.add_argument("--src-mac", required=True)
    parser.add_argument("--dst-mac", required=True)
    parser.add_argument("--src-ip", required=True)
    parser.add_argument("--dst-ip", required=True)
    parser.add_argument("--size", type=int, default=64, help="frame bytes without FCS")
    parser.add_argument("--dscp", type=int, default=0)
    parser.add_argument("--sport", type=int, default=1234)
    parser.add_argument("--dport", type=int, default=4791)
    parser.add_argument("--seconds", type=float, required=True)
    args = parser.parse_args(argv)
    try:
        frame = flood_frame(args.src_mac, args.dst_mac, args.src_ip, args.dst_ip, args.size, args.dscp,
                            args.sport, args.dport)
    except ValueError as error:
        parser.error(str(error))
    print(flood(args.intf, frame, args.seconds))


if __name__ == "__main__":
    main()
