/* A minimal frame forwarder: the machine's limit for one switch port pair over veths.
 *
 *   c_forwarder forward METHOD IN_IF OUT_IF   frames from IN_IF out of OUT_IF until SIGTERM/SIGINT
 *   c_forwarder send IF SIZE SECONDS RATE     send one prebuilt UDP frame of SIZE bytes, RATE frames/s
 *                                             (0: as fast as possible); prints the number sent.  Below
 *                                             20,000 frames/s each frame carries its send time
 *   c_forwarder latency IF COUNT SECONDS      receive such stamped frames; print count, median and
 *                                             99th percentile of their one-way delay in microseconds
 *
 * METHOD is one of
 *   mmsg      recvmmsg / sendmmsg on AF_PACKET sockets
 *   ring      PACKET_MMAP TPACKET_V3 receive ring, TPACKET_V3 transmit ring
 *   ringmmsg  PACKET_MMAP TPACKET_V3 receive ring, sendmmsg straight from the ring's blocks
 *   xdp       AF_XDP sockets (copy mode: veth has no zero copy), an XDP program of five
 *             instructions (redirect to the XSKMAP) loaded with the bpf() system call
 *
 * No lookup, no copy beyond what the method needs.  Every method waits in poll() when nothing
 * arrives (an idle forwarder uses no CPU) and drains its input in batches of BATCH frames.
 * On exit it prints "forwarded N dropped_by_kernel D".  Built by benchmarks/bench_io_methods.py.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/if_link.h>
#include <linux/if_packet.h>
#include <linux/if_xdp.h>
#include <net/if.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef SOL_XDP
#define SOL_XDP 283
#endif
#ifndef AF_XDP
#define AF_XDP 44
#endif

#define BATCH 64
#define FRAME 2048

static volatile sig_atomic_t running = 1;
static unsigned long long forwarded, kernel_drops;

static void on_signal(int sig) { (void)sig; running = 0; }

static void die(const char *what) { perror(what); exit(2); }

static int if_index(const char *name)
{
    int index = (int)if_nametoindex(name);
    if (!index) die(name);
    return index;
}

/* An AF_PACKET socket bound to one interface: protocol ETH_P_ALL to receive, 0 to only send. */
static int packet_socket(const char *ifname, int receive)
{
    int fd = socket(AF_PACKET, SOCK_RAW, receive ? htons(ETH_P_ALL) : 0);
    if (fd < 0) die("socket(AF_PACKET)");
    int one = 1;
    if (receive) setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof one);
    struct sockaddr_ll addr = {.sll_family = AF_PACKET, .sll_ifindex = if_index(ifname),
                               .sll_protocol = receive ? htons(ETH_P_ALL) : 0};
    if (bind(fd, (struct sockaddr *)&addr, sizeof addr) < 0) die("bind(AF_PACKET)");
    return fd;
}

static unsigned packet_drops(int fd)
{
    struct tpacket_stats_v3 stats;
    socklen_t len = sizeof stats;
    if (getsockopt(fd, SOL_PACKET, PACKET_STATISTICS, &stats, &len) < 0) return 0;
    return stats.tp_drops;
}

static void wait_readable(int fd)
{
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    poll(&pfd, 1, 200); /* the timeout only lets a signal's flag be seen; no packet needs it */
}

/* ------------------------------------------------------------------ recvmmsg / sendmmsg */

static void forward_mmsg(const char *in, const char *out)
{
    int rx = packet_socket(in, 1), tx = packet_socket(out, 0);
    int rcvbuf = 4 << 20;
    setsockopt(rx, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    static char buffers[BATCH][FRAME];
    struct iovec iov[BATCH];
    struct mmsghdr msgs[BATCH];
    while (running) {
        for (int i = 0; i < BATCH; i++) {
            iov[i].iov_base = buffers[i];
            iov[i].iov_len = FRAME;
            memset(&msgs[i].msg_hdr, 0, sizeof msgs[i].msg_hdr);
            msgs[i].msg_hdr.msg_iov = &iov[i];
            msgs[i].msg_hdr.msg_iovlen = 1;
        }
        int n = recvmmsg(rx, msgs, BATCH, MSG_DONTWAIT, NULL);
        if (n <= 0) {
            wait_readable(rx);
            continue;
        }
        for (int i = 0; i < n; i++) iov[i].iov_len = msgs[i].msg_len;
        int sent = sendmmsg(tx, msgs, n, 0);
        if (sent > 0) forwarded += sent;
    }
    kernel_drops = packet_drops(rx);
}

/* ------------------------------------------------------------------ TPACKET_V3 rings */

#define RX_BLOCK (1 << 18)
#define RX_BLOCKS 16
#define TX_FRAMES 1024

struct rx_ring {
    int fd;
    uint8_t *map;
    unsigned block;
};

static void rx_ring_open(struct rx_ring *ring, const char *ifname)
{
    ring->fd = socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL));
    if (ring->fd < 0) die("socket(AF_PACKET)");
    int version = TPACKET_V3, one = 1;
    if (setsockopt(ring->fd, SOL_PACKET, PACKET_VERSION, &version, sizeof version) < 0) die("PACKET_VERSION");
    setsockopt(ring->fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof one);
    struct tpacket_req3 req = {.tp_block_size = RX_BLOCK, .tp_block_nr = RX_BLOCKS, .tp_frame_size = FRAME,
                               .tp_frame_nr = RX_BLOCK / FRAME * RX_BLOCKS, .tp_retire_blk_tov = 1};
    if (setsockopt(ring->fd, SOL_PACKET, PACKET_RX_RING, &req, sizeof req) < 0) die("PACKET_RX_RING");
    ring->map = mmap(NULL, (size_t)RX_BLOCK * RX_BLOCKS, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_LOCKED,
                     ring->fd, 0);
    if (ring->map == MAP_FAILED) die("mmap(rx ring)");
    ring->block = 0;
    struct sockaddr_ll addr = {.sll_family = AF_PACKET, .sll_ifindex = if_index(ifname),
                               .sll_protocol = htons(ETH_P_ALL)};
    if (bind(ring->fd, (struct sockaddr *)&addr, sizeof addr) < 0) die("bind(rx ring)");
}

static struct tpacket_block_desc *rx_ring_block(struct rx_ring *ring)
{
    struct tpacket_block_desc *desc = (void *)(ring->map + (size_t)ring->block * RX_BLOCK);
    return (__atomic_load_n(&desc->hdr.bh1.block_status, __ATOMIC_ACQUIRE) & TP_STATUS_USER) ? desc : NULL;
}

static void rx_ring_release(struct rx_ring *ring, struct tpacket_block_desc *desc)
{
    __atomic_store_n(&desc->hdr.bh1.block_status, TP_STATUS_KERNEL, __ATOMIC_RELEASE);
    ring->block = (ring->block + 1) % RX_BLOCKS;
}

struct tx_ring {
    int fd;
    uint8_t *map;
    unsigned frame;
};

static void tx_ring_open(struct tx_ring *ring, const char *ifname)
{
    ring->fd = socket(AF_PACKET, SOCK_RAW, 0);
    if (ring->fd < 0) die("socket(AF_PACKET)");
    int version = TPACKET_V3;
    if (setsockopt(ring->fd, SOL_PACKET, PACKET_VERSION, &version, sizeof version) < 0) die("PACKET_VERSION");
    struct tpacket_req3 req = {.tp_block_size = 1 << 16, .tp_block_nr = TX_FRAMES * FRAME / (1 << 16),
                               .tp_frame_size = FRAME, .tp_frame_nr = TX_FRAMES};
    if (setsockopt(ring->fd, SOL_PACKET, PACKET_TX_RING, &req, sizeof req) < 0) die("PACKET_TX_RING");
    ring->map = mmap(NULL, (size_t)TX_FRAMES * FRAME, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_LOCKED, ring->fd, 0);
    if (ring->map == MAP_FAILED) die("mmap(tx ring)");
    ring->frame = 0;
    struct sockaddr_ll addr = {.sll_family = AF_PACKET, .sll_ifindex = if_index(ifname)};
    if (bind(ring->fd, (struct sockaddr *)&addr, sizeof addr) < 0) die("bind(tx ring)");
}

/* Put one frame in the transmit ring; 0 when the ring is full. */
static int tx_ring_put(struct tx_ring *ring, const void *data, unsigned len)
{
    struct tpacket3_hdr *hdr = (void *)(ring->map + (size_t)ring->frame * FRAME);
    if (__atomic_load_n(&hdr->tp_status, __ATOMIC_ACQUIRE) != TP_STATUS_AVAILABLE) return 0;
    unsigned offset = TPACKET3_HDRLEN - sizeof(struct sockaddr_ll);
    if (len > FRAME - offset) len = FRAME - offset;
    memcpy((uint8_t *)hdr + offset, data, len);
    hdr->tp_len = len;
    __atomic_store_n(&hdr->tp_status, TP_STATUS_SEND_REQUEST, __ATOMIC_RELEASE);
    ring->frame = (ring->frame + 1) % TX_FRAMES;
    return 1;
}

static void forward_ring(const char *in, const char *out, int tx_by_ring)
{
    struct rx_ring rx;
    struct tx_ring txr = {.fd = -1};
    rx_ring_open(&rx, in);
    int tx = -1;
    if (tx_by_ring) tx_ring_open(&txr, out);
    else tx = packet_socket(out, 0);
    struct iovec iov[BATCH];
    struct mmsghdr msgs[BATCH];
    memset(msgs, 0, sizeof msgs);
    while (running) {
        struct tpacket_block_desc *desc = rx_ring_block(&rx);
        if (!desc) {
            wait_readable(rx.fd);
            continue;
        }
        unsigned count = desc->hdr.bh1.num_pkts, queued = 0;
        struct tpacket3_hdr *pkt = (void *)((uint8_t *)desc + desc->hdr.bh1.offset_to_first_pkt);
        for (unsigned i = 0; i < count; i++) {
            uint8_t *data = (uint8_t *)pkt + pkt->tp_mac;
            if (tx_by_ring) {
                while (!tx_ring_put(&txr, data, pkt->tp_snaplen) && running)
                    send(txr.fd, NULL, 0, 0); /* ring full: let the kernel drain it */
                if (++queued == BATCH) {
                    send(txr.fd, NULL, 0, MSG_DONTWAIT);
                    queued = 0;
                }
            } else {
                iov[queued].iov_base = data;
                iov[queued].iov_len = pkt->tp_snaplen;
                msgs[queued].msg_hdr.msg_iov = &iov[queued];
                msgs[queued].msg_hdr.msg_iovlen = 1;
                if (++queued == BATCH) {
                    sendmmsg(tx, msgs, queued, 0);
                    queued = 0;
                }
            }
            pkt = (void *)((uint8_t *)pkt + pkt->tp_next_offset);
        }
        if (queued) {
            if (tx_by_ring) send(txr.fd, NULL, 0, MSG_DONTWAIT);
            else sendmmsg(tx, msgs, queued, 0);
        }
        forwarded += count;
        rx_ring_release(&rx, desc);
    }
    if (tx_by_ring) send(txr.fd, NULL, 0, 0);
    kernel_drops = packet_drops(rx.fd);
}

/* ------------------------------------------------------------------ AF_XDP */

#define XSK_FRAMES 4096
#define XSK_RING 2048

struct ring {
    uint32_t *producer, *consumer, *flags;
    void *descs;
    uint32_t size;
};

struct xsk {
    int fd;
    uint8_t *umem;
    struct ring rx, tx, fill, comp;
    uint32_t free_frames[XSK_FRAMES]; /* transmit side: UMEM frames not in flight */
    uint32_t nfree;
};

static void ring_map(int fd, struct ring *ring, const struct xdp_ring_offset *off, uint64_t pgoff,
                     size_t desc_size, uint32_t size)
{
    size_t len = off->desc + (size_t)size * desc_size;
    uint8_t *map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, (off_t)pgoff);
    if (map == MAP_FAILED) die("mmap(xsk ring)");
    ring->producer = (void *)(map + off->producer);
    ring->consumer = (void *)(map + off->consumer);
    ring->flags = (void *)(map + off->flags);
    ring->descs = map + off->desc;
    ring->size = size;
}

static void xsk_open(struct xsk *xsk, const char *ifname)
{
    xsk->fd = socket(AF_XDP, SOCK_RAW, 0);
    if (xsk->fd < 0) die("socket(AF_XDP)");
    size_t umem_len = (size_t)XSK_FRAMES * FRAME;
    xsk->umem = mmap(NULL, umem_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (xsk->umem == MAP_FAILED) die("mmap(umem)");
    struct xdp_umem_reg reg = {.addr = (uintptr_t)xsk->umem, .len = umem_len, .chunk_size = FRAME};
    if (setsockopt(xsk->fd, SOL_XDP, XDP_UMEM_REG, &reg, sizeof reg) < 0) die("XDP_UMEM_REG");
    int size = XSK_RING;
    if (setsockopt(xsk->fd, SOL_XDP, XDP_UMEM_FILL_RING, &size, sizeof size) < 0 ||
        setsockopt(xsk->fd, SOL_XDP, XDP_UMEM_COMPLETION_RING, &size, sizeof size) < 0 ||
        setsockopt(xsk->fd, SOL_XDP, XDP_RX_RING, &size, sizeof size) < 0 ||
        setsockopt(xsk->fd, SOL_XDP, XDP_TX_RING, &size, sizeof size) < 0) die("XDP rings");
    struct xdp_mmap_offsets off;
    socklen_t optlen = sizeof off;
    if (getsockopt(xsk->fd, SOL_XDP, XDP_MMAP_OFFSETS, &off, &optlen) < 0) die("XDP_MMAP_OFFSETS");
    ring_map(xsk->fd, &xsk->rx, &off.rx, XDP_PGOFF_RX_RING, sizeof(struct xdp_desc), XSK_RING);
    ring_map(xsk->fd, &xsk->tx, &off.tx, XDP_PGOFF_TX_RING, sizeof(struct xdp_desc), XSK_RING);
    ring_map(xsk->fd, &xsk->fill, &off.fr, XDP_UMEM_PGOFF_FILL_RING, sizeof(uint64_t), XSK_RING);
    ring_map(xsk->fd, &xsk->comp, &off.cr, XDP_UMEM_PGOFF_COMPLETION_RING, sizeof(uint64_t), XSK_RING);
    /* the first half of the frames feed the fill ring (receive), the second half transmit */
    uint64_t *fill = xsk->fill.descs;
    for (uint32_t i = 0; i < XSK_RING; i++) fill[i] = (uint64_t)i * FRAME;
    __atomic_store_n(xsk->fill.producer, XSK_RING, __ATOMIC_RELEASE);
    xsk->nfree = 0;
    for (uint32_t i = XSK_RING; i < XSK_FRAMES; i++) xsk->free_frames[xsk->nfree++] = i;
    struct sockaddr_xdp addr = {.sxdp_family = AF_XDP, .sxdp_ifindex = (uint32_t)if_index(ifname),
                                .sxdp_queue_id = 0, .sxdp_flags = XDP_COPY | XDP_USE_NEED_WAKEUP};
    /* a socket of a forwarder that just exited may still hold the queue for a moment */
    for (int tries = 0; bind(xsk->fd, (struct sockaddr *)&addr, sizeof addr) < 0; tries++) {
        if (errno != EBUSY || tries == 100) die("bind(AF_XDP)");
        usleep(20000);
    }
}

static long sys_bpf(int cmd, union bpf_attr *attr)
{
    return syscall(__NR_bpf, cmd, attr, sizeof *attr);
}

/* Load "return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS)" on ifname and put the socket in
 * the map.  Returns the link fd: the program is detached when the process exits. */
static int xdp_attach(const char *ifname, int xsk_fd)
{
    union bpf_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.map_type = BPF_MAP_TYPE_XSKMAP;
    attr.key_size = 4;
    attr.value_size = 4;
    attr.max_entries = 1;
    int map = (int)sys_bpf(BPF_MAP_CREATE, &attr);
    if (map < 0) die("bpf(BPF_MAP_CREATE xskmap)");
    struct bpf_insn prog[] = {
        {.code = BPF_LDX | BPF_W | BPF_MEM, .dst_reg = BPF_REG_2, .src_reg = BPF_REG_1, .off = 16}, /* rx_queue_index */
        {.code = BPF_LD | BPF_DW | BPF_IMM, .dst_reg = BPF_REG_1, .src_reg = BPF_PSEUDO_MAP_FD, .imm = map},
        {0},
        {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_3, .imm = XDP_PASS},
        {.code = BPF_JMP | BPF_CALL, .imm = BPF_FUNC_redirect_map},
        {.code = BPF_JMP | BPF_EXIT},
    };
    static char log[4096];
    memset(&attr, 0, sizeof attr);
    attr.prog_type = BPF_PROG_TYPE_XDP;
    attr.insns = (uintptr_t)prog;
    attr.insn_cnt = sizeof prog / sizeof prog[0];
    attr.license = (uintptr_t) "GPL";
    attr.log_buf = (uintptr_t)log;
    attr.log_size = sizeof log;
    attr.log_level = 1;
    int prog_fd = (int)sys_bpf(BPF_PROG_LOAD, &attr);
    if (prog_fd < 0) {
        fprintf(stderr, "verifier: %s\n", log);
        die("bpf(BPF_PROG_LOAD xdp)");
    }
    uint32_t key = 0, value = (uint32_t)xsk_fd;
    memset(&attr, 0, sizeof attr);
    attr.map_fd = map;
    attr.key = (uintptr_t)&key;
    attr.value = (uintptr_t)&value;
    if (sys_bpf(BPF_MAP_UPDATE_ELEM, &attr) < 0) die("bpf(BPF_MAP_UPDATE_ELEM)");
    memset(&attr, 0, sizeof attr);
    attr.link_create.prog_fd = prog_fd;
    attr.link_create.target_ifindex = if_index(ifname);
    attr.link_create.attach_type = BPF_XDP;
    attr.link_create.flags = XDP_FLAGS_DRV_MODE;
    int link = (int)sys_bpf(BPF_LINK_CREATE, &attr);
    if (link < 0) die("bpf(BPF_LINK_CREATE xdp)");
    return link;
}

static void xsk_kick_tx(struct xsk *xsk)
{
    sendto(xsk->fd, NULL, 0, MSG_DONTWAIT, NULL, 0);
}

/* Take back the transmit frames the kernel has sent. */
static void xsk_complete(struct xsk *xsk)
{
    uint32_t cons = *xsk->comp.consumer, prod = __atomic_load_n(xsk->comp.producer, __ATOMIC_ACQUIRE);
    uint64_t *comp = xsk->comp.descs;
    for (; cons != prod; cons++) xsk->free_frames[xsk->nfree++] = (uint32_t)(comp[cons & (XSK_RING - 1)] / FRAME);
    __atomic_store_n(xsk->comp.consumer, cons, __ATOMIC_RELEASE);
}

static void forward_xdp(const char *in, const char *out)
{
    static struct xsk rx, tx;
    xsk_open(&rx, in);
    xsk_open(&tx, out);
    int link = xdp_attach(in, rx.fd);
    (void)link;
    while (running) {
        uint32_t cons = *rx.rx.consumer, prod = __atomic_load_n(rx.rx.producer, __ATOMIC_ACQUIRE);
        if (cons == prod) {
            if (__atomic_load_n(rx.fill.flags, __ATOMIC_ACQUIRE) & XDP_RING_NEED_WAKEUP)
                recvfrom(rx.fd, NULL, 0, MSG_DONTWAIT, NULL, NULL);
            wait_readable(rx.fd);
            continue;
        }
        struct xdp_desc *rdesc = rx.rx.descs;
        struct xdp_desc *tdesc = tx.tx.descs;
        uint64_t *fill = rx.fill.descs;
        uint32_t fill_prod = *rx.fill.producer, tx_prod = *tx.tx.producer;
        xsk_complete(&tx);
        uint32_t n = 0;
        for (; cons != prod && n < BATCH; cons++, n++) {
            struct xdp_desc d = rdesc[cons & (XSK_RING - 1)];
            if (tx.nfree == 0) {
                xsk_kick_tx(&tx);
                xsk_complete(&tx);
            }
            if (tx.nfree) {
                uint32_t frame = tx.free_frames[--tx.nfree];
                memcpy(tx.umem + (uint64_t)frame * FRAME, rx.umem + d.addr, d.len);
                tdesc[tx_prod & (XSK_RING - 1)] = (struct xdp_desc){.addr = (uint64_t)frame * FRAME, .len = d.len};
                tx_prod++;
                forwarded++;
            }
            fill[fill_prod++ & (XSK_RING - 1)] = d.addr - d.addr % FRAME;
        }
        __atomic_store_n(rx.rx.consumer, cons, __ATOMIC_RELEASE);
        __atomic_store_n(rx.fill.producer, fill_prod, __ATOMIC_RELEASE);
        __atomic_store_n(tx.tx.producer, tx_prod, __ATOMIC_RELEASE);
        xsk_kick_tx(&tx);
    }
    struct xdp_statistics stats;
    socklen_t len = sizeof stats;
    if (getsockopt(rx.fd, SOL_XDP, XDP_STATISTICS, &stats, &len) == 0)
        kernel_drops = stats.rx_dropped + stats.rx_ring_full;
}

/* ------------------------------------------------------------------ sender and latency receiver */

static uint16_t checksum(const uint8_t *data, size_t len)
{
    uint32_t sum = 0;
    for (size_t i = 0; i + 1 < len; i += 2) sum += (uint32_t)data[i] << 8 | data[i + 1];
    while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
    return (uint16_t)~sum;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void send_frames(const char *ifname, unsigned size, double seconds, double rate)
{
    static uint8_t frame[FRAME];
    if (size < 60) size = 60;
    if (size > 1514) size = 1514;
    /* 02:.. locally administered MACs, 198.18.0.0/15 (benchmarking) addresses, UDP 1234 -> 4791 */
    const uint8_t dst[6] = {2, 0, 0, 0, 0, 2}, src[6] = {2, 0, 0, 0, 0, 1};
    memcpy(frame, dst, 6);
    memcpy(frame + 6, src, 6);
    frame[12] = 0x08;
    uint8_t *ip = frame + 14;
    unsigned ip_len = size - 14;
    ip[0] = 0x45, ip[2] = ip_len >> 8, ip[3] = ip_len & 0xff, ip[8] = 64, ip[9] = 17;
    memcpy(ip + 12, (uint8_t[]){198, 18, 0, 1, 198, 18, 0, 2}, 8);
    uint16_t sum = checksum(ip, 20);
    ip[10] = sum >> 8, ip[11] = sum & 0xff;
    uint8_t *udp = ip + 20;
    unsigned udp_len = ip_len - 20;
    udp[0] = 1234 >> 8, udp[1] = 1234 & 0xff, udp[2] = 4791 >> 8, udp[3] = 4791 & 0xff;
    udp[4] = udp_len >> 8, udp[5] = udp_len & 0xff;
    int fd = packet_socket(ifname, 0);
    struct iovec iov = {.iov_base = frame, .iov_len = size};
    struct mmsghdr msgs[BATCH];
    memset(msgs, 0, sizeof msgs);
    for (int i = 0; i < BATCH; i++) msgs[i].msg_hdr.msg_iov = &iov, msgs[i].msg_hdr.msg_iovlen = 1;
    unsigned long long sent = 0;
    double start = now_s(), end = start + seconds;
    for (double t = start; t < end && running; t = now_s()) {
        if (rate > 0 && sent >= rate * (t - start)) {
            usleep(50);
            continue;
        }
        int paced = rate > 0 && rate < 20000;
        if (paced) { /* slow enough to stamp each frame: its send time, for the latency mode */
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            memcpy(udp + 8, &ts, sizeof ts);
        }
        int n = sendmmsg(fd, msgs, paced ? 1 : BATCH, 0);
        if (n > 0) sent += n;
    }
    printf("%llu\n", sent);
}

static int compare_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Receive COUNT stamped frames (or until SECONDS pass); print the median and 99th percentile of
 * send-to-receive time in microseconds. */
static void latency(const char *ifname, unsigned count, double seconds)
{
    int fd = packet_socket(ifname, 1);
    uint64_t *samples = calloc(count, sizeof *samples);
    unsigned n = 0;
    uint8_t frame[FRAME];
    double end = now_s() + seconds;
    while (n < count && running && now_s() < end) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        if (poll(&pfd, 1, 100) <= 0) continue;
        ssize_t len = recv(fd, frame, sizeof frame, 0);
        struct timespec now, sent;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (len < 14 + 20 + 8 + (ssize_t)sizeof sent || frame[12] != 0x08 || frame[23] != 17) continue;
        memcpy(&sent, frame + 14 + 20 + 8, sizeof sent);
        samples[n++] = (uint64_t)(now.tv_sec - sent.tv_sec) * 1000000000ull + (uint64_t)now.tv_nsec - (uint64_t)sent.tv_nsec;
    }
    qsort(samples, n, sizeof *samples, compare_u64);
    if (n) printf("%u %.1f %.1f\n", n, samples[n / 2] / 1e3, samples[n * 99 / 100] / 1e3);
    else printf("0 0 0\n");
    free(samples);
}

int main(int argc, char **argv)
{
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc == 5 && !strcmp(argv[1], "forward")) {
        const char *method = argv[2];
        if (!strcmp(method, "mmsg")) forward_mmsg(argv[3], argv[4]);
        else if (!strcmp(method, "ring")) forward_ring(argv[3], argv[4], 1);
        else if (!strcmp(method, "ringmmsg")) forward_ring(argv[3], argv[4], 0);
        else if (!strcmp(method, "xdp")) forward_xdp(argv[3], argv[4]);
        else {
            fprintf(stderr, "unknown method %s: allowed mmsg, ring, ringmmsg, xdp\n", method);
            return 2;
        }
        printf("forwarded %llu dropped_by_kernel %llu\n", forwarded, kernel_drops);
        return 0;
    }
    if (argc == 6 && !strcmp(argv[1], "send")) {
        send_frames(argv[2], (unsigned)atoi(argv[3]), atof(argv[4]), atof(argv[5]));
        return 0;
    }
    if (argc == 5 && !strcmp(argv[1], "latency")) {
        latency(argv[2], (unsigned)atoi(argv[3]), atof(argv[4]));
        return 0;
    }
    fprintf(stderr, "usage: %s forward mmsg|ring|ringmmsg|xdp IN_IF OUT_IF\n"
                    "       %s send IF SIZE SECONDS RATE\n"
                    "       %s latency IF COUNT SECONDS\n", argv[0], argv[0], argv[0]);
    return 2;
}
