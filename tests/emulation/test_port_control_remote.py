"""Control requests to a switch on another server: made there through a relay.

The relay, :class:`~testbed.embedded_switch.port_control.ControlRelay` (one kept ``port_control
--serve`` process), is started here instead of over ssh; it and port_control's command line ask a
control socket served here by a thread.
"""
import json
import os
import sys
import threading

import pytest

from testbed.embedded_switch import port_control
from testbed.errors import EmulationError


@pytest.fixture
def answering_socket(tmp_path):
    """A control socket at a file path answering every request with its own status-like answer."""
    import socket

    path = str(tmp_path / "s1.ctl")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    server.bind(path)
    seen = []

    def serve():
        while True:
            try:
                data, reply_to = server.recvfrom(65536)
            except OSError:
                return
            message = json.loads(data)
            seen.append(message)
            answer = {"ok": True, "ports": {"1": {"loss": 0.0, "drops": 3}}, "packet_generator": {},
                      "clock_origin_ns": 7}
            server.sendto(json.dumps(answer).encode(), reply_to)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield path, seen
    server.close()
    os.remove(path)


def test_the_command_line_prints_the_answer_or_the_error(answering_socket, capsys):
    path, _ = answering_socket
    assert port_control.main([path, '{"command": "status"}']) == 0
    assert json.loads(capsys.readouterr().out)["ports"]["1"]["drops"] == 3
    assert port_control.main([path + ".none", '{"command": "status"}', "--timeout", "0.2"]) == 1
    assert path + ".none" in capsys.readouterr().err


def test_a_kept_relay_answers_each_request_and_names_a_socket_that_does_not(answering_socket, tmp_path):
    path, seen = answering_socket
    relay = port_control.ControlRelay([sys.executable, "-m", "testbed.embedded_switch.port_control", "--serve"],
                                      "on server here")
    try:
        for _ in range(20):  # one process for all of them
            assert port_control.port_status(path, via=relay) == {1: {"loss": 0.0, "drops": 3}}
        assert len(seen) == 20
        missing = str(tmp_path / "gone.ctl")
        with pytest.raises(EmulationError, match=f"switch control socket {missing} \\(on server here\\): "
                                                 f"switch control socket {missing}: "):
            port_control.switch_status(missing, timeout=0.3, via=relay)
        assert port_control.switch_status(path, via=relay)["clock_origin_ns"] == 7  # still serving
    finally:
        relay.close()
    relay.close()  # a second close changes nothing
    with pytest.raises(EmulationError, match="on server here.*the relay's connection ended"):
        port_control.switch_status(path, via=relay)
