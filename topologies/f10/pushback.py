"""F10 pushback (seed 002, section 5.2) simulated message by message on a topology graph.

Pure functions on ``topo.graph()`` of a :class:`~testbed.topologies.fattree.FatTree`
or :class:`~testbed.topologies.ab_fattree.ABFatTree` (switch attributes
``level``, ``prefix`` and, below the cores, ``type_stack``).  The lead's
controller turns :attr:`PushbackState.avoid` and
:attr:`PushbackState.avoid_except` into route changes; nothing here talks to a
switch.

The protocol as the text states it, and how each rule is read here:

* **When to push back** (three scenarios).  A switch ``n`` starts a
  notification when a new failure (or pushback state) takes away destinations
  it could route to before:

  1. destinations *inside* its subtree (it lost its only working child towards
     them): a ``PBOnly`` naming them goes to **all neighbours except** the child
     it lost (``v``);
  2. **every** destination outside its subtree (all uplinks failed, or every
     uplink refuses all but one subtree): a ``PBExcept`` naming the one
     subtree it can still reach (its own, or the one its parents' PBExcept
     named) goes to its **children**;
  3. some destinations outside its subtree (every uplink is failed or pushed
     back for them): a ``PBOnly`` naming them goes to its **children**.

  "Can route" follows F10's routing policy: a destination inside the switch's
  subtree is reached downwards only, one outside upwards (then down).
* **Termination** (for notifications of scenario 1 and their forwarded
  copies).  A receiver ``n`` has a path around the failure, installs pushback
  state and does not forward, iff (i) ``n``'s level is below the level of the
  switch that started the notification (for a failed link ``<u, v>``: below
  ``u``), or (ii) ``n``'s subtree type stack differs from the top of the
  starter's type stack (the starter's stack cut to ``n``'s length: the
  "partial type stack" for a receiver higher in the tree; cores have the
  empty stack, so they always forward).  See :func:`has_path_around`.
  Notifications of scenarios 2 and 3 go only to children, which are below
  their starter, so they always terminate at the first hop (and may start
  scenario 3 there in turn).
* **Forwarding**.  A receiver without a path around forwards the
  notification once, to all its neighbours (uplinks and downlinks, section
  8.1) except those it received it from; later copies are absorbed.
* **State**.  A terminating receiver stops sending the named destinations to
  the neighbour the message came from: ``avoid[switch][prefix]`` gains that
  neighbour (PBOnly); ``avoid_except[switch][neighbour]`` is the only prefix
  still sent there (PBExcept).  Forwarding switches keep no pushback state
  (they have no direct route left; the paper's figure counts only the
  terminating switches).
* **Timing**.  Every link delivers in one time unit (a *round*); a switch
  handles everything that reaches it in one round together, so a switch
  whose parents all notify it in the same round sends nothing back to them.

Each failure is its own set of notifications, and notifications always name a
failed *link* (``cause``), as the paper says; a failed switch is all its links
failing at once, so each of its parents starts one.

Figure 4 (6-port AB FatTree): ``u`` and ``w`` have stack {A}, ``x`` {B}, so
``u`` is an aggregation switch of a type-A pod, ``v`` an edge switch below it
(its other parents are "u's two siblings"), ``w`` the same-index switch of the
other type-A pod and the ``x`` the type-B pod's switches: the paper draws the
fabric without the doubled subtrees below the cores (footnote 2,
:func:`testbed.topologies.f10.paths.omit_doubled_subtrees`).  There ``<u, v>``
gives the paper's 14 messages and 8 switches; the whole fabric gives 26 and
17.  The switch ``v`` failing adds 37 messages and 3 switches by these rules
(the paper: 32 and 12); tests/f10/test_f10_pushback.py shows the breakdown.
"""
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Dict, FrozenSet, List, Tuple

from testbed.errors import ParameterError
from testbed.topologies.f10.detours import downward_host_sets
from testbed.topologies.graph import host_ip, hosts, is_host, level, ports_toward

PB_ONLY = "PBOnly"
PB_EXCEPT = "PBExcept"

#: Outcomes of a delivered message at its receiver.
INSTALLED = "installed"
FORWARDED = "forwarded"
ABSORBED = "absorbed"


@dataclass(frozen=True)
class Notification:
    """One pushback notification, as it travels unchanged from switch to switch.

    Attributes:
        kind: :data:`PB_ONLY` (the prefixes are unreachable) or :data:`PB_EXCEPT`
            (only the one prefix given is reachable).
        prefixes: tuple of CIDR prefixes, sorted.
        origin: the switch that started it.
        cause: ``("link", parent, child)`` for a failed downward link (scenario 1),
            ``("uplinks", origin)`` when the origin lost destinations outside its
            subtree (scenarios 2 and 3), ``("pushback", origin, senders...)`` when
            pushback state from those children took destinations inside its
            subtree (scenario 1 after several failures).
    """

    kind: str
    prefixes: Tuple[str, ...]
    origin: str
    cause: tuple


@dataclass(frozen=True)
class PushbackMessage:
    """One message on one link, with what its receiver did.

    Attributes:
        round: delivery time in link latencies after the failure (1 = first hop).
        sender: the switch that sent it.
        receiver: the neighbour it went to.
        notification: the :class:`Notification` it carries.
        outcome: :data:`INSTALLED` (the receiver has a path around and installed
            state), :data:`FORWARDED` (it forwarded the notification) or
            :data:`ABSORBED` (a later copy at a switch that already forwarded it).
    """

    round: int
    sender: str
    receiver: str
    notification: Notification
    outcome: str

    @property
    def kind(self):
        """PBOnly or PBExcept."""
        return self.notification.kind

    @property
    def prefixes(self):
        """The prefixes named by the message."""
        return self.notification.prefixes


@dataclass
class PushbackState:
    """Pushback state of every switch, plus the failures it reflects.

    Attributes:
        avoid: ``{switch: {prefix: set of neighbours}}``: PBOnly state; the
            switch must not send traffic for ``prefix`` to those neighbours.
        avoid_except: ``{switch: {neighbour: prefix}}``: PBExcept state; the
            switch sends only traffic for ``prefix`` to that neighbour.
        failed_links: normalized failed links ``(a, b, key)`` with ``a < b``.
        failed_switches: failed switch names.
    """

    avoid: Dict[str, Dict[str, set]] = field(default_factory=dict)
    avoid_except: Dict[str, Dict[str, str]] = field(default_factory=dict)
    failed_links: FrozenSet[tuple] = frozenset()
    failed_switches: FrozenSet[str] = frozenset()
    # hosts each switch may not send toward each neighbour (PBOnly and PBExcept, forwarders too)
    blocked: Dict[str, Dict[str, frozenset]] = field(default_factory=dict, repr=False)

    def copy(self):
        """A deep copy (results never share mutable state)."""
        return PushbackState(
            avoid={s: {p: set(n) for p, n in per.items()} for s, per in self.avoid.items()},
            avoid_except={s: dict(per) for s, per in self.avoid_except.items()},
            failed_links=self.failed_links, failed_switches=self.failed_switches,
            blocked={s: dict(per) for s, per in self.blocked.items()})

    def switches_with_state(self):
        """Sorted names of the switches holding PBOnly or PBExcept state."""
        return sorted(set(self.avoid) | set(self.avoid_except))


@dataclass
class PushbackResult:
    """What one new failure sets off.

    Attributes:
        failure: the failure as given (a normalized link or a switch name).
        messages: every :class:`PushbackMessage`, in delivery order (round,
            then receiver, then sender).
        starters: switches that started a notification, sorted.
        installed: switches that installed state for this failure (frozenset).
        forwarders: switches that forwarded a notification (frozenset).
        state: the pushback state of the whole fabric after this failure.
    """

    failure: object
    messages: List[PushbackMessage]
    starters: List[str]
    installed: FrozenSet[str]
    forwarders: FrozenSet[str]
    state: PushbackState

    @property
    def message_count(self):
        """Number of messages sent (one per link traversal)."""
        return len(self.messages)


# ----------------------------------------------------------------- topology facts
def _check_f10_graph(graph):
    """Raise ParameterError when switches lack the attributes pushback needs."""
    for node, attrs in graph.nodes(data=True):
        if attrs.get("role") != "host" and ("prefix" not in attrs or "level" not in attrs):
            raise ParameterError("graph", graph.graph.get("kind"),
                                 "a FatTree or AB FatTree graph (switches with level and prefix)",
                                 f"switch {node} has no prefix attribute")


def _type_stack(graph, node):
    """A switch's subtree type stack (top first); cores have the empty stack."""
    return tuple(graph.nodes[node].get("type_stack") or ())


def has_path_around(graph, switch, origin):
    """F10's termination rule: does ``switch`` have a path around a failure ``origin`` reported?

    Seed 002, section 5.2: "a node ... has a path around a single failed edge
    precisely if (i) it is at a lower level than the failure, or (ii) its
    subtree type stack is different than the top of the type stack of the
    failure".  The failure's level and stack are those of ``origin``, the
    switch that started the notification (for a failed link ``<u, v>``, the
    parent ``u``); "the top" of its stack is the part a receiver at or above
    ``origin``'s level has (its own length: the partial stack).

    Args:
        graph: FatTree or AB FatTree multigraph.
        switch: the receiver.
        origin: the switch that started the notification.

    Returns:
        bool: True when ``switch`` terminates the notification.

    >>> from testbed.topologies.ab_fattree import ABFatTree
    >>> g = ABFatTree(k=4).graph()
    >>> has_path_around(g, "e1_0", "a0_0")   # (i): below the failure
    True
    >>> has_path_around(g, "c0", "a0_0")     # a core: empty stack, same top
    False
    >>> g.nodes["a1_0"]["type_stack"], g.nodes["a0_0"]["type_stack"]
    (('B',), ('A',))
    >>> has_path_around(g, "a1_0", "a0_0")   # (ii): another type stack
    True
    """
    if level(graph, switch) < level(graph, origin):
        return True
    own = _type_stack(graph, switch)
    return own != _type_stack(graph, origin)[:len(own)]


class _Fabric:
    """Read-only facts of one graph the simulation needs (host sets, neighbours, prefixes)."""

    def __init__(self, graph):
        _check_f10_graph(graph)
        self.graph = graph
        self.host_sets = downward_host_sets(graph)
        self.all_hosts = frozenset(hosts(graph))
        self.prefix_of_set = {frozenset([host]): host_ip(graph, host) + "/32" for host in hosts(graph)}
        for node, attrs in graph.nodes(data=True):
            if not is_host(graph, node):
                self.prefix_of_set.setdefault(self.host_sets[node], attrs["prefix"])
        self.set_of_prefix = {prefix: subtree for subtree, prefix in self.prefix_of_set.items()}
        self._by_size = sorted(self.prefix_of_set, key=len, reverse=True)

    def level(self, node):
        return level(self.graph, node)

    def is_switch(self, node):
        return node in self.graph and not is_host(self.graph, node)

    def aggregate(self, hosts):
        """Cover a host set with the fewest subtree prefixes (subtrees nest, so greedy is exact)."""
        remaining = set(hosts)
        prefixes = []
        for subtree in self._by_size:
            if subtree <= remaining:
                prefixes.append(self.prefix_of_set[subtree])
                remaining -= subtree
                if not remaining:
                    break
        return tuple(sorted(prefixes))

    def hosts_of(self, prefixes):
        result = set()
        for prefix in prefixes:
            result |= self.set_of_prefix[prefix]
        return frozenset(result)


def normalize_link(graph, link):
    """Return ``(a, b, key)`` with ``a < b`` for a switch-to-switch link given as ``(a, b)`` or ``(a, b, key)``.

    Without a key the lowest key between the two nodes is meant.

    Raises:
        ParameterError: the link does not exist or touches a host.
    """
    if not isinstance(link, (tuple, list)) or len(link) not in (2, 3):
        raise ParameterError("failed_link", link, "(a, b) or (a, b, key) naming a link of the topology")
    a, b = link[0], link[1]
    if a not in graph or b not in graph or not graph.has_edge(a, b) or \
            (len(link) == 3 and not graph.has_edge(a, b, link[2])):
        raise ParameterError("failed_link", link, "a link of the topology")
    if is_host(graph, a) or is_host(graph, b):
        raise ParameterError("failed_link", link, "a switch-to-switch link",
                             "F10 leaves host links to the end hosts (section 7.2)")
    key = link[2] if len(link) == 3 else min(graph[a][b])
    a, b = sorted((a, b))
    return (a, b, key)


class _Simulation:
    """Mutable run of the protocol over one :class:`PushbackState`."""

    def __init__(self, fabric, state):
        self.fabric = fabric
        self.graph = fabric.graph
        self.state = state

    # -------------------------------------------------------------- routing view
    def working_neighbours(self, node):
        """Switch and host neighbours joined to ``node`` by at least one working link."""
        if node in self.state.failed_switches:
            return []
        result = []
        for neighbour, links in self.graph[node].items():
            if neighbour in self.state.failed_switches:
                continue
            ends = tuple(sorted((node, neighbour)))
            if any((ends[0], ends[1], key) not in self.state.failed_links for key in links):
                result.append(neighbour)
        return sorted(result)

    def reach(self, node):
        """Hosts ``node`` can route to under F10's policy, given failures and pushback state.

        Inside its subtree it routes down through working children that have not
        pushed those hosts back; outside, up through working parents, likewise.
        """
        fabric = self.fabric
        level = fabric.level(node)
        own = fabric.host_sets[node]
        blocked = self.state.blocked.get(node, {})
        down, up = set(), set()
        for neighbour in self.working_neighbours(node):
            allowed = fabric.host_sets[neighbour] if fabric.level(neighbour) < level else fabric.all_hosts
            allowed = allowed - blocked.get(neighbour, frozenset())
            if fabric.level(neighbour) < level:
                down |= allowed
            else:
                up |= allowed
        return frozenset((down & own) | (up - own))

    def block(self, node, neighbour, hosts):
        per = self.state.blocked.setdefault(node, {})
        per[neighbour] = per.get(neighbour, frozenset()) | hosts

    # ------------------------------------------------------------ notifications
    def loss_notifications(self, node, before, after, cause, exclude):
        """Notifications ``node`` starts when its reachable hosts shrink from ``before`` to ``after``.

        Args:
            node: the switch.
            before: hosts it could route to.
            after: hosts it can route to now.
            cause: the cause a scenario-1 notification names (``("link", node, child)``).
            exclude: neighbours a scenario-1 notification does not go to (the lost child).

        Returns:
            list of ``(notification, receivers)`` with at least one receiver.
        """
        fabric = self.fabric
        own = fabric.host_sets[node]
        lost = before - after
        result = []
        lost_inside = lost & own
        if lost_inside:
            receivers = [n for n in self.working_neighbours(node)
                         if fabric.is_switch(n) and n not in exclude]
            result.append((Notification(PB_ONLY, fabric.aggregate(lost_inside), node, cause), receivers))
        lost_outside = lost - own
        if lost_outside:
            children = [n for n in self.working_neighbours(node)
                        if fabric.is_switch(n) and fabric.level(n) < fabric.level(node)]
            reachable = (after - own) | own
            if reachable != fabric.all_hosts and reachable in fabric.prefix_of_set:
                notification = Notification(PB_EXCEPT, (fabric.prefix_of_set[reachable],), node,
                                            ("uplinks", node))
            else:
                notification = Notification(PB_ONLY, fabric.aggregate(lost_outside), node,
                                            ("uplinks", node))
            result.append((notification, children))
        return [(n, r) for n, r in result if r]

    def blocked_hosts(self, notification):
        """Hosts a receiver must no longer send toward the sender."""
        hosts = self.fabric.hosts_of(notification.prefixes)
        return hosts if notification.kind == PB_ONLY else self.fabric.all_hosts - hosts

    def install(self, receiver, sender, notification):
        """Record the receiver's pushback state for a terminated notification."""
        self.block(receiver, sender, self.blocked_hosts(notification))
        if notification.kind == PB_ONLY:
            per = self.state.avoid.setdefault(receiver, {})
            for prefix in notification.prefixes:
                per.setdefault(prefix, set()).add(sender)
        else:
            self.state.avoid_except.setdefault(receiver, {})[sender] = notification.prefixes[0]

    def run(self, starts):
        """Deliver notifications round by round until none is left.

        Args:
            starts: list of ``(sender, notification, receivers)`` sent at round 1.

        Returns:
            tuple: (messages, installed switches, forwarding switches).
        """
        self.messages, self.installed, self.forwarders = [], set(), set()
        self.heard = defaultdict(set)     # (switch, notification) -> senders it came from
        self.forwarded = {(sender, notification) for sender, notification, _ in starts}
        outbox = [(sender, receiver, notification)
                  for sender, notification, receivers in starts for receiver in receivers]
        current_round = 0
        while outbox:
            current_round += 1
            inbox = defaultdict(list)
            for sender, receiver, notification in outbox:
                inbox[receiver].append((sender, notification))
                self.heard[(receiver, notification)].add(sender)
            outbox = []
            for receiver in sorted(inbox):
                batch = sorted(inbox[receiver], key=lambda item: item[0])
                outbox.extend(self.deliver(receiver, batch, current_round))
        return self.messages, self.installed, self.forwarders

    def deliver(self, receiver, batch, current_round):
        """Handle one round's ``(sender, notification)`` batch at one switch; return what it sends next."""
        before = self.reach(receiver)
        sends, announced = [], frozenset()
        terminated = False
        for sender, notification in batch:
            if (receiver, notification) in self.forwarded:
                outcome = ABSORBED
                self.block(receiver, sender, self.blocked_hosts(notification))
            elif has_path_around(self.graph, receiver, notification.origin):
                outcome = INSTALLED
                self.install(receiver, sender, notification)
                self.installed.add(receiver)
                terminated = True
            else:
                outcome = FORWARDED
                self.forwarded.add((receiver, notification))
                self.forwarders.add(receiver)
                self.block(receiver, sender, self.blocked_hosts(notification))
                announced |= self.blocked_hosts(notification)
                heard = self.heard[(receiver, notification)]
                sends.extend((receiver, neighbour, notification) for neighbour in self.working_neighbours(receiver)
                             if self.fabric.is_switch(neighbour) and neighbour not in heard)
            self.messages.append(PushbackMessage(current_round, sender, receiver, notification, outcome))
        if terminated:
            # what it forwarded it has already told every neighbour; the rest is a new loss
            after = self.reach(receiver) | (announced & before)
            senders = tuple(sorted({sender for sender, _ in batch}))
            for notification, receivers in self.loss_notifications(receiver, before, after,
                                                                   ("pushback", receiver) + senders, senders):
                self.forwarded.add((receiver, notification))
                sends.extend((receiver, neighbour, notification) for neighbour in receivers)
        return sends


# ------------------------------------------------------------------ public API
def _normalize_failure(graph, failure):
    """A switch name stays a name; a link becomes ``(a, b, key)``."""
    if isinstance(failure, str):
        if failure not in graph or is_host(graph, failure):
            raise ParameterError("failure", failure, "a switch of the topology or a link (a, b[, key])")
        return failure
    return normalize_link(graph, failure)


def _apply_failure(simulation, failure):
    """Mark ``failure`` failed and return the notifications its neighbours start (round 1)."""
    state = simulation.state
    graph = simulation.graph
    if isinstance(failure, str):
        if failure in state.failed_switches:
            raise ParameterError("failure", failure, "a switch that has not failed yet")
        touched = [n for n in simulation.working_neighbours(failure) if not is_host(graph, n)]
        lost_child = {n: failure for n in touched}
        before = {n: simulation.reach(n) for n in touched}
        state.failed_switches = state.failed_switches | {failure}
    else:
        if failure in state.failed_links:
            raise ParameterError("failure", failure, "a link that has not failed yet")
        a, b, _ = failure
        touched = [n for n in (a, b) if n not in state.failed_switches]
        lost_child = {a: b, b: a}
        before = {n: simulation.reach(n) for n in touched}
        state.failed_links = state.failed_links | {failure}
    starts = []
    for node in touched:
        after = simulation.reach(node)
        lost = lost_child[node]
        for notification, receivers in simulation.loss_notifications(node, before[node], after,
                                                                      ("link", node, lost), (lost,)):
            starts.append((node, notification, receivers))
    return starts


def simulate_pushback(graph, failure, failed_links=(), failed_switches=(), state=None):
    """Simulate F10's pushback for one new failure, message by message.

    Args:
        graph: FatTree or AB FatTree multigraph (``topo.graph()``).
        failure: the new failure: a switch name, or a link ``(a, b)`` /
            ``(a, b, key)`` between two switches.
        failed_links: links already down, as ``(a, b)`` or ``(a, b, key)``.
        failed_switches: switches already down.
        state: the :class:`PushbackState` those earlier failures left (for
            example ``previous_result.state``); when None it is rebuilt by
            replaying ``failed_switches`` then ``failed_links``, each sorted, as
            separate failures.  Not modified.

    Returns:
        PushbackResult: messages, starters, switches that installed state, and
        the fabric's state after the failure.

    Raises:
        ParameterError: unknown or host link or switch, a failure already in
            effect, or a graph without F10 attributes.

    >>> from testbed.topologies.ab_fattree import ABFatTree
    >>> g = ABFatTree(k=4).graph()
    >>> result = simulate_pushback(g, ("a0_0", "e0_0"))
    >>> result.starters, result.message_count
    (['a0_0'], 11)
    >>> [(m.sender, m.receiver, m.outcome) for m in result.messages][:3]
    [('a0_0', 'c0', 'forwarded'), ('a0_0', 'c1', 'forwarded'), ('a0_0', 'e0_1', 'installed')]
    >>> result.state.avoid["e0_1"]
    {'10.0.0.0/30': {'a0_0'}}
    """
    fabric = _Fabric(graph)
    failure = _normalize_failure(graph, failure)
    if state is None:
        state = pushback_state(graph, failed_links, failed_switches, fabric=fabric)
    else:
        state = state.copy()
    simulation = _Simulation(fabric, state)
    starts = _apply_failure(simulation, failure)
    messages, installed, forwarders = simulation.run(starts)
    return PushbackResult(failure=failure, messages=messages,
                          starters=sorted({sender for sender, _, _ in starts}),
                          installed=frozenset(installed), forwarders=frozenset(forwarders),
                          state=state)


def pushback_state(graph, failed_links=(), failed_switches=(), fabric=None):
    """The pushback state after the given failures, replayed one by one.

    Switches fail first, then links, each group in sorted order.

    Args:
        graph: FatTree or AB FatTree multigraph.
        failed_links: links down, ``(a, b)`` or ``(a, b, key)``.
        failed_switches: switch names down.
        fabric: internal cache of the graph's facts.

    Returns:
        PushbackState.

    Raises:
        ParameterError: as :func:`simulate_pushback`.
    """
    fabric = fabric or _Fabric(graph)
    simulation = _Simulation(fabric, PushbackState())
    for switch in failed_switches:
        if not isinstance(switch, str):
            raise ParameterError("failed_switches", switch, "switch names")
    switches = sorted({_normalize_failure(graph, switch) for switch in failed_switches})
    links = sorted({normalize_link(graph, link) for link in failed_links})
    for failure in switches + links:
        if failure in simulation.state.failed_links:
            continue
        simulation.run(_apply_failure(simulation, failure))
    return simulation.state


def avoid_ports(graph, state):
    """Turn :attr:`PushbackState.avoid` neighbours into the switch's port numbers.

    Args:
        graph: the topology multigraph (edge attributes ``a``, ``a_port``, ``b``, ``b_port``).
        state: a :class:`PushbackState`.

    Returns:
        dict: ``{switch: {prefix: sorted ports}}``, every parallel link to an
        avoided neighbour included.

    >>> from testbed.topologies.ab_fattree import ABFatTree
    >>> g = ABFatTree(k=4).graph()
    >>> avoid_ports(g, simulate_pushback(g, ("a0_0", "e0_0")).state)["e0_1"]
    {'10.0.0.0/30': [3]}
    """
    result = {}
    for switch, per_prefix in state.avoid.items():
        result[switch] = {prefix: sorted(ports_toward(graph, switch, neighbours))
                          for prefix, neighbours in per_prefix.items()}
    return result
