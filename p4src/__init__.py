"""P4_16 v1model programs (one per mechanism) and their shared includes.

``program_path(name)`` returns the path of a program shipped here.
"""
import os

P4SRC_DIR = os.path.dirname(os.path.abspath(__file__))


def program_path(name):
    """Return the absolute path of ``name`` (with or without ``.p4``) in p4src/.

    Raises:
        FileNotFoundError: no such program is shipped.
    """
    if not name.endswith(".p4"):
        name += ".p4"
    path = os.path.join(P4SRC_DIR, name)
    if not os.path.isfile(path):
        shipped = sorted(f for f in os.listdir(P4SRC_DIR) if f.endswith(".p4"))
        raise FileNotFoundError(f"no P4 program {name!r} in {P4SRC_DIR}; shipped: {', '.join(shipped)}")
    return path
