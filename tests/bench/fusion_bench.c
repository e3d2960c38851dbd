/*
 * Fusion benchmark: training-step time against the fusion threshold.
 *
 * A "step" replays a backward pass: the gradient tensors of a model become
 * ready one by one in backprop order (last layer first), each after some
 * computation proportional to its size, and each is handed to
 * tnt_fusion_mark_ready (scale 1/p, as for a mean over ranks); the step ends
 * when tnt_fusion_wait returns. With threshold 0 every tensor is its own
 * allreduce; larger thresholds fuse more (fewer, larger allreduces, one extra
 * copy into the staging buffer, but the first allreduce starts later).
 *
 * Models (float32 tensor lists, built below):
 *   resnet50  161 tensors, 25.6 M parameters (torchvision's ResNet-50 layout)
 *   mlp10m       8 tensors, 10.2 M parameters (1024-2048-2048-1280-1000 MLP)
 *
 * Usage (2 ranks; see docs/tuning.md):
 *   tarantella -n 2 -- build/bin/fusion_bench [--model resnet50|mlp10m|all]
 *       [--compute NS_PER_PARAM] [--layout separate|flat] [--thresholds KIB,...]
 *       [--rounds R] [--steps K] [--quick]
 * --layout separate (default) gives every gradient its own allocation, as
 * PyTorch does, so fused buckets go through the staging copy; flat puts all
 * gradients back to back in one buffer in plan order, so every bucket is
 * reduced in place.
 * Every threshold is measured in R rounds of K steps, the thresholds
 * taking turns step by step so that slow phases of the VM hit all of them
 * alike; the table gives the median and minimum step time over all
 * R*K steps, and "compute" is the same step with no communication at all.
 * It never fails on speed; it exits non-zero only on errors.
 */
#include <tnt/tnt.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_TENSORS 256

typedef struct {
    const char *name;
    size_t num;
    tnt_tensor_desc_t desc[MAX_TENSORS];
} model_t;

static void add(model_t *m, size_t count)
{
    if (m->num < MAX_TENSORS) {
        m->desc[m->num].count = count;
        m->desc[m->num].dtype = TNT_FLOAT32;
        m->num++;
    }
}

static void reverse(model_t *m)
{
    for (size_t i = 0; i < m->num / 2; i++) {
        tnt_tensor_desc_t t = m->desc[i];
        m->desc[i] = m->desc[m->num - 1 - i];
        m->desc[m->num - 1 - i] = t;
    }
}

/* torchvision resnet50 parameters in forward order, then reversed: backprop
 * produces the last layer's gradients first. */
static void build_resnet50(model_t *m)
{
    static const int blocks[4] = { 3, 4, 6, 3 };
    static const int widths[4] = { 64, 128, 256, 512 };
    int in = 64;

    m->name = "resnet50";
    m->num = 0;
    add(m, 64 * 3 * 7 * 7); /* conv1 */
    add(m, 64);             /* bn1 weight, bias */
    add(m, 64);
    for (int s = 0; s < 4; s++) {
        const int w = widths[s];
        for (int b = 0; b < blocks[s]; b++) {
            add(m, (size_t)w * in); /* conv1 1x1 */
            add(m, w);
            add(m, w);
            add(m, (size_t)w * w * 9); /* conv2 3x3 */
            add(m, w);
            add(m, w);
            add(m, (size_t)4 * w * w); /* conv3 1x1 */
            add(m, 4 * w);
            add(m, 4 * w);
            if (b == 0) {
                add(m, (size_t)4 * w * in); /* downsample conv + bn */
                add(m, 4 * w);
                add(m, 4 * w);
            }
            in = 4 * w;
        }
    }
    add(m, 2048 * 1000); /* fc */
    add(m, 1000);
    reverse(m);
}

static void build_mlp10m(model_t *m)
{
    static const int sizes[] = { 1024, 2048, 2048, 1280, 1000 };
    m->name = "mlp10m";
    m->num = 0;
    for (int l = 0; l + 1 < 5; l++) {
        add(m, (size_t)sizes[l] * sizes[l + 1]);
        add(m, sizes[l + 1]);
    }
    reverse(m);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Computation that stands in for backprop: a dependent chain of floating
 * point operations (CPU-bound, little memory traffic), calibrated once. */
static volatile double sink;
static volatile double coef_a = 0.9999999, coef_b = 1e-7;
static double iters_per_ns = 0.3;

static void compute(uint64_t iterations)
{
    /* The coefficients come from volatiles so that the compiler cannot fold
     * the loop at compile time. */
    const double a = coef_a, b = coef_b;
    double x = sink;
    for (uint64_t i = 0; i < iterations; i++) {
        x = x * a + b;
    }
    sink = x;
}

/* Rank 0 measures the loop's speed and every rank uses that figure, so all
 * ranks do the same work per tensor (ranks calibrating on their own under
 * load would disagree). Best of several tries. */
static void calibrate(tnt_comm_t *comm)
{
    const uint64_t n = 20000000;
    double best = 1e9;
    if (tnt_rank(comm) == 0) {
        for (int r = 0; r < 5; r++) {
            double t0 = now_s();
            compute(n);
            double t = now_s() - t0;
            if (t < best) {
                best = t;
            }
        }
        iters_per_ns = (double)n / (best * 1e9);
    }
    tnt_broadcast(comm, &iters_per_ns, sizeof(iters_per_ns), 0);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void die(int rank, const char *what, tnt_status_t st)
{
    fprintf(stderr, "fusion_bench rank %d: %s failed: %s (%s)\n", rank, what, tnt_status_string(st),
            tnt_last_error());
    exit(1);
}

/* One step. fusion == NULL: compute only. */
static double step(tnt_comm_t *comm, tnt_fusion_t *fusion, const model_t *m, float **grads,
                   const uint64_t *work, double scale)
{
    double t0 = now_s();
    for (size_t i = 0; i < m->num; i++) {
        compute(work[i]);
        if (fusion != NULL) {
            tnt_status_t st = tnt_fusion_mark_ready(fusion, i, grads[i], scale);
            if (st != TNT_OK) {
                die(tnt_rank(comm), "mark_ready", st);
            }
        }
    }
    if (fusion != NULL) {
        tnt_status_t st = tnt_fusion_wait(fusion);
        if (st != TNT_OK) {
            die(tnt_rank(comm), "wait", st);
        }
    }
    return now_s() - t0;
}

/* Step times of all ranks for one step: the slowest rank's time counts. */
static double max_over_ranks(tnt_comm_t *comm, double t)
{
    tnt_status_t st = tnt_allreduce(comm, &t, &t, 1, TNT_FLOAT64, TNT_MAX);
    if (st != TNT_OK) {
        die(tnt_rank(comm), "allreduce of timings", st);
    }
    return t;
}

static void bench_model(tnt_comm_t *comm, const model_t *m, double compute_ns_per_param,
                        const size_t *thresholds, size_t num_thresholds, int rounds, int steps,
                        int flat)
{
    const int rank = tnt_rank(comm), size = tnt_size(comm);
    float *grads[MAX_TENSORS];
    uint64_t work[MAX_TENSORS];
    size_t params = 0;
    const size_t samples_per = (size_t)rounds * (size_t)steps;
    double *times = calloc((num_thresholds + 1) * samples_per, sizeof(double));
    size_t buckets[64] = { 0 };

    float *flat_buf = NULL;

    if (times == NULL) {
        die(rank, "calloc", TNT_ERR_NO_MEMORY);
    }
    if (flat) {
        size_t total = 0;
        for (size_t i = 0; i < m->num; i++) {
            total += m->desc[i].count;
        }
        flat_buf = malloc(total * sizeof(float));
        if (flat_buf == NULL) {
            die(rank, "malloc", TNT_ERR_NO_MEMORY);
        }
    }
    for (size_t i = 0, off = 0; i < m->num; i++) {
        if (flat) {
            grads[i] = flat_buf + off;
            off += m->desc[i].count;
        } else {
            grads[i] = malloc(m->desc[i].count * sizeof(float));
            if (grads[i] == NULL) {
                die(rank, "malloc", TNT_ERR_NO_MEMORY);
            }
        }
        for (size_t k = 0; k < m->desc[i].count; k++) {
            grads[i][k] = 1.0f;
        }
        work[i] = (uint64_t)(compute_ns_per_param * (double)m->desc[i].count * iters_per_ns);
        params += m->desc[i].count;
    }

    /* All engines exist at once and the thresholds take turns step by step
     * (plus the compute-only step), so a slow phase of the machine hits every
     * threshold alike. Each round: one warm-up pass, then `steps` passes. */
    tnt_fusion_t *engines[64] = { NULL };
    for (size_t k = 0; k < num_thresholds; k++) {
        tnt_status_t st =
            tnt_fusion_create(comm, m->desc, m->num, thresholds[k], TNT_SUM, &engines[k]);
        if (st != TNT_OK) {
            die(rank, "tnt_fusion_create", st);
        }
        buckets[k] = tnt_fusion_num_buckets(engines[k]);
    }
    for (int r = 0; r < rounds; r++) {
        for (int s = -1; s < steps; s++) {
            /* index num_thresholds: compute only */
            for (size_t k = 0; k <= num_thresholds; k++) {
                tnt_barrier(comm);
                double t = step(comm, engines[k], m, grads, work, 1.0 / size);
                t = max_over_ranks(comm, t);
                if (s >= 0) {
                    times[k * samples_per + (size_t)r * steps + s] = t;
                }
            }
        }
    }
    for (size_t k = 0; k < num_thresholds; k++) {
        tnt_fusion_destroy(engines[k]);
    }

    if (rank == 0) {
        double *compute_only = &times[num_thresholds * samples_per];
        qsort(compute_only, samples_per, sizeof(double), cmp_double);
        const double compute_med = compute_only[samples_per / 2];
        printf("\n%s: %zu tensors, %.1f M parameters (%.1f MB float32), %d ranks, "
               "gradients %s, compute %.2f ns/param (%.1f ms per step alone), %d x %d steps\n",
               m->name, m->num, params / 1e6, params * 4 / 1e6, size,
               flat ? "in one flat buffer" : "allocated separately", compute_ns_per_param,
               compute_med * 1e3, rounds, steps);
        printf("| threshold | buckets | median step (ms) | min step (ms) | exposed comm (ms) |\n");
        printf("|---|---|---|---|---|\n");
        for (size_t k = 0; k < num_thresholds; k++) {
            double *t = &times[k * samples_per];
            qsort(t, samples_per, sizeof(double), cmp_double);
            char label[32];
            if (thresholds[k] == 0) {
                snprintf(label, sizeof(label), "0 (per tensor)");
            } else if (thresholds[k] >= (1u << 20)) {
                snprintf(label, sizeof(label), "%zu MiB", thresholds[k] >> 20);
            } else {
                snprintf(label, sizeof(label), "%zu KiB", thresholds[k] >> 10);
            }
            printf("| %s | %zu | %.2f | %.2f | %.2f |\n", label, buckets[k],
                   t[samples_per / 2] * 1e3, t[0] * 1e3, (t[samples_per / 2] - compute_med) * 1e3);
        }
        fflush(stdout);
    }
    if (!flat) {
        for (size_t i = 0; i < m->num; i++) {
            free(grads[i]);
        }
    }
    free(flat_buf);
    free(times);
}

int main(int argc, char **argv)
{
    tnt_comm_t *comm = NULL;
    const char *which = "all";
    double compute_ns = 0.5;
    int rounds = 5, steps = 5, quick = 0, flat = 0;
    size_t custom[32], num_custom = 0;
    static const size_t all_thresholds[] = { 0,       64 << 10, 256 << 10, 1 << 20,  2 << 20,
                                             4 << 20, 8 << 20,  16 << 20,  32 << 20, 64 << 20 };
    static const size_t quick_thresholds[] = { 0, 1 << 20, 64 << 20 };

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--model") == 0 && i + 1 < argc) {
            which = argv[++i];
        } else if (strcmp(argv[i], "--compute") == 0 && i + 1 < argc) {
            compute_ns = atof(argv[++i]);
        } else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) {
            rounds = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--steps") == 0 && i + 1 < argc) {
            steps = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--layout") == 0 && i + 1 < argc) {
            i++;
            if (strcmp(argv[i], "flat") == 0) {
                flat = 1;
            } else if (strcmp(argv[i], "separate") != 0) {
                fprintf(stderr, "fusion_bench: --layout is flat or separate\n");
                return 2;
            }
        } else if (strcmp(argv[i], "--thresholds") == 0 && i + 1 < argc) {
            /* comma-separated KiB values, e.g. 0,64,1024 */
            char *p = argv[++i];
            num_custom = 0;
            while (*p != '\0' && num_custom < 32) {
                char *end = NULL;
                unsigned long long kib = strtoull(p, &end, 10);
                if (end == p || (*end != ',' && *end != '\0')) {
                    fprintf(stderr, "fusion_bench: --thresholds takes KiB values like 0,64,1024\n");
                    return 2;
                }
                custom[num_custom++] = (size_t)kib << 10;
                p = *end == ',' ? end + 1 : end;
            }
        } else if (strcmp(argv[i], "--quick") == 0) {
            quick = 1;
        } else {
            fprintf(stderr,
                    "usage: fusion_bench [--model resnet50|mlp10m|all] "
                    "[--compute NS_PER_PARAM] [--layout separate|flat] [--thresholds KIB,KIB,...] "
                    "[--rounds R] [--steps K] [--quick]\n");
            return 2;
        }
    }
    if (quick) {
        rounds = 1;
        steps = 2;
    }
    if (rounds < 1 || steps < 1 || compute_ns < 0) {
        fprintf(stderr, "fusion_bench: rounds and steps must be >= 1, compute >= 0\n");
        return 2;
    }
    tnt_status_t st = tnt_init(&comm);
    if (st != TNT_OK) {
        die(-1, "tnt_init", st);
    }
    calibrate(comm);

    model_t *m = malloc(sizeof(*m));
    if (m == NULL) {
        die(tnt_rank(comm), "malloc", TNT_ERR_NO_MEMORY);
    }
    const size_t *thresholds = quick ? quick_thresholds : all_thresholds;
    size_t num = quick ? sizeof(quick_thresholds) / sizeof(quick_thresholds[0])
                       : sizeof(all_thresholds) / sizeof(all_thresholds[0]);
    if (num_custom > 0) {
        thresholds = custom;
        num = num_custom;
    }
    if (strcmp(which, "all") == 0 || strcmp(which, "resnet50") == 0) {
        build_resnet50(m);
        bench_model(comm, m, compute_ns, thresholds, num, rounds, steps, flat);
    }
    if (strcmp(which, "all") == 0 || strcmp(which, "mlp10m") == 0) {
        build_mlp10m(m);
        bench_model(comm, m, compute_ns, thresholds, num, rounds, steps, flat);
    }
    free(m);
    tnt_finalize(comm);
    return 0;
}
