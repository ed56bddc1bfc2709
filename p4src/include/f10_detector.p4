/* F10's failure detector in the data plane (seed 002, section 5.4; prototype 7.1).
 *
 * Include after headers.p4 and the program's metadata_t, which has a member
 * `f10_metadata_t f10`.
 *
 * Every fabric port counts the valid frames it receives (data and probes).
 * Time is cut into buckets of one probe period; the detector's window t is the
 * last `window_buckets` buckets (t = window_buckets x probe period), so the
 * count slides by one bucket per period:
 *
 *   rx_bucket[p*8 + b]  valid frames of bucket b (at most MAX_BUCKETS = 8)
 *   cur_bucket[p]       the bucket frames count into now
 *
 * The window's count is the sum of its buckets, added up by each decision.
 * Ingress (arrivals) and egress (decisions) run in different threads on BMv2,
 * and p4c splits a control's statements into several actions, each atomic on
 * its own: a running sum that ingress increments and egress rewrites (read,
 * then write after an `if`) loses increments that the buckets keep, so it
 * ends below their total and wraps around at 0, after which the port never
 * goes down.  Here each register cell has one writer per step (ingress adds to
 * the current bucket, egress empties the oldest one), so a frame counted
 * late is at worst one bucket late.
 *
 * Each trigger frame (one per probe period, see f10_headers.p4) is multicast to
 * every fabric port (group F10_PORTS_GROUP, written by the controller); its copy
 * for port p, in egress, closes p's bucket and decides (F10Detector):
 *
 *   up   -> down  when fewer than `down_below` (c) frames are in the window;
 *   down -> up    when at least `up_at_least` (d) frames are in the window and
 *                 the hold-down has passed.
 *
 * A port is evaluated only once it has been watched for a whole window, and
 * it can be declared down only after a window with at least d frames has
 * shown it working (port_confirmed): switches start their triggers one after
 * another, and a port whose neighbour has not started yet is not a failure
 * (a link that never comes up is never reported as going down).
 * Flapping backs off exponentially: a new down within `backoff_reset_us` of the
 * previous one doubles the hold-down (`holddown_us << level`, at most
 * `holddown_max_us`); a down after a stable period starts again at `holddown_us`.
 *
 *   port_down[p]        1 while p is declared down (read by forwarding, ingress)
 *   holddown_until[p], last_down_us[p], backoff_level[p]
 *
 * After deciding, the copy becomes a probe if p sent nothing since the previous
 * trigger (last_tx_us[p], written by every frame leaving p, against
 * last_trigger_us[p]), else it is dropped.  Triggers come once per probe period,
 * so an idle port sends one probe per period.  (Comparing the time since the
 * last frame with the period instead would skip a probe whenever a trigger ran
 * less late than the one before: about one period in three on a loaded host.)
 *
 * Reports: each transition is cloned (E2E) to clone session F10_REPORT_SESSION,
 * which the controller points at the CPU port; the clone leaves as a PacketIn
 * whose packet_in fields carry the switch's timestamp, the port, the new status,
 * the window's count and the hold-down.  The counters
 * MyEgress.port_down_events / port_up_events (indexed by port) count the
 * transitions, so the current status can be read back over P4Runtime on any
 * target: a port is down when it has more down than up events.
 *
 * Run-time parameters: the default action of the keyless table
 * MyEgress.detector_params (testbed/modes.py describes them and their ranges).
 */
#ifndef _TESTBED_F10_DETECTOR_P4_
#define _TESTBED_F10_DETECTOR_P4_

#define F10_PORTS 512
#define MAX_BUCKETS 8
#define F10_PORTS_GROUP 1
#define F10_REPORT_SESSION 100

#ifndef F10_DEFAULT_PROBE_PERIOD_US
#define F10_DEFAULT_PROBE_PERIOD_US 20000
#endif

const bit<32> MAX_BACKOFF_LEVEL = 16;

register<bit<32>>(F10_PORTS * MAX_BUCKETS) rx_bucket;
register<bit<32>>(F10_PORTS) cur_bucket;
register<bit<32>>(F10_PORTS) watched_buckets;
register<bit<1>>(F10_PORTS) port_confirmed;
register<bit<1>>(F10_PORTS) port_down;
register<bit<48>>(F10_PORTS) holddown_until;
register<bit<48>>(F10_PORTS) last_down_us;
register<bit<32>>(F10_PORTS) backoff_level;
register<bit<48>>(F10_PORTS) last_tx_us;
register<bit<48>>(F10_PORTS) last_trigger_us;

/* ingress: one more valid frame on a fabric port */
control F10CountArrival(in standard_metadata_t standard_metadata) {
    apply {
        bit<32> port = (bit<32>)standard_metadata.ingress_port;
        bit<32> bucket;
        bit<32> count;
        cur_bucket.read(bucket, port);
        rx_bucket.read(count, port * MAX_BUCKETS + bucket);
        rx_bucket.write(port * MAX_BUCKETS + bucket, count + 1);
    }
}

/* the valid frames in port's window: its first `buckets` buckets (MAX_BUCKETS unrolled) */
action window_sum(in bit<32> port, in bit<32> buckets, inout bit<32> sum) {
    bit<32> base = port * MAX_BUCKETS;
    bit<32> b0; bit<32> b1; bit<32> b2; bit<32> b3; bit<32> b4; bit<32> b5; bit<32> b6; bit<32> b7;
    rx_bucket.read(b0, base);
    rx_bucket.read(b1, base + 1);
    rx_bucket.read(b2, base + 2);
    rx_bucket.read(b3, base + 3);
    rx_bucket.read(b4, base + 4);
    rx_bucket.read(b5, base + 5);
    rx_bucket.read(b6, base + 6);
    rx_bucket.read(b7, base + 7);
    sum = b0 + (buckets > 1 ? b1 : 0) + (buckets > 2 ? b2 : 0) + (buckets > 3 ? b3 : 0)
        + (buckets > 4 ? b4 : 0) + (buckets > 5 ? b5 : 0) + (buckets > 6 ? b6 : 0) + (buckets > 7 ? b7 : 0);
}

/* egress, on a trigger copy for one fabric port: decide, report, probe or drop */
control F10Detector(inout headers_t hdr,
                    inout metadata_t meta,
                    inout standard_metadata_t standard_metadata) {
    @name(".MyEgress.port_down_events")
    counter(F10_PORTS, CounterType.packets) port_down_events;
    @name(".MyEgress.port_up_events")
    counter(F10_PORTS, CounterType.packets) port_up_events;

    @name(".MyEgress.set_detector_params")
    action set_detector_params(bit<32> window_buckets, bit<32> down_below, bit<32> up_at_least,
                               bit<32> probe_period_us, bit<32> holddown_us, bit<32> holddown_max_us,
                               bit<32> backoff_reset_us) {
        meta.f10.window_buckets = window_buckets;
        meta.f10.down_below = down_below;
        meta.f10.up_at_least = up_at_least;
        meta.f10.probe_period_us = probe_period_us;
        meta.f10.holddown_us = holddown_us;
        meta.f10.holddown_max_us = holddown_max_us;
        meta.f10.backoff_reset_us = backoff_reset_us;
    }

    /* run-time parameters: a keyless table whose default entry the controller modifies */
    @name(".MyEgress.detector_params")
    table detector_params {
        actions = { set_detector_params; }
        default_action = set_detector_params(5, 1, 3, F10_DEFAULT_PROBE_PERIOD_US, 200000, 3200000, 1000000);
    }

    action report(bit<8> status, bit<32> frames, bit<32> holddown, bit<32> level) {
        meta.f10.report_status = status;
        meta.f10.report_port = (bit<16>)standard_metadata.egress_port;
        meta.f10.report_frames = frames;
        meta.f10.report_holddown_us = holddown;
        meta.f10.report_level = (bit<8>)level;
        meta.f10.report_time_us = standard_metadata.egress_global_timestamp;
        clone_preserving_field_list(CloneType.E2E, F10_REPORT_SESSION, 1);
    }

    apply {
        detector_params.apply();
        bit<32> port = (bit<32>)standard_metadata.egress_port;
        bit<48> now = standard_metadata.egress_global_timestamp;
        bit<32> count = 0;
        bit<32> watched;
        bit<1> down;
        window_sum(port, meta.f10.window_buckets, count);
        watched_buckets.read(watched, port);
        port_down.read(down, port);

        bit<1> confirmed;
        port_confirmed.read(confirmed, port);
        if (watched >= meta.f10.window_buckets && count >= meta.f10.up_at_least) {
            port_confirmed.write(port, 1);
        }
        if (watched >= meta.f10.window_buckets) {
            if (down == 0 && confirmed == 1 && count < meta.f10.down_below) {
                bit<48> previous;
                bit<32> level;
                last_down_us.read(previous, port);
                backoff_level.read(level, port);
                if (previous != 0 && now - previous < (bit<48>)meta.f10.backoff_reset_us) {
                    if (level < MAX_BACKOFF_LEVEL) {
                        level = level + 1;
                    }
                } else {
                    level = 0;
                }
                bit<32> hold = meta.f10.holddown_us << (bit<8>)level;
                if (hold > meta.f10.holddown_max_us || (hold >> (bit<8>)level) != meta.f10.holddown_us) {
                    hold = meta.f10.holddown_max_us;   /* capped, also when the shift overflowed */
                }
                holddown_until.write(port, now + (bit<48>)hold);
                last_down_us.write(port, now);
                backoff_level.write(port, level);
                port_down.write(port, 1);
                port_down_events.count(port);
                report(PORT_DOWN, count, hold, level);
            } else if (down == 1 && count >= meta.f10.up_at_least) {
                bit<48> until;
                holddown_until.read(until, port);
                if (now >= until) {
                    port_down.write(port, 0);
                    port_up_events.count(port);
                    report(PORT_UP, count, 0, 0);
                }
            }
        } else {
            watched_buckets.write(port, watched + 1);
        }

        /* slide the window by one bucket: the oldest bucket becomes the current one, emptied */
        bit<32> bucket;
        cur_bucket.read(bucket, port);
        bucket = bucket + 1;
        if (bucket >= meta.f10.window_buckets || bucket >= MAX_BUCKETS) {
            bucket = 0;
        }
        rx_bucket.write(port * MAX_BUCKETS + bucket, 0);
        cur_bucket.write(port, bucket);

        /* F10: a link is never silent (nothing sent since the previous trigger: probe) */
        bit<48> last_tx;
        bit<48> previous_trigger;
        last_tx_us.read(last_tx, port);
        last_trigger_us.read(previous_trigger, port);
        last_trigger_us.write(port, now);
        if (last_tx <= previous_trigger) {
            hdr.f10_trigger.setInvalid();
            hdr.f10_probe.setValid();
            hdr.f10_probe.port = (bit<16>)standard_metadata.egress_port;
            hdr.f10_probe.timestamp_us = now;
            hdr.f10_probe._pad = 0;
            hdr.ethernet.dstAddr = F10_PROBE_DMAC;
            hdr.ethernet.srcAddr = 0;
            hdr.ethernet.etherType = ETHERTYPE_F10_PROBE;
            last_tx_us.write(port, now);
        } else {
            mark_to_drop(standard_metadata);
        }
    }
}

#endif /* _TESTBED_F10_DETECTOR_P4_ */
