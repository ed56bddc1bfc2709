"""Log helpers for the processes a fabric runs (switches, controllers).

Kept free of Mininet imports: importing Mininet replaces the process-wide
logger class, which must not happen inside controller processes.
"""


def log_tail(path, lines=15):
    """Return the last ``lines`` lines of a log file ("" if unreadable)."""
    try:
        with open(path, errors="replace") as handle:
            return "".join(handle.readlines()[-lines:])
    except OSError:
        return ""
