"""How the traffic processes say they are ready and hand their JSON reports back."""
import json

#: the width of the time bins of the reports' timelines (packets sent and received per bin), in ms
DEFAULT_BIN_MS = 10.0


def emit_report(report, path=None):
    """Write ``report`` as indented JSON to ``path``, or print it when no path is given."""
    text = json.dumps(report, indent=1)
    if path:
        with open(path, "w") as handle:
            handle.write(text)
    else:
        print(text)


def announce(path, word):
    """Say the process is ready: ``word`` as a line on stdout when ``path`` is ``-`` (its report then
    follows there), else written into the file ``path``; nothing when ``path`` is None."""
    if not path:
        return
    if path == "-":
        print(word, flush=True)
        return
    with open(path, "w") as handle:
        handle.write(word + "\n")
