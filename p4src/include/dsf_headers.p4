/* The DSF fabric header (seed 000): what a cell carries across the fabric domain.
 *
 * Include before headers.p4 and parsers.p4 (it fills their hooks: a headers_t
 * member `dsf`, the parser state for cells, the deparser).  Used by every DSF
 * node program: p4src/dsf_rdsw.p4 (interface nodes) and p4src/dsf_fabric.p4
 * (fabric and spine nodes, plain v1model).
 *
 * A cell on a fabric link is one Ethernet frame:
 *
 *   Ethernet (14 bytes, EtherType 0x88B5, the IEEE 802 local-experimental value;
 *             cells never leave the fabric domain, so no host ever sees one)
 *   dsf_cell_t (DSF_HEADER_BYTES = 20 bytes, below)
 *   payload    (data cells: `payload_len` bytes of the packet; control cells: none)
 *
 * Cell size (run-time parameter dsf_cell_bytes, testbed/modes.py): the fabric
 * header plus the payload, i.e. what the Ethernet frame carries, at most; a
 * packet of L bytes becomes n = ceil(L / (dsf_cell_bytes - 20)) cells of equal size.  Jericho-class
 * devices use cells of up to 256 bytes; the emulation may use larger ones to
 * save work, and results record the size.
 *
 * Fields:
 *   cell_type    1 DATA: a piece of a packet;
 *                2 CREDIT_REQUEST: a VOQ tells the egress port scheduler of its
 *                  destination port its state: credit_bytes = the VOQ's backlog
 *                  in bytes (0: the VOQ is empty, stop granting);
 *                3 CREDIT_GRANT: the egress port scheduler gives a VOQ
 *                  credit_bytes of credit.
 *   last         DATA: this is the last cell of its packet.
 *   tc           traffic class; a VOQ is (dst_port, tc).
 *   ttl          decremented by every fabric node; a cell reaching 0 is dropped
 *                (a loop guard: the fabric forwards only toward the destination).
 *   src_node     the interface node that made the cell (DATA, REQUEST: the VOQ's
 *                node; GRANT: the egress node that grants).
 *   dst_node     the interface node the cell goes to: the only key every fabric
 *                node forwards on (no L3 lookup inside the fabric).
 *   dst_port     the destination system port (a host port of the egress node,
 *                numbered across the whole fabric by the control plane).
 *   seq          DATA: the packet's sequence number in its VOQ (0, 1, 2 ... per
 *                (src_node, dst_port, tc)); the egress node delivers in this order.
 *   cell_index   DATA: the cell's position in its packet (0 first).
 *   payload_len  DATA: payload bytes in this cell.
 *   credit_bytes REQUEST: the VOQ's backlog in bytes (0: empty);
 *                GRANT: bytes of credit granted.
 */
#ifndef _TESTBED_DSF_HEADERS_P4_
#define _TESTBED_DSF_HEADERS_P4_

#define HEADERS_AFTER_ETHERNET \
    dsf_cell_t dsf;

#define PARSER_ETHERTYPES_EXTRA \
    ETHERTYPE_DSF: parse_dsf_cell;

#define PARSER_STATES_EXTRA \
    state parse_dsf_cell { \
        packet.extract(hdr.dsf); \
        transition accept; \
    }

#define DEPARSE_AFTER_ETHERNET \
    packet.emit(hdr.dsf);

const bit<16> ETHERTYPE_DSF = 0x88B5;
#define DSF_HEADER_BYTES 20

const bit<4> DSF_CELL_DATA           = 1;
const bit<4> DSF_CELL_CREDIT_REQUEST = 2;
const bit<4> DSF_CELL_CREDIT_GRANT   = 3;

/* a fabric node forwards a cell at most this many times */
const bit<8> DSF_INITIAL_TTL = 16;

/* node numbers and system ports are below these (array sizes of the programs) */
#define DSF_MAX_NODES 1024
#define DSF_MAX_SYSTEM_PORTS 64
#define DSF_CLASSES 8
/* VOQ index = dst_port * DSF_CLASSES + tc */
#define DSF_MAX_VOQS 512
/* a system port no node has */
const bit<16> DSF_NO_PORT = 0xFFFF;

header dsf_cell_t {
    bit<4>  cell_type;
    bit<1>  last;
    bit<3>  tc;
    bit<8>  ttl;
    bit<16> src_node;
    bit<16> dst_node;
    bit<16> dst_port;
    bit<32> seq;
    bit<16> cell_index;
    bit<16> payload_len;
    bit<32> credit_bytes;
}

/* Per-packet DSF metadata of the node programs (interface nodes use every field,
 * fabric nodes only spray_key). */
struct dsf_metadata_t {
    bit<32> spray_key;              /* the spraying selector's key (round robin per dst_node) */
    bit<16> my_node;                /* this interface node (MyIngress.dsf_node) */
    bit<16> dst_node;               /* host route: egress interface node */
    bit<16> dst_port;               /* host route: destination system port */
    bit<3>  tc;                     /* traffic class (MyIngress.dsf_class) */
    bit<16> lookup_port;            /* system port looked up in dsf_system_ports */
    bit<9>  local_port;             /* its local port */
    bit<32> port_rate_kbps;         /* and that port's rate */
    bit<16> share_permille;         /* reachable share toward a granting node */
    /* run-time parameters (MyIngress.dsf_params, testbed/modes.py) */
    bit<16> cell_bytes;
    bit<32> grant_bytes;
    bit<8>  credit_rate_pct;
    bit<32> voq_depth;
    bit<32> reassembly_timeout_us;
    bit<1>  credits;
}

#endif /* _TESTBED_DSF_HEADERS_P4_ */
