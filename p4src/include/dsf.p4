/* The DSF traffic manager of the embedded target: VOQs gated by credit, segmentation, reassembly.
 *
 * Real DSF interface nodes (Jericho3-AI) do these in fixed-function hardware
 * beside the programmable lookup; v1model has no primitive for them.  The
 * embedded target provides them as a documented part of its traffic manager
 * (testbed/p4/v1model/dsf/), declared here as extern functions.  They are
 * @embedded_only: loading a program that calls them for BMv2 is refused,
 * naming them, before anything starts (testbed/targets.py).  The lookup part of
 * the interface node (p4src/dsf_rdsw.p4) and the fabric-node program
 * (p4src/dsf_fabric.p4) are plain v1model.
 *
 * Include after dsf_headers.p4 and headers.p4.
 *
 * How the parts meet the pipeline (the same on every interface node):
 *
 *  - Ingress calls at most one of the functions below per packet.  The call is
 *    a request carried out at the end of ingress, in place of the packet's normal
 *    fate: dsf_voq_enqueue and dsf_reassemble take the packet (its egress_spec,
 *    multicast group and clone requests are ignored); dsf_credit_request and
 *    dsf_credit_grant consume a control cell (the program then drops it).
 *  - Frames the traffic manager makes enter the ingress pipeline again, like
 *    Tofino's packet generator or a recirculation, on two internal ports:
 *      DSF_CELL_PORT      cells (data cells of a granted packet, credit requests,
 *                         credit grants), complete with Ethernet and fabric
 *                         header: ingress sprays them toward dst_node like any
 *                         transit cell (so the spraying policy is P4: the
 *                         reachability table of include/dsf_forwarding.p4);
 *      DSF_DELIVERY_PORT  reassembled packets, exactly as the ingress node's pipeline
 *                         left them (no encapsulation: standard_metadata.packet_length
 *                         and the egress counters see the packet's real length); the
 *                         program finds their host port again from their destination.
 *  - Its statistics are the counters declared below (P4Runtime reads them; BMv2's
 *    P4Runtime server, like ours, serves counters, never registers).
 *
 * Semantics of each extern:
 *
 * dsf_voq_enqueue(src_node, dst_node, dst_port, tc, cell_bytes, voq_depth, credits)
 *   The packet (deparsed as ingress left it: computeChecksum and the deparser run
 *   first) joins the VOQ (dst_port, tc) of this node, at its tail, unless the VOQ
 *   holds voq_depth packets already: then it is dropped (dsf_drops[DSF_DROP_VOQ_TAIL]).
 *   With credits = 1 the VOQ sends only against credit: when it becomes non-empty
 *   it sends a CREDIT_REQUEST (credit_bytes = its backlog) to dst_node, repeats it
 *   every DSF_REQUEST_REFRESH_US while backlogged without a grant (a request may be
 *   lost), and sends one with credit_bytes = 0 when it empties; its head packet
 *   leaves while its credit balance is positive and costs its length in bytes
 *   (the balance may go negative by one packet); an empty VOQ keeps at most one
 *   grant's worth of credit.  With credits = 0 packets leave at once (no gating:
 *   the "credits off" switch of the experiments).  A packet that leaves gets the
 *   VOQ's next sequence number and is cut into n = ceil(L / (cell_bytes - 20)) DATA
 *   cells of equal size (the first L mod n carry one byte more: no short tail cell, so
 *   round-robin spraying balances bytes as well as cells), all entering ingress on
 *   DSF_CELL_PORT at once, in order.
 *   cell_bytes outside [DSF_HEADER_BYTES + 1, 1500] or voq_depth 0 drops the packet
 *   (dsf_drops[DSF_DROP_BAD_PARAMETER]) and logs the field and its range.
 *
 * dsf_credit_request(my_node, src_node, dst_port, tc, backlog_bytes, port,
 *                    port_rate_kbps, credit_rate_pct, grant_bytes)
 *   A CREDIT_REQUEST reached the egress node my_node.  The port scheduler of its
 *   local host port `port` (the system port dst_port) marks the VOQ (src_node,
 *   tc) active (backlog_bytes > 0) or idle (0).  Each port scheduler issues one
 *   CREDIT_GRANT of grant_bytes every grant_bytes * 8 / (port_rate_kbps * 1000 *
 *   credit_rate_pct / 100) seconds while it has active VOQs, to them in turn
 *   (round robin; classes are not prioritised), and none while it has none (no
 *   credit is saved up).  The latest rate and grant size given apply.
 *   credit_rate_pct outside [1, 100], grant_bytes 0 or port_rate_kbps 0 leaves the
 *   scheduler unchanged and counts dsf_drops[DSF_DROP_BAD_PARAMETER].
 *
 * dsf_credit_grant(dst_port, tc, credit_bytes, share_permille)
 *   A CREDIT_GRANT for the VOQ (dst_port, tc) of this node: its balance grows by
 *   credit_bytes * share_permille / 1000.  share_permille is this node's
 *   reachable share toward the granting node (the control plane's reachability:
 *   links with reachability over links with reachability when nothing failed),
 *   so a node whose reachability shrank sends proportionally less (seed 000,
 *   Input Balanced Mode: "notifying other devices to send proportionally less
 *   traffic to the affected device"); the rest of the grant is forfeited.
 *   A grant for a VOQ that is empty is answered with a request of 0.
 *
 * dsf_reassemble(src_node, dst_port, tc, seq, cell_index, last, payload_len, timeout_us)
 *   A DATA cell reached its egress node: its payload (the first payload_len bytes
 *   after the fabric header) is kept in the reassembly context (src_node,
 *   dst_port, tc), i.e. per source VOQ.  Packets are delivered in seq order, each
 *   as soon as all its cells (0 .. the one marked last) are there and every
 *   earlier packet was delivered or given up.  When the context has waited
 *   timeout_us for its next packet (cells of later packets present, or the next
 *   packet incomplete), that packet is given up (dsf_drops[DSF_DROP_REASSEMBLY_TIMEOUT],
 *   its received bytes) and delivery goes on: a missing cell is never waited on for
 *   ever.  A cell of a packet already delivered or given up is dropped
 *   (dsf_drops[DSF_DROP_LATE_CELL]): a cell is late when its seq is less than
 *   2^31 behind the next expected one (modulo 2^32).  A context buffers the window of
 *   DSF_MAX_PENDING_PACKETS seq numbers from the next expected one; a cell beyond
 *   the window (and not late) moves it so that its packet is the window's last:
 *   every packet before the new window is given up at once (counted together in
 *   dsf_drops[DSF_DROP_REASSEMBLY_TIMEOUT], as many packets as were skipped, with
 *   the bytes received of them), so a run of lost packets longer than the window
 *   costs those packets, not the context.
 */
#ifndef _TESTBED_DSF_P4_
#define _TESTBED_DSF_P4_

/* internal ports of the traffic manager (testbed/p4/v1model/dsf/constants.py) */
#define DSF_CELL_PORT_ID 509
#define DSF_DELIVERY_PORT_ID 508
const port_t DSF_CELL_PORT     = DSF_CELL_PORT_ID;
const port_t DSF_DELIVERY_PORT = DSF_DELIVERY_PORT_ID;

#define DSF_REQUEST_REFRESH_US 20000
#define DSF_MAX_PENDING_PACKETS 1024

/* dsf_drops indexes (places where the traffic manager drops) */
#define DSF_DROP_VOQ_TAIL 0
#define DSF_DROP_REASSEMBLY_TIMEOUT 1
#define DSF_DROP_LATE_CELL 2
#define DSF_DROP_BAD_PARAMETER 3
#define DSF_DROP_PLACES 4

#define DSF_PORTS 512

@embedded_only("DSF traffic manager: VOQs gated by credit and segmentation into cells")
extern void dsf_voq_enqueue(in bit<16> src_node, in bit<16> dst_node, in bit<16> dst_port, in bit<3> tc,
                            in bit<16> cell_bytes, in bit<32> voq_depth, in bit<1> credits);

@embedded_only("DSF traffic manager: egress port credit scheduler")
extern void dsf_credit_request(in bit<16> my_node, in bit<16> src_node, in bit<16> dst_port, in bit<3> tc,
                               in bit<32> backlog_bytes, in port_t port, in bit<32> port_rate_kbps,
                               in bit<8> credit_rate_pct, in bit<32> grant_bytes);

@embedded_only("DSF traffic manager: credit grants to VOQs")
extern void dsf_credit_grant(in bit<16> dst_port, in bit<3> tc, in bit<32> credit_bytes,
                             in bit<16> share_permille);

@embedded_only("DSF traffic manager: reassembly of cells into packets")
extern void dsf_reassemble(in bit<16> src_node, in bit<16> dst_port, in bit<3> tc, in bit<32> seq,
                           in bit<16> cell_index, in bit<1> last, in bit<16> payload_len,
                           in bit<32> timeout_us);

/* Statistics the traffic manager keeps (packets and bytes; VOQ index dst_port * DSF_CLASSES + tc) */
counter(DSF_MAX_VOQS, CounterType.packets_and_bytes) dsf_voq_enqueued;    /* packets admitted into the VOQ */
counter(DSF_MAX_VOQS, CounterType.packets_and_bytes) dsf_voq_dequeued;    /* packets that left it as cells */
counter(DSF_MAX_VOQS, CounterType.packets_and_bytes) dsf_credit_received; /* grants (bytes: granted) */
counter(DSF_PORTS, CounterType.packets_and_bytes) dsf_credit_granted;     /* grants issued, by local port */
counter(DSF_MAX_SYSTEM_PORTS, CounterType.packets_and_bytes) dsf_reassembled; /* packets delivered, by dst_port */
counter(DSF_DROP_PLACES, CounterType.packets_and_bytes) dsf_drops;        /* by DSF_DROP_* place */

#endif /* _TESTBED_DSF_P4_ */
