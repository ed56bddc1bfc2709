"""User-friendly values for the client: ints, IP and MAC strings, match specs per match kind.

Accepted value forms (``parse_value``): ``int``; ``bytes``; ``"10.0.0.1"`` (IPv4);
``"2001:db8::1"`` (IPv6); ``"00:11:22:33:44:55"`` or ``"00-11-..."`` (MAC); ``"0x1f"``
or ``"31"`` (numbers).  Match specs per match kind (``match_from_spec``):

* exact: a value.
* lpm: ``(value, prefix_len)``, ``"10.0.0.0/24"``, or a bare value (full prefix).
* ternary: ``(value, mask)``, ``"value&&&mask"``, or a bare value (all-ones mask).
* range: ``(low, high)`` or ``"low..high"``.
* optional: a value; ``None`` is the wildcard.
"""
import ipaddress
import re

from testbed.errors import ParameterError

_MAC_RE = re.compile(r"^[0-9a-fA-F]{2}([:-][0-9a-fA-F]{2}){5}$")


def parse_value(value, bitwidth, what):
    """The integer of a user-given value for a field of ``bitwidth`` bits.

    Raises:
        ParameterError: unparsable, negative or too wide (names ``what``).
    """
    allowed = f"an int, bytes, IP or MAC string fitting {bitwidth} bits"
    if isinstance(value, bool):
        raise ParameterError(what, value, allowed)
    if isinstance(value, int):
        number = value
    elif isinstance(value, (bytes, bytearray)):
        number = int.from_bytes(value, "big")
    elif isinstance(value, str):
        text = value.strip()
        try:
            if _MAC_RE.match(text):
                number = int(text.replace(":", "").replace("-", ""), 16)
            elif re.match(r"^\d+\.\d+\.\d+\.\d+$", text) or ":" in text:
                number = int(ipaddress.ip_address(text))
            else:
                number = int(text, 0)
        except ValueError:
            raise ParameterError(what, value, allowed) from None
    else:
        raise ParameterError(what, value, allowed)
    if number < 0 or number >> bitwidth:
        raise ParameterError(what, value, allowed, reason=f"value does not fit in {bitwidth} bits")
    return number


def match_from_spec(kind, spec, bitwidth, what):
    """(kind, numbers) of a user match spec; None when it is a wildcard.

    Returns:
        None for a wildcard, else a dict with keys by kind: exact/optional
        ``{"value"}``, lpm ``{"value", "prefix_len"}``, ternary ``{"value", "mask"}``,
        range ``{"low", "high"}``.

    Raises:
        ParameterError: a malformed spec (names ``what``).
    """
    full = (1 << bitwidth) - 1
    if spec is None:
        if kind == "exact":
            raise ParameterError(what, spec, "a value (exact fields cannot be wildcards)")
        return None
    if kind in ("exact", "optional"):
        return {"value": parse_value(spec, bitwidth, what)}
    if kind == "lpm":
        if isinstance(spec, str) and "/" in spec:
            address, _, length = spec.partition("/")
            spec = (address, int(length))
        if isinstance(spec, (tuple, list)):
            if len(spec) != 2:
                raise ParameterError(what, spec, "(value, prefix_len)")
            value, prefix_len = parse_value(spec[0], bitwidth, what), int(spec[1])
        else:
            value, prefix_len = parse_value(spec, bitwidth, what), bitwidth
        if not 0 <= prefix_len <= bitwidth:
            raise ParameterError(what, spec, f"a prefix length in 0..{bitwidth}")
        mask = full ^ ((1 << (bitwidth - prefix_len)) - 1)
        if prefix_len == 0:
            return None
        return {"value": value & mask, "prefix_len": prefix_len}
    if kind == "ternary":
        if isinstance(spec, str) and "&&&" in spec:
            spec = tuple(spec.split("&&&", 1))
        if isinstance(spec, (tuple, list)):
            if len(spec) != 2:
                raise ParameterError(what, spec, "(value, mask)")
            value, mask = parse_value(spec[0], bitwidth, what), parse_value(spec[1], bitwidth, what)
        else:
            value, mask = parse_value(spec, bitwidth, what), full
        if mask == 0:
            return None
        return {"value": value & mask, "mask": mask}
    if kind == "range":
        if isinstance(spec, str) and ".." in spec:
            spec = tuple(spec.split("..", 1))
        if not isinstance(spec, (tuple, list)) or len(spec) != 2:
            raise ParameterError(what, spec, "(low, high)")
        low, high = parse_value(spec[0], bitwidth, what), parse_value(spec[1], bitwidth, what)
        if low > high:
            raise ParameterError(what, spec, "(low, high) with low <= high")
        if low == 0 and high == full:
            return None
        return {"low": low, "high": high}
    raise ParameterError(what, kind, "exact, lpm, ternary, range or optional")
