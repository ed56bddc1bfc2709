
#include <core.p4>
#include <v1model.p4>
header eth_t { bit<48> dst; bit<48> src; bit<16> type; }
header data_t { bit<8> a; bit<8> b; bit<16> c; bit<32> d; }
struct headers_t { eth_t eth; data_t data; }
struct meta_t {  }

        control Bump(inout data_t d) { apply { d.c = d.c + 1; } }
        control Once(inout data_t d) {
            counter(4, CounterType.packets) seen;
            apply { seen.count(0); }
        }
        parser Inner(packet_in pkt, inout headers_t hdr) { state start { pkt.extract(hdr.data); transition accept; } }
    
parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.eth); transition select(hdr.eth.type) { 0x88b5: parse_data; default: accept; } }
    state parse_data { Inner.apply(pkt, hdr); transition accept; }
}
control MyVerify(inout headers_t hdr, inout meta_t meta) { apply { } }
control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {

 apply {
sm.egress_spec = 2; Bump.apply(hdr.data); Bump.apply(hdr.data); Once.apply(hdr.data);
 }
}
control MyEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {

 apply {

 }
}
control MyCompute(inout headers_t hdr, inout meta_t meta) { apply {  } }

control MyDeparser(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr.eth); pkt.emit(hdr.data); }
}
V1Switch(MyParser(), MyVerify(), MyIngress(), MyEgress(), MyCompute(), MyDeparser()) main;
