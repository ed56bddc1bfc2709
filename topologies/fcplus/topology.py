"""FC+ and FC expander topologies: ToR switches split into virtual switches on virtual layers (seed 001, III-A).

Notation (seed 001): ``N`` ToR switches with ``p`` ports each, ``s`` of them to
other ToRs and ``h = p - s`` to hosts; every ToR ``S_i`` is split into ``v``
virtual switches ``S_i^1 .. S_i^v`` placed on ``k`` virtual layers
``L_1 .. L_k``; links join virtual switches of different ToRs on adjacent
layers only.

FC+ (:func:`fcplus_graph`, :class:`FCPlusTopo`):

* STEP 1, Eq. (1): ``S_i^1`` and ``S_i^v`` have ``l = 1`` link,
  ``S_i^j`` (``1 < j < v``) has ``l_j = (s - 2) / (v - 2)`` links;
* STEP 2, Eq. (2): ``k = (s - 2) / 2 + 2``; ``S_i^1`` is on ``L_1``, ``S_i^v`` on
  ``L_k``; the layers ``L_2 .. L_(k-1)`` form ``v - 2`` groups of
  ``N_gl = (s - 2) / (2 (v - 2))`` layers (Eq. (3)); ``S_i^j`` goes to a layer of
  group ``G_(j-1)``, drawn at random so that every layer of a group holds
  ``N / N_gl`` virtual switches;
* STEP 3: a random bipartite graph between every two adjacent layers, never
  joining two virtual switches of one ToR.  The layer counts force ``N`` links
  between every two adjacent layers, so a virtual switch inside a group has
  ``N_gl`` links down and ``N_gl`` up.

``v`` unset follows the paper's strategy (IV-B): the smallest integer ``v``
with ``v >= 2 + (s - 2) / 10`` (Eq. (5)) and an integral ``N_gl``.

FC (:func:`fc_graph`, :class:`FCTopo`), the baseline: ``v = k`` virtual
switches, ``S_i^j`` on ``L_j``.  With the largest ``k = s/2 + 1`` this is FC+
with ``v = k`` (one link up and one down per middle virtual switch).  A smaller
``k`` gives every ToR ``d_m`` links between layers ``L_m`` and ``L_(m+1)``,
ideally ``s / (2(k - 1))``, rounded as :func:`fc_layer_links` says.

The wiring avoids parallel links between two ToRs whenever ``N - 1 >= s``
allows (a random repair of the bipartite matchings); below that (the paper's
Figure 2 examples, 6 ToRs with ``s = 10``) parallel links are unavoidable and
allowed, but never two links between the same two virtual switches.

The result is a networkx ``MultiGraph`` of ToRs (the *ToR graph*) that the
routing, deadlock and throughput functions of this package work on:

* nodes ``"tor0" .. "tor<N-1>"`` with ``index``, ``layers`` (the layer of
  ``S_i^j`` at position ``j - 1``) and ``ports`` (the switch ports of each
  virtual switch, a list per ``j``);
* one edge per physical link, key = link id (0..), with ``port``, ``layer`` and
  ``vswitch`` dicts keyed by end node (``data["layer"][u]`` is the layer of the
  link's end at ``u``) and ``lower``, the end on the lower layer;
* graph attributes ``kind``, ``N``, ``p``, ``s``, ``h``, ``v``, ``k``,
  ``n_gl``, ``degrees`` (Eq. (1)), ``seed`` and ``parallel_links``.

Ports of a ToR: hosts ``1 .. h``, then the ``s`` fabric ports virtual switch by
virtual switch (``S_i^1`` first), inside one virtual switch down links before
up links, each by peer ToR.  So a port identifies its virtual switch and layer.
"""
import random
from collections import Counter

import networkx as nx

from testbed.errors import ParameterError
from testbed.topologies.base import (DEFAULT_FABRIC_LINK_MBPS, DEFAULT_HOST_LINK_MBPS, MAX_SWITCH_PORT,
                                     FabricTopo, check_int, check_node_count, check_positive_number,
                                     leaf_host_address, leaf_prefix)

#: name prefix of ToR switches (``tor0`` ...)
TOR_PREFIX = "tor"
_REPAIR_TRIES_PER_LINK = 200


# ------------------------------------------------------------------ equations
def layer_count(s):
    """Number of virtual layers ``k = (s - 2) / 2 + 2`` (Eq. (2)), the largest FC ``k``.

    Args:
        s: ports of a ToR to other ToRs, an even integer >= 4.

    Returns:
        int: k.

    Raises:
        ParameterError: ``s`` odd or below 4.

    >>> layer_count(18), layer_count(10), layer_count(22)
    (10, 6, 12)
    """
    check_int("s", s, minimum=4, allowed="an even integer >= 4")
    if s % 2:
        raise ParameterError("s", s, "an even integer >= 4", "k = (s-2)/2 + 2 must be an integer (Eq. (2))")
    return (s - 2) // 2 + 2


def layers_per_group(s, v):
    """``N_gl = (s - 2) / (2 (v - 2))``, the virtual layers of each group (Eq. (3)).

    Raises:
        ParameterError: naming ``v`` when ``2 < v <= k`` fails or ``l_j`` or
            ``N_gl`` is not an integer; the message lists the valid ``v``.

    >>> layers_per_group(18, 4), layers_per_group(18, 10), layers_per_group(10, 4)
    (4, 1, 2)
    """
    k = layer_count(s)
    valid = valid_v_values(s)
    allowed = "one of: " + ", ".join(str(value) for value in valid) + \
        f" (2 < v <= k={k} with integral l_j = (s-2)/(v-2) and N_gl = (s-2)/(2(v-2)))"
    check_int("v", v, allowed=allowed)
    if not 2 < v <= k:
        raise ParameterError("v", v, allowed, f"Eq. (1) needs 2 < v <= k = {k}")
    if (s - 2) % (v - 2):
        raise ParameterError("v", v, allowed, f"l_j = (s-2)/(v-2) = {s - 2}/{v - 2} is not an integer (Eq. (1))")
    if (s - 2) % (2 * (v - 2)):
        raise ParameterError("v", v, allowed,
                             f"N_gl = (s-2)/(2(v-2)) = {(s - 2) / (2 * (v - 2)):g} is not an integer (Eq. (3))")
    return (s - 2) // (2 * (v - 2))


def valid_v_values(s):
    """Every ``v`` with ``2 < v <= k`` and an integral ``N_gl`` (so an integral ``l_j``).

    >>> valid_v_values(18)
    [3, 4, 6, 10]
    >>> valid_v_values(10)
    [3, 4, 6]
    """
    k = layer_count(s)
    return [v for v in range(3, k + 1) if (s - 2) % (2 * (v - 2)) == 0]


def virtual_switch_degrees(s, v):
    """Links of ``S_i^1 .. S_i^v``: 1, ``(s-2)/(v-2)`` ..., 1 (Eq. (1)); they sum to ``s``.

    Raises:
        ParameterError: as :func:`layers_per_group`.

    >>> virtual_switch_degrees(10, 4)
    [1, 4, 4, 1]
    >>> sum(virtual_switch_degrees(18, 3))
    18
    """
    n_gl = layers_per_group(s, v)
    return [1] + [2 * n_gl] * (v - 2) + [1]


def choose_v(s):
    """The paper's choice of ``v`` (IV-B Strategy): the smallest integer ``v >= 2 + (s-2)/10`` (Eq. (5))
    with an integral ``N_gl``.

    >>> choose_v(18), choose_v(22), choose_v(10)
    (4, 4, 3)
    """
    for v in valid_v_values(s):
        if 10 * (v - 2) >= s - 2:  # Eq. (5) without rounding
            return v
    raise AssertionError("v = k always satisfies Eq. (5)")  # pragma: no cover


# -------------------------------------------------------------- construction
def fcplus_graph(N, p, s, v=None, seed=1):
    """Build the FC+ ToR graph (STEP 1-3 of III-A) as a networkx ``MultiGraph``.

    Args:
        N: ToR switches, a multiple of ``N_gl`` and at least ``N_gl (N_gl + 1)`` (2 when ``N_gl = 1``).
        p: ports per ToR (``s < p <= 254``); hosts use ports ``1 .. p - s``.
        s: ports to other ToRs, an even integer >= 4.
        v: virtual switches per ToR (``2 < v <= k``, integral ``N_gl``); None
            chooses it by :func:`choose_v`.
        seed: seed of every random choice (layer assignment and wiring).

    Returns:
        networkx.MultiGraph: the ToR graph described in the module docstring.

    Raises:
        ParameterError: naming ``N``, ``p``, ``s`` or ``v`` and what is valid.

    >>> graph = fcplus_graph(6, 12, 10, v=4, seed=3)
    >>> graph.graph["k"], graph.graph["n_gl"], graph.graph["degrees"]
    (6, 2, [1, 4, 4, 1])
    >>> sorted(d for _, d in graph.degree())
    [10, 10, 10, 10, 10, 10]
    """
    s, p = _check_ports(p, s, fcplus=True)
    k = layer_count(s)
    if v is None:
        v = choose_v(s)
    n_gl = layers_per_group(s, v)
    _check_tors(N, n_gl)
    rng = random.Random(seed)
    layers = [[1] + [0] * (v - 2) + [k] for _ in range(N)]
    for group in range(1, v - 1):  # virtual switch j = group + 1 goes to group G_group
        first = 2 + (group - 1) * n_gl
        order = list(range(N))
        rng.shuffle(order)
        for position, tor in enumerate(order):
            layers[tor][group] = first + position % n_gl
    up = [[1] + [n_gl] * (v - 2) + [0] for _ in range(N)]
    down = [[0] + [n_gl] * (v - 2) + [1] for _ in range(N)]
    return _build_graph("fcplus", N, p, s, v, k, n_gl, layers, up, down, rng, seed)


def fc_layer_links(s, k):
    """Links ``d_m`` every ToR has between layers ``L_m`` and ``L_(m+1)`` in FC (one end up, one down).

    ``S_i^1`` and ``S_i^k`` get ``d_1`` and ``d_(k-1)`` links, ``S_i^j`` in
    between ``d_(j-1) + d_j``; ideally ``s / (2(k-1))`` and ``s / (k-1)``.  When
    that is not an integer the ``d_m`` (integers >= 1 summing to ``s/2``) bring
    the virtual switches' link counts as close to the ideal as possible (least
    squares), the larger counts on the middle layers on a tie, then the
    lexicographically smallest.  (Seed 001 does not say how FC rounds; this rule
    reproduces its Table III counts for k = 6 and 8.)

    Args:
        s: ports to other ToRs (even).
        k: virtual layers, ``2 <= k <= s/2 + 1``.

    Returns:
        list[int]: ``d_1 .. d_(k-1)``.

    >>> fc_layer_links(18, 4), fc_layer_links(18, 6), fc_layer_links(18, 8)
    ([3, 3, 3], [2, 1, 3, 1, 2], [1, 1, 2, 1, 2, 1, 1])
    """
    pairs, total = k - 1, s // 2
    ideal = [s / (2 * pairs)] + [s / pairs] * (k - 2) + [s / (2 * pairs)]
    centre = (k - 1) / 2
    mean = total / pairs
    choices = range(max(1, int(mean) - 2), int(mean) + 4)
    # dynamic programme over the layer pairs: state (last d, links so far) -> best (cost, d list)
    best = {(d, d): ((d - ideal[0]) ** 2, d * abs(0 - centre), [d]) for d in choices if d <= total}
    for m in range(1, pairs):
        nxt = {}
        for (last, used), (error, spread, ds) in best.items():
            for d in choices:
                if used + d > total:
                    continue
                degree = last + d  # links of S^(m+1)
                entry = (error + (degree - ideal[m]) ** 2, spread + degree * abs(m - centre), ds + [d])
                key = (d, used + d)
                if key not in nxt or _better(entry, nxt[key]):
                    nxt[key] = entry
        best = nxt
    finals = [(error + (last - ideal[-1]) ** 2, spread + last * abs(pairs - centre), ds)
              for (last, used), (error, spread, ds) in best.items() if used == total]
    winner = finals[0]
    for entry in finals[1:]:
        if _better(entry, winner):
            winner = entry
    return winner[2]


def _better(a, b):
    """Compare (squared error, spread, d list) entries: less error, then less spread, then smaller d."""
    if abs(a[0] - b[0]) > 1e-9:
        return a[0] < b[0]
    if abs(a[1] - b[1]) > 1e-9:
        return a[1] < b[1]
    return a[2] < b[2]


def fc_graph(N, p, s, k=None, seed=1):
    """Build the FC ToR graph: ``v = k`` virtual switches, ``S_i^j`` on layer ``L_j``.

    Every ToR has :func:`fc_layer_links` ``d_m`` links between its virtual
    switches on ``L_m`` (up) and ``L_(m+1)`` (down, to other ToRs), so every
    layer pair holds ``N d_m`` links, wired at random.

    Args:
        N: ToR switches, more than the largest ``d_m``.
        p: ports per ToR (``s < p <= 254``).
        s: ports to other ToRs, an even integer >= 2.
        k: virtual layers, ``2 <= k <= s/2 + 1``; None: the largest, ``s/2 + 1``.
        seed: seed of every random choice.

    Returns:
        networkx.MultiGraph: the ToR graph (``v == k``, ``n_gl == 1``,
        graph attribute ``layer_links`` = the ``d_m``).

    Raises:
        ParameterError: naming the parameter.

    >>> graph = fc_graph(8, 8, 6, seed=1)
    >>> graph.graph["k"], graph.graph["v"], graph.nodes["tor0"]["layers"]
    (4, 4, [1, 2, 3, 4])
    """
    check_int("s", s, minimum=2, allowed="an even integer >= 2")
    if s % 2:
        raise ParameterError("s", s, "an even integer >= 2", "every layer pair takes d_m links up and d_m down")
    s, p = _check_ports(p, s, fcplus=False)
    largest = s // 2 + 1
    if k is None:
        k = largest
    check_int("k", k, minimum=2, maximum=largest,
              allowed=f"an integer from 2 to {largest} (at least one link per ToR and layer pair)")
    links = fc_layer_links(s, k)
    check_int("N", N, minimum=max(links) + 1,
              allowed=f"an integer >= {max(links) + 1} (a virtual switch links to {max(links)} other ToRs "
              "on the next layer)")
    up = [links + [0] for _ in range(N)]
    down = [[0] + links for _ in range(N)]
    layers = [list(range(1, k + 1)) for _ in range(N)]
    graph = _build_graph("fc", N, p, s, k, k, 1, layers, up, down, random.Random(seed), seed)
    graph.graph["layer_links"] = links
    return graph


def _check_ports(p, s, fcplus):
    """Validate ``p`` and ``s`` (``s < p <= 254``); return them."""
    check_int("p", p, minimum=2, maximum=MAX_SWITCH_PORT)
    if fcplus:
        layer_count(s)
    else:
        check_int("s", s, minimum=2, allowed="an integer >= 2")
    if s >= p:
        raise ParameterError("s", s, f"an integer below p={p}", "h = p - s ports must remain for hosts")
    return s, p


def _check_tors(N, n_gl):
    """Validate ``N`` against the group size ``N_gl``: a multiple of it, and at least ``N_gl (N_gl + 1)``.

    Two adjacent layers inside a group hold ``N / N_gl`` virtual switches each,
    with ``N_gl`` links to distinct partners on the other layer; across two
    groups one of the candidates may belong to the same ToR, so ``N / N_gl``
    must exceed ``N_gl`` (at ``N / N_gl = N_gl`` the layers would have to be
    completely joined, which a ToR on both sides forbids).
    """
    least = n_gl * (n_gl + 1) if n_gl > 1 else 2
    allowed = f"a multiple of N_gl={n_gl} that is >= {least}" if n_gl > 1 else "an integer >= 2"
    check_int("N", N, minimum=least, allowed=allowed)
    if N % n_gl:
        raise ParameterError("N", N, allowed,
                             f"every one of the N_gl={n_gl} layers of a group holds N/N_gl virtual switches")


def _build_graph(kind, N, p, s, v, k, n_gl, layers, up, down, rng, seed):
    """Wire every adjacent layer pair at random and number the ports; return the ToR graph."""
    by_layer = {}
    for tor in range(N):
        for j in range(v):
            by_layer.setdefault(layers[tor][j], []).append((tor, j))
    allow_parallel = N - 1 < s  # a simple graph needs s distinct neighbours
    tor_pairs = Counter()
    wired = []  # (lower (tor, j), upper (tor, j))
    for layer in range(1, k):
        lower = [end for end in by_layer.get(layer, []) for _ in range(up[end[0]][end[1]])]
        upper = [end for end in by_layer.get(layer + 1, []) for _ in range(down[end[0]][end[1]])]
        if len(lower) != len(upper):  # pragma: no cover - the degree rules balance every pair
            raise AssertionError(f"layers {layer}/{layer + 1}: {len(lower)} up ends, {len(upper)} down ends")
        wired.extend(_match_layers(lower, upper, rng, tor_pairs, allow_parallel, layer, N))
    degrees = [up[0][j] + down[0][j] for j in range(v)] if kind == "fcplus" else None
    return _assemble(dict(kind=kind, N=N, p=p, s=s, h=p - s, v=v, k=k, n_gl=n_gl, degrees=degrees, seed=seed),
                     layers, wired)


def _assemble(attrs, layers, wired):
    """The ToR graph of ``wired`` links ``((tor, j), (tor, j))`` (0-based, lower end first), ports numbered."""
    N, h = len(layers), attrs["h"]
    ends = {}  # (tor, j) -> [(peer layer, peer tor, link id, side)]
    for link, (low, high) in enumerate(wired):
        ends.setdefault(low, []).append((layers[high[0]][high[1]], high[0], link, "a"))
        ends.setdefault(high, []).append((layers[low[0]][low[1]], low[0], link, "b"))
    port_of = {}
    ports = [[[] for _ in layers[tor]] for tor in range(N)]
    for tor in range(N):
        port = h + 1
        for j in range(len(layers[tor])):
            for _peer_layer, _peer, link, side in sorted(ends.get((tor, j), [])):
                port_of[(link, side)] = port
                ports[tor][j].append(port)
                port += 1
    graph = nx.MultiGraph(**attrs)
    names = [tor_name(tor) for tor in range(N)]
    for tor in range(N):
        graph.add_node(names[tor], index=tor, layers=list(layers[tor]), ports=ports[tor])
    parallel = 0
    for link, (low, high) in enumerate(wired):
        a, b = names[low[0]], names[high[0]]
        if graph.has_edge(a, b):
            parallel += 1
        graph.add_edge(a, b, key=link, lower=a,
                       port={a: port_of[(link, "a")], b: port_of[(link, "b")]},
                       layer={a: layers[low[0]][low[1]], b: layers[high[0]][high[1]]},
                       vswitch={a: low[1] + 1, b: high[1] + 1})
    graph.graph["parallel_links"] = parallel
    return graph


def tor_graph_from_links(layers, links):
    """A ToR graph with given virtual layers and links, for hand-made examples and tests.

    Args:
        layers: per ToR (``tor0``, ``tor1`` ... in order) the layers of its
            virtual switches ``S^1, S^2 ...``.
        links: ``((tor, j), (tor, j))`` pairs, ToR indices 0-based and virtual
            switches ``j`` 1-based, on adjacent layers of different ToRs.

    Returns:
        networkx.MultiGraph: a ToR graph (kind ``"custom"``, no host ports, so
        fabric ports start at 1, numbered as :func:`fcplus_graph` does).

    Raises:
        ParameterError: naming ``links`` for a link inside a ToR, between
            non-adjacent layers or repeated between two virtual switches.

    >>> graph = tor_graph_from_links([[1, 2], [1, 2]], [((0, 1), (1, 2)), ((1, 1), (0, 2))])
    >>> sorted(graph.edges(keys=True)), graph.nodes["tor0"]["ports"]
    ([('tor0', 'tor1', 0), ('tor0', 'tor1', 1)], [[1], [2]])
    """
    layers = [list(row) for row in layers]
    wired, seen = [], set()
    for link in links:
        (ta, ja), (tb, jb) = link
        a, b = (ta, ja - 1), (tb, jb - 1)
        try:
            la, lb = layers[ta][ja - 1], layers[tb][jb - 1]
        except (IndexError, TypeError):
            raise ParameterError("links", link, "pairs of existing (tor, j), j from 1") from None
        if ta == tb or abs(la - lb) != 1 or min(ja, jb) < 1:
            raise ParameterError("links", link, "links between different ToRs on adjacent layers")
        low, high = (a, b) if la < lb else (b, a)
        if (low, high) in seen:
            raise ParameterError("links", link, "at most one link between two virtual switches")
        seen.add((low, high))
        wired.append((low, high))
    degree = Counter()
    for low, high in wired:
        degree[low[0]] += 1
        degree[high[0]] += 1
    s = max(degree.values(), default=0)
    k = max((layer for row in layers for layer in row), default=1)
    return _assemble(dict(kind="custom", N=len(layers), p=s, s=s, h=0, v=max(map(len, layers), default=0), k=k,
                          n_gl=None, degrees=None, seed=None), layers, wired)


def _match_layers(lower, upper, rng, tor_pairs, allow_parallel, layer, N):
    """A random bipartite matching of link ends (configuration model) repaired by random swaps.

    Never pairs two virtual switches of one ToR or the same two virtual switches
    twice; avoids a second link between two ToRs unless ``allow_parallel``, and
    falls back to allowing it when the repair fails.  Updates ``tor_pairs``.
    """
    for parallel_ok in ((True,) if allow_parallel else (False, True)):
        candidate = list(upper)
        rng.shuffle(candidate)
        if _repair(lower, candidate, rng, tor_pairs, parallel_ok):
            for a, b in zip(lower, candidate):
                tor_pairs[_pair(a[0], b[0])] += 1
            return list(zip(lower, candidate))
    raise ParameterError("N", N, "a larger number of ToR switches",
                         f"no wiring between layers {layer} and {layer + 1} avoids links inside one ToR "
                         "and repeated links between two virtual switches")


def _pair(a, b):
    return (a, b) if a <= b else (b, a)


def _repair(lower, upper, rng, tor_pairs, parallel_ok):
    """Swap ends of ``upper`` in place until no pair conflicts; return whether that succeeded.

    A local search: a swap of two upper ends is kept when it does not add
    conflicts (equal counts too, so the search can cross plateaus).
    Conflicts: a pair inside one ToR, each repeat of a virtual switch pair and,
    unless ``parallel_ok``, each repeat of a ToR pair (``tor_pairs`` holds the
    links of the layer pairs wired before).
    """
    n = len(lower)
    vs_pairs = Counter(zip(lower, upper))
    pairs = Counter(tor_pairs)
    pairs.update(_pair(a[0], b[0]) for a, b in zip(lower, upper))

    def conflict(i):
        a, b = lower[i], upper[i]
        return (a[0] == b[0] or vs_pairs[(a, b)] > 1
                or (not parallel_ok and pairs[_pair(a[0], b[0])] > 1))

    def cost(positions, vs_keys, tor_keys):
        total = sum(lower[i][0] == upper[i][0] for i in positions)
        total += sum(max(0, vs_pairs[key] - 1) for key in vs_keys)
        if not parallel_ok:
            total += sum(max(0, pairs[key] - 1) for key in tor_keys)
        return total

    def count(i, step):
        vs_pairs[(lower[i], upper[i])] += step
        pairs[_pair(lower[i][0], upper[i][0])] += step

    def swap(i, j):
        count(i, -1)
        count(j, -1)
        upper[i], upper[j] = upper[j], upper[i]
        count(i, 1)
        count(j, 1)

    bad = [i for i in range(n) if conflict(i)]
    tries = _REPAIR_TRIES_PER_LINK * n + 1000
    while bad and tries > 0:
        tries -= 1
        i = bad[rng.randrange(len(bad))]
        if not conflict(i):
            bad.remove(i)
            continue
        j = rng.randrange(n)
        if j == i:
            continue
        vs_keys = {(lower[i], upper[i]), (lower[j], upper[j]), (lower[i], upper[j]), (lower[j], upper[i])}
        tor_keys = {_pair(lower[x][0], upper[y][0]) for x in (i, j) for y in (i, j)}
        before = cost((i, j), vs_keys, tor_keys)
        swap(i, j)
        if cost((i, j), vs_keys, tor_keys) > before:
            swap(i, j)
        elif conflict(j) and j not in bad:
            bad.append(j)
        if tries % n == 0:  # other pairs may have changed state through shared counters
            bad = [x for x in range(n) if conflict(x)]
    return not any(conflict(i) for i in range(n))


def tor_name(index):
    """Name of ToR ``index`` (``"tor<index>"``)."""
    return f"{TOR_PREFIX}{index}"


# ------------------------------------------------------------------ queries
def virtual_layers(graph):
    """The virtual switches on every layer.

    Args:
        graph: a ToR graph (:func:`fcplus_graph`, :func:`fc_graph`).

    Returns:
        dict: layer (1..k) -> sorted list of ``(tor name, j)`` (``j`` 1-based).

    >>> layers = virtual_layers(fcplus_graph(6, 12, 10, v=4, seed=3))
    >>> [len(layers[m]) for m in range(1, 7)]
    [6, 3, 3, 3, 3, 6]
    """
    result = {layer: [] for layer in range(1, graph.graph["k"] + 1)}
    for name, data in graph.nodes(data=True):
        for j, layer in enumerate(data["layers"], start=1):
            result[layer].append((name, j))
    for members in result.values():
        members.sort(key=lambda item: (graph.nodes[item[0]]["index"], item[1]))
    return result


def link_table(graph):
    """Every physical link with its ends' ports, virtual switches and layers, lower layer first.

    Returns:
        list[dict]: ``{"link", "a", "a_port", "a_vswitch", "a_layer", "b", "b_port",
        "b_vswitch", "b_layer"}`` by link id; ``a_layer + 1 == b_layer``.

    >>> link_table(tor_graph_from_links([[1, 2], [1, 2]], [((1, 2), (0, 1))]))  # doctest: +NORMALIZE_WHITESPACE
    [{'link': 0, 'a': 'tor0', 'a_port': 1, 'a_vswitch': 1, 'a_layer': 1,
      'b': 'tor1', 'b_port': 1, 'b_vswitch': 2, 'b_layer': 2}]
    """
    rows = []
    for u, w, key, data in graph.edges(keys=True, data=True):
        a = data["lower"]
        b = w if a == u else u
        rows.append({"link": key, "a": a, "a_port": data["port"][a], "a_vswitch": data["vswitch"][a],
                     "a_layer": data["layer"][a], "b": b, "b_port": data["port"][b],
                     "b_vswitch": data["vswitch"][b], "b_layer": data["layer"][b]})
    rows.sort(key=lambda row: row["link"])
    return rows


def port_virtual_switch(graph, tor, port):
    """Return ``(j, layer)`` of the virtual switch of ``tor`` that owns fabric port ``port``.

    Raises:
        ParameterError: ``port`` is not a fabric port of ``tor``.

    >>> graph = fcplus_graph(6, 12, 10, v=4, seed=3)  # h = 2: ports 3 (S^1), 4-7 (S^2), 8-11 (S^3), 12 (S^4)
    >>> j, layer = port_virtual_switch(graph, "tor0", 9)
    >>> j, layer == graph.nodes["tor0"]["layers"][2]
    (3, True)
    """
    data = graph.nodes[tor]
    for j, ports in enumerate(data["ports"], start=1):
        if port in ports:
            return j, data["layers"][j - 1]
    raise ParameterError("port", port, f"a fabric port of {tor}: {graph.graph['h'] + 1}..{graph.graph['p']}")


# --------------------------------------------------------------- topologies
class FCPlusTopo(FabricTopo):
    """FC+ expander (seed 001): N ToRs split into v virtual switches on k virtual layers, random wiring.

    Args:
        N: ToR switches (a multiple of ``N_gl``, at least ``N_gl (N_gl + 1)``).
        p: ports per ToR (``s < p <= 254``).
        s: ports per ToR to other ToRs (even, >= 4).
        v: virtual switches per ToR; None: the paper's strategy (:func:`choose_v`).
        seed: seed of the layer assignment and the wiring.
        hosts_per_tor: hosts attached to each ToR, 1..p-s; None: ``p - s``.
        hosts_link_mbps, fabric_link_mbps: link capacities.

    Switches are ``tor0 ..`` (role ``tor``, level 1, attributes ``index``,
    ``prefix``, ``virtual_layers`` and ``virtual_ports``), hosts ``h1 ..``
    (``10.<hi>.<lo>.<host+1>`` as :func:`leaf_host_address`, attribute ``tor``).
    ToR-ToR links are added with the end on the lower virtual layer first.
    :meth:`tor_graph` gives the ToR graph the routing functions take.

    Raises:
        ParameterError: a parameter that violates Eq. (1)-(3) or the port limits.
    """

    kind = "fcplus"
    PARAMETERS = (
        ("N", 8, "ToR switches (a multiple of N_gl, >= N_gl(N_gl+1))"),
        ("p", 8, "ports per ToR"),
        ("s", 6, "ports per ToR to other ToRs (even, >= 4, < p)"),
        ("v", None, "virtual switches per ToR, 2 < v <= k with integral N_gl (unset: the paper's choice)"),
        ("seed", 1, "seed of the layer assignment and the random wiring"),
        ("hosts_per_tor", None, "hosts per ToR, 1..p-s (unset: p-s)"),
        ("hosts_link_mbps", DEFAULT_HOST_LINK_MBPS, "capacity of host links (Mbit/s)"),
        ("fabric_link_mbps", DEFAULT_FABRIC_LINK_MBPS, "capacity of ToR-ToR links (Mbit/s)"),
    )

    def __init__(self, N=8, p=8, s=6, v=None, seed=1, hosts_per_tor=None,
                 hosts_link_mbps=DEFAULT_HOST_LINK_MBPS, fabric_link_mbps=DEFAULT_FABRIC_LINK_MBPS, **topo_opts):
        check_int("seed", seed, allowed="an integer")
        self._tors = fcplus_graph(N, p, s, v=v, seed=seed)
        self._init_common(N, p, s, seed, hosts_per_tor, hosts_link_mbps, fabric_link_mbps, topo_opts,
                          {"v": self._tors.graph["v"]})

    def _init_common(self, N, p, s, seed, hosts_per_tor, hosts_link_mbps, fabric_link_mbps, topo_opts, extra):
        """Validate the host parameters, record ``params`` and build."""
        h = p - s
        if hosts_per_tor is None:
            hosts_per_tor = h
        check_int("hosts_per_tor", hosts_per_tor, minimum=1, maximum=h)
        check_node_count("N", N, N * (1 + hosts_per_tor))
        self.params = {"N": N, "p": p, "s": s, **extra, "seed": seed, "hosts_per_tor": hosts_per_tor,
                       "hosts_link_mbps": check_positive_number("hosts_link_mbps", hosts_link_mbps),
                       "fabric_link_mbps": check_positive_number("fabric_link_mbps", fabric_link_mbps)}
        super().__init__(**topo_opts)

    # ------------------------------------------------------------ building
    def build(self):
        """Add the ToRs, their hosts and host links, then the ToR-ToR links layer pair by layer pair."""
        graph = self._tors
        names = sorted(graph.nodes, key=lambda name: graph.nodes[name]["index"])
        for name in names:
            data = graph.nodes[name]
            self.add_fabric_switch(name, "tor", 1, index=data["index"], prefix=leaf_prefix(data["index"]),
                                   virtual_layers=list(data["layers"]),
                                   virtual_ports=[list(ports) for ports in data["ports"]])
        number = 0
        for name in names:
            index = graph.nodes[name]["index"]
            for host_index in range(self.params["hosts_per_tor"]):
                number += 1
                host = self.add_fabric_host(f"h{number}", leaf_host_address(index, host_index), tor=name,
                                            host_index=host_index)
                self.add_fabric_link(host, 0, name, host_index + 1, self.params["hosts_link_mbps"])
        for row in sorted(link_table(graph), key=lambda r: (r["a_layer"], r["link"])):
            self.add_fabric_link(row["a"], row["a_port"], row["b"], row["b_port"], self.params["fabric_link_mbps"])

    # ------------------------------------------------------------- queries
    def tor_graph(self):
        """A copy of the ToR graph (see the module docstring) for routing and analysis."""
        return self._tors.copy()

    @property
    def k(self):
        """Number of virtual layers."""
        return self._tors.graph["k"]

    @property
    def v(self):
        """Virtual switches per ToR."""
        return self._tors.graph["v"]

    def virtual_layers(self):
        """Layer (1..k) -> ``[(tor, j), ...]`` (see :func:`virtual_layers`)."""
        return virtual_layers(self._tors)

    def link_layers(self):
        """Every ToR-ToR link with its ends' ports, virtual switches and layers (see :func:`link_table`)."""
        return link_table(self._tors)

    def port_virtual_switch(self, tor, port):
        """``(j, layer)`` of the virtual switch of ``tor`` owning fabric port ``port``."""
        return port_virtual_switch(self._tors, tor, port)

    def extra_summary(self):
        """FC+/FC rows: k, v, N_gl, links per virtual switch, virtual switches per layer, parallel links."""
        graph = self._tors
        sizes = [len(members) for _, members in sorted(virtual_layers(graph).items())]
        rows = [("k (virtual layers)", graph.graph["k"]), ("v (virtual switches per ToR)", graph.graph["v"]),
                ("h (host ports per ToR)", graph.graph["h"])]
        if graph.graph["degrees"] is not None:
            rows += [("N_gl (layers per group)", graph.graph["n_gl"]),
                     ("l_j (links per virtual switch)", ",".join(str(d) for d in graph.graph["degrees"]))]
        rows += [("virtual switches per layer (L1..Lk)", ",".join(str(size) for size in sizes)),
                 ("parallel ToR-ToR links", graph.graph["parallel_links"])]
        return rows


class FCTopo(FCPlusTopo):
    """FC expander (the FC+ baseline): v = k virtual switches per ToR, S_i^j on layer L_j, random wiring.

    Args:
        N: ToR switches (>= 2).
        p: ports per ToR (``s < p <= 254``).
        s: ports per ToR to other ToRs.
        k: virtual layers, 2..s/2+1; None: s/2 + 1 (FC+ with v = k).
        seed, hosts_per_tor, hosts_link_mbps, fabric_link_mbps: as :class:`FCPlusTopo`.
    """

    kind = "fc"
    PARAMETERS = (
        ("N", 8, "ToR switches"),
        ("p", 8, "ports per ToR"),
        ("s", 6, "ports per ToR to other ToRs (even, < p)"),
        ("k", None, "virtual layers = virtual switches per ToR, 2..s/2+1 (unset: s/2+1)"),
        ("seed", 1, "seed of the random wiring"),
        ("hosts_per_tor", None, "hosts per ToR, 1..p-s (unset: p-s)"),
        ("hosts_link_mbps", DEFAULT_HOST_LINK_MBPS, "capacity of host links (Mbit/s)"),
        ("fabric_link_mbps", DEFAULT_FABRIC_LINK_MBPS, "capacity of ToR-ToR links (Mbit/s)"),
    )

    def __init__(self, N=8, p=8, s=6, k=None, seed=1, hosts_per_tor=None,
                 hosts_link_mbps=DEFAULT_HOST_LINK_MBPS, fabric_link_mbps=DEFAULT_FABRIC_LINK_MBPS, **topo_opts):
        check_int("seed", seed, allowed="an integer")
        self._tors = fc_graph(N, p, s, k=k, seed=seed)
        self._init_common(N, p, s, seed, hosts_per_tor, hosts_link_mbps, fabric_link_mbps, topo_opts,
                          {"k": self._tors.graph["k"]})
