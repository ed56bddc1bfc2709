"""The topology kinds by name, and construction from CLI-style ``key=value`` strings.

``make_topology("fattree", k="4")`` converts each string value (integers,
floats, ``true``/``false``, ``none``, comma lists ``2,2,3`` and matrices with
rows separated by ``;`` such as ``1,2;2,1``) and passes it to the generator,
which validates it.  Non-string values are passed unchanged.
"""
from testbed.errors import ParameterError
from testbed.topologies.ab_fattree import ABFatTree
from testbed.topologies.clos import Clos3Topo, ClosTopo
from testbed.topologies.dsf.topology import DSFTopo
from testbed.topologies.fattree import FatTree
from testbed.topologies.fcplus.clos import FCPlusClosTopo
from testbed.topologies.fcplus.topology import FCPlusTopo, FCTopo

#: kind name -> generator class
TOPOLOGY_KINDS = {
    "clos": ClosTopo,
    "clos3": Clos3Topo,
    "fattree": FatTree,
    "abfattree": ABFatTree,
    "dsf": DSFTopo,
    "fcplus": FCPlusTopo,
    "fc": FCTopo,
    "fcplus_clos": FCPlusClosTopo,
}


def _parse_scalar(text):
    """Convert one CLI token to bool, None, int, float, or leave it as a string."""
    lowered = text.strip().lower()
    if lowered in ("true", "yes", "on"):
        return True
    if lowered in ("false", "no", "off"):
        return False
    if lowered in ("none", "null", ""):
        return None
    try:
        return int(lowered)
    except ValueError:
        pass
    try:
        return float(lowered)
    except ValueError:
        return text.strip()


def parse_value(text):
    """Convert a CLI parameter value: scalars, ``a,b,c`` lists and ``a,b;c,d`` matrices.

    Brackets are tolerated (``[1,2]``, ``[[1,2],[2,1]]``).

    Returns:
        the converted value (strings that are not numbers stay strings).
    """
    if not isinstance(text, str):
        return text
    stripped = text.strip()
    if stripped.startswith("[[") and stripped.endswith("]]"):
        stripped = stripped[2:-2].replace("],[", ";").replace("], [", ";")
    elif stripped.startswith("[") and stripped.endswith("]"):
        stripped = stripped[1:-1]
    if ";" in stripped:
        return [[_parse_scalar(item) for item in row.split(",")] for row in stripped.split(";")]
    if "," in stripped:
        return [_parse_scalar(item) for item in stripped.split(",")]
    return _parse_scalar(stripped)


def topology_class(kind):
    """Return the generator class of ``kind``.

    Raises:
        ParameterError: for an unknown kind (the message lists the known ones).
    """
    try:
        return TOPOLOGY_KINDS[kind]
    except KeyError:
        raise ParameterError("kind", kind, "one of: " + ", ".join(TOPOLOGY_KINDS)) from None


def parse_key_values(pairs):
    """Turn CLI tokens ``["k=4", "levels=2"]`` into ``{"k": "4", "levels": "2"}`` (values stay strings).

    Raises:
        ParameterError: a token is not of the form key=value, or a key repeats.
    """
    params = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ParameterError("params", pair, "key=value pairs (see `testbed topo kinds`)")
        if key in params:
            raise ParameterError(key, value, "each parameter given once", "repeated parameter")
        params[key] = value
    return params


def make_topology(kind, **params):
    """Build a topology of ``kind`` from keyword parameters (strings are converted).

    Args:
        kind: a key of :data:`TOPOLOGY_KINDS`.
        **params: generator parameters; string values are parsed with :func:`parse_value`.

    Returns:
        FabricTopo: the built topology.

    Raises:
        ParameterError: unknown kind, unknown parameter (the message lists the
            allowed ones) or a value the generator rejects.
    """
    cls = topology_class(kind)
    allowed = [name for name, _default, _help in cls.PARAMETERS]
    converted = {}
    for name, value in params.items():
        if name not in allowed:
            raise ParameterError(name, value, f"a parameter of {kind}: " + ", ".join(allowed),
                                 "unknown parameter")
        converted[name] = parse_value(value)
    return cls(**converted)


def describe_kinds():
    """Return ``[(kind, one-line description, [(name, default, help), ...]), ...]`` for every kind."""
    rows = []
    for kind, cls in TOPOLOGY_KINDS.items():
        doc = (cls.__doc__ or "").strip().splitlines()
        rows.append((kind, doc[0] if doc else "", list(cls.PARAMETERS)))
    return rows


def virtual_layer_analysis():
    """The routings and throughput analysis of topologies on virtual layers (FC+ and FC).

    Returns:
        ``(routing, throughput)``: the modules :mod:`testbed.topologies.fcplus.routing` (``ROUTINGS``,
        ``check_k``, ``check_n_lp``) and :mod:`testbed.topologies.fcplus.throughput` (``TRAFFIC_PATTERNS``,
        ``routing_throughput``), so that commands reach them through this registry.
    """
    from testbed.topologies.fcplus import routing, throughput
    return routing, throughput
