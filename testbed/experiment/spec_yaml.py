"""Reading a spec file's YAML within bounds: its size, encoding, nesting, aliases and keys.

``yaml.safe_load`` trusts its input in ways a spec reader must not:

* aliases are resolved by reference, so a few lines ("billion laughs")
  describe a value of billions of nodes that validation, copying or an error
  message would then walk;
* the composer recurses once per nesting level, so deep nesting exhausts
  Python's stack;
* a repeated key silently replaces the earlier value;
* a text stream is decoded with the locale's encoding.

:func:`read_spec_yaml` refuses each of these with a :class:`SpecError`:

* the file: at most :data:`MAX_SPEC_BYTES`, UTF-8 (a UTF-8 byte order mark is
  allowed; UTF-16 and UTF-32 are recognized by their byte order mark and refused);
* nesting: at most :data:`MAX_DEPTH` levels of mappings and lists;
* aliases (``*name``) are allowed while the document, with every alias
  expanded, has at most :data:`MAX_EXPANDED_NODES` nodes (a spec of 255
  traffic entries has a few thousand); an alias inside its own anchor is refused;
* a key given twice in one mapping is refused with its field path and both
  lines (keys a ``<<`` merge brings in may be overridden, as YAML specifies);
* values YAML cannot represent in Python (an integer of more than 4,300 digits)
  are refused.
"""
import yaml
from yaml.nodes import MappingNode, ScalarNode, SequenceNode

from testbed.errors import SpecError

MAX_SPEC_BYTES = 1 << 20
MAX_DEPTH = 32
MAX_EXPANDED_NODES = 100_000
MERGE_TAG = "tag:yaml.org,2002:merge"
_OTHER_UNICODE_BOMS = {b"\xff\xfe\x00\x00": "UTF-32", b"\x00\x00\xfe\xff": "UTF-32",
                       b"\xff\xfe": "UTF-16", b"\xfe\xff": "UTF-16"}


class _BoundedLoader(yaml.SafeLoader):
    """A SafeLoader whose composer refuses nesting deeper than :data:`MAX_DEPTH`."""

    def __init__(self, stream):
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent, index):
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                mark = self.peek_event().start_mark
                raise SpecError("spec", None, f"is nested more than {MAX_DEPTH} levels deep "
                                f"(line {mark.line + 1})", show_value=False)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def decode_spec_bytes(data):
    """The text of a spec file's bytes.

    Args:
        data: the file's content.

    Returns:
        str: the text (without a UTF-8 byte order mark).

    Raises:
        SpecError: larger than :data:`MAX_SPEC_BYTES`, UTF-16/UTF-32, or not valid UTF-8 (with the line).
    """
    if len(data) > MAX_SPEC_BYTES:
        raise SpecError("spec", None, f"is {len(data)} bytes; a spec file has at most {MAX_SPEC_BYTES} bytes",
                        show_value=False)
    for bom, encoding in _OTHER_UNICODE_BOMS.items():
        if data.startswith(bom):
            raise SpecError("spec", None, f"is {encoding} text; save it as UTF-8", show_value=False)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise SpecError("spec", None, f"is not UTF-8 text: byte 0x{data[error.start]:02x} on line {line}; "
                        "save it as UTF-8", show_value=False) from None


def _yaml_problem(error):
    """One line describing a YAML error (its problem and where)."""
    mark = getattr(error, "problem_mark", None)
    problem = getattr(error, "problem", None) or str(error)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    return where + " ".join(str(problem).split())


def _key_text(node):
    """A mapping key as it appears in a field path."""
    return node.value if isinstance(node, ScalarNode) else f"<{node.id} key>"


def check_nodes(root):
    """Refuse duplicate keys, recursive aliases and documents too large or deep once aliases are expanded.

    Each node is visited once (aliases share their anchor's node), so this
    takes time in proportion to the text, not to the expanded value.

    Args:
        root: the composed document (a yaml node) or None.

    Raises:
        SpecError: naming the field path of the duplicate key, the recursive alias
            or the too deep value, or the expanded size.
    """
    measured = {}   # id(node) -> (expanded node count, levels below and including it)
    active = set()  # nodes on the current path (one reached again through them is recursive)

    def too_deep(path):
        return SpecError(path or "spec", None, f"is nested more than {MAX_DEPTH} levels deep once aliases are "
                         "expanded", show_value=False)

    def visit(node, path, depth):
        key = id(node)
        if key in measured:
            size, height = measured[key]
            if depth + height - 1 > MAX_DEPTH:
                raise too_deep(path)
            return size, height
        if key in active:
            raise SpecError(path or "spec", None, "is an alias inside its own anchor (recursive)",
                            show_value=False)
        if depth > MAX_DEPTH:
            raise too_deep(path)
        active.add(key)
        children = []
        if isinstance(node, SequenceNode):
            children = [(item, f"{path}[{index}]") for index, item in enumerate(node.value)]
        elif isinstance(node, MappingNode):
            seen = {}
            for key_node, value_node in node.value:
                name = _key_text(key_node)
                field = f"{path}.{name}" if path else str(name)
                if key_node.tag != MERGE_TAG:
                    if name in seen:
                        raise SpecError(field, None, f"is given twice (lines {seen[name] + 1} and "
                                        f"{key_node.start_mark.line + 1})", show_value=False)
                    seen[name] = key_node.start_mark.line
                children += [(key_node, field), (value_node, field)]
        size, height = 1, 1
        for child, child_path in children:
            child_size, child_height = visit(child, child_path, depth + 1)
            size += child_size
            height = max(height, child_height + 1)
            if size > MAX_EXPANDED_NODES:
                raise SpecError("spec", None, f"has more than {MAX_EXPANDED_NODES} values once its aliases are "
                                "expanded (a YAML alias bomb?)", show_value=False)
        active.discard(key)
        measured[key] = (size, height)
        return size, height

    if root is not None:
        visit(root, "", 1)


def parse_spec_text(text):
    """Parse a spec's YAML text within the bounds of this module.

    Args:
        text: the YAML document.

    Returns:
        the parsed value (a dict for a well-formed spec).

    Raises:
        SpecError: invalid YAML, too deep, too large with aliases expanded, a
            duplicate key, or a value Python cannot hold.
    """
    loader = None
    try:
        loader = _BoundedLoader(text)  # the reader refuses unprintable characters here
        root = loader.get_single_node()
        check_nodes(root)
        return None if root is None else loader.construct_document(root)
    except SpecError:
        raise
    except yaml.YAMLError as error:
        raise SpecError("spec", None, f"is not valid YAML: {_yaml_problem(error)}", show_value=False) from None
    except ValueError as error:  # e.g. an integer of more digits than Python converts
        raise SpecError("spec", None, f"has a value that cannot be read: {' '.join(str(error).split())}",
                        show_value=False) from None
    finally:
        if loader is not None:
            loader.dispose()


def read_spec_yaml(path):
    """Read and parse a spec file within the bounds of this module.

    Args:
        path: the YAML file.

    Returns:
        the parsed value.

    Raises:
        SpecError: unreadable file, or anything :func:`decode_spec_bytes` and
            :func:`parse_spec_text` refuse.
    """
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_SPEC_BYTES + 1)
    except OSError as error:
        raise SpecError("spec", path, f"cannot read the file: {error.strerror or error}") from None
    return parse_spec_text(decode_spec_bytes(data))
