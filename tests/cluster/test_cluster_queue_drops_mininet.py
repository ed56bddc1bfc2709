"""Queue drops on another server are read there, over one ssh connection kept open for it.

The congestion timeline samples every switch port's qdisc every 100 ms; a remote server's ports
are read through a shell the server keeps for them (:meth:`~testbed.emulation.cluster.servers.Server.shell`:
``tc`` run on the server at each read, over one connection).  Here a qdisc on the simulated server that
drops every frame must be read with the drops ``tc`` shows in that server's namespace.
"""
import shlex
import subprocess
import sys

import pytest

from testbed.emulation.network import QDISC_COMMAND, parse_qdisc_drops
from testbed.errors import EmulationError
from testbed.pytest_plugin import SIMULATED_SERVER

pytestmark = [pytest.mark.mininet, pytest.mark.cluster]

PORT, PEER = "tbqdr0", "tbqdr1"  # names no fabric uses, in the simulated server's namespace only
FRAMES = 5
# a packet socket hears of a qdisc's drop as ENOBUFS
SEND_FRAMES = f"""
import contextlib, socket
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind(({PORT!r}, 0))
for _ in range({FRAMES}):
    with contextlib.suppress(OSError):
        s.send(bytes.fromhex("ffffffffffff02000000000188b5") + bytes(50))
"""


def there(*argv):
    return subprocess.run(["ip", "netns", "exec", SIMULATED_SERVER, *argv], capture_output=True, text=True,
                          check=True).stdout


def test_a_remote_servers_queue_drops_are_read_there(simulated_server):
    there("ip", "link", "add", PORT, "type", "veth", "peer", "name", PEER)
    try:
        for name in (PORT, PEER):  # no address, no IPv6: the kernel itself sends nothing on it
            there("sysctl", "-qw", f"net.ipv6.conf.{name}.disable_ipv6=1")
        there("ip", "link", "set", PORT, "up")
        there("ip", "link", "set", PEER, "up")
        there("tc", "qdisc", "add", "dev", PORT, "root", "pfifo", "limit", "0")  # every frame dropped
        reader = simulated_server.shell("queue drops")
        read = shlex.join(QDISC_COMMAND)
        try:
            assert simulated_server.shell("queue drops") is reader  # kept
            assert simulated_server.shell() is not reader  # a shell of its own
            before = parse_qdisc_drops(reader.run(read).stdout)[PORT]
            assert before == parse_qdisc_drops(there(*QDISC_COMMAND))[PORT]
            there(sys.executable, "-c", SEND_FRAMES)
            truth = parse_qdisc_drops(there(*QDISC_COMMAND))[PORT]
            assert truth == before + FRAMES
            assert parse_qdisc_drops(reader.run(read).stdout)[PORT] == truth
            assert parse_qdisc_drops(reader.run(read).stdout)[PORT] == truth  # the same connection, read again
        finally:
            simulated_server.close_kept()
        simulated_server.close_kept()  # a second close changes nothing
        assert reader.process.returncode is not None
        with pytest.raises(EmulationError, match=f"server {SIMULATED_SERVER} .*its kept shell's connection ended"):
            reader.run(read)
    finally:
        subprocess.run(["ip", "netns", "exec", SIMULATED_SERVER, "ip", "link", "del", PORT], capture_output=True)
