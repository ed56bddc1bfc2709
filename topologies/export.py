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
"""
import json
import textwrap
from collections import Counter

FORMATS = ("json", "dot", "png")

ROLE_COLOURS = {
    "host": "#d9d9d9", "leaf": "#9ecae1", "edge": "#9ecae1", "rdsw": "#9ecae1",
    "spine": "#a1d99b", "agg": "#a1d99b", "fdsw": "#a1d99b",
    "core": "#fdae6b", "sdsw": "#fdae6b",
}
_DEFAULT_COLOUR = "#bcbddc"
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
            extra = attrs["ip"].split("/")[0] if attrs["role"] == "host" else attrs["role"]
            colour = ROLE_COLOURS.get(attrs["role"], _DEFAULT_COLOUR)
            shape = ", shape=ellipse" if attrs["role"] == "host" else ""
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
            if attrs["role"] == "host":
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
