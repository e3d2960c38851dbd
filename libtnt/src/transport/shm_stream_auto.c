/*
 * TNT_SHM_STREAM=auto's choice between streamed and cached copies (see
 * shm_stream_auto.h for the policy and the measurements behind it).
 */
#include "transport/shm_stream_auto.h"

#include <stdint.h>
#include <string.h>

void tnt_stream_auto_init(struct tnt_stream_auto *a, size_t min_bytes)
{
    memset(a, 0, sizeof(*a));
    a->min_bytes = min_bytes ? min_bytes : 1;
    for (int c = 0; c < TNT_STREAM_AUTO_CLASSES; c++) {
        a->classes[c].current = TNT_STREAM_KIND_STREAMED;
        a->classes[c].period = TNT_STREAM_AUTO_PERIOD_MIN;
    }
}

int tnt_stream_auto_class_of(const struct tnt_stream_auto *a, size_t bytes)
{
    int c = 0;
    for (size_t limit = a->min_bytes; c < TNT_STREAM_AUTO_CLASSES - 1; c++) {
        if (limit > SIZE_MAX / 4 || bytes < limit * 4) {
            break;
        }
        limit *= 4;
    }
    return c;
}

/* The lower median of the current kind's last calls: one slow call does not
 * move it, two do. */
static double stream_auto_estimate(const struct tnt_stream_auto_class *k)
{
    double v[TNT_STREAM_AUTO_HISTORY];
    unsigned n = k->current_samples;
    memcpy(v, k->current_ns, n * sizeof(v[0]));
    for (unsigned i = 1; i < n; i++) {
        for (unsigned j = i; j > 0 && v[j - 1] > v[j]; j--) {
            double t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    }
    return v[(n - 1) / 2];
}

static void stream_auto_restart(struct tnt_stream_auto_class *k, int kind, double sample)
{
    k->current = kind;
    k->current_ns[0] = sample;
    k->current_samples = 1;
    k->current_next = 1;
    k->reference_ns = sample;
    k->period = TNT_STREAM_AUTO_PERIOD_MIN;
    k->countdown = TNT_STREAM_AUTO_PERIOD_MIN;
}

/* The longest period whose tries cost at most TNT_STREAM_AUTO_TRY_COST of
 * the time, when the other kind is `ratio` times slower, as a power of two
 * within [PERIOD_MIN, PERIOD_MAX]. */
static uint32_t stream_auto_period_limit(double ratio)
{
    uint32_t p = TNT_STREAM_AUTO_PERIOD_MIN;
    while (p < TNT_STREAM_AUTO_PERIOD_MAX && (double)p * TNT_STREAM_AUTO_TRY_COST < ratio - 1) {
        p *= 2;
    }
    return p;
}

/* The nearest class with measurements, smaller sizes first, or NULL. */
static const struct tnt_stream_auto_class *stream_auto_neighbour(const struct tnt_stream_auto *a,
                                                                 int c)
{
    for (int d = 1; d < TNT_STREAM_AUTO_CLASSES; d++) {
        if (c - d >= 0 && a->classes[c - d].measured) {
            return &a->classes[c - d];
        }
        if (c + d < TNT_STREAM_AUTO_CLASSES && a->classes[c + d].measured) {
            return &a->classes[c + d];
        }
    }
    return NULL;
}

int tnt_stream_auto_first(const struct tnt_stream_auto *a, int c)
{
    const struct tnt_stream_auto_class *near = stream_auto_neighbour(a, c);
    return near ? near->current : TNT_STREAM_KIND_STREAMED;
}

int tnt_stream_auto_pick(struct tnt_stream_auto *a, size_t bytes)
{
    const int c = tnt_stream_auto_class_of(a, bytes);
    struct tnt_stream_auto_class *k = &a->classes[c];
    if (!k->measured) {
        return tnt_stream_auto_first(a, c);
    }
    if (k->countdown == 0) {
        /* Until the try's time is learned (which may be after the next
         * pick, see tnt_stream_auto_pick), no second try. */
        k->countdown = k->period;
        return !k->current;
    }
    k->countdown--;
    return k->current;
}

void tnt_stream_auto_learn(struct tnt_stream_auto *a, size_t bytes, int kind, uint64_t ns)
{
    const int c = tnt_stream_auto_class_of(a, bytes);
    struct tnt_stream_auto_class *k = &a->classes[c];
    double sample = (double)(ns ? ns : 1) / (double)(bytes ? bytes : 1);
    if (!k->measured) {
        /* A size near one already learned starts from its choice and try
         * period; the first size learned tries the other kind at once. */
        const struct tnt_stream_auto_class *near = stream_auto_neighbour(a, c);
        stream_auto_restart(k, kind, sample);
        k->period = near ? near->period : TNT_STREAM_AUTO_PERIOD_MIN;
        k->countdown = near ? near->period : 0;
        k->measured = 1;
        return;
    }
    if (kind == k->current) {
        k->current_ns[k->current_next] = sample;
        k->current_next = (k->current_next + 1) % TNT_STREAM_AUTO_HISTORY;
        if (k->current_samples < TNT_STREAM_AUTO_HISTORY) {
            k->current_samples++;
        }
        if (stream_auto_estimate(k) > TNT_STREAM_AUTO_SLOWDOWN * k->reference_ns) {
            /* Slower by more than noise: the placement may have changed. */
            k->period = TNT_STREAM_AUTO_PERIOD_MIN;
            k->countdown = 0;
        }
        return;
    }
    /* A try of the other kind. */
    double estimate = stream_auto_estimate(k);
    if (sample < estimate) {
        stream_auto_restart(k, kind, sample);
        return;
    }
    uint32_t limit = stream_auto_period_limit(sample / estimate);
    k->period = k->period * 2 < limit ? k->period * 2 : limit;
    k->countdown = k->period;
    k->reference_ns = estimate;
}

int tnt_stream_auto_current(const struct tnt_stream_auto *a, size_t bytes)
{
    const int c = tnt_stream_auto_class_of(a, bytes);
    return a->classes[c].measured ? a->classes[c].current : tnt_stream_auto_first(a, c);
}
