"""Switch database for the fat-tree designer: load, validate, and pick the cheapest switches.

A database is a JSON file::

    {"description": "...", "currency": "USD",
     "switches": [{"model": "fixed-36", "ports": 36, "cost": 9000,
                   "rack_units": 1, "watts": 106, "roles": ["edge", "core"]}, ...]}

``roles`` is optional (default: both).  As the fat-tree primer (seed 003)
recommends, each configuration of a modular switch (chassis with k line
boards) is its own entry, with its own ports, cost, size and power.  The
shipped ``data/switches.json`` is EXAMPLE DATA with made-up prices.

:func:`choose_design` tries every edge model with every core model (the
primer's nested loops), keeps the buildable designs within the optional
rack-unit, power and cost limits, and returns the cheapest.
"""
import dataclasses
import json
import math
import os
from dataclasses import dataclass
from typing import Tuple

from testbed.errors import ParameterError, TestbedError
from testbed.topologies.designer import design_fat_tree, max_nodes_two_level, validate_request

EXAMPLE_DB_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "switches.json")
ROLES = ("edge", "core")


@dataclass(frozen=True)
class SwitchModel:
    """One switch model (or one configuration of a modular switch).

    Attributes:
        model: unique name.
        ports: usable ports (int >= 2).
        cost: price of one switch (>= 0, the database's currency).
        rack_units: rack space of one switch (>= 0).
        watts: power of one switch (>= 0).
        roles: levels it may be used on, a subset of ("edge", "core").
        notes: free text.
    """

    model: str
    ports: int
    cost: float
    rack_units: float
    watts: float
    roles: Tuple[str, ...] = ROLES
    notes: str = ""


@dataclass(frozen=True)
class SwitchDatabase:
    """A validated set of switch models.

    Attributes:
        switches: the models, in file order (the order breaks cost ties).
        description: the file's description text.
        currency: unit of the costs.
        source: where it was loaded from.
    """

    switches: Tuple[SwitchModel, ...]
    description: str = ""
    currency: str = ""
    source: str = "<data>"

    def models_for(self, role):
        """Return the models allowed on ``role`` ("edge" or "core").

        Raises:
            ParameterError: for an unknown role.
        """
        if role not in ROLES:
            raise ParameterError("role", role, "one of: " + ", ".join(ROLES))
        return [switch for switch in self.switches if role in switch.roles]

    def get(self, model):
        """Return the model named ``model``.

        Raises:
            ParameterError: if there is no such model.
        """
        for switch in self.switches:
            if switch.model == model:
                return switch
        raise ParameterError("model", model, "one of: " + ", ".join(s.model for s in self.switches))


def _number(source, field_name, value, minimum, integer=False):
    """Validate one numeric field; raise ParameterError naming ``field_name``."""
    kind = "an integer" if integer else "a number"
    allowed = f"{kind} >= {minimum}"
    ok_type = isinstance(value, int) if integer else isinstance(value, (int, float))
    if isinstance(value, bool) or not ok_type or (not integer and not math.isfinite(value)) or value < minimum:
        raise ParameterError(field_name, value, allowed, f"in switch database {source}")
    return value


def parse_switch_db(data, source="<data>"):
    """Validate the parsed JSON of a switch database.

    Args:
        data: the decoded JSON document.
        source: file name used in error messages.

    Returns:
        SwitchDatabase.

    Raises:
        ParameterError: naming the bad field (``switches[3].ports``) and its allowed values.
    """
    where = f"in switch database {source}"
    if not isinstance(data, dict):
        raise ParameterError("(document)", type(data).__name__, "a JSON object with a \"switches\" list", where)
    entries = data.get("switches")
    if not isinstance(entries, list) or not entries:
        raise ParameterError("switches", entries, "a non-empty list of switch objects", where)
    switches, seen = [], set()
    for index, entry in enumerate(entries):
        prefix = f"switches[{index}]"
        if not isinstance(entry, dict):
            raise ParameterError(prefix, entry, "an object with model, ports, cost, rack_units, watts", where)
        unknown = set(entry) - {"model", "ports", "cost", "rack_units", "watts", "roles", "notes"}
        if unknown:
            raise ParameterError(f"{prefix}.{sorted(unknown)[0]}", entry[sorted(unknown)[0]],
                                 "no such field; fields are model, ports, cost, rack_units, watts, roles, notes",
                                 where)
        model = entry.get("model")
        if not isinstance(model, str) or not model.strip():
            raise ParameterError(f"{prefix}.model", model, "a non-empty string", where)
        if model in seen:
            raise ParameterError(f"{prefix}.model", model, "a name not used by another switch", where)
        seen.add(model)
        ports = _number(source, f"{prefix}.ports", entry.get("ports"), 2, integer=True)
        cost = _number(source, f"{prefix}.cost", entry.get("cost"), 0)
        rack_units = _number(source, f"{prefix}.rack_units", entry.get("rack_units"), 0)
        watts = _number(source, f"{prefix}.watts", entry.get("watts"), 0)
        roles = entry.get("roles", list(ROLES))
        if (not isinstance(roles, list) or not roles
                or any(role not in ROLES for role in roles) or len(set(roles)) != len(roles)):
            raise ParameterError(f"{prefix}.roles", roles, 'a non-empty list of "edge" and/or "core"', where)
        notes = entry.get("notes", "")
        if not isinstance(notes, str):
            raise ParameterError(f"{prefix}.notes", notes, "a string", where)
        switches.append(SwitchModel(model=model, ports=ports, cost=cost, rack_units=rack_units,
                                    watts=watts, roles=tuple(roles), notes=notes))
    description = data.get("description", "")
    currency = data.get("currency", "")
    if not isinstance(description, str):
        raise ParameterError("description", description, "a string", where)
    if not isinstance(currency, str):
        raise ParameterError("currency", currency, "a string", where)
    return SwitchDatabase(switches=tuple(switches), description=description, currency=currency, source=source)


def load_switch_db(path=None):
    """Load and validate a switch database file.

    Args:
        path: JSON file; None loads the shipped example database (made-up prices).

    Returns:
        SwitchDatabase.

    Raises:
        TestbedError: if the file cannot be read or is not valid JSON (with line and column).
        ParameterError: if a field is invalid (naming it).
    """
    path = EXAMPLE_DB_PATH if path is None else os.fspath(path)
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as error:
        raise TestbedError(f"cannot read switch database {path}: {error.strerror or error}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise TestbedError(f"switch database {path} is not valid JSON: line {error.lineno} "
                           f"column {error.colno}: {error.msg}") from None
    return parse_switch_db(data, source=path)


def with_models(design, edge_model, core_model):
    """Return a copy of ``design`` with the models and the cost, rack-unit and watt totals.

    Totals count the installed switches: E edge switches and C core switches
    (with expansion, the core level is complete from the start).

    Args:
        design: a Design whose port counts match the models.
        edge_model: SwitchModel used on the edge level.
        core_model: SwitchModel used on the core level.

    Returns:
        Design: the copy.

    Raises:
        ParameterError: if a model's ports differ from the design's.
    """
    if edge_model.ports != design.edge_ports:
        raise ParameterError("edge_model", edge_model.model, f"a model with {design.edge_ports} ports")
    if core_model.ports != design.core_ports:
        raise ParameterError("core_model", core_model.model, f"a model with {design.core_ports} ports")
    edges, cores = design.edge_switches, design.core_switches
    return dataclasses.replace(
        design, edge_model=edge_model.model, core_model=core_model.model,
        cost=edges * edge_model.cost + cores * core_model.cost,
        rack_units=edges * edge_model.rack_units + cores * core_model.rack_units,
        watts=edges * edge_model.watts + cores * core_model.watts)


def candidate_designs(db, nodes, blocking=1, edge_ports=None, core_ports=None, distribution="dense",
                      bundle_split="even", expand_to=None, max_rack_units=None, max_watts=None,
                      max_cost=None):
    """Every buildable design from the database's edge x core models, cheapest first.

    Args:
        db: SwitchDatabase.
        nodes, blocking, distribution, bundle_split, expand_to: as for
            :func:`testbed.topologies.designer.design_fat_tree`.
        edge_ports: if given, only edge models with this many ports.
        core_ports: if given, only core models with this many ports.
        max_rack_units, max_watts, max_cost: optional limits on the totals.

    Returns:
        list[Design]: sorted by cost, then rack units, watts, total switches and database order.

    Raises:
        ParameterError: for invalid common parameters (nodes, blocking, ...), or for
            a port count no model of that role has.
    """
    edge_models = db.models_for("edge")
    core_models = db.models_for("core")
    if edge_ports is not None:
        edge_models = [m for m in edge_models if m.ports == edge_ports]
        if not edge_models:
            raise ParameterError("edge_ports", edge_ports, "a port count of an edge model in the database: "
                                 + ", ".join(sorted({str(m.ports) for m in db.models_for("edge")}, key=int)))
    if core_ports is not None:
        core_models = [m for m in core_models if m.ports == core_ports]
        if not core_models:
            raise ParameterError("core_ports", core_ports, "a port count of a core model in the database: "
                                 + ", ".join(sorted({str(m.ports) for m in db.models_for("core")}, key=int)))
    for name, limit in (("max_rack_units", max_rack_units), ("max_watts", max_watts), ("max_cost", max_cost)):
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, (int, float)) or limit < 0):
            raise ParameterError(name, limit, "a number >= 0")

    validate_request(nodes, blocking, distribution, bundle_split, expand_to)

    ranked = []
    for edge_index, edge in enumerate(edge_models):
        for core_index, core in enumerate(core_models):
            try:
                design = design_fat_tree(nodes, edge.ports, core.ports, blocking, distribution,
                                         bundle_split, expand_to)
            except ParameterError:
                continue  # this pair cannot build the tree (E > Pc); other pairs may
            design = with_models(design, edge, core)
            if max_rack_units is not None and design.rack_units > max_rack_units:
                continue
            if max_watts is not None and design.watts > max_watts:
                continue
            if max_cost is not None and design.cost > max_cost:
                continue
            ranked.append(((design.cost, design.rack_units, design.watts, design.total_switches,
                            edge_index, core_index), design))
    ranked.sort(key=lambda item: item[0])
    return [design for _, design in ranked]


def choose_design(db, nodes, blocking=1, edge_ports=None, core_ports=None, distribution="dense",
                  bundle_split="even", expand_to=None, max_rack_units=None, max_watts=None,
                  max_cost=None):
    """The cheapest buildable design from the database (ties: fewer rack units, watts, switches).

    Args:
        db: SwitchDatabase.
        nodes, blocking, edge_ports, core_ports, distribution, bundle_split,
            expand_to, max_rack_units, max_watts, max_cost: see :func:`candidate_designs`.

    Returns:
        Design: with edge_model, core_model, cost, rack_units and watts set.

    Raises:
        ParameterError: for invalid parameters, or when no model pair can
            build the tree (names "nodes" or "expand_to" with the largest size
            the database allows) or none fits the limits (names the limit).
    """
    designs = candidate_designs(db, nodes, blocking, edge_ports, core_ports, distribution, bundle_split,
                                expand_to, max_rack_units, max_watts, max_cost)
    if designs:
        return designs[0]
    unconstrained = candidate_designs(db, nodes, blocking, edge_ports, core_ports, distribution,
                                      bundle_split, expand_to)
    if unconstrained:
        cheapest = unconstrained[0]
        smallest = min(unconstrained, key=lambda d: d.rack_units)
        leanest = min(unconstrained, key=lambda d: d.watts)
        for name, limit, best in (("max_rack_units", max_rack_units, smallest.rack_units),
                                  ("max_watts", max_watts, leanest.watts),
                                  ("max_cost", max_cost, cheapest.cost)):
            if limit is not None and limit < best:
                raise ParameterError(name, limit, f">= {best:g} for this request",
                                     "no switch combination in the database fits")
        raise ParameterError("max_rack_units/max_watts/max_cost", (max_rack_units, max_watts, max_cost),
                             "limits that one switch combination meets together",
                             "each limit alone can be met, but not all at once")
    largest = 0
    for edge in db.models_for("edge"):
        if edge_ports is not None and edge.ports != edge_ports:
            continue
        for core in db.models_for("core"):
            if core_ports is not None and core.ports != core_ports:
                continue
            largest = max(largest, max_nodes_two_level(edge.ports, core.ports, blocking))
    field_name, value = ("expand_to", expand_to) if expand_to is not None else ("nodes", nodes)
    raise ParameterError(field_name, value, f"1..{largest} with the switches of {db.source}",
                         "no edge/core model pair can build a two-level fat-tree this large")

