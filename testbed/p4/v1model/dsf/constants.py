"""Fixed values of the DSF traffic manager, as p4src/include/dsf_headers.p4 and dsf.p4 declare them.

The P4 side and this side must agree (a test compares them): the fabric
header's layout, the EtherType of cells, the cell types, the internal ports on
which the traffic manager hands frames back to ingress, the indexes of its drop
counter and the names of the counters it keeps.
"""
import struct

ETHERTYPE_DSF = 0x88B5
ETHERNET_BYTES = 14
HEADER_BYTES = 20  # DSF_HEADER_BYTES

#: the fabric header, field by field as dsf_cell_t declares it: (name, bits)
HEADER_FIELDS = (("cell_type", 4), ("last", 1), ("tc", 3), ("ttl", 8), ("src_node", 16), ("dst_node", 16),
                 ("dst_port", 16), ("seq", 32), ("cell_index", 16), ("payload_len", 16), ("credit_bytes", 32))
#: the same as a struct format: the first byte packs cell_type, last and tc
HEADER_STRUCT = struct.Struct("!BBHHHIHHI")

CELL_DATA = 1
CELL_CREDIT_REQUEST = 2
CELL_CREDIT_GRANT = 3

INITIAL_TTL = 16  # DSF_INITIAL_TTL

CELL_PORT = 509  # DSF_CELL_PORT_ID: cells the traffic manager makes enter ingress here
DELIVERY_PORT = 508  # DSF_DELIVERY_PORT_ID: reassembled packets enter ingress here

CLASSES = 8  # DSF_CLASSES; VOQ index = dst_port * CLASSES + tc
MAX_VOQS = 512  # DSF_MAX_VOQS
MAX_SYSTEM_PORTS = 64  # DSF_MAX_SYSTEM_PORTS

REQUEST_REFRESH_NS = 20_000_000  # DSF_REQUEST_REFRESH_US
MAX_PENDING_PACKETS = 1024  # DSF_MAX_PENDING_PACKETS

PERMILLE = 1000  # reachable shares are in thousandths

MIN_CELL_BYTES = HEADER_BYTES + 1
MAX_CELL_BYTES = 1500  # the fabric links' MTU: a cell is one Ethernet payload

# dsf_drops indexes (DSF_DROP_*)
DROP_VOQ_TAIL = 0
DROP_REASSEMBLY_TIMEOUT = 1
DROP_LATE_CELL = 2
DROP_BAD_PARAMETER = 3
DROP_PLACES = ("voq_tail", "reassembly_timeout", "late_cell", "bad_parameter")

# the counters of p4src/include/dsf.p4 the traffic manager counts into (P4Info names)
COUNTER_VOQ_ENQUEUED = "dsf_voq_enqueued"
COUNTER_VOQ_DEQUEUED = "dsf_voq_dequeued"
COUNTER_CREDIT_RECEIVED = "dsf_credit_received"
COUNTER_CREDIT_GRANTED = "dsf_credit_granted"
COUNTER_REASSEMBLED = "dsf_reassembled"
COUNTER_DROPS = "dsf_drops"
COUNTERS = (COUNTER_VOQ_ENQUEUED, COUNTER_VOQ_DEQUEUED, COUNTER_CREDIT_RECEIVED, COUNTER_CREDIT_GRANTED,
            COUNTER_REASSEMBLED, COUNTER_DROPS)

#: the extern functions of p4src/include/dsf.p4 and their parameters, in order
EXTERNS = {
    "dsf_voq_enqueue": ("src_node", "dst_node", "dst_port", "tc", "cell_bytes", "voq_depth", "credits"),
    "dsf_credit_request": ("my_node", "src_node", "dst_port", "tc", "backlog_bytes", "port", "port_rate_kbps",
                           "credit_rate_pct", "grant_bytes"),
    "dsf_credit_grant": ("dst_port", "tc", "credit_bytes", "share_permille"),
    "dsf_reassemble": ("src_node", "dst_port", "tc", "seq", "cell_index", "last", "payload_len", "timeout_us"),
}


def voq_index(dst_port, tc):
    """The VOQ's counter index: ``dst_port * CLASSES + tc``."""
    return dst_port * CLASSES + tc
