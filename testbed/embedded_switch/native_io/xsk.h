/* xsk.h - AF_XDP sockets without libbpf: one socket per interface (its receive queue 0) and a
 * five-instruction XDP program that redirects every frame of the queue to the socket.  A switch's
 * sockets share one UMEM (struct xsk_umem: registered by the first socket, shared by the others
 * with XDP_SHARED_UMEM): each socket keeps its own receive frames in its fill ring, and all draw
 * their transmit frames from one pool.  Copy mode: veth has no zero copy.
 *
 * Used by the native packet loop (tbio.c) and by benchmarks/c_forwarder.c.  Functions return 0 or
 * -1 with a message in err (errno kept).  Closing the socket and the link fd (xsk_close, or the
 * process's exit) detaches the program.
 */
#ifndef TB_XSK_H
#define TB_XSK_H

#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/if_link.h>
#include <linux/if_xdp.h>
#include <net/if.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SOL_XDP
#define SOL_XDP 283
#endif
#ifndef AF_XDP
#define AF_XDP 44
#endif

#define XSK_FRAME 2048u /* UMEM chunk (the kernel's smallest): the largest frame a port receives or sends */
/* Transmit frames of a UMEM, shared by its sockets.  The kernel pins the whole UMEM (XDP_UMEM_REG),
 * so every frame is resident memory.  A sent frame comes back only when the peer has taken it,
 * which for a veth whose peer runs XDP (switch to switch) is that peer's NAPI poll, later under
 * load: its queue holds 256 frames, so a pool of 256 lets one port take a burst as the link would
 * (128 could not send frames in bench_fabric_capacity.py; xsk_tx_put takes the pool's sent frames
 * back when it runs dry). */
#define XSK_TX_FRAMES 256u

struct xsk_ring {
    uint32_t *producer, *consumer, *flags;
    void *descs;
    uint32_t size;       /* power of two */
    void *map;
    size_t map_len;
};

struct xsk;

/* The frames of a process's sockets: rx_frames receive frames, handed to the sockets' fill rings
 * as they open, then tx_frames transmit frames, shared. */
struct xsk_umem {
    uint8_t *area;
    size_t len;
    uint32_t rx_frames, rx_given; /* receive frames, and those handed to a socket so far */
    uint32_t *free_frames;        /* transmit frames not in flight */
    uint32_t nfree, tx_frames;
    int fd;                       /* a bound socket holding the registration (a dup of the first
                                   * socket's, so it outlives that port): the others share through it */
    struct xsk *sockets;          /* the open sockets, whose completion rings give frames back */
};

struct xsk {
    int fd, link_fd, ifindex;
    struct xsk_umem *umem;
    struct xsk *next;      /* in umem->sockets */
    uint32_t ring_size, rx_first; /* receive frames rx_first .. rx_first + ring_size - 1 */
    struct xsk_ring rx, tx, fill, comp;
    uint32_t tx_prod;      /* our producer index, published by xsk_tx_flush */
};

static int xsk_fail(char *err, size_t errlen, const char *what, const char *ifname)
{
    int saved = errno;
    snprintf(err, errlen, "%s on %s: %s", what, ifname, strerror(saved));
    errno = saved;
    return -1;
}

static int xsk_ring_map(int fd, struct xsk_ring *ring, const struct xdp_ring_offset *off, uint64_t pgoff,
                        size_t desc_size, uint32_t size)
{
    ring->map_len = off->desc + (size_t)size * desc_size;
    ring->map = mmap(NULL, ring->map_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, (off_t)pgoff);
    if (ring->map == MAP_FAILED) {
        ring->map = NULL;
        return -1;
    }
    uint8_t *base = ring->map;
    ring->producer = (void *)(base + off->producer);
    ring->consumer = (void *)(base + off->consumer);
    ring->flags = (void *)(base + off->flags);
    ring->descs = base + off->desc;
    ring->size = size;
    return 0;
}

static long xsk_bpf(int cmd, union bpf_attr *attr)
{
    return syscall(__NR_bpf, cmd, attr, sizeof *attr);
}

/* Load "return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS)", put the socket at key 0,
 * attach the program to ifindex (driver mode) through a BPF link; return the link fd or -1. */
static int xsk_attach_program(int ifindex, int xsk_fd, char *log, size_t loglen)
{
    union bpf_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.map_type = BPF_MAP_TYPE_XSKMAP;
    attr.key_size = 4;
    attr.value_size = 4;
    attr.max_entries = 1;
    int map = (int)xsk_bpf(BPF_MAP_CREATE, &attr);
    if (map < 0) return -1;
    struct bpf_insn prog[] = {
        {.code = BPF_LDX | BPF_W | BPF_MEM, .dst_reg = BPF_REG_2, .src_reg = BPF_REG_1, .off = 16}, /* rx_queue_index */
        {.code = BPF_LD | BPF_DW | BPF_IMM, .dst_reg = BPF_REG_1, .src_reg = BPF_PSEUDO_MAP_FD, .imm = map},
        {0},
        {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_3, .imm = XDP_PASS},
        {.code = BPF_JMP | BPF_CALL, .imm = BPF_FUNC_redirect_map},
        {.code = BPF_JMP | BPF_EXIT},
    };
    memset(&attr, 0, sizeof attr);
    attr.prog_type = BPF_PROG_TYPE_XDP;
    attr.insns = (uintptr_t)prog;
    attr.insn_cnt = sizeof prog / sizeof prog[0];
    attr.license = (uintptr_t) "GPL";
    attr.log_buf = (uintptr_t)log;
    attr.log_size = (uint32_t)loglen;
    attr.log_level = log ? 1 : 0;
    int prog_fd = (int)xsk_bpf(BPF_PROG_LOAD, &attr);
    int link = -1;
    if (prog_fd >= 0) {
        if (log) log[0] = 0; /* the verifier's log of a program it took says nothing about a failure after */
        uint32_t key = 0, value = (uint32_t)xsk_fd;
        memset(&attr, 0, sizeof attr);
        attr.map_fd = (uint32_t)map;
        attr.key = (uintptr_t)&key;
        attr.value = (uintptr_t)&value;
        if (xsk_bpf(BPF_MAP_UPDATE_ELEM, &attr) == 0) {
            memset(&attr, 0, sizeof attr);
            attr.link_create.prog_fd = (uint32_t)prog_fd;
            attr.link_create.target_ifindex = (uint32_t)ifindex;
            attr.link_create.attach_type = BPF_XDP;
            attr.link_create.flags = XDP_FLAGS_DRV_MODE;
            link = (int)xsk_bpf(BPF_LINK_CREATE, &attr);
        }
    }
    int saved = errno;
    if (prog_fd >= 0) close(prog_fd); /* the link keeps the program, the program keeps the map */
    close(map);
    errno = saved;
    return link;
}

/* Set up u with rx_frames receive frames (the sum of its sockets' ring sizes) and tx_frames transmit
 * frames; the kernel registers (and pins) them when the first socket opens. */
static int xsk_umem_open(struct xsk_umem *u, uint32_t rx_frames, uint32_t tx_frames, char *err, size_t errlen)
{
    memset(u, 0, sizeof *u);
    u->fd = -1;
    u->rx_frames = rx_frames;
    u->tx_frames = tx_frames;
    u->len = (size_t)(rx_frames + tx_frames) * XSK_FRAME;
    u->area = mmap(NULL, u->len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    u->free_frames = malloc(sizeof *u->free_frames * (tx_frames ? tx_frames : 1));
    if (u->area == MAP_FAILED || !u->free_frames) {
        snprintf(err, errlen, "%s: %s", u->area == MAP_FAILED ? "mmap(UMEM)" : "malloc", strerror(errno));
        if (u->area == MAP_FAILED) u->area = NULL;
        return -1;
    }
    for (uint32_t i = 0; i < tx_frames; i++) u->free_frames[u->nfree++] = rx_frames + i;
    return 0;
}

/* After every socket of u is closed. */
static void xsk_umem_close(struct xsk_umem *u)
{
    if (u->fd >= 0) close(u->fd);
    if (u->area) munmap(u->area, u->len);
    free(u->free_frames);
    memset(u, 0, sizeof *u);
    u->fd = -1;
}

static void xsk_close(struct xsk *x)
{
    if (x->link_fd >= 0) close(x->link_fd);
    if (x->fd >= 0) close(x->fd);
    struct xsk_ring *rings[] = {&x->rx, &x->tx, &x->fill, &x->comp};
    for (int i = 0; i < 4; i++)
        if (rings[i]->map) munmap(rings[i]->map, rings[i]->map_len);
    if (x->umem) { /* its receive frames stay its own: the UMEM has a range for every socket it was made for */
        struct xsk **at = &x->umem->sockets;
        while (*at && *at != x) at = &(*at)->next;
        if (*at) *at = x->next;
    }
    memset(x, 0, sizeof *x);
    x->fd = x->link_fd = -1;
}

/* Open x on ifname's queue 0 with rings of ring_size (a power of two) and ring_size receive frames of
 * u (all in the fill ring); it sends with u's transmit frames. */
static int xsk_open(struct xsk *x, struct xsk_umem *u, const char *ifname, uint32_t ring_size, char *err,
                    size_t errlen)
{
    memset(x, 0, sizeof *x);
    x->fd = x->link_fd = -1;
    int ifindex = (int)if_nametoindex(ifname);
    if (!ifindex) return xsk_fail(err, errlen, "no such interface", ifname);
    x->ifindex = ifindex;
    if (u->rx_given + ring_size > u->rx_frames) {
        snprintf(err, errlen, "%s: the UMEM has no receive frames left (%u of %u given)", ifname, u->rx_given,
                 u->rx_frames);
        errno = ENOSPC;
        return -1;
    }
    x->umem = u;
    x->ring_size = ring_size;
    x->rx_first = u->rx_given;
    u->rx_given += ring_size;
    char path[128];
    snprintf(path, sizeof path, "/sys/class/net/%s/queues/rx-1", ifname);
    if (access(path, F_OK) == 0) {
        snprintf(err, errlen, "%s has more than one receive queue; the switch reads queue 0 only", ifname);
        goto fail;
    }
    x->fd = socket(AF_XDP, SOCK_RAW | SOCK_CLOEXEC, 0);
    if (x->fd < 0) {
        xsk_fail(err, errlen, "socket(AF_XDP)", ifname);
        goto fail;
    }
    struct xdp_umem_reg reg = {.addr = (uintptr_t)u->area, .len = u->len, .chunk_size = XSK_FRAME};
    if (u->fd < 0 && setsockopt(x->fd, SOL_XDP, XDP_UMEM_REG, &reg, sizeof reg) < 0) {
        xsk_fail(err, errlen, "XDP_UMEM_REG", ifname);
        goto fail;
    }
    /* the completion ring takes every frame of the pool in flight through this socket */
    int size = (int)ring_size, comp_size = (int)ring_size;
    while ((uint32_t)comp_size < u->tx_frames) comp_size *= 2;
    if (setsockopt(x->fd, SOL_XDP, XDP_UMEM_FILL_RING, &size, sizeof size) < 0 ||
        setsockopt(x->fd, SOL_XDP, XDP_UMEM_COMPLETION_RING, &comp_size, sizeof comp_size) < 0 ||
        setsockopt(x->fd, SOL_XDP, XDP_RX_RING, &size, sizeof size) < 0 ||
        setsockopt(x->fd, SOL_XDP, XDP_TX_RING, &size, sizeof size) < 0) {
        xsk_fail(err, errlen, "AF_XDP ring sizes", ifname);
        goto fail;
    }
    struct xdp_mmap_offsets off;
    socklen_t optlen = sizeof off;
    if (getsockopt(x->fd, SOL_XDP, XDP_MMAP_OFFSETS, &off, &optlen) < 0 ||
        xsk_ring_map(x->fd, &x->rx, &off.rx, XDP_PGOFF_RX_RING, sizeof(struct xdp_desc), ring_size) ||
        xsk_ring_map(x->fd, &x->tx, &off.tx, XDP_PGOFF_TX_RING, sizeof(struct xdp_desc), ring_size) ||
        xsk_ring_map(x->fd, &x->fill, &off.fr, XDP_UMEM_PGOFF_FILL_RING, sizeof(uint64_t), ring_size) ||
        xsk_ring_map(x->fd, &x->comp, &off.cr, XDP_UMEM_PGOFF_COMPLETION_RING, sizeof(uint64_t),
                     (uint32_t)comp_size)) {
        xsk_fail(err, errlen, "mmap(AF_XDP rings)", ifname);
        goto fail;
    }
    uint64_t *fill = x->fill.descs;
    for (uint32_t i = 0; i < ring_size; i++) fill[i] = (uint64_t)(x->rx_first + i) * XSK_FRAME;
    __atomic_store_n(x->fill.producer, ring_size, __ATOMIC_RELEASE);
    struct sockaddr_xdp addr = {.sxdp_family = AF_XDP, .sxdp_ifindex = (uint32_t)ifindex, .sxdp_queue_id = 0,
                                .sxdp_flags = XDP_COPY | XDP_USE_NEED_WAKEUP};
    if (u->fd >= 0) { /* another device's socket holds the UMEM: this one has its own fill and completion rings */
        addr.sxdp_flags = XDP_SHARED_UMEM;
        addr.sxdp_shared_umem_fd = (uint32_t)u->fd;
    }
    /* a socket closed a moment ago (a previous switch on this port) may still hold the queue */
    for (int tries = 0; bind(x->fd, (struct sockaddr *)&addr, sizeof addr) < 0; tries++) {
        if (errno != EBUSY || tries == 100) {
            xsk_fail(err, errlen, "bind(AF_XDP)", ifname);
            goto fail;
        }
        usleep(20000);
    }
    if (u->fd < 0 && (u->fd = fcntl(x->fd, F_DUPFD_CLOEXEC, 0)) < 0) {
        xsk_fail(err, errlen, "dup(AF_XDP socket)", ifname);
        goto fail;
    }
    x->next = u->sockets;
    u->sockets = x;
    static char log[4096];
    log[0] = 0;
    x->link_fd = xsk_attach_program(ifindex, x->fd, log, sizeof log);
    if (x->link_fd < 0) {
        int saved = errno;
        snprintf(err, errlen, "loading the XDP program on %s: %s%s%s", ifname, strerror(saved), log[0] ? ": " : "",
                 log);
        errno = saved;
        goto fail;
    }
    return 0;
fail:
    xsk_close(x);
    return -1;
}

/* Take back the transmit frames the kernel has sent through x. */
static void xsk_complete(struct xsk *x)
{
    struct xsk_umem *u = x->umem;
    uint32_t cons = *x->comp.consumer, prod = __atomic_load_n(x->comp.producer, __ATOMIC_ACQUIRE);
    const uint64_t *comp = x->comp.descs;
    uint32_t mask = x->comp.size - 1;
    for (; cons != prod; cons++) u->free_frames[u->nfree++] = (uint32_t)(comp[cons & mask] / XSK_FRAME);
    __atomic_store_n(x->comp.consumer, cons, __ATOMIC_RELEASE);
}

/* Publish the queued frames and have the kernel send them: copy mode sends a bounded number of
 * frames per system call (EAGAIN: call again), so call until the ring is empty. */
static void xsk_tx_flush(struct xsk *x)
{
    __atomic_store_n(x->tx.producer, x->tx_prod, __ATOMIC_RELEASE);
    for (int calls = 0; calls < 64; calls++) {
        if (__atomic_load_n(x->tx.consumer, __ATOMIC_ACQUIRE) == x->tx_prod) break;
        if (sendto(x->fd, NULL, 0, MSG_DONTWAIT, NULL, 0) < 0 && errno != EAGAIN && errno != EBUSY &&
            errno != ENOBUFS)
            break;
        xsk_complete(x);
    }
    xsk_complete(x);
}

/* Frames of the pool a socket's ring may hold that the kernel has not taken yet.  A flush normally
 * leaves none; an interface that is down (not IFF_UP) takes none until it is up again, and without
 * this bound one down port would hold the whole pool and stop every other port. */
#define XSK_TX_QUEUED 64u

static uint32_t xsk_tx_queued(struct xsk *x)
{
    return x->tx_prod - __atomic_load_n(x->tx.consumer, __ATOMIC_ACQUIRE);
}

/* Queue one frame for sending (xsk_tx_flush sends).  When the pool is dry, the frames every socket has
 * sent are taken back, and x's queued frames are sent; 0 when no transmit frame is free even then,
 * x holds its share of queued frames (XSK_TX_QUEUED, or its ring size if smaller) even after a flush,
 * or the frame is too long. */
static int xsk_tx_put(struct xsk *x, const void *data, uint32_t len)
{
    struct xsk_umem *u = x->umem;
    uint32_t most = x->tx.size < XSK_TX_QUEUED ? x->tx.size : XSK_TX_QUEUED;
    if (len > XSK_FRAME) return 0;
    if (xsk_tx_queued(x) >= most) xsk_tx_flush(x);
    for (struct xsk *s = u->sockets; s && !u->nfree; s = s->next) xsk_complete(s);
    if (!u->nfree) xsk_tx_flush(x);
    if (!u->nfree || xsk_tx_queued(x) >= most) return 0;
    uint32_t frame = u->free_frames[--u->nfree];
    memcpy(u->area + (uint64_t)frame * XSK_FRAME, data, len);
    struct xdp_desc *descs = x->tx.descs;
    descs[x->tx_prod & (x->tx.size - 1)] = (struct xdp_desc){.addr = (uint64_t)frame * XSK_FRAME, .len = len};
    x->tx_prod++;
    return 1;
}

/* Receive up to max frames: call fn(ctx, data, len) for each, give the frames back to the kernel;
 * returns the number received. */
static uint32_t xsk_receive(struct xsk *x, uint32_t max, void (*fn)(void *, const uint8_t *, uint32_t), void *ctx)
{
    uint32_t cons = *x->rx.consumer, prod = __atomic_load_n(x->rx.producer, __ATOMIC_ACQUIRE);
    if (cons == prod) return 0;
    const struct xdp_desc *descs = x->rx.descs;
    uint64_t *fill = x->fill.descs;
    uint32_t mask = x->ring_size - 1, fill_prod = *x->fill.producer, n = 0;
    for (; cons != prod && n < max; cons++, n++) {
        struct xdp_desc d = descs[cons & mask];
        fn(ctx, x->umem->area + d.addr, d.len);
        fill[fill_prod++ & mask] = d.addr - d.addr % XSK_FRAME;
    }
    __atomic_store_n(x->rx.consumer, cons, __ATOMIC_RELEASE);
    __atomic_store_n(x->fill.producer, fill_prod, __ATOMIC_RELEASE);
    return n;
}

/* Frames the kernel dropped because the receive ring was full or invalid. */
static uint64_t xsk_drops(struct xsk *x)
{
    struct xdp_statistics stats;
    socklen_t len = sizeof stats;
    if (getsockopt(x->fd, SOL_XDP, XDP_STATISTICS, &stats, &len) < 0) return 0;
    return stats.rx_dropped + stats.rx_ring_full + stats.rx_invalid_descs;
}

#endif /* TB_XSK_H */
