/* Shared header definitions of the testbed's P4 programs.
 *
 * Ethernet, IPv4, IPv6, TCP, UDP and the InfiniBand Base Transport Header
 * (BTH) that RoCEv2 carries on UDP port 4791, plus the packet_in/packet_out
 * controller headers exchanged with the P4Runtime server through the CPU
 * port.  A program may #define CPU_PORT_ID before including this file.
 */
#ifndef _TESTBED_HEADERS_P4_
#define _TESTBED_HEADERS_P4_

#ifndef CPU_PORT_ID
#define CPU_PORT_ID 255
#endif

typedef bit<9>   port_t;
typedef bit<48>  mac_addr_t;
typedef bit<32>  ipv4_addr_t;
typedef bit<128> ipv6_addr_t;

const port_t   CPU_PORT       = CPU_PORT_ID;
const bit<16>  ETHERTYPE_IPV4 = 0x0800;
const bit<16>  ETHERTYPE_IPV6 = 0x86dd;
const bit<16>  ETHERTYPE_ARP  = 0x0806;
const bit<8>   IP_PROTO_TCP   = 6;
const bit<8>   IP_PROTO_UDP   = 17;
const bit<16>  UDP_PORT_ROCEV2 = 4791;

#ifndef PACKET_IN_EXTRA_FIELDS
#define PACKET_IN_EXTRA_FIELDS
#endif
#ifndef HEADERS_AFTER_ETHERNET
#define HEADERS_AFTER_ETHERNET
#endif

@controller_header("packet_in")
header packet_in_header_t {
    port_t  ingress_port;
    bit<7>  _pad;
    PACKET_IN_EXTRA_FIELDS
}

@controller_header("packet_out")
header packet_out_header_t {
    port_t  egress_port;
    bit<7>  _pad;
}

header ethernet_t {
    mac_addr_t dstAddr;
    mac_addr_t srcAddr;
    bit<16>    etherType;
}

header ipv4_t {
    bit<4>      version;
    bit<4>      ihl;
    bit<6>      dscp;
    bit<2>      ecn;
    bit<16>     totalLen;
    bit<16>     identification;
    bit<3>      flags;
    bit<13>     fragOffset;
    bit<8>      ttl;
    bit<8>      protocol;
    bit<16>     hdrChecksum;
    ipv4_addr_t srcAddr;
    ipv4_addr_t dstAddr;
}

header ipv6_t {
    bit<4>      version;
    bit<8>      trafficClass;
    bit<20>     flowLabel;
    bit<16>     payloadLen;
    bit<8>      nextHdr;
    bit<8>      hopLimit;
    ipv6_addr_t srcAddr;
    ipv6_addr_t dstAddr;
}

header tcp_t {
    bit<16> srcPort;
    bit<16> dstPort;
    bit<32> seqNo;
    bit<32> ackNo;
    bit<4>  dataOffset;
    bit<4>  res;
    bit<8>  flags;
    bit<16> window;
    bit<16> checksum;
    bit<16> urgentPtr;
}

header udp_t {
    bit<16> srcPort;
    bit<16> dstPort;
    bit<16> length;
    bit<16> checksum;
}

/* InfiniBand Base Transport Header (12 bytes), as carried by RoCEv2.
 * flags = solicited event (1), migration request (1), pad count (2),
 * transport header version (4). */
header bth_t {
    bit<8>  opcode;
    bit<8>  flags;
    bit<16> pkey;
    bit<1>  fecn;
    bit<1>  becn;
    bit<6>  resv6;
    bit<24> dstQP;
    bit<1>  ackReq;
    bit<7>  resv7;
    bit<24> psn;
}

struct headers_t {
    packet_out_header_t packet_out;
    packet_in_header_t  packet_in;
    ethernet_t          ethernet;
    HEADERS_AFTER_ETHERNET
    ipv4_t              ipv4;
    ipv6_t              ipv6;
    tcp_t               tcp;
    udp_t               udp;
    bth_t               bth;
}

/* The flow fields every program hashes on (filled by the shared parser). */
struct flow_t {
    bit<32> src_addr;
    bit<32> dst_addr;
    bit<8>  protocol;
    bit<16> src_port;
    bit<16> dst_port;
}

#endif /* _TESTBED_HEADERS_P4_ */
