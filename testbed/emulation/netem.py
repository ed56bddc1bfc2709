"""Whether this kernel has the ``netem`` qdisc (link delay and loss), probed once.

The machines this project was built on have no netem (their kernel lacks
``sch_netem``); the Vagrant VM has it.  Where it is missing, loss and delay are
emulated inside the embedded switches' ports instead
(:meth:`testbed.emulation.network.FabricNetwork.set_link_loss`).
"""
import os
import subprocess

_NETEM = {}


def netem_available():
    """True when this kernel accepts a ``netem`` qdisc (probed once on a temporary veth)."""
    if "ok" in _NETEM:
        return _NETEM["ok"]
    ok = False
    probe = f"tbnp{os.getpid() % 100000}"
    try:
        created = subprocess.run(["ip", "link", "add", probe, "type", "veth", "peer", "name", probe + "p"],
                                 capture_output=True, check=False).returncode == 0
        if created:
            ok = subprocess.run(["tc", "qdisc", "add", "dev", probe, "root", "netem", "loss", "1%"],
                                capture_output=True, check=False).returncode == 0
    except OSError:
        ok = False
    finally:
        subprocess.run(["ip", "link", "del", probe], capture_output=True, check=False)
    _NETEM["ok"] = ok
    return ok
