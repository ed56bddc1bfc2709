"""Write an F10 fabric's plans (controllers/f10/routes.py) into p4src/f10.p4 over P4Runtime.

Everything here is a table entry, an action-profile member or group, a
multicast group or a clone session: P4Runtime objects that BMv2's server
implements too.  Per switch, after the primary routes (written by
:class:`~testbed.controllers.fabric_programmer.FabricProgrammer`):

* ``MyIngress.f10_fabric_ports`` / ``MyEgress.f10_host_ports``: port roles;
* multicast group :data:`PORTS_GROUP`: every fabric port (the trigger's copies);
* clone session :data:`REPORT_SESSION`: the CPU port (detector reports as PacketIn);
* ``MyIngress.f10_backup``: ``(destination /32, primary port)`` -> a group of
  backup members (``set_nhop`` up, ``detour`` down);
* ``MyIngress.f10_detour_up``: ingress parent port -> the other parents;
  ``MyIngress.f10_detour_down``: the children.

Members are written before the groups naming them, and groups before the
entries naming the groups, each set in one Write batch (P4Runtime does not
order the updates of one batch).
"""
from testbed.controllers.f10.routes import PHASE_DOWN, check_loop_free, plan_fabric
from testbed.topologies.graph import host_ip

PORTS_GROUP = 1  # F10_PORTS_GROUP of p4src/include/f10_detector.p4
REPORT_SESSION = 100  # F10_REPORT_SESSION
BACKUP_SELECTOR = "MyIngress.backup_selector"
UP_SELECTOR = "MyIngress.detour_up_selector"
DOWN_SELECTOR = "MyIngress.detour_down_selector"


def program_switch(programmer, switch, plan, cpu_port):
    """Write one switch's F10 objects.

    Args:
        programmer: a connected :class:`~testbed.controllers.fabric_programmer.FabricProgrammer`
            (its primary sessions, graph and next-hop parameters are used).
        switch: the switch's name.
        plan: its :class:`~testbed.controllers.f10.routes.SwitchPlan`.
        cpu_port: the switch's CPU port (the report session's replica).

    Returns:
        int: the number of updates written.
    """
    client = programmer.clients[switch]
    graph = programmer.graph
    members = {}  # (profile, action, params tuple) -> member id
    member_updates, group_updates, entry_updates = [], [], []

    def member(profile, action, params):
        key = (profile, action, tuple(sorted(params.items())))
        if key not in members:
            members[key] = len([k for k in members if k[0] == profile]) + 1
            member_updates.append((profile, members[key], action, params))
        return members[key]

    groups = {}

    def group(profile, member_ids):
        key = (profile, tuple(sorted(member_ids)))
        if key not in groups:
            groups[key] = len([k for k in groups if k[0] == profile]) + 1
            group_updates.append((profile, groups[key], list(key[1])))
        return groups[key]

    for (host, primary), backups in sorted(plan.backups.items()):
        ids = []
        for backup in backups:
            params = programmer.next_hop_params(switch, backup.port)
            if backup.phase:
                ids.append(member(BACKUP_SELECTOR, "MyIngress.detour",
                                  dict(params, phase=backup.phase, scheme=backup.scheme)))
            else:
                ids.append(member(BACKUP_SELECTOR, "MyIngress.set_nhop", params))
        entry_updates.append(("MyIngress.f10_backup",
                              {"hdr.ipv4.dstAddr": (host_ip(graph, host), 32), "meta.f10.primary_port": primary},
                              group(BACKUP_SELECTOR, ids)))
    for parent_port, others in sorted(plan.detour_up.items()):
        ids = [member(UP_SELECTOR, "MyIngress.set_nhop", programmer.next_hop_params(switch, port)) for port in others]
        entry_updates.append(("MyIngress.f10_detour_up", {"standard_metadata.ingress_port": parent_port},
                              group(UP_SELECTOR, ids)))
    if plan.detour_down:
        ids = [member(DOWN_SELECTOR, "MyIngress.set_nhop", programmer.next_hop_params(switch, port))
               for port in plan.detour_down]
        entry_updates.append(("MyIngress.f10_detour_down", {"hdr.f10_detour.phase": PHASE_DOWN},
                              group(DOWN_SELECTOR, ids)))
    with client.batch():
        for port in plan.fabric_ports:
            client.insert_table_entry("MyIngress.f10_fabric_ports", {"standard_metadata.ingress_port": port},
                                      "MyIngress.fabric_port")
        for port in plan.host_ports:
            client.insert_table_entry("MyEgress.f10_host_ports", {"standard_metadata.egress_port": port},
                                      "MyEgress.to_host")
        if plan.fabric_ports:
            client.insert_multicast_group(PORTS_GROUP, plan.fabric_ports)
        client.insert_clone_session(REPORT_SESSION, [cpu_port])
        for profile, member_id, action, params in member_updates:
            client.insert_member(profile, member_id, action, params)
    with client.batch():
        for profile, group_id, member_ids in group_updates:
            client.insert_group(profile, group_id, [(m, 1) for m in member_ids])
    with client.batch():
        for table, match, group_id in entry_updates:
            client.insert_table_entry(table, match, group_id=group_id)
    return (len(plan.fabric_ports) + len(plan.host_ports) + 2 + len(member_updates) + len(group_updates)
            + len(entry_updates))


def program_fabric(programmer, cpu_ports, plans=None):
    """Write every switch's F10 objects (after the pipeline and the primary routes).

    Args:
        programmer: a connected FabricProgrammer that has pushed f10.p4 and the routes.
        cpu_ports: ``{switch: CPU port}``.
        plans: ``{switch: SwitchPlan}`` (default: :func:`~testbed.controllers.f10.routes.plan_fabric`).

    Returns:
        int: updates written.

    Raises:
        ParameterError: the backups would loop (:func:`~testbed.controllers.f10.routes.check_loop_free`);
            nothing is written then.
    """
    plans = plan_fabric(programmer.graph) if plans is None else plans
    check_loop_free(programmer.graph, plans)
    return sum(program_switch(programmer, switch, plans[switch], cpu_ports[switch])
               for switch in sorted(programmer.clients))
