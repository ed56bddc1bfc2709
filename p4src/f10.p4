/* f10.p4 - F10's data plane: failure detector, probes and local rerouting (seed 002, sections 5.1, 5.4).
 *
 * Runs on an AB FatTree (F10 proper) and on a standard FatTree (local rerouting
 * with longer detours), on the embedded target and on BMv2: plain v1model.
 *
 * Forwarding.  MyIngress.ipv4_lpm (the routing objects of include/routing.p4's
 * programs: one controller writes all of them) gives the primary next hop: ECMP
 * over the parents on the way up (hashed as p4src/ecmp.p4 hashes: the 5-tuple,
 * the hash seed and the switch's own salt, include/flow_hash.p4), the one child
 * on the way down.
 * If the failure detector (include/f10_detector.p4) has declared that port down,
 * the same pass takes the backup: MyIngress.f10_backup, keyed by destination and
 * primary port, written by the controller from the topology
 * (controllers/f10/routes.py):
 *   - up:   another parent (set_nhop: a plain next hop, no mark);
 *   - down: F10 Scheme 1 on an AB FatTree: a type-B child, marked phase UP, which
 *           goes up to a parent outside the failed child's failure group (+2 hops);
 *           Scheme 2 where Scheme 1 has no child (a standard FatTree): a
 *           same-type child, marked phase DOWN, which goes down, then up again
 *           away from it (+4 hops).
 * A marked packet (the detour header, include/f10_headers.p4) follows its phase
 * at the next switches (f10_detour_down: any child; f10_detour_up: any parent but
 * the one it came from) and then routes normally; it is never detoured again.
 * A packet whose next hop is down and has no working backup is dropped and
 * counted (MyIngress.f10_no_detour, by port).  TTL drops by one per switch, so
 * receivers see the detour's extra hops.
 *
 * Scheduled flows (sections 6.1, 6.2).  MyIngress.f10_flows, exact on the source
 * and destination address, comes before ipv4_lpm: an entry whose action is
 * scheduled_nhop pins that host pair's flow to the next hop the epoch scheduler
 * chose (controllers/f10/scheduled_flows.py); an entry with NoAction only counts
 * (its direct counter is how the scheduler measures the ToRs' flows).  A
 * scheduled flow whose pinned port is down becomes unscheduled at that switch and
 * takes ipv4_lpm and the backup like any other packet.  Marked (detoured)
 * packets skip the table.
 *
 * Detector, probes and reports: include/f10_detector.p4.  Port roles (which
 * ports are fabric ports, which face hosts): MyIngress.f10_fabric_ports and
 * MyEgress.f10_host_ports, written by the controller.
 */
#include <core.p4>
#include <v1model.p4>

#include "include/f10_headers.p4"
#include "include/headers.p4"

const port_t PKTGEN_PORT = PKTGEN_PORT_ID;

struct f10_metadata_t {
    bit<1>  fabric_port;         /* the ingress port is a fabric (switch-switch) port */
    port_t  primary_port;        /* ipv4_lpm's choice */
    bit<1>  scheduled;           /* MyIngress.f10_flows placed this packet's flow */
    /* detector parameters (MyEgress.detector_params) */
    bit<32> window_buckets;
    bit<32> down_below;
    bit<32> up_at_least;
    bit<32> probe_period_us;
    bit<32> holddown_us;
    bit<32> holddown_max_us;
    bit<32> backoff_reset_us;
    /* a transition, carried to the report clone */
    @field_list(1) bit<8>  report_status;
    @field_list(1) bit<16> report_port;
    @field_list(1) bit<32> report_frames;
    @field_list(1) bit<32> report_holddown_us;
    @field_list(1) bit<8>  report_level;
    @field_list(1) bit<48> report_time_us;
}

#define METADATA_EXTRA f10_metadata_t f10;
#include "include/lb_metadata.p4"
#include "include/parsers.p4"
#include "include/flow_hash.p4"
#include "include/f10_detector.p4"

control MyIngress(inout headers_t hdr,
                  inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    counter(F10_PORTS, CounterType.packets_and_bytes) ingress_port_counter;
    counter(F10_PORTS, CounterType.packets) f10_no_detour;
    counter(F10_PORTS, CounterType.packets) f10_detoured;

    /* ECMP as in p4src/ecmp.p4: the 5-tuple, the hash seed and this switch's salt
     * (include/flow_hash.p4), so the tiers of a FatTree choose independently */
    action_selector(HashAlgorithm.crc16, 32w1024, 32w14) ecmp_selector;
    action_selector(HashAlgorithm.crc16, 32w1024, 32w14) backup_selector;
    action_selector(HashAlgorithm.crc16, 32w64, 32w14) detour_down_selector;
    action_selector(HashAlgorithm.crc16, 32w1024, 32w14) detour_up_selector;

    FlowHash() flow_hash;
    FlowSalt() flow_salt;
    F10CountArrival() count_arrival;

    action drop() {
        mark_to_drop(standard_metadata);
    }

    action fabric_port() {
        meta.f10.fabric_port = 1;
    }

    /* which ports face other switches (their frames feed the detector) */
    table f10_fabric_ports {
        key = { standard_metadata.ingress_port : exact; }
        actions = { fabric_port; NoAction; }
        default_action = NoAction();
        size = 512;
    }

    /* the TTL is decremented once per switch, after the forwarding decision */
    action set_nhop(mac_addr_t dmac, mac_addr_t smac, port_t port) {
        hdr.ethernet.srcAddr = smac;
        hdr.ethernet.dstAddr = dmac;
        standard_metadata.egress_spec = port;
    }

    /* per host pair: what it sent (measured at its ToR), and where the scheduler placed it */
    direct_counter(CounterType.packets_and_bytes) f10_flow_counter;

    action scheduled_nhop(mac_addr_t dmac, mac_addr_t smac, port_t port) {
        set_nhop(dmac, smac, port);
        meta.f10.scheduled = 1;
    }

    table f10_flows {
        key = {
            hdr.ipv4.srcAddr : exact;
            hdr.ipv4.dstAddr : exact;
        }
        actions = { scheduled_nhop; NoAction; }
        default_action = NoAction();
        counters = f10_flow_counter;
        size = 4096;
    }

    table ipv4_lpm {
        key = {
            hdr.ipv4.dstAddr   : lpm;
            FLOW_SELECTOR_KEYS
        }
        actions = { set_nhop; drop; NoAction; }
        implementation = ecmp_selector;
        size = 1024;
    }

    /* the detour: a next hop and the mark telling the next switches what to do */
    action detour(mac_addr_t dmac, mac_addr_t smac, port_t port, bit<8> phase, bit<8> scheme) {
        set_nhop(dmac, smac, port);
        hdr.f10_detour.setValid();
        hdr.f10_detour.phase = phase;
        hdr.f10_detour.scheme = scheme;
        hdr.f10_detour.etherType = hdr.ethernet.etherType;
        hdr.ethernet.etherType = ETHERTYPE_F10_DETOUR;
    }

    table f10_backup {
        key = {
            hdr.ipv4.dstAddr       : lpm;
            meta.f10.primary_port  : exact;
            FLOW_SELECTOR_KEYS
        }
        actions = { set_nhop; detour; drop; }
        implementation = backup_selector;
        size = 4096;
    }

    /* phase DOWN: any child; phase UP: any parent but the one the packet came from */
    table f10_detour_down {
        key = {
            hdr.f10_detour.phase : exact;   /* DETOUR_PHASE_DOWN: a selector table needs a match key */
            FLOW_SELECTOR_KEYS
        }
        actions = { set_nhop; drop; }
        implementation = detour_down_selector;
        size = 64;
    }

    table f10_detour_up {
        key = {
            standard_metadata.ingress_port : exact;
            FLOW_SELECTOR_KEYS
        }
        actions = { set_nhop; drop; }
        implementation = detour_up_selector;
        size = 512;
    }

    apply {
        if (hdr.packet_out.isValid()) {
            standard_metadata.egress_spec = hdr.packet_out.egress_port;
            hdr.packet_out.setInvalid();
            exit;
        }
        if (standard_metadata.ingress_port == PKTGEN_PORT) {
            if (hdr.f10_trigger.isValid()) {
                standard_metadata.mcast_grp = F10_PORTS_GROUP;   /* one copy per fabric port, to egress */
            } else {
                mark_to_drop(standard_metadata);
            }
            exit;
        }
        f10_fabric_ports.apply();
        if (meta.f10.fabric_port == 1) {
            count_arrival.apply(standard_metadata);
        }
        if (hdr.f10_probe.isValid() || hdr.f10_trigger.isValid()) {
            mark_to_drop(standard_metadata);   /* consumed here; a trigger from a link is forged */
            exit;
        }
        /* data frames only (like egress_port_counter): per link, what one end sent and the other
         * received differ by what the link lost */
        ingress_port_counter.count((bit<32>)standard_metadata.ingress_port);
        if (!hdr.ipv4.isValid()) {
            standard_metadata.egress_spec = CPU_PORT;
            exit;
        }
        if (hdr.ipv4.ttl <= 1) {
            mark_to_drop(standard_metadata);
            exit;
        }
        flow_hash.apply(hdr, meta);
        flow_salt.apply(meta);

        bit<1> down;
        if (hdr.f10_detour.isValid() && hdr.f10_detour.phase == DETOUR_PHASE_DOWN) {
            if (!f10_detour_down.apply().hit) {
                mark_to_drop(standard_metadata);
                exit;
            }
            hdr.f10_detour.phase = DETOUR_PHASE_UP;
        } else if (hdr.f10_detour.isValid() && hdr.f10_detour.phase == DETOUR_PHASE_UP) {
            if (!f10_detour_up.apply().hit) {
                mark_to_drop(standard_metadata);
                exit;
            }
            hdr.f10_detour.phase = DETOUR_PHASE_DONE;
        } else {
            if (!hdr.f10_detour.isValid()) {
                f10_flows.apply();
            }
            if (meta.f10.scheduled == 1) {
                port_down.read(down, (bit<32>)standard_metadata.egress_spec);
                if (down == 1) {
                    meta.f10.scheduled = 0;   /* unscheduled at the point of failure (6.2) */
                }
            }
            if (meta.f10.scheduled == 0) {
                if (!ipv4_lpm.apply().hit) {
                    mark_to_drop(standard_metadata);
                    exit;
                }
                meta.f10.primary_port = standard_metadata.egress_spec;
                port_down.read(down, (bit<32>)standard_metadata.egress_spec);
                if (down == 1) {
                    bool rerouted = false;
                    if (!hdr.f10_detour.isValid()) {   /* a marked packet is never detoured twice */
                        rerouted = f10_backup.apply().hit;
                    }
                    if (!rerouted) {
                        f10_no_detour.count((bit<32>)meta.f10.primary_port);
                        mark_to_drop(standard_metadata);
                        exit;
                    }
                    f10_detoured.count((bit<32>)meta.f10.primary_port);
                }
            }
        }
        port_down.read(down, (bit<32>)standard_metadata.egress_spec);
        if (down == 1) {
            f10_no_detour.count((bit<32>)standard_metadata.egress_spec);
            mark_to_drop(standard_metadata);
            exit;
        }
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }
}

control MyEgress(inout headers_t hdr,
                 inout metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    counter(F10_PORTS, CounterType.packets_and_bytes) egress_port_counter;

    F10Detector() detector;

    action to_host() {
        /* leaving the fabric: the detour mark goes */
        hdr.ethernet.etherType = hdr.f10_detour.etherType;
        hdr.f10_detour.setInvalid();
    }

    table f10_host_ports {
        key = { standard_metadata.egress_port : exact; }
        actions = { to_host; NoAction; }
        default_action = NoAction();
        size = 512;
    }

    apply {
        if (standard_metadata.instance_type == 2) {
            /* E2E clone of a detector transition, for the controller */
            hdr.packet_in.setValid();
            hdr.packet_in.ingress_port = standard_metadata.ingress_port;
            hdr.packet_in._pad = 0;
            hdr.packet_in.reason = REPORT_DETECTOR;
            hdr.packet_in.port = meta.f10.report_port;
            hdr.packet_in.status = meta.f10.report_status;
            hdr.packet_in.timestamp_us = meta.f10.report_time_us;
            hdr.packet_in.frames = meta.f10.report_frames;
            hdr.packet_in.holddown_us = meta.f10.report_holddown_us;
            hdr.packet_in.backoff_level = meta.f10.report_level;
            exit;
        }
        if (hdr.f10_trigger.isValid()) {
            detector.apply(hdr, meta, standard_metadata);   /* decides, reports, probes or drops */
            exit;
        }
        egress_port_counter.count((bit<32>)standard_metadata.egress_port);
        last_tx_us.write((bit<32>)standard_metadata.egress_port, standard_metadata.egress_global_timestamp);
        if (hdr.f10_detour.isValid()) {
            f10_host_ports.apply();
        }
        if (standard_metadata.egress_port == CPU_PORT) {
            hdr.packet_in.setValid();
            hdr.packet_in.ingress_port = standard_metadata.ingress_port;
            hdr.packet_in._pad = 0;
            hdr.packet_in.reason = 0;
            hdr.packet_in.port = 0;
            hdr.packet_in.status = 0;
            hdr.packet_in.timestamp_us = 0;
            hdr.packet_in.frames = 0;
            hdr.packet_in.holddown_us = 0;
            hdr.packet_in.backoff_level = 0;
        }
    }
}

#include "include/v1switch.p4"
