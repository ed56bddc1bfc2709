/* pktgen.c - the embedded target's packet generator in native code (see tbio.h).
 *
 * The timers of testbed/p4/v1model/packet_generator.py, which is the reference and keeps the
 * configuration (its checks, its status): an application's template enters ingress on its port
 * once per period; when the loop comes late and several periods passed, one frame is generated and
 * the missed periods are counted as skipped, late_max_ns keeps the latest a frame went out after
 * its due time.  The packet loop (tbio.c) asks for the due applications on its own timer, so a
 * trigger needs no Python.
 */
#include <stdlib.h>
#include <string.h>

#include "tbio.h"

struct pktgen_app {
    int active;
    tbio_pktgen_app_t state;
    uint32_t len;
    uint8_t template_[TBIO_PKTGEN_MAX_FRAME];
};

struct tbio_pktgen {
    struct pktgen_app apps[TBIO_PKTGEN_APPS];
};

tbio_pktgen_t *tbio_pktgen_new(void) { return calloc(1, sizeof(tbio_pktgen_t)); }

void tbio_pktgen_free(tbio_pktgen_t *pg) { free(pg); }

int tbio_pktgen_set(tbio_pktgen_t *pg, uint32_t app, const tbio_pktgen_app_t *state, const uint8_t *frame,
                    uint32_t len)
{
    if (app >= TBIO_PKTGEN_APPS || len > TBIO_PKTGEN_MAX_FRAME || state->period_ns <= 0) return -1;
    struct pktgen_app *a = &pg->apps[app];
    a->state = *state;
    memcpy(a->template_, frame, len);
    a->len = len;
    a->active = 1;
    return 0;
}

void tbio_pktgen_stop(tbio_pktgen_t *pg, uint32_t app)
{
    if (app < TBIO_PKTGEN_APPS) pg->apps[app].active = 0;
}

int tbio_pktgen_get(tbio_pktgen_t *pg, uint32_t app, tbio_pktgen_app_t *out)
{
    if (app >= TBIO_PKTGEN_APPS || !pg->apps[app].active) return 0;
    *out = pg->apps[app].state;
    return 1;
}

int tbio_pktgen_next_due(tbio_pktgen_t *pg, int64_t *when)
{
    int found = 0;
    for (uint32_t i = 0; i < TBIO_PKTGEN_APPS; i++) {
        const struct pktgen_app *a = &pg->apps[i];
        if (a->active && (!found || a->state.next_ns < *when)) *when = a->state.next_ns, found = 1;
    }
    return found;
}

/* PacketGenerator.due: the applications whose time has come, in application order, one frame each. */
int tbio_pktgen_due(tbio_pktgen_t *pg, int64_t now, uint32_t *apps, int cap)
{
    int n = 0;
    for (uint32_t i = 0; i < TBIO_PKTGEN_APPS && n < cap; i++) {
        struct pktgen_app *a = &pg->apps[i];
        tbio_pktgen_app_t *s = &a->state;
        if (!a->active || s->next_ns > now) continue;
        int64_t periods = (now - s->next_ns) / s->period_ns + 1;
        int64_t late = now - (s->next_ns + (periods - 1) * s->period_ns);
        s->skipped += (uint64_t)(periods - 1);
        if ((uint64_t)(periods - 1) > s->skipped_run_max) s->skipped_run_max = (uint64_t)(periods - 1);
        if (late > s->late_max_ns) s->late_max_ns = late;
        s->generated++;
        s->next_ns += periods * s->period_ns;
        apps[n++] = i;
    }
    return n;
}

const uint8_t *tbio_pktgen_frame(tbio_pktgen_t *pg, uint32_t app, uint32_t *len)
{
    if (app >= TBIO_PKTGEN_APPS || !pg->apps[app].active) return NULL;
    *len = pg->apps[app].len;
    return pg->apps[app].template_;
}
