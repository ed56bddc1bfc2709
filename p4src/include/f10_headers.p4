/* F10's own frames and fields (seed 002, sections 5.1 and 5.4), for p4src/f10.p4.
 *
 * Include before headers.p4 and parsers.p4: it fills their hooks (headers_t
 * members, packet_in fields, parser states, deparser).
 *
 * Frames that never leave the fabric (EtherTypes from the IEEE 802
 * local-experimental and OUI-extended range, documented here):
 *
 *   0x88B5 probe    a switch sends one on a fabric port that has sent nothing for
 *                   one probe period (F10: a link is never silent); the neighbour
 *                   counts it as a valid frame and drops it (never forwards it).
 *                   Destination 01:80:c2:00:00:0e (link-local: no bridge forwards it).
 *   0x88B6 trigger  the periodic timer frame: the embedded target's packet
 *                   generator (testbed/p4/v1model/packet_generator.py) or, on
 *                   BMv2, an injector on a dedicated port puts one into ingress on
 *                   PKTGEN_PORT every probe period.  It drives the failure
 *                   detector and the probes; one arriving on any other port is
 *                   dropped.
 *   0x88B7 detour   the mark of a locally rerouted packet, inserted between Ethernet
 *                   and IPv4 by the switch that detours it and removed before the
 *                   packet reaches a host.  `phase` says what the next switch does:
 *                     1 DOWN  go down to any child (F10 Scheme 2's first detour hop),
 *                             then the packet becomes phase 2;
 *                     2 UP    go up to any parent except the one it came from (Scheme 1's
 *                             detour hop; Scheme 2's third hop), then phase 3;
 *                     3 DONE  route normally.
 *                   A packet that carries the mark is never detoured again: a
 *                   second failure on its way drops it (counted) instead of
 *                   risking a loop.  `scheme` records 1 or 2.
 *
 * PACKET_IN_EXTRA_FIELDS: a detector transition reported to the controller
 * (reason 1), with the switch's timestamp (microseconds), the port, its new
 * status, the valid frames counted in the window that decided it, and the
 * hold-down the port must stay down for.
 */
#ifndef _TESTBED_F10_HEADERS_P4_
#define _TESTBED_F10_HEADERS_P4_

#define PACKET_IN_EXTRA_FIELDS \
    bit<8>  reason; \
    bit<16> port; \
    bit<8>  status; \
    bit<48> timestamp_us; \
    bit<32> frames; \
    bit<32> holddown_us; \
    bit<8>  backoff_level;

#define HEADERS_AFTER_ETHERNET \
    f10_probe_t   f10_probe; \
    f10_trigger_t f10_trigger; \
    f10_detour_t  f10_detour;

/* how include/parsers.p4 parses and deparses them */
#define PARSER_ETHERTYPES_EXTRA \
    ETHERTYPE_F10_PROBE: parse_f10_probe; \
    ETHERTYPE_F10_TRIGGER: parse_f10_trigger; \
    ETHERTYPE_F10_DETOUR: parse_f10_detour;

#define PARSER_STATES_EXTRA \
    state parse_f10_probe { \
        packet.extract(hdr.f10_probe); \
        transition accept; \
    } \
    state parse_f10_trigger { \
        packet.extract(hdr.f10_trigger); \
        transition accept; \
    } \
    state parse_f10_detour { \
        packet.extract(hdr.f10_detour); \
        transition select(hdr.f10_detour.etherType) { \
            ETHERTYPE_IPV4: parse_ipv4; \
            default: accept; \
        } \
    }

#define DEPARSE_AFTER_ETHERNET \
    packet.emit(hdr.f10_probe); \
    packet.emit(hdr.f10_trigger); \
    packet.emit(hdr.f10_detour);

const bit<16> ETHERTYPE_F10_PROBE   = 0x88B5;
const bit<16> ETHERTYPE_F10_TRIGGER = 0x88B6;
const bit<16> ETHERTYPE_F10_DETOUR  = 0x88B7;
const bit<48> F10_PROBE_DMAC        = 0x0180C200000E;

#ifndef PKTGEN_PORT_ID
#define PKTGEN_PORT_ID 510
#endif

const bit<8> DETOUR_PHASE_DOWN = 1;
const bit<8> DETOUR_PHASE_UP   = 2;
const bit<8> DETOUR_PHASE_DONE = 3;

const bit<8> REPORT_DETECTOR = 1;   /* packet_in.reason of a detector transition */
const bit<8> PORT_UP   = 1;
const bit<8> PORT_DOWN = 0;

header f10_probe_t {
    bit<16> port;           /* the sender's port */
    bit<48> timestamp_us;   /* the sender's egress timestamp */
    bit<16> _pad;
}

header f10_trigger_t {
    bit<16> app;            /* the generator application */
    bit<16> _pad;
}

header f10_detour_t {
    bit<8>  phase;
    bit<8>  scheme;
    bit<16> etherType;      /* of what follows (IPv4) */
}

#endif /* _TESTBED_F10_HEADERS_P4_ */
