"""The one format of the log lines the testbed's processes write (switches, controllers).

Every line begins with a wall-clock timestamp, ISO 8601 in UTC with
milliseconds, then the logger's name, the level and the message::

    2026-11-24T04:40:00.123Z testbed.switchd.s1 INFO: ports {1: 's1-eth1'}, P4Runtime on 127.0.0.1:9560

The clock is the one results.json's ``t0_ns`` is read on (nanoseconds since
the epoch), and results.json gives time zero in this format too (``t0_utc``),
so a switch's or a controller's log line lines up with the run's timeline:
its time since start is the line's timestamp minus ``t0_utc``.

This module imports nothing of the testbed, so every layer may use it.
"""
import logging
import re
import sys
import time

#: the fields of a log line after its timestamp
LOG_FORMAT = "%(asctime)s %(name)s %(levelname)s: %(message)s"
#: a log line's timestamp, e.g. ``2026-11-24T04:40:00.123Z``
TIMESTAMP_RE = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")
#: a whole log line: timestamp, logger name, level, message
LINE_RE = re.compile(r"(?P<time>" + TIMESTAMP_RE.pattern + r") (?P<name>\S+) (?P<level>[A-Z]+): (?P<message>.*)")


def format_timestamp(time_ns):
    """``time_ns`` (nanoseconds since the epoch) as a log line's timestamp, e.g. ``2026-11-24T04:40:00.123Z``."""
    seconds, rest_ns = divmod(int(time_ns), 1_000_000_000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{rest_ns // 1_000_000:03d}Z"


class TimestampFormatter(logging.Formatter):
    """A :class:`logging.Formatter` writing :data:`LOG_FORMAT` with :func:`format_timestamp` times."""

    def __init__(self):
        super().__init__(LOG_FORMAT)

    def formatTime(self, record, datefmt=None):  # noqa: N802 - logging's name
        """The record's creation time as :func:`format_timestamp` writes it (``datefmt`` is ignored)."""
        return format_timestamp(int(record.created) * 1_000_000_000 + int(record.msecs) * 1_000_000)


def configure_process_logging(level=logging.INFO, stream=None):
    """Send the process's log records to ``stream`` as timestamped lines (replaces earlier handlers).

    Python warnings are logged too (so they carry a timestamp).

    Args:
        level: the root logger's level.
        stream: where lines go (default: ``sys.stderr``).

    Returns:
        logging.Handler: the handler installed on the root logger.
    """
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(TimestampFormatter())
    logging.basicConfig(level=level, handlers=[handler], force=True)
    logging.captureWarnings(True)
    return handler
