"""Portless embedded switch processes for the benchmarks (no Mininet, no interfaces).

Each is ``python -m testbed.embedded_switch.switchd`` with a P4Runtime server on a
free loopback port, as tests/lb/test_fabric_app.py starts them.
"""
import contextlib
import subprocess
import sys

from testbed.controllers.launcher import free_ports
from testbed.emulation.p4switch import wait_listening


@contextlib.contextmanager
def portless_switches(count, program=None):
    """Start ``count`` switch processes (device ids 1..count), each loading ``program`` if given.

    Yields:
        list: ``(subprocess.Popen, "127.0.0.1:port", device id)`` of listening switches.

    Raises:
        SystemExit: a switch does not listen within a minute.
    """
    switches = []
    try:
        for device_id, port in enumerate(free_ports(count), start=1):
            address = f"127.0.0.1:{port}"
            command = [sys.executable, "-m", "testbed.embedded_switch.switchd", "--name", f"s{device_id}",
                       "--device-id", str(device_id), "--grpc-addr", address]
            if program:
                command += ["--program", program]
            switches.append((subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
                             address, device_id))
        for _process, address, device_id in switches:
            if not wait_listening(address):
                sys.exit(f"switch {device_id} not listening on {address}")
        yield switches
    finally:
        for process, _address, _device_id in switches:
            process.terminate()
        for process, _address, _device_id in switches:
            process.wait(timeout=20)
