"""The packet generator of a BMv2 switch: periodic trigger frames on a dedicated port.

BMv2 has no packet generator (v1model has no timer), so for a program that
needs periodic frames (p4src/f10.p4's failure detector) each BMv2 switch gets
one more port, the generator port (510 by default), attached to one end of a
veth pair; this process writes the template frame into the other end every
period, so the frames enter ingress on that port exactly as the embedded
target's generator (:mod:`testbed.p4.v1model.packet_generator`) injects them.

    python -m testbed.emulation.pktgen_injector --intf s1-pg510 --period-us 10000 --template HEX

Periods are kept on an absolute schedule; when the process falls behind (a
loaded machine) it sends one frame and skips the missed periods, like the
embedded generator.  SIGTERM stops it; it prints how many frames it sent and
skipped.
"""
import argparse
import signal
import socket
import sys
import time

from testbed.errors import ParameterError
from testbed.p4.v1model.packet_generator import MAX_FRAME, MAX_PERIOD_NS, MIN_FRAME, MIN_PERIOD_NS


def parse_template(text):
    """The frame bytes of a hex template.

    Raises:
        ParameterError: not hex, or a size outside 14..1514 bytes.
    """
    try:
        frame = bytes.fromhex(text)
    except ValueError:
        raise ParameterError("--template", text[:40], "an Ethernet frame as hex digits") from None
    if not MIN_FRAME <= len(frame) <= MAX_FRAME:
        raise ParameterError("--template", f"{len(frame)} bytes", f"{MIN_FRAME} to {MAX_FRAME} bytes")
    return frame


def run(interface, period_ns, frame, stop):
    """Send ``frame`` on ``interface`` every ``period_ns`` until ``stop()`` is true; return (sent, skipped)."""
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    sock.bind((interface, 0))
    sent = skipped = 0
    next_ns = time.monotonic_ns() + period_ns
    try:
        while not stop():
            wait = (next_ns - time.monotonic_ns()) / 1e9
            if wait > 0:
                time.sleep(min(wait, 0.1))  # stays responsive to SIGTERM
                continue
            try:
                sock.send(frame)
                sent += 1
            except OSError:
                pass  # the port went down with its switch: keep the schedule
            late = (time.monotonic_ns() - next_ns) // period_ns
            skipped += late
            next_ns += (late + 1) * period_ns
    finally:
        sock.close()
    return sent, skipped


def main(argv=None):
    """Run until SIGTERM/SIGINT; exit status 0, or 2 for bad arguments."""
    parser = argparse.ArgumentParser(prog="python -m testbed.emulation.pktgen_injector",
                                     description="Periodic frames into a BMv2 switch's generator port.")
    parser.add_argument("--intf", required=True, help="the veth end opposite the switch's generator port")
    parser.add_argument("--period-us", type=float, required=True, help="period in microseconds")
    parser.add_argument("--template", required=True, help="the frame, as hex")
    args = parser.parse_args(argv)
    try:
        frame = parse_template(args.template)
        period_ns = int(args.period_us * 1000)
        if not MIN_PERIOD_NS <= period_ns <= MAX_PERIOD_NS:
            raise ParameterError("--period-us", args.period_us,
                                 f"a number in [{MIN_PERIOD_NS / 1000:g}, {MAX_PERIOD_NS / 1000:g}]")
    except ParameterError as error:
        print(f"pktgen_injector: {error}", file=sys.stderr)
        return 2
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    signal.signal(signal.SIGINT, lambda *_: stopping.append(True))
    sent, skipped = run(args.intf, period_ns, frame, lambda: bool(stopping))
    print(f"pktgen_injector {args.intf}: sent {sent}, skipped {skipped}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
