"""Which parts of a P4 program only the embedded target can run (its ``@embedded_only`` externs).

The embedded target implements some fixed-function parts itself (the DSF
traffic manager of p4src/include/dsf.p4) and declares them as extern functions
annotated ``@embedded_only("what it is")``.  BMv2 has no such externs, so a
program that calls one must be refused for BMv2 before anything starts, naming
them (:func:`embedded_only_calls`, used by :func:`testbed.targets.embedded_only_needs`),
rather than fail deep inside p4c or run without them.  Only the preprocessor and
the parser run here (no type check, no code generation): it is cheap enough to do
on every pipeline build.
"""
import os

from testbed.p4.frontend.ast import Node, annotation_value
from testbed.p4.frontend.parser import parse_source
from testbed.p4.frontend.preprocessor import Preprocessor, SourceProvider

ANNOTATION = "embedded_only"


def _calls(node, found):
    """Collect the names of every function called by name under ``node``."""
    if isinstance(node, Node):
        if node.kind == "call" and getattr(node.func, "kind", None) == "name":
            found.add(node.func.name)
        for value in node.__dict__.values():
            _calls(value, found)
    elif isinstance(node, (list, tuple)):
        for item in node:
            _calls(item, found)
    return found


def embedded_only_calls(path):
    """The ``@embedded_only`` extern functions a program calls.

    Args:
        path: the program's main file.

    Returns:
        dict: ``{extern name: what it is (the annotation's text)}``, empty for a plain v1model program.

    Raises:
        P4LoadError: the program does not preprocess or parse (file:line).
    """
    provider = SourceProvider(None, os.path.dirname(os.path.abspath(path)), None,
                              display_dir=os.path.dirname(path))
    preprocessor = Preprocessor(provider, None)
    program = parse_source(preprocessor.run(os.path.basename(path)))
    declared = {}
    for decl in program.declarations:
        if decl.kind == "extern_function":
            feature = annotation_value(getattr(decl, "annotations", None), ANNOTATION)
            if feature is not None:
                declared[decl.name] = feature
    called = _calls([d for d in program.declarations if d.kind != "extern_function"], set())
    return {name: feature for name, feature in sorted(declared.items()) if name in called}
