"""The error every failing call of the P4Runtime client raises, and how gRPC failures become it."""
from google.rpc import code_pb2, status_pb2
from p4.v1 import p4runtime_pb2

from testbed.errors import TestbedError


class P4RuntimeClientError(TestbedError):
    """A P4Runtime call failed.

    Attributes:
        code: gRPC status name ("NOT_FOUND", ...); for a failed Write batch the code of
            the first failing update (the call status itself is UNKNOWN, per the spec).
        message: the server's message; for a failed Write batch, the failed updates
            (index, code and message of the first few, and how many in all).
        errors: for a Write, list of (update index, code name, message) of every
            failed update (the index counts from 0 in the batch given to the client).
    """

    def __init__(self, code, message, errors=None):
        self.code = code
        self.message = message
        self.errors = errors or []
        super().__init__(f"{code}: {message}")


def describe_failures(errors, count, shown=5):
    """A one-line account of the failed updates of a Write batch.

    Args:
        errors: list of (update index, code name, message).
        count: the number of updates in the batch.
        shown: how many failures to spell out.

    Returns:
        str: e.g. ``"2 of 600 updates failed: update 17: ALREADY_EXISTS: ...; update 40: ..."``.
    """
    listed = "; ".join(f"update {index}: {code}: {message}" for index, code, message in errors[:shown])
    more = f"; and {len(errors) - shown} more" if len(errors) > shown else ""
    return f"{len(errors)} of {count} updates failed: {listed}{more}"


def _write_errors(trailing_metadata):
    """(number of p4.Error details, [(index, code name, message) of the failed ones]) of a status trailer."""
    for key, value in trailing_metadata or ():
        if key == "grpc-status-details-bin":
            status = status_pb2.Status()
            status.ParseFromString(value)
            errors = []
            for number, detail in enumerate(status.details):
                error = p4runtime_pb2.Error()
                if detail.Unpack(error) and error.canonical_code != code_pb2.OK:
                    errors.append((number, code_pb2.Code.Name(error.canonical_code), error.message))
            return len(status.details), errors
    return 0, []


def rpc_error(exc):
    """P4RuntimeClientError of a grpc.RpcError (decoding Write error details)."""
    code = exc.code().name if exc.code() is not None else "UNKNOWN"
    details = exc.details() or ""
    count, errors = _write_errors(exc.trailing_metadata())
    if code == "UNKNOWN" and errors:
        return P4RuntimeClientError(errors[0][1], describe_failures(errors, count), errors)
    return P4RuntimeClientError(code, details, errors)
