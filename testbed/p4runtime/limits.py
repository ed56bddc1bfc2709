"""The documented limits of the P4Runtime server and the embedded target behind it.

A request that would go beyond one is refused with the status the P4Runtime
specification gives for a target limit, naming the limit and its value:

* Selector groups (spec "Action Profile Group Programming", "Rules on Setting
  max_size": a target refuses what it cannot support with RESOURCE_EXHAUSTED).
  The embedded target realizes a member of weight *w* as *w* consecutive copies in
  the group's selection list, as the PI server does in front of BMv2, so that the
  member a packet takes is the one BMv2 + PI would pick.  That list costs memory
  in proportion to the weights, so weights are capped (not represented another
  way, which would change the data-plane lookup): the sum of the member weights
  of one group is at most :data:`MAX_GROUP_WEIGHT`, the sum over all groups of
  one selector at most :data:`MAX_SELECTOR_WEIGHT`, and a group's ``max_size``
  at most :data:`MAX_GROUP_WEIGHT`.
* Indexed externs (counters, meters, registers) get one cell per index at
  pipeline commit.  A program declaring an array of more than
  :data:`MAX_EXTERN_CELLS` cells, or more than :data:`MAX_TOTAL_EXTERN_CELLS`
  cells over all its arrays, cannot be realized: SetForwardingPipelineConfig
  (and loading a program at switch start) fails with INVALID_ARGUMENT (spec
  "SetForwardingPipelineConfig RPC": a config the target cannot realize) before
  anything is allocated.
* Device configs: a config of more than ``MAX_DEVICE_CONFIG_BYTES``
  (``testbed.p4.device_config``), or whose program is larger than the loader's
  bounds after preprocessing (``MAX_PROGRAM_CHARS``, ``MAX_PROGRAM_TOKENS``: see
  ``testbed/p4/compiler/SUPPORTED.md``), is refused with INVALID_ARGUMENT naming
  the bound, before the program is parsed.
* gRPC: requests up to :data:`MAX_MESSAGE_BYTES` are accepted, and metadata up
  to :data:`MAX_METADATA_BYTES` is exchanged (server and the project's client;
  gRPC itself refuses a single metadata value of 16 MiB or more), so that the
  per-update ``p4.v1.Error`` details of a Write batch reach the client whatever
  its size (spec "Write RPC", "Error Reporting": one ``p4.Error`` per update).
  OK entries carry the code only; the messages of failed updates are shortened
  when needed so that all details fit in :data:`MAX_ERROR_DETAILS_BYTES`.  A
  Write of more than :data:`MAX_WRITE_UPDATES` updates is refused
  (RESOURCE_EXHAUSTED) before any is applied.  A client whose gRPC metadata
  limit is the library default (16 KiB) receives the details of batches of up
  to about 400 updates only: its channel must raise ``grpc.max_metadata_size``.
* Read responses are streamed in messages of :data:`READ_CHUNK_ENTITIES` entities.
"""

MAX_GROUP_WEIGHT = 1 << 16
"""Largest sum of member weights in one selector group (and largest ``max_size``)."""

MAX_SELECTOR_WEIGHT = 1 << 20
"""Largest sum of member weights over all groups of one action selector."""

MAX_EXTERN_CELLS = 1 << 20
"""Largest number of cells of one counter, meter or register array."""

MAX_TOTAL_EXTERN_CELLS = 1 << 22
"""Largest number of cells over all counter, meter and register arrays of a program."""

MAX_WRITE_UPDATES = 50_000
"""Largest number of updates in one WriteRequest."""

MAX_ERROR_DETAILS_BYTES = 12 << 20
"""Budget of the serialized ``google.rpc.Status`` of a failed Write batch."""

MAX_MESSAGE_BYTES = 64 << 20
"""Largest gRPC message the server receives and the project's client receives."""

MAX_METADATA_BYTES = 16 << 20
"""gRPC metadata size limit on the server and on the project's client channels."""

READ_CHUNK_ENTITIES = 512
"""Entities per ReadResponse message."""
