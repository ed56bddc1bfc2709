"""How the traffic processes hand their JSON reports back."""
import json


def emit_report(report, path=None):
    """Write ``report`` as indented JSON to ``path``, or print it when no path is given."""
    text = json.dumps(report, indent=1)
    if path:
        with open(path, "w") as handle:
            handle.write(text)
    else:
        print(text)
