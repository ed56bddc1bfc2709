"""P4Runtime for the testbed: P4Info generation, the embedded target's gRPC server, and a client.

Modules:
    p4info: P4Info protobuf from a :class:`testbed.p4.program.ProgramInfo`, with the ids p4c assigns.
    p4info_index: name/id lookups over any P4Info message (ours or p4c's).
    convert: P4Runtime byte strings and messages <-> the embedded target's runtime state.
    values: user-friendly values (ints, IP/MAC strings) and match specs for the client.
    target: the embedded target behind a server (program, state, device, packet I/O, device config).
    arbitration: primary/backup controllers per role.
    digests: DigestEntry config, DigestList batching and acks.
    idle_timeout: IdleTimeoutNotification for entries not hit for their TTL.
    server: the P4Runtime gRPC service, one per switch.
    reader: Read requests: what they select, copied under the lock, rendered and streamed after.
    limits: the documented limits (selector weights, extern array sizes, batch and metadata sizes).
    embedded: the embedded target's pipeline config (P4Info and device config) of a program.
    client: a P4Runtime client library that works with names, for both targets (a package:
        the session and one module per P4Runtime entity).
    errors: P4RuntimeError (a gRPC status name and a message).
"""
