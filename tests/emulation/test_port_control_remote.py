"""Control requests to a switch on another server: made there by port_control's command line.

The server is stood in for by a ``run`` that executes the command on this machine (what
``Server.run`` does over ssh), against a control socket served here by a thread.
"""
import json
import os
import subprocess
import threading

import pytest

from testbed.embedded_switch import port_control
from testbed.errors import EmulationError


def run_here(command, timeout):
    return subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=timeout, check=False)


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


def test_a_request_made_on_the_switchs_server_gets_the_switchs_answer(answering_socket):
    path, seen = answering_socket
    commands = []

    def run(command, timeout):
        commands.append(command)
        return run_here(command, timeout)

    assert port_control.port_status(path, run=run) == {1: {"loss": 0.0, "drops": 3}}
    assert port_control.switch_status(path, run=run)["clock_origin_ns"] == 7
    assert seen == [{"command": "status"}, {"command": "status"}]
    assert all("-m testbed.embedded_switch.port_control" in command and path in command for command in commands)


def test_a_switch_that_does_not_answer_on_its_server_is_an_error_naming_its_socket(tmp_path):
    missing = str(tmp_path / "gone.ctl")
    with pytest.raises(EmulationError, match=f"switch control socket {missing} \\(on its server\\):"):
        port_control.port_status(missing, timeout=0.5, run=run_here)

    def unreachable(command, timeout):
        return subprocess.CompletedProcess([], 255, "", "ssh: connect to host 198.18.9.2 port 22: No route to host")

    with pytest.raises(EmulationError, match="No route to host"):
        port_control.switch_status(missing, run=unreachable)


def test_the_command_line_prints_the_answer_or_the_error(answering_socket, capsys):
    path, _ = answering_socket
    assert port_control.main([path, '{"command": "status"}']) == 0
    assert json.loads(capsys.readouterr().out)["ports"]["1"]["drops"] == 3
    assert port_control.main([path + ".none", '{"command": "status"}', "--timeout", "0.2"]) == 1
    assert path + ".none" in capsys.readouterr().err
