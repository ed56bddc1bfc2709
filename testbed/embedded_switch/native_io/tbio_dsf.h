/* tbio_dsf.h - the native loop's use of the DSF traffic manager (testbed/p4/native/csrc/tb_dsf.c).
 *
 * Included once by tbio.c, after run_ingress is declared (these are its static helpers).  The
 * traffic manager object is the switch device's own (NativeDSFTrafficManager.dsf, made by Python
 * and counting into the pipeline's native counters); its functions come from the pipeline's
 * shared object, where build.py compiles tb_dsf.c.  As Device does it: at the end of ingress the
 * packet's DSF extern requests go to the manager (tb_dsf_handle), which may take the packet; the
 * frames it makes (cells on port 509, reassembled packets on 508) enter ingress again from the
 * loop (dsf_run), whose wait also ends at the manager's next timer (dsf_next).
 */
#define DSF_REQUESTS 8   /* TB_MAX_EXTERN_REQUESTS */
#define DSF_ARGS 12      /* TB_MAX_EXTERN_ARGS */
#define DSF_SPACE (65536 + 8192)

struct dsf_glue {
    void *dsf;
    int (*handle)(void *, int64_t, uint32_t, const int32_t *, const uint64_t *, const uint8_t *, uint32_t,
                  const uint8_t *, uint32_t);
    void (*due)(void *, int64_t);
    int32_t (*take)(void *, uint32_t *, uint8_t *, uint32_t);
    uint32_t (*pending)(const void *);
    int (*next_event)(const void *, int64_t *);
    uint32_t (*payload_offset)(const tb_packet_t *);
    uint8_t buf[DSF_SPACE]; /* the deparsed packet; a frame too large for a slot */
};

static void dsf_detach(tbio_loop_t *L)
{
    free(L->dsf);
    L->dsf = NULL;
}

int tbio_set_dsf(tbio_loop_t *L, void *dsf, char *err, size_t errlen)
{
    dsf_detach(L);
    if (!dsf) return 0;
    struct dsf_glue *g = L->dl && L->ops.extern_requests ? calloc(1, sizeof *g) : NULL;
    if (!g) {
        snprintf(err, errlen, "no pipeline calling the target's externs, or out of memory");
        return -1;
    }
    const char *names[] = {"tb_dsf_handle", "tb_dsf_due", "tb_dsf_take", "tb_dsf_pending", "tb_dsf_next_event",
                           "tb_packet_payload_offset"};
    void **slots[] = {(void **)&g->handle, (void **)&g->due, (void **)&g->take, (void **)&g->pending,
                      (void **)&g->next_event, (void **)&g->payload_offset};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        *slots[i] = dlsym(L->dl, names[i]);
        if (!*slots[i]) {
            snprintf(err, errlen, "the pipeline has no function %s (built without tb_dsf.c)", names[i]);
            free(g);
            return -1;
        }
    }
    g->dsf = dsf;
    L->dsf = g;
    return 0;
}

/* End of ingress: hand the packet's DSF requests to the manager; 1 when it took the packet (s is freed). */
static int dsf_takes(tbio_loop_t *L, slot_t *s, tb_packet_t *pkt, int64_t now)
{
    struct dsf_glue *g = L->dsf;
    int32_t ids[DSF_REQUESTS];
    uint64_t args[DSF_REQUESTS * DSF_ARGS];
    int n = L->ops.extern_requests(pkt, ids, args, DSF_REQUESTS);
    if (n <= 0) return 0;
    const uint8_t *packet = NULL;
    int packet_len = 0;
    for (int i = 0; i < n && ids[i] != 3; i++) { /* the first request that takes the packet decides */
        if (ids[i] == 0) {
            packet_len = L->ops.deparse(L->pl, pkt, g->buf, sizeof g->buf);
            if (packet_len < 0) {
                L->errors++;
                port_stats(L, L->ops.packet_std(pkt)->ingress_port)->drops++;
                packet_free(L, s);
                return 1;
            }
            packet = g->buf;
            break;
        }
    }
    uint32_t offset = g->payload_offset(pkt);
    uint32_t payload_len = s->len > offset ? s->len - offset : 0;
    int taken = g->handle(g->dsf, now, (uint32_t)n, ids, args, packet, (uint32_t)packet_len,
                          frame_of(s) + (payload_len ? offset : 0), payload_len);
    if (taken < 0) L->errors++;
    if (taken == 0) return 0;
    if (L->ops.events) { /* a taken packet's digests are not sent (Device returns before sending them) */
        int32_t sites[EVENTS_PER_STAGE];
        uint64_t values[EVENTS_PER_STAGE * EVENT_VALUES];
        int k = L->ops.events(pkt, sites, values, EVENTS_PER_STAGE);
        for (uint32_t i = 0; i < (uint32_t)(k > 0 ? k : 0) && i < L->nevents; i++)
            L->events[(L->events_head + L->nevents - 1 - i) % EVENT_QUEUE].valid = 0;
    }
    packet_free(L, s);
    return 1;
}

/* The manager's timers due by now, and its frames into ingress, for at most MAX_PASSES rounds
 * (a grant releases data cells, which may make more). */
static void dsf_run(tbio_loop_t *L, int64_t now)
{
    struct dsf_glue *g = L->dsf;
    for (int pass = 0; pass < MAX_PASSES; pass++) {
        g->due(g->dsf, now);
        uint32_t n = g->pending(g->dsf);
        if (!n) return;
        while (n-- > 0 && !L->halted) {
            slot_t *s = slot_get(L);
            uint32_t port;
            int32_t len = s ? g->take(g->dsf, &port, s->frame, SLOT_FRAME) : 0;
            if (len < 0) {
                slot_unref(L, s);
                break;
            }
            if (!s || len > (int32_t)SLOT_FRAME) { /* no slot, or larger than one: the frame is lost */
                g->take(g->dsf, &port, g->buf, sizeof g->buf);
                L->errors++;
                if (s) slot_unref(L, s);
                continue;
            }
            s->len = (uint32_t)len;
            run_ingress(L, s, port, TB_INSTANCE_NORMAL, NULL, -1);
        }
    }
}

/* Shorten the loop's wait to the manager's next timer. */
static void dsf_next(tbio_loop_t *L, int64_t *next)
{
    int64_t when;
    if (L->dsf->next_event(L->dsf->dsf, &when) && when < *next) *next = when;
}
