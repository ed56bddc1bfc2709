"""The common base of every topology generator: a Mininet ``Topo`` that also exports itself.

A generator subclasses :class:`FabricTopo`, validates its parameters in
``__init__`` and builds nodes and links in ``build()`` through the helpers
:meth:`FabricTopo.add_fabric_switch`, :meth:`FabricTopo.add_fabric_host` and
:meth:`FabricTopo.add_fabric_link`, which enforce the conventions every other
part of the testbed relies on:

* every switch carries the options ``role``, ``level`` and a unique ``dpid``
  (16 hex digits, numbered in build order from 1);
* every host carries ``role="host"``, ``level=0``, ``ip`` ("10.x.y.z/8"),
  ``mac`` (derived from the IP: ``00:00:0a:xx:yy:zz``) and ``switch`` (the
  switch it is attached to);
* every link carries explicit ``port1``/``port2`` (the Mininet port numbers,
  which are also the P4 switch port numbers; hosts use port 0) and
  ``capacity_mbps``; links are added lower tier first (``a`` is the lower end);
* node names are at most 8 characters and interface names ``<node>-eth<port>``
  at most 15, the Linux limit;
* switch ports are numbered 1..:data:`MAX_SWITCH_PORT` (254): v1model ports
  are 9 bits with 511 BMv2's drop port, and the fabric programs' CPU port is
  255 (p4src/include/headers.p4);
* a topology has at most :data:`MAX_NODES` nodes (switches and hosts).

Generators check the port and node limits from their parameters before
building anything (:func:`check_multiplier`, :func:`check_node_count`), so an
absurd size is refused at once with the allowed range; the building helpers
enforce the same limits as a last guard.

Levels count tiers from the hosts up: hosts 0, leaf/edge/RDSW 1, spine/agg/FDSW
2, core/SDSW 3 (a FatTree with more levels continues upwards).

All hosts live in one flat 10.0.0.0/8 network; each generator documents how it
lays out addresses inside it so switches can route by prefix.
"""
import ipaddress
import math
from collections import Counter, OrderedDict

import networkx as nx
from mininet.topo import Topo

from testbed.errors import ParameterError

MAX_NODE_NAME = 8
MAX_INTF_NAME = 15  # Linux IFNAMSIZ - 1
MAX_SWITCH_PORT = 254
MAX_NODES = 200000
PORT_LIMIT_REASON = (f"switch ports are 1..{MAX_SWITCH_PORT} (9-bit v1model ports, 255 is the programs' "
                     "CPU port)")
HOST_NETWORK = ipaddress.IPv4Network("10.0.0.0/8")
DEFAULT_HOST_LINK_MBPS = 100.0
DEFAULT_FABRIC_LINK_MBPS = 100.0

# Node options that are Mininet plumbing rather than topology facts.
_INTERNAL_NODE_OPTS = ("isSwitch",)


def mac_from_ip(ip_int):
    """Return the MAC address derived from an IPv4 address.

    Args:
        ip_int: the IPv4 address as an integer (or an ``ipaddress`` object).

    Returns:
        str: ``"00:00:0a:xx:yy:zz"`` with the four address bytes in the last four places.
    """
    value = int(ip_int)
    octets = [0, 0] + [(value >> shift) & 0xFF for shift in (24, 16, 8, 0)]
    return ":".join(f"{octet:02x}" for octet in octets)


def leaf_host_address(leaf_index, host_index):
    """Address of host ``host_index`` (0-based) below leaf-like switch ``leaf_index`` (0-based).

    The layout is ``10.<leaf high byte>.<leaf low byte>.<host + 1>``, so every
    leaf owns the /24 ``10.<hi>.<lo>.0/24`` (see :func:`leaf_prefix`).

    Args:
        leaf_index: global index of the leaf (0..65535).
        host_index: index of the host on that leaf (0..253).

    Returns:
        int: the IPv4 address as an integer.

    Raises:
        ParameterError: if an index does not fit the layout.
    """
    if not 0 <= leaf_index <= 0xFFFF:
        raise ParameterError("leaves", leaf_index + 1, "at most 65536 leaf-like switches",
                             "the 10.<hi>.<lo>.<host> addressing encodes the leaf in 16 bits")
    if not 0 <= host_index <= 253:
        raise ParameterError("hosts_per_leaf", host_index + 1, "1..254 hosts per leaf-like switch",
                             "the last address byte encodes the host as 1..254")
    return int(HOST_NETWORK.network_address) | (leaf_index << 8) | (host_index + 1)


def leaf_prefix(leaf_index):
    """Return the /24 (CIDR text) that :func:`leaf_host_address` gives leaf ``leaf_index``."""
    base = int(HOST_NETWORK.network_address) | (leaf_index << 8)
    return f"{ipaddress.IPv4Address(base)}/24"


def check_int(field, value, minimum=None, maximum=None, allowed=None):
    """Validate an integer parameter.

    Args:
        field: parameter name used in the error.
        value: the value given.
        minimum: smallest allowed value (inclusive), or None.
        maximum: largest allowed value (inclusive), or None.
        allowed: text describing the allowed values (built from the bounds when None).

    Returns:
        int: the value.

    Raises:
        ParameterError: if the value is not an integer within the bounds.
    """
    if allowed is None:
        if minimum is not None and maximum is not None:
            allowed = f"an integer from {minimum} to {maximum}"
        elif minimum is not None:
            allowed = f"an integer >= {minimum}"
        elif maximum is not None:
            allowed = f"an integer <= {maximum}"
        else:
            allowed = "an integer"
    if isinstance(value, bool) or not isinstance(value, int):
        raise ParameterError(field, value, allowed)
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        raise ParameterError(field, value, allowed)
    return value


def check_positive_number(field, value):
    """Validate a capacity-like parameter: a finite number > 0; returns it as float.

    Raises:
        ParameterError: if the value is not a finite positive number (NaN and infinity are refused).
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
        raise ParameterError(field, value, "a finite number > 0")
    return float(value)


def check_multiplier(field, value, demands):
    """Validate a count of parallel links against the ports of the switches it multiplies.

    Args:
        field: parameter name used in the error.
        value: the count given.
        demands: ``[(switch, other_ports, ports_per_unit)]``: a switch (text for the
            message) uses ``other_ports + ports_per_unit * value`` ports.

    Returns:
        int: the value.

    Raises:
        ParameterError: not an integer >= 1, or some switch would need more than
            :data:`MAX_SWITCH_PORT` ports (the message gives the allowed range).
    """
    check_int(field, value, minimum=1)
    largest, binding = None, None
    for switch, other_ports, per_unit in demands:
        if per_unit > 0:
            fits = (MAX_SWITCH_PORT - other_ports) // per_unit
            if largest is None or fits < largest:
                largest, binding = fits, (switch, other_ports, per_unit)
    if largest is not None and value > largest:
        switch, other_ports, per_unit = binding
        allowed = f"an integer from 1 to {largest}" if largest >= 1 else \
            "none with the other parameters (they already fill the switch ports)"
        raise ParameterError(field, value, allowed,
                             f"{switch} would use {other_ports + per_unit * value} ports; {PORT_LIMIT_REASON}")
    return value


def check_switch_ports(field, value, switch, ports):
    """Refuse a parameter that makes ``switch`` use more than :data:`MAX_SWITCH_PORT` ports.

    Raises:
        ParameterError: naming ``field`` and ``value``.
    """
    if ports > MAX_SWITCH_PORT:
        raise ParameterError(field, value, f"a value that gives every switch at most {MAX_SWITCH_PORT} ports",
                             f"{switch} would use {ports} ports; {PORT_LIMIT_REASON}")


def check_node_count(field, value, nodes):
    """Refuse a topology of more than :data:`MAX_NODES` nodes before it is built.

    Args:
        field: the parameter blamed (the one that sizes the topology most).
        value: its value.
        nodes: the number of switches and hosts the parameters give.

    Raises:
        ParameterError: naming ``field``.
    """
    if nodes > MAX_NODES:
        raise ParameterError(field, value, f"a value that gives at most {MAX_NODES} nodes",
                             f"the parameters give {nodes} switches and hosts")


def check_ports(field, value):
    """Validate an optional port-count parameter (None means unlimited).

    Raises:
        ParameterError: if the value is neither None nor an integer >= 1.
    """
    if value is None:
        return None
    return check_int(field, value, minimum=1, allowed="an integer >= 1 (or unset for no limit)")


class FabricTopo(Topo):
    """A Mininet topology that also describes itself as a graph, a dict and a summary.

    Subclasses set :attr:`kind`, list their constructor parameters in
    :attr:`PARAMETERS` (for the registry and the CLI), validate in ``__init__``,
    store the normalized values in ``self.params`` and then call
    ``FabricTopo.__init__(self)``, which runs ``build()``.

    Attributes:
        kind: the registry name of the generator (``"fattree"`` ...).
        params: the normalized constructor parameters (JSON-serializable).
    """

    kind = None
    #: Ordered parameter descriptions: (name, default, help text).
    PARAMETERS = ()

    def __init__(self, **topo_opts):
        unknown = sorted(set(topo_opts) - {"hopts", "sopts", "lopts"})
        if unknown:
            allowed = [name for name, _default, _help in self.PARAMETERS]
            raise ParameterError(unknown[0], topo_opts[unknown[0]],
                                 f"a parameter of {self.kind}: " + ", ".join(allowed), "unknown parameter")
        self._next_dpid = 1
        self._used_ports = {}
        self._node_order = []
        self._link_order = []
        super().__init__(**topo_opts)

    # ----------------------------------------------------------------- building
    def add_fabric_switch(self, name, role, level, **attrs):
        """Add a switch with its role, level and the next free dpid.

        Args:
            name: node name (at most 8 characters).
            role: ``"leaf"``, ``"spine"``, ``"edge"``, ``"agg"``, ``"core"``, ``"rdsw"``, ...
            level: tier above the hosts (1 = the tier the hosts attach to).
            **attrs: further node attributes (kind specific, JSON-serializable).

        Returns:
            str: the name.

        Raises:
            ParameterError: if the name is too long for Mininet's interface names.
        """
        self._check_name(name)
        self._count_node(name)
        dpid = f"{self._next_dpid:016x}"
        self._next_dpid += 1
        self._node_order.append(name)
        self._used_ports[name] = set()
        return self.addSwitch(name, role=role, level=level, dpid=dpid, **attrs)

    def add_fabric_host(self, name, ip_int, prefix_len=8, **attrs):
        """Add a host with its address in 10.0.0.0/8 and the MAC derived from it.

        Args:
            name: node name (at most 8 characters).
            ip_int: the IPv4 address as an integer.
            prefix_len: prefix length written into ``ip`` (the flat /8).
            **attrs: further node attributes.

        Returns:
            str: the name.
        """
        self._check_name(name)
        self._count_node(name)
        address = ipaddress.IPv4Address(ip_int)
        self._node_order.append(name)
        self._used_ports[name] = set()
        return self.addHost(name, role="host", level=0, ip=f"{address}/{prefix_len}",
                            mac=mac_from_ip(address), **attrs)

    def add_fabric_link(self, a, a_port, b, b_port, capacity_mbps):
        """Add one link with explicit port numbers on both ends.

        Args:
            a: lower-tier end (a host or the lower switch).
            a_port: port number on ``a`` (0 for hosts).
            b: upper-tier end.
            b_port: port number on ``b``.
            capacity_mbps: link capacity in Mbit/s.

        Returns:
            the Mininet link key (distinguishes parallel links).

        Raises:
            ParameterError: if a port is used twice or its interface name is too long.
        """
        for node, port in ((a, a_port), (b, b_port)):
            if port in self._used_ports[node]:
                raise ParameterError("ports", f"{node}:{port}", "each port used by one link only",
                                     "generator bug: port assigned twice")
            if port > MAX_SWITCH_PORT and self.isSwitch(node):
                raise ParameterError("size", f"{node}:{port}", f"switch ports 1..{MAX_SWITCH_PORT}",
                                     f"the topology needs more ports on {node}; {PORT_LIMIT_REASON}")
            intf = f"{node}-eth{port}"
            if len(intf) > MAX_INTF_NAME:
                raise ParameterError("size", intf, f"interface names of at most {MAX_INTF_NAME} characters",
                                     "the topology is too large for Mininet interface names")
            self._used_ports[node].add(port)
        if self.nodeInfo(a).get("role") == "host":
            self.nodeInfo(a)["switch"] = b  # every host records the switch it hangs off
        key = self.addLink(a, b, port1=a_port, port2=b_port, capacity_mbps=float(capacity_mbps))
        self._link_order.append((a, b, key))
        return key

    def _count_node(self, name):
        """Raise ParameterError when adding ``name`` would exceed :data:`MAX_NODES`."""
        if len(self._node_order) >= MAX_NODES:
            raise ParameterError("size", name, f"at most {MAX_NODES} nodes (switches and hosts)",
                                 "the topology is too large to emulate")

    @staticmethod
    def _check_name(name):
        """Raise ParameterError when a node name would make interface names too long."""
        if len(name) > MAX_NODE_NAME:
            raise ParameterError("size", name, f"node names of at most {MAX_NODE_NAME} characters",
                                 "the topology is too large for Mininet interface names")

    # ---------------------------------------------------------------- exporting
    def node_attrs(self, name):
        """Return the public attributes of node ``name`` (role, level, ip, mac, kind specific ...)."""
        info = self.nodeInfo(name)
        return {key: value for key, value in info.items() if key not in _INTERNAL_NODE_OPTS}

    def node_names(self):
        """Return node names in build order (switches and hosts as they were added)."""
        return list(self._node_order)

    def link_records(self):
        """Return every link as a dict ``{"a", "a_port", "b", "b_port", "capacity_mbps", "key"}`` in build order."""
        records = []
        for a, b, key in self._link_order:
            info = self.linkInfo(a, b, key)
            if info["node1"] == a:
                a_port, b_port = info["port1"], info["port2"]
            else:  # pragma: no cover - links are always stored as added
                a_port, b_port = info["port2"], info["port1"]
            records.append({"a": a, "a_port": a_port, "b": b, "b_port": b_port,
                            "capacity_mbps": info["capacity_mbps"], "key": key})
        return records

    def graph(self):
        """Return the topology as a networkx multigraph.

        Returns:
            networkx.MultiGraph: nodes carry :meth:`node_attrs`; edges carry
            ``a``, ``a_port``, ``b``, ``b_port``, ``capacity_mbps``; the edge key
            is the Mininet link key, so parallel links stay distinct.
        """
        graph = nx.MultiGraph(kind=self.kind, params=dict(self.params))
        for name in self._node_order:
            graph.add_node(name, **self.node_attrs(name))
        for record in self.link_records():
            attrs = {key: value for key, value in record.items() if key != "key"}
            graph.add_edge(record["a"], record["b"], key=record["key"], **attrs)
        return graph

    def to_dict(self):
        """Return the stable JSON form: ``{"kind", "params", "nodes", "links"}``.

        Nodes are ``{"name", "role", "level", ...}`` (hosts have role ``"host"``
        plus ``ip`` and ``mac``); links are ``{"a", "a_port", "b", "b_port",
        "capacity_mbps"}``.  Tuples become lists.
        """
        nodes = []
        for name in self._node_order:
            attrs = self.node_attrs(name)
            entry = OrderedDict(name=name, role=attrs.pop("role"), level=attrs.pop("level"))
            for key in sorted(attrs):
                entry[key] = _jsonable(attrs[key])
            nodes.append(entry)
        links = [OrderedDict((key, record[key]) for key in ("a", "a_port", "b", "b_port", "capacity_mbps"))
                 for record in self.link_records()]
        return OrderedDict(kind=self.kind, params=_jsonable(dict(self.params)), nodes=nodes, links=links)

    def ports_used(self, name):
        """Return the number of ports (links) node ``name`` uses."""
        return len(self._used_ports[name])

    def summary(self):
        """Return ordered ``(label, value)`` rows describing the topology for a table.

        Rows: kind, parameters, node counts per role, link counts per tier pair,
        capacities, the largest number of ports used per switch role, then any
        rows the subclass adds through :meth:`extra_summary`.
        """
        rows = [("kind", self.kind),
                ("parameters", " ".join(f"{key}={_format_param(value)}" for key, value in self.params.items()
                                        if value is not None))]
        roles = Counter(self.nodeInfo(name)["role"] for name in self._node_order)
        role_order = [role for role in self._roles_in_order() if role in roles]
        for role in role_order:
            rows.append((f"{role} nodes", roles[role]))
        records = self.link_records()
        pairs = Counter()
        capacity = Counter()
        for record in records:
            pair = f"{self.nodeInfo(record['a'])['role']}-{self.nodeInfo(record['b'])['role']}"
            pairs[pair] += 1
            capacity[pair] += record["capacity_mbps"]
        rows.append(("links", len(records)))
        for pair in pairs:
            rows.append((f"{pair} links", pairs[pair]))
        for pair in pairs:
            rows.append((f"{pair} capacity (Mbps)", _format_param(capacity[pair])))
        for role in role_order:
            if role == "host":
                continue
            used = max(self.ports_used(name) for name in self._node_order if self.nodeInfo(name)["role"] == role)
            rows.append((f"max ports used per {role}", used))
        rows.extend(self.extra_summary())
        return rows

    def extra_summary(self):
        """Kind-specific summary rows (override); the base adds none."""
        return []

    def _roles_in_order(self):
        """Roles ordered from the top tier down to hosts."""
        levels = {}
        for name in self._node_order:
            info = self.nodeInfo(name)
            levels.setdefault(info["role"], info["level"])
        return sorted(levels, key=lambda role: (-levels[role], role))

    def __repr__(self):
        params = ", ".join(f"{key}={value!r}" for key, value in getattr(self, "params", {}).items())
        return f"{type(self).__name__}({params})"


def _jsonable(value):
    """Convert tuples (and nested containers) to lists so JSON output is stable."""
    if isinstance(value, (list, tuple)):
        return [_jsonable(item) for item in value]
    if isinstance(value, dict):
        return {key: _jsonable(item) for key, item in value.items()}
    return value


def _format_param(value):
    """Compact text for a parameter value in a summary (integers without '.0', lists as the CLI takes them)."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (list, tuple)):
        if value and isinstance(value[0], (list, tuple)):  # matrices as the CLI takes them: 1,2;2,1
            return ";".join(",".join(_format_param(x) for x in row) for row in value)
        return ",".join(_format_param(item) for item in value)
    return str(value)
