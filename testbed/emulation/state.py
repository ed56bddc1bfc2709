"""The running network's state file: where other commands learn how to reach a fabric.

:class:`testbed.emulation.network.FabricNetwork` writes it while a fabric runs
(default ``/run/testbed/net.json``); ``testbed net status``, ``testbed
traffic`` and controllers read it.  This module has no Mininet dependency, so
processes inside the emulated hosts can use it too.  Format::

    {"pid": <owner pid>, "kind": "fattree", "params": {...}, "switch": "embedded",
     "hosts": {"h1": {"pid": 1234, "ip": "10.0.0.1", "mac": "00:00:0a:00:00:01",
                      "intf": "h1-eth0"}, ...},
     "switches": {"e0_0": {"pid": 1240, "role": "edge", "ports": {"1": "e0_0-eth1"},
                           "grpc": "127.0.0.1:9560", "device_id": 1, ...}, ...}}
"""
import json
import os

from testbed.errors import EmulationError

DEFAULT_STATE_FILE = "/run/testbed/net.json"


def write_state(description, state_file=DEFAULT_STATE_FILE):
    """Write ``description`` atomically (a temporary file renamed into place)."""
    directory = os.path.dirname(state_file)
    if directory:
        os.makedirs(directory, exist_ok=True)
    temporary = state_file + ".tmp"
    with open(temporary, "w") as handle:
        json.dump(description, handle, indent=1, sort_keys=True)
    os.replace(temporary, state_file)


def state_owner(state_file):
    """The owner pid a state file records, or None when the file cannot be read or names none."""
    try:
        with open(state_file) as handle:
            pid = json.load(handle).get("pid")
    except (OSError, ValueError, AttributeError):
        return None
    return pid if isinstance(pid, int) and pid > 0 else None


def read_state(state_file=DEFAULT_STATE_FILE):
    """Return the description of the running network.

    Raises:
        EmulationError: no network is running (no state file), the file is not
            JSON, or its owner process died.
    """
    try:
        with open(state_file) as handle:
            state = json.load(handle)
    except FileNotFoundError:
        raise EmulationError(f"no running network ({state_file} does not exist): "
                             "start one with `testbed net up`") from None
    except ValueError as error:
        raise EmulationError(f"{state_file} is not valid JSON: {error}") from None
    owner = state.get("pid") if isinstance(state, dict) else None
    if owner and not os.path.exists(f"/proc/{owner}"):
        raise EmulationError(f"the network in {state_file} is stale (its owner {owner} is gone): "
                             "run `testbed cleanup`")
    return state
