"""Program a fabric of P4 switches over P4Runtime: pipeline, host routes, ECMP groups.

The routing state every load-balancing program shares: an LPM table on the
IPv4 destination whose entries either name one next hop (``set_nhop``) or an
action-selector group of next hops (one member per egress port).  Routes are
the equal-cost shortest paths of :mod:`testbed.controllers.routing`; after a
failure :meth:`FabricProgrammer.reroute` recomputes the destinations the failure
touches and writes only the difference.

Writes: every switch is programmed in its own worker thread (a session is used
by one thread at a time), and a switch's updates go out in few Write requests:
first the new action-profile members, then the new groups, then the table
entries.  P4Runtime lets a server apply the updates of one Write in any order
(spec, "Batching and Ordering of Updates"), so what must exist before an update
refers to it goes in an earlier Write.
"""
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from testbed.controllers.routing import HostRoutes
from testbed.p4runtime.client import P4RuntimeClient, P4RuntimeClientError
from testbed.topologies.graph import is_host, port_toward

#: most updates in one Write request (about 100 bytes each, far below gRPC's 4 MB limit)
MAX_UPDATES_PER_WRITE = 1000
#: most switches programmed at the same time
MAX_CONCURRENT_SWITCHES = 16
#: most pipelines pushed at the same time: each switch compiles its program, which is CPU work,
#: so more at once than there are cores only makes every push slower (and may time it out)
MAX_CONCURRENT_PIPELINES = os.cpu_count() or 1


@dataclass(frozen=True)
class RoutingTables:
    """Names of the routing objects in a program (defaults: p4src/l3_ecmp.p4)."""

    table: str = "MyIngress.ipv4_lpm"
    action: str = "MyIngress.set_nhop"
    selector: str = "MyIngress.ecmp_selector"
    port_param: str = "port"
    dmac_param: str = "dmac"
    smac_param: str = "smac"


def switch_mac(device_id):
    """The MAC a switch uses as source address: locally administered, from its device id."""
    return "02:fb:%02x:%02x:%02x:%02x" % tuple((device_id >> shift) & 0xFF for shift in (24, 16, 8, 0))


class _WriteFailed(Exception):
    """A switch's Write failed; the updates before ``failed`` index were recorded as applied."""


class FabricProgrammer:
    """Pushes the pipeline and the routes of a whole fabric, and keeps them up to date.

    Args:
        graph: the topology multigraph (``topo.graph()``).
        switches: ``{name: {"grpc": "host:port", "device_id": int}}`` (the
            ``switches`` of the running network's description).
        pipeline: a :class:`testbed.targets.PipelineConfig`.
        tables: the routing object names of the program.
        election_id: P4Runtime election id of this controller.
        progress: ``callable(step, done, total)`` told each time a switch finished a step
            of :meth:`push_pipeline` (``"pipelines pushed"``, counted in switches) or
            :meth:`install_routes` (``"route entries written"``, counted in entries); it is
            called from the worker threads.  None: nothing is told.

    Attributes:
        clients: ``{switch: P4RuntimeClient}`` once :meth:`connect` ran.
        failed_links: the links currently treated as down.
        unreachable: ``{switch: error message}`` of the switches the last
            route update could not write (a crashed switch does not stop the
            others from being updated).
    """

    def __init__(self, graph, switches, pipeline, tables=RoutingTables(), election_id=(0, 1), progress=None):
        self.graph = graph
        self.progress = progress
        self.switches = switches
        self.pipeline = pipeline
        self.tables = tables
        self.election_id = election_id
        self.clients = {}
        self.failed_links = set()
        self._routes = None  # HostRoutes once routes were computed
        self._installed = {}  # switch -> {ip: (kind, value)} as written
        self._groups = {}  # switch -> {ports tuple: group id, "_members": {port: member id}}
        self._neighbors = {}  # switch -> {port: neighbour}
        self._exclusions = {}  # switch -> {ip: ports the routes must not use} (exclude_next_hops)
        self.unreachable = {}

    # -- concurrency --------------------------------------------------------------------
    @staticmethod
    def _for_each(names, work, workers=MAX_CONCURRENT_SWITCHES, done=None):
        """Run ``work(name)`` for every name in at most ``workers`` threads.

        ``done(name, result)`` (if given) is called in the worker after each success.
        When the calling thread is interrupted (Ctrl-C), names not started are dropped.

        Returns:
            dict: ``{name: (result, None) | (None, exception)}``.
        """
        names = sorted(names)
        outcomes = {}
        if not names:
            return outcomes

        def run(name):
            try:
                result = work(name)
            except Exception as error:  # noqa: BLE001 - reported per switch to the caller
                return name, (None, error)
            if done is not None:
                done(name, result)
            return name, (result, None)

        pool = ThreadPoolExecutor(max_workers=min(workers, len(names)), thread_name_prefix="fabric-programmer")
        try:
            outcomes.update(pool.map(run, names))
        except BaseException:
            pool.shutdown(wait=True, cancel_futures=True)
            raise
        pool.shutdown(wait=True)
        return outcomes

    def _reporter(self, step, total):
        """A ``done(name, amount)`` callback that tells :attr:`progress` how far ``step`` is (thread-safe)."""
        if self.progress is None:
            return None
        lock, state = threading.Lock(), {"done": 0}

        def done(_name, amount):
            with lock:
                state["done"] += amount
                self.progress(step, state["done"], total)
        return done

    @staticmethod
    def _raise_first(outcomes):
        """Raise the first (by switch name) exception among ``_for_each`` outcomes."""
        for name in sorted(outcomes):
            error = outcomes[name][1]
            if error is not None:
                raise error

    # -- session ------------------------------------------------------------------------
    def connect(self):
        """Open a primary P4Runtime session to every switch (all at once).

        Raises:
            P4RuntimeClientError: the first switch (by name) that could not be reached;
                the sessions that did open are kept in :attr:`clients`.
        """
        def open_session(name):
            info = self.switches[name]
            return P4RuntimeClient(info["grpc"], device_id=info["device_id"], election_id=self.election_id)

        outcomes = self._for_each(self.switches, open_session)
        for name, (client, _) in sorted(outcomes.items()):
            if client is not None:
                self.clients[name] = client
        self._raise_first(outcomes)

    def close(self):
        """Close every session."""
        for client in self.clients.values():
            client.close()
        self.clients = {}

    def forget_switch(self, switch):
        """Stop programming ``switch`` (it crashed): close its session, drop it from updates."""
        client = self.clients.pop(switch, None)
        self.switches = {name: info for name, info in self.switches.items() if name != switch}
        self._installed.pop(switch, None)
        self._groups.pop(switch, None)
        self.unreachable.pop(switch, None)
        if client is not None:
            try:
                client.close()
            except Exception:  # noqa: BLE001 - the switch is gone; closing its channel may fail too
                pass

    def __enter__(self):
        self.connect()
        return self

    def __exit__(self, *exc_info):
        self.close()
        return False

    # -- programming --------------------------------------------------------------------
    def push_pipeline(self):
        """SetForwardingPipelineConfig on every switch (as many at once as there are cores).

        Raises:
            P4RuntimeClientError: the first switch (by name) that refused it.
        """
        config = self.pipeline

        def push(name):
            self.clients[name].set_pipeline(p4info=config.p4info, device_config=config.device_config,
                                            target=config.target)

        reporter = self._reporter("pipelines pushed", len(self.clients))
        self._raise_first(self._for_each(self.clients, push, MAX_CONCURRENT_PIPELINES,
                                         done=reporter and (lambda name, _result: reporter(name, 1))))

    def _neighbor(self, switch, port):
        """The node at the other end of ``switch``'s ``port`` (None if no link uses it)."""
        ports = self._neighbors.get(switch)
        if ports is None:
            ports = {port_toward(data, switch): other for _, other, data in self.graph.edges(switch, data=True)}
            self._neighbors[switch] = ports
        return ports.get(port)

    def next_hop_params(self, switch, port):
        """Action parameters of the next hop out of ``switch`` ``port``."""
        neighbor, neighbor_mac = self._neighbor(switch, port), None
        if neighbor is not None and is_host(self.graph, neighbor):
            neighbor_mac = self.graph.nodes[neighbor]["mac"]
        elif neighbor is not None:
            neighbor_mac = switch_mac(self.switches[neighbor]["device_id"])
        return {self.tables.dmac_param: neighbor_mac or "00:00:00:00:00:00",
                self.tables.smac_param: switch_mac(self.switches[switch]["device_id"]),
                self.tables.port_param: port}

    @staticmethod
    def _route(ports):
        """``("port", p)`` for one next hop, ``("group", ports)`` for several."""
        return ("port", ports[0]) if len(ports) == 1 else ("group", tuple(ports))

    def _desired(self, switch, ips=None):
        """``{ip: route}`` of ``switch`` for ``ips`` (all its routes when None), exclusions applied."""
        by_ip = self._routes.routes.get(switch, {})
        excluded = self._exclusions.get(switch, {})

        def route(ip):
            ports = by_ip[ip]
            kept = [port for port in ports if port not in excluded.get(ip, ())]
            return self._route(kept or ports)  # never exclude every next hop: that is a black hole

        if ips is None:
            return {ip: route(ip) for ip in by_ip}
        return {ip: route(ip) for ip in ips if ip in by_ip}

    def _plan(self, switch, desired, ips):
        """The updates that make ``switch``'s routes for ``ips`` equal ``desired``.

        Returns:
            tuple: (new member ports, new groups as port tuples, [(ip, route or None)])
            where a route of None deletes the entry.
        """
        installed = self._installed.get(switch, {})
        groups = self._groups.get(switch, {})
        members = groups.get("_members", {})
        entries, new_members, new_groups = [], [], []
        for ip in sorted(ips):
            route = desired.get(ip)
            if installed.get(ip) == route:
                continue
            entries.append((ip, route))
            if route is None:
                continue
            kind, value = route
            ports = (value,) if kind == "port" else value
            for port in ports:
                if port not in members and port not in new_members:
                    new_members.append(port)
            if kind == "group" and value not in groups and value not in new_groups:
                new_groups.append(value)
        return new_members, new_groups, entries

    def _write(self, client, updates, record):
        """Send ``updates`` (callables writing one update each) in batches; ``record(i)`` each applied.

        Raises:
            _WriteFailed: a Write failed; the updates it applied were recorded.
        """
        for start in range(0, len(updates), MAX_UPDATES_PER_WRITE):
            chunk = updates[start:start + MAX_UPDATES_PER_WRITE]
            try:
                with client.batch():
                    for update in chunk:
                        update()
            except P4RuntimeClientError as error:
                # the failed updates are listed by position; the others were applied
                # (a call that failed as a whole, such as an unreachable switch, lists none)
                failed = {index for index, _code, _message in error.errors}
                for index in range(len(chunk)):
                    if error.errors and index not in failed:
                        record(start + index)
                raise _WriteFailed(str(error)) from error
            for index in range(len(chunk)):
                record(start + index)

    def _apply_switch(self, switch, desired, ips):
        """Write ``switch``'s routes for ``ips``; returns the table entries written.

        Raises:
            _WriteFailed: a Write failed (what was applied is recorded).
        """
        client = self.clients[switch]
        tables = self.tables
        groups = self._groups.setdefault(switch, {})
        members = groups.setdefault("_members", {})
        installed = self._installed.setdefault(switch, {})
        new_members, new_groups, entries = self._plan(switch, desired, ips)

        def member_update(port):
            return lambda: client.insert_member(tables.selector, port + 1, tables.action,
                                                self.next_hop_params(switch, port))
        self._write(client, [member_update(port) for port in new_members],
                    lambda i: members.__setitem__(new_members[i], new_members[i] + 1))

        next_id = max((gid for key, gid in groups.items() if key != "_members"), default=0) + 1
        group_ids = {ports: next_id + offset for offset, ports in enumerate(new_groups)}

        def group_update(ports):
            return lambda: client.insert_group(tables.selector, group_ids[ports],
                                               [(members[port], 1) for port in ports])
        self._write(client, [group_update(ports) for ports in new_groups],
                    lambda i: groups.__setitem__(new_groups[i], group_ids[new_groups[i]]))

        def entry_update(ip, route):
            match = {"hdr.ipv4.dstAddr": (ip, 32)}
            if route is None:
                return lambda: client.delete_table_entry(tables.table, match)
            write = client.modify_table_entry if ip in installed else client.insert_table_entry
            kind, value = route
            if kind == "port":
                return lambda: write(tables.table, match, member_id=members[value])
            return lambda: write(tables.table, match, group_id=groups[value])

        def record_entry(index):
            ip, route = entries[index]
            if route is None:
                installed.pop(ip, None)
            else:
                installed[ip] = route
        self._write(client, [entry_update(ip, route) for ip, route in entries], record_entry)
        return len(entries)

    def _apply(self, ips_by_switch, done=None):
        """Write the routes of every switch concurrently; ``ips_by_switch[s]`` None means all.

        ``done(switch, entries written)`` is called as each switch finishes (see :meth:`_for_each`).

        A switch whose write fails is listed in :attr:`unreachable` and does not
        stop the others.

        Returns:
            int: table entries written.
        """
        def apply(switch):
            ips = ips_by_switch[switch]
            desired = self._desired(switch, ips)
            if ips is None:
                ips = set(desired) | set(self._installed.get(switch, {}))
            return self._apply_switch(switch, desired, ips)

        targets = [switch for switch in ips_by_switch if switch in self.clients]
        outcomes = self._for_each(targets, apply, done=done)
        self.unreachable = {}
        written = 0
        for switch, (count, error) in sorted(outcomes.items()):
            if isinstance(error, _WriteFailed):
                self.unreachable[switch] = str(error)
            elif error is not None:
                raise error
            else:
                written += count
        return written

    def install_routes(self):
        """Compute routes on the intact topology and write them to every switch.

        Returns:
            int: number of table entries written.
        """
        self._groups = {}
        self._installed = {}
        self._routes = HostRoutes(self.graph, self.failed_links)
        total = sum(len(self._routes.routes.get(switch, {})) for switch in self.switches if switch in self.clients)
        return self._apply(dict.fromkeys(self.switches), done=self._reporter("route entries written", total))

    def reroute(self, failed_links):
        """Recompute routes without ``failed_links`` and write only what changed.

        Only destinations whose shortest paths a changed link touches are
        recomputed; switches the last update could not reach get a full comparison.

        Args:
            failed_links: the set of links now down (link ids or node pairs, see
                :func:`testbed.topologies.graph.usable_links`).

        Returns:
            dict: ``{"entries_written": n, "seconds": total, "compute_s": route
            computation, "write_s": P4Runtime writes}``.
        """
        started = time.monotonic()
        self.failed_links = set(failed_links)
        if self._routes is None:
            self._routes = HostRoutes(self.graph, self.failed_links)
            ips_by_switch = dict.fromkeys(self.switches)
        else:
            changed = self._routes.update(self.failed_links)
            ips_by_switch = {switch: None if switch in self.unreachable else changed
                             for switch in self.switches}
        computed = time.monotonic()
        written = self._apply(ips_by_switch)
        done = time.monotonic()
        return {"entries_written": written, "seconds": done - started,
                "compute_s": computed - started, "write_s": done - computed}

    def exclude_next_hops(self, exclusions):
        """Keep the computed routes but without some next hops, and write what changed.

        F10's pushback (:mod:`testbed.controllers.f10.pushback`) tells a switch
        not to send some destinations to some neighbours; this is how that
        state reaches the switches' ECMP groups.  Exclusions replace the
        previous ones (an exclusion not repeated is lifted); a route whose next
        hops would all be excluded keeps them all.

        Args:
            exclusions: ``{switch: {host ip: ports}}`` (host ips as in the routes).

        Returns:
            int: table entries written.
        """
        previous, self._exclusions = self._exclusions, {switch: {ip: set(ports) for ip, ports in per.items()}
                                                        for switch, per in exclusions.items()}
        touched = {}
        for switch in set(previous) | set(self._exclusions):
            touched[switch] = set(previous.get(switch, {})) | set(self._exclusions.get(switch, {}))
        return self._apply(touched) if touched else 0

    def routes_of(self, switch):
        """``{host ip: [ports]}``: the routes computed for ``switch`` (before exclusions)."""
        return dict(self._routes.routes.get(switch, {})) if self._routes is not None else {}

    def program(self):
        """Push the pipeline and install routes on every switch; returns entries written."""
        self.push_pipeline()
        return self.install_routes()


def programmer_for_network(fabric, pipeline, **kwargs):
    """Return a :class:`FabricProgrammer` for a running :class:`~testbed.emulation.network.FabricNetwork`.

    Args:
        fabric: the running network (P4 switches).
        pipeline: a :class:`testbed.targets.PipelineConfig`.
        **kwargs: passed to :class:`FabricProgrammer`.
    """
    description = fabric.describe()
    switches = {name: {"grpc": entry["grpc"], "device_id": entry["device_id"]}
                for name, entry in description["switches"].items() if "grpc" in entry}
    return FabricProgrammer(fabric.topo.graph(), switches, pipeline, **kwargs)
