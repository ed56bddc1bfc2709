"""Export a topology as JSON, Graphviz dot text, or a PNG drawing (tiers in rows).

* :func:`to_json`: the stable ``{"kind", "params", "nodes", "links"}`` form
  (:meth:`testbed.topologies.base.FabricTopo.to_dict`).
* :func:`to_dot`: Graphviz text (no Graphviz needed to produce it); one rank
  per level, hosts at the bottom, port numbers as edge end labels, parallel
  links as separate edges.
* :func:`write_png`: a matplotlib (Agg) drawing: one row per level with hosts
  at the bottom and the top tier at the top, nodes coloured by role, parallel
  links drawn once with a ``xN`` label.  Large tiers drop their labels rather
  than print unreadable ones.

Topologies on virtual layers (FC+ and FC: they have ``tor_graph()``) are drawn
as their virtual multi-layer topology, in dot and PNG alike: hosts at the
bottom, the physical ToRs above them, then one row per virtual layer
``L1 .. Lk`` holding the virtual switches ``S_i^j`` (named ``tor<i>/<j>``); a
dashed edge joins a ToR to each of its virtual switches and every link joins
the two virtual switches it connects (with its switch ports).
"""
import json
import textwrap
from collections import Counter

from testbed.topologies.graph import host_ip, is_host

FORMATS = ("json", "dot", "png")

ROLE_COLOURS = {
    "host": "#d9d9d9", "leaf": "#9ecae1", "edge": "#9ecae1", "rdsw": "#9ecae1",
    "spine": "#a1d99b", "agg": "#a1d99b", "fdsw": "#a1d99b",
    "core": "#fdae6b", "sdsw": "#fdae6b",
}
_DEFAULT_COLOUR = "#bcbddc"
_LAYER_COLOUR = "#fdd0a2"
_MAX_LABELLED_PER_ROW = 96


def to_json(topo, indent=2):
    """Return the topology's stable JSON text (see ``FabricTopo.to_dict``)."""
    return json.dumps(topo.to_dict(), indent=indent) + "\n"


def _dot_id(name):
    """Quote a name for dot."""
    return '"' + str(name).replace('"', r'\"') + '"'


def to_dot(topo):
    """Return Graphviz dot text for ``topo``.

    Nodes carry their role (as label line and fill colour) and, for hosts, the
    IP; edges carry ``taillabel``/``headlabel`` port numbers and the capacity.
    Render with ``dot -Tpng`` (or ``neato``) where Graphviz is installed.
    """
    if _is_virtual(topo):
        return _to_dot_virtual(topo)
    graph = topo.graph()
    lines = [f"graph {_dot_id(topo.kind)} {{",
             "  rankdir=BT;",
             "  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", fontsize=10];",
             "  edge [fontsize=8, labelfontsize=8];"]
    params = " ".join(f"{key}={value}" for key, value in topo.params.items() if value is not None)
    lines.append(f"  label={_dot_id(f'{topo.kind} {params}')}; labelloc=t;")
    by_level = {}
    for name in topo.node_names():
        by_level.setdefault(graph.nodes[name]["level"], []).append(name)
    for level in sorted(by_level):
        lines.append(f"  subgraph level{level} {{ rank=same;")
        for name in by_level[level]:
            attrs = graph.nodes[name]
            extra = host_ip(graph, name) if is_host(graph, name) else attrs["role"]
            colour = ROLE_COLOURS.get(attrs["role"], _DEFAULT_COLOUR)
            shape = ", shape=ellipse" if is_host(graph, name) else ""
            lines.append(f"    {_dot_id(name)} [label={_dot_id(name + chr(92) + 'n' + extra)}, "
                         f"fillcolor=\"{colour}\"{shape}];")
        lines.append("  }")
    for record in topo.link_records():
        capacity = record["capacity_mbps"]
        capacity_text = f"{int(capacity)}" if float(capacity).is_integer() else f"{capacity}"
        lines.append(f"  {_dot_id(record['a'])} -- {_dot_id(record['b'])} "
                     f"[taillabel=\"{record['a_port']}\", headlabel=\"{record['b_port']}\", "
                     f"tooltip=\"{capacity_text} Mbps\"];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _is_virtual(topo):
    """True for topologies on virtual layers (FC+, FC)."""
    return callable(getattr(topo, "tor_graph", None))


def _vswitch_id(tor, j):
    return f"{tor}/{j}"


def _to_dot_virtual(topo):
    """Dot text of a topology on virtual layers (see the module docstring)."""
    graph = topo.graph()
    tors = topo.tor_graph()
    k = tors.graph["k"]
    params = " ".join(f"{key}={value}" for key, value in topo.params.items() if value is not None)
    lines = [f"graph {_dot_id(topo.kind)} {{",
             "  rankdir=BT;",
             "  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", fontsize=10];",
             "  edge [fontsize=8, labelfontsize=8];",
             f"  label={_dot_id(f'{topo.kind} {params} (virtual layers L1..L{k})')}; labelloc=t;"]
    hosts = [name for name in topo.node_names() if is_host(graph, name)]
    switches = [name for name in topo.node_names() if not is_host(graph, name)]
    lines.append("  subgraph hosts { rank=same;")
    for name in hosts:
        label = name + chr(92) + "n" + host_ip(graph, name)
        lines.append(f"    {_dot_id(name)} [label={_dot_id(label)}, "
                     f"fillcolor=\"{ROLE_COLOURS['host']}\", shape=ellipse];")
    lines.append("  }")
    lines.append("  subgraph tors { rank=same;")
    for name in switches:
        lines.append(f"    {_dot_id(name)} [label={_dot_id(name + chr(92) + 'n' + graph.nodes[name]['role'])}, "
                     f"fillcolor=\"{_DEFAULT_COLOUR}\"];")
    lines.append("  }")
    members = _virtual_members(topo)
    for layer in range(1, k + 1):
        lines.append(f"  subgraph layer{layer} {{ rank=same;")
        for tor, j in members[layer]:
            label = f"{_vswitch_id(tor, j)}{chr(92)}nL{layer}"
            lines.append(f"    {_dot_id(_vswitch_id(tor, j))} [label={_dot_id(label)}, "
                         f"fillcolor=\"{_LAYER_COLOUR}\"];")
        lines.append("  }")
    for record in topo.link_records():
        if is_host(graph, record["a"]):
            lines.append(f"  {_dot_id(record['a'])} -- {_dot_id(record['b'])} "
                         f"[taillabel=\"{record['a_port']}\", headlabel=\"{record['b_port']}\"];")
    for tor in switches:
        for j in range(1, tors.graph["v"] + 1):
            lines.append(f"  {_dot_id(tor)} -- {_dot_id(_vswitch_id(tor, j))} [style=dashed, color=gray];")
    for row in sorted(topo.link_layers(), key=lambda r: r["link"]):
        lines.append(f"  {_dot_id(_vswitch_id(row['a'], row['a_vswitch']))} -- "
                     f"{_dot_id(_vswitch_id(row['b'], row['b_vswitch']))} "
                     f"[taillabel=\"{row['a_port']}\", headlabel=\"{row['b_port']}\"];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _virtual_members(topo):
    """Layer -> [(tor, j)], as ``topo.virtual_layers()``."""
    return topo.virtual_layers()


def layout_rows(topo):
    """Return ``{node: (x, y)}`` with one row per level (y = level) and nodes spread in build order.

    Each row is spread over the width of the widest row, centred, so a
    narrow top tier sits above the middle of a wide bottom tier.
    """
    graph = topo.graph()
    rows = {}
    for name in topo.node_names():
        rows.setdefault(graph.nodes[name]["level"], []).append(name)
    widest = max(len(names) for names in rows.values())
    positions = {}
    for level, names in rows.items():
        count = len(names)
        spacing = widest / count
        for i, name in enumerate(names):
            positions[name] = ((i + 0.5) * spacing, float(level))
    return positions


def write_png(topo, path, title=None, dpi=110):
    """Draw ``topo`` to a PNG file: tiers in rows, hosts at the bottom.

    Args:
        topo: a :class:`testbed.topologies.base.FabricTopo`.
        path: output file name.
        title: title text (default: kind and parameters).
        dpi: resolution.

    Returns:
        str: ``path``.
    """
    import matplotlib

    matplotlib.use("Agg")
    if _is_virtual(topo):
        return _write_png_virtual(topo, path, title, dpi)
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    graph = topo.graph()
    positions = layout_rows(topo)
    rows = Counter(graph.nodes[name]["level"] for name in graph.nodes)
    widest = max(rows.values())
    levels = sorted(rows)
    width = min(max(8.0, 0.55 * widest + 1.5), 60.0)
    height = 1.4 + 1.3 * len(levels)
    fig, ax = plt.subplots(figsize=(width, height))
    try:
        bundles = Counter()
        for a, b, data in graph.edges(data=True):
            bundles[(data["a"], data["b"])] += 1
        for (a, b), count in bundles.items():
            (xa, ya), (xb, yb) = positions[a], positions[b]
            ax.plot([xa, xb], [ya, yb], color="#737373", linewidth=0.6 + 0.7 * (count - 1), alpha=0.7, zorder=1)
            if count > 1:
                ax.text(xa + 0.3 * (xb - xa), ya + 0.3 * (yb - ya), f"x{count}", fontsize=7, color="#7a0177",
                        ha="center", va="center", zorder=3,
                        bbox=dict(boxstyle="round,pad=0.1", fc="white", ec="none", alpha=0.8))
        font = 8 if widest <= 40 else 6
        for name, (x, y) in positions.items():
            attrs = graph.nodes[name]
            colour = ROLE_COLOURS.get(attrs["role"], _DEFAULT_COLOUR)
            labelled = rows[attrs["level"]] <= _MAX_LABELLED_PER_ROW
            if is_host(graph, name):
                ax.scatter([x], [y], s=40, marker="o", color=colour, edgecolors="black", linewidths=0.5,
                           zorder=2)
                if labelled:
                    ax.text(x, y - 0.12, name, fontsize=font, ha="center", va="top",
                            rotation=90 if rows[attrs["level"]] > 24 else 0, zorder=3)
            elif labelled:
                label = name
                if topo.kind == "abfattree" and attrs.get("subtree_type") and attrs["role"] == "agg":
                    label = f"{name} {attrs['subtree_type']}"  # the pod's subtree type
                ax.text(x, y, label, fontsize=font, ha="center", va="center", zorder=3,
                        bbox=dict(boxstyle="round,pad=0.3", fc=colour, ec="black", lw=0.6))
            else:
                ax.scatter([x], [y], s=60, marker="s", color=colour, edgecolors="black", linewidths=0.5, zorder=2)
        for level in levels:
            role_names = sorted({graph.nodes[n]["role"] for n in graph.nodes if graph.nodes[n]["level"] == level})
            ax.text(-0.3, level, f"{'/'.join(role_names)}\n({rows[level]})", fontsize=9,
                    ha="right", va="center", fontweight="bold")
        present = []
        for name in sorted(topo.node_names(), key=lambda n: -graph.nodes[n]["level"]):
            role = graph.nodes[name]["role"]
            if role not in present:
                present.append(role)
        fig.legend(handles=[Patch(facecolor=ROLE_COLOURS.get(r, _DEFAULT_COLOUR), edgecolor="black", label=r)
                            for r in present], loc="lower center", ncol=len(present), fontsize=8,
                   frameon=False)
        if title is None:
            shown = " ".join(f"{k}={_compact(v)}" for k, v in topo.params.items()
                             if v is not None and v is not False and "mbps" not in k)
            title = f"{topo.kind}: {shown}"
        ax.set_title(textwrap.fill(title, width=int(width * 11)), fontsize=11, loc="left")
        ax.set_xlim(-2.4, widest + 0.3)
        ax.set_ylim(min(levels) - 0.6, max(levels) + 0.5)
        ax.axis("off")
        fig.tight_layout(rect=(0, 0.05, 1, 1))
        fig.savefig(path, dpi=dpi)
    finally:
        plt.close(fig)
    return path


def _write_png_virtual(topo, path, title, dpi):
    """PNG of a topology on virtual layers: hosts, ToRs, then the rows L1..Lk of virtual switches."""
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    graph = topo.graph()
    tors = topo.tor_graph()
    k = tors.graph["k"]
    members = _virtual_members(topo)
    hosts = [name for name in topo.node_names() if is_host(graph, name)]
    switches = [name for name in topo.node_names() if not is_host(graph, name)]
    rows = {0: hosts, 1: switches}
    for layer in range(1, k + 1):
        rows[layer + 1] = [_vswitch_id(tor, j) for tor, j in members[layer]]
    widest = max(len(names) for names in rows.values())
    positions = {}
    for y, names in rows.items():
        spacing = widest / max(len(names), 1)
        for i, name in enumerate(names):
            positions[name] = ((i + 0.5) * spacing, float(y))
    width = min(max(8.0, 0.5 * widest + 2.0), 60.0)
    height = 1.6 + 1.0 * len(rows)
    fig, ax = plt.subplots(figsize=(width, height))
    try:
        colours = plt.get_cmap("tab20")
        tor_colour = {tor: colours(i % 20) for i, tor in enumerate(switches)}
        for record in topo.link_records():
            if is_host(graph, record["a"]):
                (xa, ya), (xb, yb) = positions[record["a"]], positions[record["b"]]
                ax.plot([xa, xb], [ya, yb], color="#bdbdbd", linewidth=0.5, zorder=1)
        for tor in switches:
            for j in range(1, tors.graph["v"] + 1):
                (xa, ya), (xb, yb) = positions[tor], positions[_vswitch_id(tor, j)]
                ax.plot([xa, xb], [ya, yb], color=tor_colour[tor], linewidth=0.5, linestyle="--", alpha=0.5,
                        zorder=1)
        for row in topo.link_layers():
            (xa, ya) = positions[_vswitch_id(row["a"], row["a_vswitch"])]
            (xb, yb) = positions[_vswitch_id(row["b"], row["b_vswitch"])]
            ax.plot([xa, xb], [ya, yb], color="#525252", linewidth=0.8, alpha=0.8, zorder=1)
        font = 7 if widest <= 40 else 5
        for y, names in rows.items():
            labelled = len(names) <= _MAX_LABELLED_PER_ROW
            for name in names:
                x, _ = positions[name]
                if y == 0:
                    ax.scatter([x], [y], s=25, color=ROLE_COLOURS["host"], edgecolors="black", linewidths=0.4,
                               zorder=2)
                    continue
                tor, _, j = name.partition("/")
                colour = tor_colour[tor]
                label = name if not j else f"{graph.nodes[tor]['index']}^{j}"
                if labelled:
                    ax.text(x, y, label, fontsize=font, ha="center", va="center", zorder=3,
                            bbox=dict(boxstyle="round,pad=0.25", fc=colour, ec="black", lw=0.5))
                else:
                    ax.scatter([x], [y], s=40, marker="s", color=colour, edgecolors="black", linewidths=0.4,
                               zorder=2)
        names = {0: "hosts", 1: "ToRs"}
        for y, members_of_row in rows.items():
            label = names.get(y, f"L{y - 1}")
            ax.text(-0.3, y, f"{label}\n({len(members_of_row)})", fontsize=9, ha="right", va="center",
                    fontweight="bold")
        fig.legend(handles=[Line2D([0], [0], color="#525252", label="link between virtual switches i^j"),
                            Line2D([0], [0], color="gray", linestyle="--", label="ToR i - its virtual switches"),
                            Line2D([0], [0], color="#bdbdbd", label="host link")],
                   loc="lower center", ncol=3, fontsize=8, frameon=False)
        if title is None:
            shown = " ".join(f"{key}={_compact(value)}" for key, value in topo.params.items()
                             if value is not None and "mbps" not in key)
            title = f"{topo.kind}: {shown} (k={k} virtual layers, v={tors.graph['v']} virtual switches per ToR)"
        ax.set_title(textwrap.fill(title, width=int(width * 11)), fontsize=11, loc="left")
        ax.set_xlim(-2.4, widest + 0.3)
        ax.set_ylim(-0.6, len(rows) - 0.5)
        ax.axis("off")
        fig.tight_layout(rect=(0, 0.05, 1, 1))
        fig.savefig(path, dpi=dpi)
    finally:
        plt.close(fig)
    return path


def _compact(value):
    """Parameter value without spaces (lists as 1,2;3,4)."""
    if isinstance(value, (list, tuple)):
        if value and isinstance(value[0], (list, tuple)):
            return ";".join(",".join(str(x) for x in row) for row in value)
        return ",".join(str(x) for x in value)
    return str(value)


def export(topo, fmt, path=None):
    """Export ``topo`` in ``fmt``; return the text for json/dot when ``path`` is None.

    Args:
        topo: the topology.
        fmt: one of :data:`FORMATS`.
        path: output file (required for png).

    Returns:
        str or None: the text when not written to a file.

    Raises:
        ParameterError: unknown format, or png without a path.
    """
    from testbed.errors import ParameterError

    if fmt not in FORMATS:
        raise ParameterError("format", fmt, "one of: " + ", ".join(FORMATS))
    if fmt == "png":
        if not path:
            raise ParameterError("output", path, "a file name (-o FILE) for png")
        write_png(topo, path)
        return None
    text = to_json(topo) if fmt == "json" else to_dot(topo)
    if path:
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)
        return None
    return text
