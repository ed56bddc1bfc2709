"""The F10 plans the controller installs (backups, detour groups, port roles) are those of a recorded snapshot.

Recorded for AB and standard FatTrees: k = 4 in full (tests/f10/data/f10_plans_*.json,
so a change shows switch by switch), k = 4, 6, 8 as SHA-256 digests of the same
canonical JSON.  A change of the installed scheme has to change them on purpose.
"""
import hashlib
import json
import os

import pytest

from testbed.controllers.f10.routes import plan_fabric
from testbed.topologies.ab_fattree import ABFatTree
from testbed.topologies.fattree import FatTree

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")

DIGESTS = {
    (ABFatTree, 4): "d2c653653462ecb94d5e6d311cfb4117d028f189140421d180f73f378a21f3bf",
    (ABFatTree, 6): "e788e1c3c23784009d3dad3e2f6d1a151605bca387da7a0cfda61d86a50d1f07",
    (ABFatTree, 8): "405f3c143bbf6116172482127889e82165c03d78f12f410ddf67e9c23abd95d9",
    (FatTree, 4): "a0ed3574026836326f5103751a74e58d3a9bab3c905319fe06dfba4fb666c606",
    (FatTree, 6): "fd19b3e67aa6df8636f5438f748c65b00b98b464404e6bfcbf59def7398055b8",
    (FatTree, 8): "d2544a65c41147cb9d583f386cc575bfdf928f2954c44924a57afb463cc73d97",
}


def canonical(plans):
    """The plans as JSON-ready data, every collection sorted."""
    return {switch: {"fabric_ports": plan.fabric_ports, "host_ports": plan.host_ports,
                     "parent_ports": sorted(plan.parent_ports.items()),
                     "child_ports": sorted(plan.child_ports.items()),
                     "detour_up": sorted(plan.detour_up.items()), "detour_down": plan.detour_down,
                     "backups": sorted([host, port, [[b.port, b.neighbor, b.phase, b.scheme] for b in backups]]
                                       for (host, port), backups in plan.backups.items())}
            for switch, plan in sorted(plans.items())}


def compact(data):
    return json.dumps(data, sort_keys=True, separators=(",", ":"))


@pytest.mark.parametrize("cls", [ABFatTree, FatTree], ids=lambda cls: cls.__name__)
def test_k4_plans_equal_the_snapshot_switch_by_switch(cls):
    with open(os.path.join(DATA, f"f10_plans_{cls.__name__.lower()}-4.json")) as handle:
        expected = json.load(handle)
    got = json.loads(compact(canonical(plan_fabric(cls(k=4).graph()))))
    assert sorted(got) == sorted(expected)
    for switch in expected:
        assert got[switch] == expected[switch], switch


@pytest.mark.parametrize("cls, k", sorted(DIGESTS, key=lambda item: (item[0].__name__, item[1])),
                         ids=lambda value: value.__name__ if isinstance(value, type) else f"k{value}")
def test_plans_have_the_snapshot_digest(cls, k):
    text = compact(canonical(plan_fabric(cls(k=k).graph())))
    assert hashlib.sha256(text.encode()).hexdigest() == DIGESTS[(cls, k)]
