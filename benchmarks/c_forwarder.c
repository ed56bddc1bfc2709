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
 *             instructions (redirect to the XSKMAP) loaded with the bpf() system call: the code
 *             of the switch's native loop (testbed/embedded_switch/native_io/xsk.h)
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

#include "../testbed/embedded_switch/native_io/xsk.h" /* the native switch loop's AF_XDP code */

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

#define XSK_RING 1024

static void forward_one(void *ctx, const uint8_t *data, uint32_t len)
{
    if (xsk_tx_put(ctx, data, len)) forwarded++;
}

static void forward_xdp(const char *in, const char *out)
{
    static struct xsk_umem umem;
    static struct xsk rx, tx;
    char err[512];
    if (xsk_umem_open(&umem, 2 * XSK_RING, XSK_TX_FRAMES, err, sizeof err) ||
        xsk_open(&rx, &umem, in, XSK_RING, err, sizeof err) || xsk_open(&tx, &umem, out, XSK_RING, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        exit(2);
    }
    while (running) {
        if (!xsk_receive(&rx, BATCH, forward_one, &tx)) {
            wait_readable(rx.fd);
            continue;
        }
        xsk_tx_flush(&tx);
    }
    kernel_drops = xsk_drops(&rx);
    xsk_close(&rx);
    xsk_close(&tx);
    xsk_umem_close(&umem);
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
