/*
 * TEST DOUBLE of the CUDA runtime (libcudart.so.<major>): the functions
 * libtnt_cuda.so and the GPU checks call, with host memory for device
 * memory and a worker thread per stream. See cuda_double.h.
 */
#include "cuda_double.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Configuration and fault injection                                        */
/* ------------------------------------------------------------------------ */

#define MAX_DEVICES 8

static struct {
    int rank;
    int count;
    char labels[MAX_DEVICES][32];
    long fail_after; /* -1: never */
} g_cfg;
static pthread_once_t g_cfg_once = PTHREAD_ONCE_INIT;
static atomic_long g_calls;
static atomic_int g_sticky; /* a device fault happened: every call fails */
static __thread cudaError_t t_last_error = cudaSuccess;
static __thread int t_device;

static void cfg_load(void)
{
    const char *r = getenv("PMIX_RANK");
    g_cfg.rank = r != NULL ? atoi(r) : 0;
    g_cfg.fail_after = -1;
    const char *fa = getenv("TNT_CUDA_DOUBLE_FAIL_AFTER");
    const char *fr = getenv("TNT_CUDA_DOUBLE_FAIL_RANK");
    if (fa != NULL && (fr == NULL || atoi(fr) == g_cfg.rank)) {
        g_cfg.fail_after = atol(fa);
    }
    const char *gpus = getenv("TNT_CUDA_DOUBLE_GPUS");
    if (gpus == NULL || strcmp(gpus, "none") == 0 || gpus[0] == '\0') {
        return;
    }
    /* Entry rank % entries. */
    int entries = 1;
    for (const char *p = gpus; *p; p++) {
        entries += *p == ',';
    }
    int want = g_cfg.rank % entries;
    const char *p = gpus;
    for (int i = 0; i < want; i++) {
        p = strchr(p, ',') + 1;
    }
    size_t len = strcspn(p, ",");
    char entry[256];
    snprintf(entry, sizeof(entry), "%.*s", (int)len, p);
    if (strcmp(entry, "none") == 0) {
        return;
    }
    char *save = NULL;
    for (char *tok = strtok_r(entry, "+", &save); tok != NULL && g_cfg.count < MAX_DEVICES;
         tok = strtok_r(NULL, "+", &save)) {
        snprintf(g_cfg.labels[g_cfg.count++], sizeof(g_cfg.labels[0]), "%s", tok);
    }
}

/* Every counted runtime call starts here: the fault injection point. */
static cudaError_t enter(void)
{
    pthread_once(&g_cfg_once, cfg_load);
    long n = atomic_fetch_add(&g_calls, 1);
    if (g_cfg.fail_after >= 0 && n >= g_cfg.fail_after) {
        if (!atomic_exchange(&g_sticky, 1)) {
            fprintf(stderr, "cuda double: rank %d: injected device fault at runtime call %ld\n",
                    g_cfg.rank, n + 1);
        }
    }
    return atomic_load(&g_sticky) ? cudaErrorLaunchFailure : cudaSuccess;
}

static cudaError_t ret(cudaError_t e)
{
    if (e != cudaSuccess) {
        t_last_error = e;
    }
    return e;
}

#define ENTER()                   \
    do {                          \
        cudaError_t e_ = enter(); \
        if (e_ != cudaSuccess) {  \
            return ret(e_);       \
        }                         \
    } while (0)

int tnt_cuda_double_rank(void)
{
    pthread_once(&g_cfg_once, cfg_load);
    return g_cfg.rank;
}

/* ------------------------------------------------------------------------ */
/* Memory registry                                                          */
/* ------------------------------------------------------------------------ */

struct alloc {
    char *base;
    size_t size;
    enum cudaMemoryType type;
    int device;
    struct alloc *next;
};
static struct alloc *g_allocs;
static pthread_mutex_t g_allocs_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_long g_live_device, g_live_host, g_live_streams, g_live_events;

static const struct alloc *alloc_find_locked(const void *ptr)
{
    for (const struct alloc *a = g_allocs; a != NULL; a = a->next) {
        if ((const char *)ptr >= a->base && (const char *)ptr < a->base + (a->size ? a->size : 1)) {
            return a;
        }
    }
    return NULL;
}

static cudaError_t alloc_add(void **p, size_t size, enum cudaMemoryType type)
{
    struct alloc *a = malloc(sizeof(*a));
    /* Fresh device memory holds garbage, not zeros: calloc would hide a
     * missing copy. */
    char *mem = malloc(size ? size : 1);
    if (a == NULL || mem == NULL) {
        free(a);
        free(mem);
        return cudaErrorMemoryAllocation;
    }
    memset(mem, 0xa5, size);
    *a = (struct alloc){ .base = mem, .size = size, .type = type, .device = t_device };
    pthread_mutex_lock(&g_allocs_lock);
    a->next = g_allocs;
    g_allocs = a;
    pthread_mutex_unlock(&g_allocs_lock);
    atomic_fetch_add(type == cudaMemoryTypeDevice ? &g_live_device : &g_live_host, 1);
    *p = mem;
    return cudaSuccess;
}

static cudaError_t alloc_remove(void *p, enum cudaMemoryType type)
{
    if (p == NULL) {
        return cudaSuccess;
    }
    pthread_mutex_lock(&g_allocs_lock);
    struct alloc **pp = &g_allocs;
    while (*pp != NULL && !((*pp)->base == p && (*pp)->type == type)) {
        pp = &(*pp)->next;
    }
    struct alloc *a = *pp;
    if (a != NULL) {
        *pp = a->next;
    }
    pthread_mutex_unlock(&g_allocs_lock);
    if (a == NULL) {
        return cudaErrorInvalidValue;
    }
    atomic_fetch_sub(type == cudaMemoryTypeDevice ? &g_live_device : &g_live_host, 1);
    free(a->base);
    free(a);
    return cudaSuccess;
}

int tnt_cuda_double_is_device(const void *ptr, size_t n)
{
    pthread_mutex_lock(&g_allocs_lock);
    const struct alloc *a = alloc_find_locked(ptr);
    int ok =
        a != NULL && a->type == cudaMemoryTypeDevice && (const char *)ptr + n <= a->base + a->size;
    pthread_mutex_unlock(&g_allocs_lock);
    return ok;
}

cudaError_t cudaMalloc(void **p, size_t size)
{
    ENTER();
    return ret(alloc_add(p, size, cudaMemoryTypeDevice));
}

/* Like the real ones, the frees wait for the device's queued work, which
 * may still read the buffer. */
static void device_wait_idle(void);

cudaError_t cudaFree(void *p)
{
    ENTER();
    device_wait_idle();
    return ret(alloc_remove(p, cudaMemoryTypeDevice));
}

cudaError_t cudaHostAlloc(void **p, size_t size, unsigned int flags)
{
    ENTER();
    return ret(alloc_add(p, size, cudaMemoryTypeHost));
}

cudaError_t cudaFreeHost(void *p)
{
    ENTER();
    device_wait_idle();
    return ret(alloc_remove(p, cudaMemoryTypeHost));
}

cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *attr, const void *ptr)
{
    ENTER();
    memset(attr, 0, sizeof(*attr));
    attr->type = cudaMemoryTypeUnregistered;
    attr->device = -2;
    pthread_mutex_lock(&g_allocs_lock);
    const struct alloc *a = alloc_find_locked(ptr);
    if (a != NULL) {
        attr->type = a->type;
        attr->device = a->device;
        attr->devicePointer = a->type == cudaMemoryTypeDevice ? (void *)ptr : NULL;
        attr->hostPointer = a->type == cudaMemoryTypeHost ? (void *)ptr : NULL;
    }
    pthread_mutex_unlock(&g_allocs_lock);
    return cudaSuccess;
}

/* ------------------------------------------------------------------------ */
/* Devices                                                                  */
/* ------------------------------------------------------------------------ */

cudaError_t cudaGetDeviceCount(int *count)
{
    ENTER();
    *count = g_cfg.count;
    return g_cfg.count > 0 ? cudaSuccess : ret(cudaErrorNoDevice);
}

cudaError_t cudaGetDevice(int *device)
{
    ENTER();
    if (g_cfg.count == 0) {
        return ret(cudaErrorNoDevice);
    }
    *device = t_device;
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int device)
{
    ENTER();
    if (device < 0 || device >= g_cfg.count) {
        return ret(g_cfg.count == 0 ? cudaErrorNoDevice : cudaErrorInvalidDevice);
    }
    t_device = device;
    return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device)
{
    ENTER();
    if (device < 0 || device >= g_cfg.count) {
        return ret(cudaErrorInvalidDevice);
    }
    memset(prop, 0, sizeof(*prop));
    snprintf(prop->name, sizeof(prop->name), "cuda double %s", g_cfg.labels[device]);
    /* The UUID is the label, so equal labels are one shared GPU. */
    memset(prop->uuid.bytes, 0, sizeof(prop->uuid.bytes));
    memcpy(prop->uuid.bytes, g_cfg.labels[device],
           strnlen(g_cfg.labels[device], sizeof(prop->uuid.bytes)));
    prop->totalGlobalMem = (size_t)1 << 34;
    prop->major = 9;
    prop->unifiedAddressing = 1;
    return cudaSuccess;
}

/* ------------------------------------------------------------------------ */
/* Errors                                                                   */
/* ------------------------------------------------------------------------ */

cudaError_t cudaGetLastError(void)
{
    cudaError_t e = t_last_error;
    t_last_error = cudaSuccess;
    return e;
}

static const struct {
    cudaError_t e;
    const char *name, *text;
} g_errors[] = {
    { cudaSuccess, "cudaSuccess", "no error" },
    { cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument" },
    { cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory" },
    { cudaErrorNoDevice, "cudaErrorNoDevice", "no CUDA-capable device is detected" },
    { cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal" },
    { cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle", "invalid resource handle" },
    { cudaErrorNotReady, "cudaErrorNotReady", "device not ready" },
    { cudaErrorLaunchFailure, "cudaErrorLaunchFailure",
      "unspecified launch failure (injected by the cuda double)" },
};

const char *cudaGetErrorName(cudaError_t e)
{
    for (size_t i = 0; i < sizeof(g_errors) / sizeof(g_errors[0]); i++) {
        if (g_errors[i].e == e) {
            return g_errors[i].name;
        }
    }
    return "cudaErrorUnknown";
}

const char *cudaGetErrorString(cudaError_t e)
{
    for (size_t i = 0; i < sizeof(g_errors) / sizeof(g_errors[0]); i++) {
        if (g_errors[i].e == e) {
            return g_errors[i].text;
        }
    }
    return "unknown error";
}

/* ------------------------------------------------------------------------ */
/* Streams: a FIFO of work items, run in order by one worker thread         */
/* ------------------------------------------------------------------------ */

struct work {
    void (*fn)(void *);
    void *arg;
    struct work *next;
};

struct CUstream_st {
    struct CUstream_st *next_live; /* g_streams */
    pthread_mutex_t lock;
    pthread_cond_t cond; /* work queued, work done, or stop */
    struct work *head, *tail;
    int busy, stop;
    pthread_t thread;
};

/* Every stream with a worker, for the device-wide synchronisation of
 * cudaFree; a stream leaves the list when its worker ends. */
static struct CUstream_st *g_streams;
static pthread_mutex_t g_streams_lock = PTHREAD_MUTEX_INITIALIZER;

static void stream_unlist(struct CUstream_st *s)
{
    pthread_mutex_lock(&g_streams_lock);
    struct CUstream_st **pp = &g_streams;
    while (*pp != NULL && *pp != s) {
        pp = &(*pp)->next_live;
    }
    if (*pp != NULL) {
        *pp = s->next_live;
    }
    pthread_mutex_unlock(&g_streams_lock);
}

static void stream_wait_idle(struct CUstream_st *s)
{
    pthread_mutex_lock(&s->lock);
    while (s->head != NULL || s->busy) {
        pthread_cond_wait(&s->cond, &s->lock);
    }
    pthread_mutex_unlock(&s->lock);
}

/* What cudaDeviceSynchronize and cudaFree do: wait for the work of every
 * stream (the list lock keeps each stream alive meanwhile). */
static void device_wait_idle(void)
{
    pthread_mutex_lock(&g_streams_lock);
    for (struct CUstream_st *s = g_streams; s != NULL; s = s->next_live) {
        stream_wait_idle(s);
    }
    pthread_mutex_unlock(&g_streams_lock);
}

static void *stream_worker(void *arg)
{
    struct CUstream_st *s = arg;
    pthread_mutex_lock(&s->lock);
    for (;;) {
        while (s->head == NULL && !s->stop) {
            pthread_cond_wait(&s->cond, &s->lock);
        }
        if (s->head == NULL) {
            break; /* stopped and drained */
        }
        struct work *w = s->head;
        s->head = w->next;
        if (s->head == NULL) {
            s->tail = NULL;
        }
        s->busy = 1;
        pthread_mutex_unlock(&s->lock);
        w->fn(w->arg);
        free(w);
        pthread_mutex_lock(&s->lock);
        s->busy = 0;
        pthread_cond_broadcast(&s->cond);
    }
    pthread_mutex_unlock(&s->lock);
    stream_unlist(s);
    /* cudaStreamDestroy returns at once, as the real one does; the worker
     * frees the stream once its queued work is done. */
    pthread_cond_destroy(&s->cond);
    pthread_mutex_destroy(&s->lock);
    free(s);
    return NULL;
}

static struct CUstream_st *stream_new(void)
{
    struct CUstream_st *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        return NULL;
    }
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->cond, NULL);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&s->thread, &attr, stream_worker, s);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        free(s);
        return NULL;
    }
    pthread_mutex_lock(&g_streams_lock);
    s->next_live = g_streams;
    g_streams = s;
    pthread_mutex_unlock(&g_streams_lock);
    return s;
}

/* The legacy default stream (0, cudaStreamLegacy, cudaStreamPerThread). */
static struct CUstream_st *g_default_stream;
static pthread_once_t g_default_once = PTHREAD_ONCE_INIT;
static void default_stream_make(void)
{
    g_default_stream = stream_new();
}

static struct CUstream_st *stream_of(cudaStream_t stream)
{
    if (stream == NULL || stream == cudaStreamLegacy || stream == cudaStreamPerThread) {
        pthread_once(&g_default_once, default_stream_make);
        return g_default_stream;
    }
    return stream;
}

int tnt_cuda_double_enqueue(cudaStream_t stream, void (*fn)(void *), void *arg)
{
    struct CUstream_st *s = stream_of(stream);
    struct work *w = malloc(sizeof(*w));
    if (s == NULL || w == NULL) {
        free(w);
        return -1;
    }
    *w = (struct work){ .fn = fn, .arg = arg };
    pthread_mutex_lock(&s->lock);
    if (s->tail != NULL) {
        s->tail->next = w;
    } else {
        s->head = w;
    }
    s->tail = w;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
    return 0;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned int flags)
{
    ENTER();
    struct CUstream_st *s = stream_new();
    if (s == NULL) {
        return ret(cudaErrorMemoryAllocation);
    }
    atomic_fetch_add(&g_live_streams, 1);
    *stream = s;
    return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream)
{
    ENTER();
    if (stream == NULL) {
        return ret(cudaErrorInvalidResourceHandle);
    }
    pthread_mutex_lock(&stream->lock);
    stream->stop = 1;
    pthread_cond_broadcast(&stream->cond);
    pthread_mutex_unlock(&stream->lock);
    atomic_fetch_sub(&g_live_streams, 1);
    return cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t stream)
{
    ENTER();
    struct CUstream_st *s = stream_of(stream);
    pthread_mutex_lock(&s->lock);
    int idle = s->head == NULL && !s->busy;
    pthread_mutex_unlock(&s->lock);
    return idle ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream)
{
    ENTER();
    stream_wait_idle(stream_of(stream));
    return cudaSuccess;
}

/* ------------------------------------------------------------------------ */
/* Events                                                                   */
/* ------------------------------------------------------------------------ */

struct CUevent_st {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    uint64_t recorded;  /* generation of the latest cudaEventRecord */
    uint64_t completed; /* generation its stream has reached */
    atomic_int refs;    /* the handle, and each queued item naming it */
};

static void event_unref(struct CUevent_st *ev)
{
    if (atomic_fetch_sub(&ev->refs, 1) == 1) {
        pthread_cond_destroy(&ev->cond);
        pthread_mutex_destroy(&ev->lock);
        free(ev);
    }
}

struct event_work {
    struct CUevent_st *ev;
    uint64_t gen;
};

static void event_complete(void *arg)
{
    struct event_work *w = arg;
    pthread_mutex_lock(&w->ev->lock);
    if (w->gen > w->ev->completed) {
        w->ev->completed = w->gen;
    }
    pthread_cond_broadcast(&w->ev->cond);
    pthread_mutex_unlock(&w->ev->lock);
    event_unref(w->ev);
    free(w);
}

static void event_await(void *arg)
{
    struct event_work *w = arg;
    pthread_mutex_lock(&w->ev->lock);
    while (w->ev->completed < w->gen) {
        pthread_cond_wait(&w->ev->cond, &w->ev->lock);
    }
    pthread_mutex_unlock(&w->ev->lock);
    event_unref(w->ev);
    free(w);
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags)
{
    ENTER();
    struct CUevent_st *ev = calloc(1, sizeof(*ev));
    if (ev == NULL) {
        return ret(cudaErrorMemoryAllocation);
    }
    pthread_mutex_init(&ev->lock, NULL);
    pthread_cond_init(&ev->cond, NULL);
    atomic_init(&ev->refs, 1);
    atomic_fetch_add(&g_live_events, 1);
    *event = ev;
    return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event)
{
    ENTER();
    if (event == NULL) {
        return ret(cudaErrorInvalidResourceHandle);
    }
    atomic_fetch_sub(&g_live_events, 1);
    event_unref(event);
    return cudaSuccess;
}

static cudaError_t event_enqueue(cudaEvent_t event, cudaStream_t stream, void (*fn)(void *),
                                 int record)
{
    struct event_work *w = malloc(sizeof(*w));
    if (w == NULL) {
        return ret(cudaErrorMemoryAllocation);
    }
    pthread_mutex_lock(&event->lock);
    w->ev = event;
    w->gen = record ? ++event->recorded : event->recorded;
    pthread_mutex_unlock(&event->lock);
    atomic_fetch_add(&event->refs, 1);
    if (tnt_cuda_double_enqueue(stream, fn, w) != 0) {
        event_unref(event);
        free(w);
        return ret(cudaErrorInvalidResourceHandle);
    }
    return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream)
{
    ENTER();
    return event_enqueue(event, stream, event_complete, 1);
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags)
{
    ENTER();
    return event_enqueue(event, stream, event_await, 0);
}

cudaError_t cudaEventQuery(cudaEvent_t event)
{
    ENTER();
    pthread_mutex_lock(&event->lock);
    int done = event->completed >= event->recorded;
    pthread_mutex_unlock(&event->lock);
    return done ? cudaSuccess : cudaErrorNotReady;
}

/* ------------------------------------------------------------------------ */
/* Copies                                                                   */
/* ------------------------------------------------------------------------ */

struct copy_work {
    char *dst;
    const char *src;
    size_t dpitch, spitch, width, height;
    void *owned; /* a staged pageable source, freed after the copy */
};

static void copy_run(void *arg)
{
    struct copy_work *w = arg;
    for (size_t row = 0; row < w->height; row++) {
        memmove(w->dst + row * w->dpitch, w->src + row * w->spitch, w->width);
    }
    free(w->owned);
    free(w);
}

/* A pageable host source is copied at the call, as the real runtime stages
 * it before returning; everything else is read when the stream gets there. */
static cudaError_t copy_enqueue(void *dst, size_t dpitch, const void *src, size_t spitch,
                                size_t width, size_t height, cudaStream_t stream)
{
    struct copy_work *w = malloc(sizeof(*w));
    if (w == NULL) {
        return ret(cudaErrorMemoryAllocation);
    }
    *w = (struct copy_work){
        .dst = dst, .src = src, .dpitch = dpitch, .spitch = spitch, .width = width, .height = height
    };
    pthread_mutex_lock(&g_allocs_lock);
    int pageable_src = alloc_find_locked(src) == NULL;
    pthread_mutex_unlock(&g_allocs_lock);
    if (pageable_src && width * height > 0) {
        char *staged = malloc(width * height);
        if (staged == NULL) {
            free(w);
            return ret(cudaErrorMemoryAllocation);
        }
        for (size_t row = 0; row < height; row++) {
            memcpy(staged + row * width, (const char *)src + row * spitch, width);
        }
        w->src = w->owned = staged;
        w->spitch = width;
    }
    if (tnt_cuda_double_enqueue(stream, copy_run, w) != 0) {
        free(w->owned);
        free(w);
        return ret(cudaErrorInvalidResourceHandle);
    }
    return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                            cudaStream_t stream)
{
    ENTER();
    return copy_enqueue(dst, count, src, count, count, 1, stream);
}

cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch,
                              size_t width, size_t height, enum cudaMemcpyKind kind,
                              cudaStream_t stream)
{
    ENTER();
    if (width > dpitch || width > spitch) {
        return ret(cudaErrorInvalidValue);
    }
    return copy_enqueue(dst, dpitch, src, spitch, width, height, stream);
}

/* Synchronous: ordered on the legacy default stream, returns when done. */
cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
    ENTER();
    cudaError_t e = copy_enqueue(dst, count, src, count, count, 1, NULL);
    if (e != cudaSuccess) {
        return e;
    }
    return cudaStreamSynchronize(NULL);
}

cudaError_t cudaMemset(void *dst, int value, size_t count)
{
    ENTER();
    cudaError_t e = cudaStreamSynchronize(NULL);
    if (e == cudaSuccess) {
        memset(dst, value, count);
    }
    return e;
}

cudaError_t cudaDeviceSynchronize(void)
{
    ENTER();
    device_wait_idle();
    return cudaSuccess;
}

/* ------------------------------------------------------------------------ */
/* Leak accounting                                                          */
/* ------------------------------------------------------------------------ */

void tnt_cuda_double_live(struct tnt_cuda_double_live *live)
{
    memset(live, 0, sizeof(*live));
    live->streams = atomic_load(&g_live_streams);
    live->events = atomic_load(&g_live_events);
    live->device_allocs = atomic_load(&g_live_device);
    live->host_allocs = atomic_load(&g_live_host);
}
