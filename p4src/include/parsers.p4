/* The shared parser, checksum controls and deparser of the testbed's programs.
 *
 * Include after headers.p4 and after the program's `struct metadata_t`, which
 * must have a member `flow_t flow` (the 5-tuple, filled here for IPv4 TCP/UDP).
 * Frames from the CPU port start with a packet_out header.
 *
 * A program with headers of its own between Ethernet and IPv4 (headers.p4's
 * HEADERS_AFTER_ETHERNET) defines, before including this file:
 *   PARSER_ETHERTYPES_EXTRA  more `ETHERTYPE: state;` cases after Ethernet
 *   PARSER_STATES_EXTRA      the parser states they name
 *   DEPARSE_AFTER_ETHERNET   the emit() calls of those headers
 * (include/f10_headers.p4 does this for F10's probe, trigger and detour headers).
 */
#ifndef _TESTBED_PARSERS_P4_
#define _TESTBED_PARSERS_P4_

#ifndef PARSER_ETHERTYPES_EXTRA
#define PARSER_ETHERTYPES_EXTRA
#endif
#ifndef PARSER_STATES_EXTRA
#define PARSER_STATES_EXTRA
#endif
#ifndef DEPARSE_AFTER_ETHERNET
#define DEPARSE_AFTER_ETHERNET
#endif

parser CommonParser(packet_in packet,
                    out headers_t hdr,
                    inout metadata_t meta,
                    inout standard_metadata_t standard_metadata) {
    state start {
        transition select(standard_metadata.ingress_port) {
            CPU_PORT: parse_packet_out;
            default: parse_ethernet;
        }
    }

    state parse_packet_out {
        packet.extract(hdr.packet_out);
        transition parse_ethernet;
    }

    state parse_ethernet {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            ETHERTYPE_IPV4: parse_ipv4;
            ETHERTYPE_IPV6: parse_ipv6;
            PARSER_ETHERTYPES_EXTRA
            default: accept;
        }
    }

    PARSER_STATES_EXTRA

    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        meta.flow.src_addr = hdr.ipv4.srcAddr;
        meta.flow.dst_addr = hdr.ipv4.dstAddr;
        meta.flow.protocol = hdr.ipv4.protocol;
        /* options (ihl > 5) and fragments are not parsed further */
        transition select(hdr.ipv4.ihl, hdr.ipv4.fragOffset, hdr.ipv4.protocol) {
            (5, 0, IP_PROTO_TCP): parse_tcp;
            (5, 0, IP_PROTO_UDP): parse_udp;
            default: accept;
        }
    }

    state parse_ipv6 {
        packet.extract(hdr.ipv6);
        transition select(hdr.ipv6.nextHdr) {
            IP_PROTO_TCP: parse_tcp;
            IP_PROTO_UDP: parse_udp;
            default: accept;
        }
    }

    state parse_tcp {
        packet.extract(hdr.tcp);
        meta.flow.src_port = hdr.tcp.srcPort;
        meta.flow.dst_port = hdr.tcp.dstPort;
        transition accept;
    }

    state parse_udp {
        packet.extract(hdr.udp);
        meta.flow.src_port = hdr.udp.srcPort;
        meta.flow.dst_port = hdr.udp.dstPort;
        transition select(hdr.udp.dstPort) {
            UDP_PORT_ROCEV2: parse_bth;
            default: accept;
        }
    }

    state parse_bth {
        packet.extract(hdr.bth);
        transition accept;
    }
}

control CommonVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {
        verify_checksum(
            hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn,
              hdr.ipv4.totalLen, hdr.ipv4.identification, hdr.ipv4.flags,
              hdr.ipv4.fragOffset, hdr.ipv4.ttl, hdr.ipv4.protocol,
              hdr.ipv4.srcAddr, hdr.ipv4.dstAddr },
            hdr.ipv4.hdrChecksum,
            HashAlgorithm.csum16);
    }
}

control CommonComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {
        update_checksum(
            hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn,
              hdr.ipv4.totalLen, hdr.ipv4.identification, hdr.ipv4.flags,
              hdr.ipv4.fragOffset, hdr.ipv4.ttl, hdr.ipv4.protocol,
              hdr.ipv4.srcAddr, hdr.ipv4.dstAddr },
            hdr.ipv4.hdrChecksum,
            HashAlgorithm.csum16);
    }
}

control CommonDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.packet_in);
        packet.emit(hdr.ethernet);
        DEPARSE_AFTER_ETHERNET
        packet.emit(hdr.ipv4);
        packet.emit(hdr.ipv6);
        packet.emit(hdr.tcp);
        packet.emit(hdr.udp);
        packet.emit(hdr.bth);
    }
}

#endif /* _TESTBED_PARSERS_P4_ */
