/* A test fixture, not a product feature: the smallest "compiled program" of tb_pipeline.h's ABI,
 * so the native packet loop can be tested before (and apart from) the P4-to-C compiler.
 *
 * Port map: a frame from port 1 leaves on port 2, from any other port on port 1.  A broadcast
 * destination goes to the CPU port 255; EtherType 0x9999 is dropped (mark_to_drop).  The
 * priority is the IPv4 TOS precedence (top 3 bits of byte 15) for EtherType 0x0800, and byte 14's
 * low 3 bits for EtherType 0x88b5, whose egress also writes enq_qdepth and deq_qdepth (4 bytes
 * each, big-endian) at bytes 16..23 so tests can see the queueing metadata.  For the end-of-stage
 * decisions: EtherType 0x88b6 goes to multicast group 1, 0x88b7 asks for I2E clone session 5,
 * 0x88b8 for E2E clone session 6, 0x88b9 is resubmitted once, 0x88ba recirculated once; their
 * deparser writes instance_type, egress_rid and egress_port at bytes 14, 15 and 16.  EtherType
 * 0x88bb reports event site 0 (a digest of byte 14) in ingress and site 1 (a log_msg of the egress
 * port) in egress.  Everything else leaves byte for byte as it came.
 */
#include <stdlib.h>
#include <string.h>
#include TB_PIPELINE_HEADER

struct tb_packet {
    tb_std_meta_t std;
    const uint8_t *frame;
    uint32_t len;
    uint32_t nevents;       /* of the last stage */
    int32_t site;
    uint64_t value;
};

struct tb_pipeline {
    int unused;
};

uint32_t tb_abi_version(void) { return TB_PIPELINE_ABI_VERSION; }
tb_pipeline_t *tb_pipeline_new(void) { return calloc(1, sizeof(tb_pipeline_t)); }
void tb_pipeline_free(tb_pipeline_t *pl) { free(pl); }
size_t tb_packet_size(void) { return sizeof(tb_packet_t); }
void tb_packet_reset(tb_pipeline_t *pl, tb_packet_t *pkt) { (void)pl; memset(pkt, 0, sizeof *pkt); }
tb_std_meta_t *tb_packet_std(tb_packet_t *pkt) { return &pkt->std; }
void tb_packet_copy(tb_packet_t *dst, const tb_packet_t *src) { *dst = *src; }
void tb_packet_copy_headers(tb_packet_t *dst, const tb_packet_t *src) { dst->frame = src->frame, dst->len = src->len; }
void tb_preserve_fields(int index, const tb_packet_t *src, tb_packet_t *dst) { (void)index, (void)src, (void)dst; }

static uint16_t ethertype(const tb_packet_t *pkt) { return pkt->len >= 14 ? pkt->frame[12] << 8 | pkt->frame[13] : 0; }

static void no_request(tb_request_t *req, const tb_std_meta_t *std)
{
    req->egress_spec = std->egress_spec, req->mcast_grp = std->mcast_grp, req->priority = std->priority;
    req->clone_session = req->clone_field_list = req->resubmit_field_list = -1;
    req->recirculate_field_list = req->truncate_length = -1;
}

int tb_parse(tb_pipeline_t *pl, tb_packet_t *pkt, const uint8_t *frame, uint32_t len)
{
    (void)pl;
    pkt->frame = frame, pkt->len = len;
    return TB_OK;
}

int tb_ingress(tb_pipeline_t *pl, tb_packet_t *pkt, uint64_t now_ns, tb_request_t *req)
{
    (void)pl, (void)now_ns;
    static const uint8_t broadcast[6] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    tb_std_meta_t *std = &pkt->std;
    std->egress_spec = std->ingress_port == 1 ? 2 : 1;
    if (pkt->len >= 6 && !memcmp(pkt->frame, broadcast, 6)) std->egress_spec = 255;
    uint16_t type = ethertype(pkt);
    if (type == 0x9999) std->egress_spec = TB_DROP_PORT;
    if (type == 0x0800 && pkt->len > 15) std->priority = pkt->frame[15] >> 5;
    if (type == 0x88b5 && pkt->len > 14) std->priority = pkt->frame[14] & 7;
    if (type == 0x88b6) std->mcast_grp = 1;
    pkt->nevents = type == 0x88bb;
    pkt->site = 0, pkt->value = pkt->len > 14 ? pkt->frame[14] : 0;
    no_request(req, std);
    if (type == 0x88b7) req->clone_session = 5;
    if (type == 0x88b9 && std->instance_type != TB_INSTANCE_RESUBMIT) req->resubmit_field_list = 0;
    return TB_OK;
}

int tb_egress(tb_pipeline_t *pl, tb_packet_t *pkt, uint64_t now_ns, tb_request_t *req)
{
    (void)pl, (void)now_ns;
    no_request(req, &pkt->std);
    uint16_t type = ethertype(pkt);
    pkt->nevents = type == 0x88bb;
    pkt->site = 1, pkt->value = pkt->std.egress_port;
    if (type == 0x88b8 && pkt->std.instance_type != TB_INSTANCE_EGRESS_CLONE) req->clone_session = 6;
    if (type == 0x88ba && pkt->std.instance_type != TB_INSTANCE_RECIRC) req->recirculate_field_list = 0;
    return TB_OK;
}

int tb_packet_events(const tb_packet_t *pkt, int32_t *sites, uint64_t *values, uint32_t max)
{
    if (!pkt->nevents || !max) return 0;
    sites[0] = pkt->site;
    memset(values, 0, sizeof *values * TB_MAX_EVENT_VALUES);
    values[0] = pkt->value;
    ((tb_packet_t *)pkt)->nevents = 0; /* a stage's list is read once */
    return 1;
}

static void put32(uint8_t *p, uint32_t v) { p[0] = v >> 24, p[1] = v >> 16, p[2] = v >> 8, p[3] = v; }

int tb_deparse(tb_pipeline_t *pl, tb_packet_t *pkt, uint8_t *out, uint32_t cap)
{
    (void)pl;
    if (pkt->len > cap) return -TB_NEED_SPACE;
    memcpy(out, pkt->frame, pkt->len);
    if (ethertype(pkt) == 0x88b5 && pkt->len >= 24) {
        put32(out + 16, pkt->std.enq_qdepth);
        put32(out + 20, pkt->std.deq_qdepth);
    }
    if (ethertype(pkt) >= 0x88b6 && ethertype(pkt) <= 0x88ba && pkt->len >= 17) {
        out[14] = (uint8_t)pkt->std.instance_type;
        out[15] = (uint8_t)pkt->std.egress_rid;
        out[16] = (uint8_t)pkt->std.egress_port;
    }
    return (int)pkt->len;
}
