/* xferscope._iocore: the I/O hot loop.
 *
 * A Job runs N worker threads (plain pthreads: they never touch Python
 * objects, so the GIL is never in their way). Each worker owns a file
 * descriptor, a region of its file, its buffers and its counters; a sampler
 * in Python reads the counters through Job.snapshot() at its own pace.
 *
 * Modes:
 *   HOST            storage -> host buffer (psync, or io_uring at depth > 1)
 *   BOUNCE          storage -> pinned host -> GPU, copy waited for (gdsio CPU_GPU)
 *   BOUNCE_PIPE     as BOUNCE, with K pinned buffers: reads go on while the copies
 *                   land (gdsio CPU_ASYNC_GPU); reads through a ring copied a group
 *                   at a time (copy_batch), writes through the staged pipeline
 *   CUFILE          cuFileRead/cuFileWrite straight into GPU memory (gdsio GPUD)
 * The GPU modes call CUDA driver and cuFile functions through addresses that
 * the Python side resolves from the libraries it loaded; nothing here links
 * against CUDA. That table of addresses is also the test seam: xferscope._gpusim
 * provides host stand-ins with the same signatures, so the scheduling of the GPU
 * modes (and their data, with --verify) can be checked on a machine without a GPU.
 *
 * With split > 0 (psync modes), one request of block_size becomes sub-requests of
 * `split` bytes that the worker and its helper threads (its "lanes") issue in
 * parallel; the request completes when all have.
 *
 * With timeline > 0, every worker records up to that many intervals (reads,
 * writes, sub-requests, copies issued, waits for copies) for Job.timeline().
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <limits.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "histogram.h"
#include "uring.h"

enum { MODE_HOST = 0, MODE_BOUNCE = 1, MODE_BOUNCE_PIPE = 2, MODE_CUFILE = 3 };
enum { DIR_READ = 0, DIR_WRITE = 1 };
#define MAX_SLOTS 4096
#define MAX_PIPE 64   /* pinned buffers per worker, bounce-async */
#define MAX_LANES 16  /* threads per worker that issue the sub-requests of a split request */
#define CUDA_ERROR_NOT_READY 600

/* What a timeline record is: an interval of one worker (or one of its lanes). */
enum { TL_READ = 0, TL_WRITE = 1, TL_COPY = 2, TL_WAIT = 3, TL_SUB_READ = 4, TL_SUB_WRITE = 5 };

/* ------------------------------------------------------------------ helpers */

static inline uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint64_t splitmix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

static inline uint64_t xorshift(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1Dull;
}

/* The data pattern: the 8-byte word at file offset o is splitmix64(seed ^ o/8). */
static void pattern_fill(void *buf, size_t len, uint64_t file_off, uint64_t seed)
{
    uint64_t *w = buf;
    uint64_t first = file_off / 8;
    for (size_t i = 0; i < len / 8; i++)
        w[i] = splitmix64(seed ^ (first + i));
}

/* Returns the offset of the first bad word, or UINT64_MAX when all match. */
static uint64_t pattern_check(const void *buf, size_t len, uint64_t file_off, uint64_t seed)
{
    const uint64_t *w = buf;
    uint64_t first = file_off / 8;
    for (size_t i = 0; i < len / 8; i++)
        if (w[i] != splitmix64(seed ^ (first + i)))
            return file_off + i * 8;
    return UINT64_MAX;
}

/* CUDA driver and cuFile entry points, resolved by the Python side. */
typedef int (*cu_ctx_set_t)(void *ctx);
typedef int (*cu_htod_t)(uint64_t dst, const void *src, size_t n, void *stream);
typedef int (*cu_dtoh_t)(void *dst, uint64_t src, size_t n, void *stream);
typedef int (*cu_sync_t)(void *stream);
typedef int (*cu_event_record_t)(void *event, void *stream);
typedef int (*cu_event_sync_t)(void *event);
typedef int (*cu_event_query_t)(void *event);
typedef ssize_t (*cufile_rw_t)(void *handle, void *dev, size_t size, off_t file_off, off_t dev_off);

typedef struct {
    cu_ctx_set_t ctx_set_current;
    cu_htod_t htod;
    cu_dtoh_t dtoh;
    cu_sync_t stream_sync;
    cu_event_record_t event_record;
    cu_event_sync_t event_sync;
    cu_event_query_t event_query;
    cufile_rw_t cufile_read;
    cufile_rw_t cufile_write;
} gpu_fns_t;

/* ------------------------------------------------------------------ worker */

typedef struct job job_t;
typedef struct split_team split_t;

typedef struct {
    uint32_t kind, lane; /* TL_*; 0 = the worker itself, 1.. its helper threads */
    int32_t buf;         /* pinned buffer (bounce-async), else -1 */
    uint32_t pad;
    uint64_t t0, t1;     /* CLOCK_MONOTONIC ns */
    uint64_t off, len;   /* file offset and bytes */
} tl_rec_t;

typedef struct {
    /* written by the worker, read by snapshot(): relaxed atomics, one writer */
    uint64_t ops[2], bytes[2], lat_sum[2];
    uint64_t lat_min, lat_max;
    uint64_t done_ns; /* 0 while running */
    uint64_t cpu_usr_us, cpu_sys_us; /* the worker thread's CPU time in the timed region, set when done */
    uint64_t lanes_usr_us, lanes_sys_us, lane_max_us; /* its lanes' (split requests): sum, and the busiest one */
    uint64_t hist[2][HIST_NBUCKETS];
} wstat_t;

typedef struct {
    job_t *job;
    int id;
    int fd;
    int cpu;
    uint64_t start, length;   /* region in the file, bytes */
    uint64_t pattern_seed;
    /* GPU */
    void *ctx, *stream, *handle;
    uint64_t dev;             /* device buffer, slots * block_size bytes */
    void *host[MAX_PIPE];      /* pinned host buffers (bounce) */
    void *ext_buf;            /* HOST: the memory its buffers are in, the caller's (what pinned memory costs a
                                 read: doctor's probe); NULL: a mapping of its own */
    void *events[MAX_PIPE];
    int nhost;
    uint64_t copy_pred_ns;    /* how long this worker's copies take from issue to landing (learnt) */
    int copy_late;            /* waits in a row that ended in cuEventSynchronize (no landing seen) */
    int bufs_used;            /* bounce-async reads: pinned buffers read into (ring_report) */
    int ended_serial;         /* ... whether the worker ended on one buffer, each copy waited for */
    uint64_t trial_ns[2];     /* ... its last trial: mean ns from one read's start to the next's [serial] */
    pthread_t thread;
    int started;
    volatile int tid;         /* kernel thread id, for per-thread CPU accounting */
    wstat_t *st;
    split_t *team;            /* lanes for split requests, or NULL */
    tl_rec_t *tl;             /* timeline records, or NULL */
    uint32_t tl_cap;
    atomic_uint tl_n;         /* records taken (may exceed tl_cap: the rest were dropped) */
} worker_t;

struct job {
    PyObject_HEAD
    int mode, nworkers, iodepth, read_pct, random, verify, use_uring, huge_pages;
    int copy_batch;        /* BOUNCE_PIPE reads: blocks per copy of the ring (slots side by side); 0: no ring */
    int turns;             /* BOUNCE_PIPE reads: TURNS_AUTO, TURNS_ALWAYS or TURNS_NEVER (see the ring) */
    int host_buffers;      /* HOST psync: buffers a worker reads into in turn (doctor's buffer-set probe) */
    uint64_t block_size, duration_ns, bytes_limit, seed;
    uint64_t split;        /* sub-request size (0: none) */
    int lanes;             /* threads per worker issuing sub-requests, the worker included (1: no split) */
    uint32_t timeline;     /* timeline records per worker (0: none) */
    gpu_fns_t fn;
    worker_t *workers;
    wstat_t *stats;
    atomic_int go, stop, done_count, running;
    uint64_t t_start;
    /* first worker to finish: the totals at that moment (elbencho's first-done) */
    atomic_int first_done_set;
    uint64_t first_done_ns, first_done_bytes, first_done_ops;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    char error[512];
    atomic_int has_error;
    uint64_t error_offset;
    int uring_errno;
};

static void job_fail(job_t *job, uint64_t offset, const char *fmt, ...)
{
    pthread_mutex_lock(&job->lock);
    if (!atomic_load(&job->has_error)) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(job->error, sizeof job->error, fmt, ap);
        va_end(ap);
        job->error_offset = offset;
        atomic_store(&job->has_error, 1);
    }
    pthread_mutex_unlock(&job->lock);
    atomic_store(&job->stop, 1);
}

static inline void record(wstat_t *st, int dir, uint64_t bytes, uint64_t lat)
{
    __atomic_store_n(&st->ops[dir], st->ops[dir] + 1, __ATOMIC_RELAXED);
    __atomic_store_n(&st->bytes[dir], st->bytes[dir] + bytes, __ATOMIC_RELAXED);
    __atomic_store_n(&st->lat_sum[dir], st->lat_sum[dir] + lat, __ATOMIC_RELAXED);
    unsigned idx = hist_index(lat);
    __atomic_store_n(&st->hist[dir][idx], st->hist[dir][idx] + 1, __ATOMIC_RELAXED);
    if (lat < st->lat_min)
        __atomic_store_n(&st->lat_min, lat, __ATOMIC_RELAXED);
    if (lat > st->lat_max)
        __atomic_store_n(&st->lat_max, lat, __ATOMIC_RELAXED);
}

typedef struct {
    uint64_t pos, rng, blocks, done_bytes;
} cursor_t;

static inline uint64_t next_offset(worker_t *w, cursor_t *c)
{
    uint64_t bs = w->job->block_size;
    if (w->job->random)
        return w->start + (xorshift(&c->rng) % c->blocks) * bs;
    uint64_t off = w->start + c->pos * bs;
    if (++c->pos >= c->blocks)
        c->pos = 0;
    return off;
}

static inline int next_is_write(job_t *job, cursor_t *c)
{
    if (job->read_pct >= 100)
        return 0;
    if (job->read_pct <= 0)
        return 1;
    return (int)(xorshift(&c->rng) % 100) >= job->read_pct;
}

/* May this worker start another operation? */
static inline int keep_going(worker_t *w, cursor_t *c, uint64_t t)
{
    job_t *job = w->job;
    if (atomic_load_explicit(&job->stop, memory_order_relaxed))
        return 0;
    if (job->duration_ns && t - job->t_start >= job->duration_ns)
        return 0;
    if (job->bytes_limit && c->done_bytes >= job->bytes_limit)
        return 0;
    return 1;
}

static int io_full(int fd, int write, void *buf, size_t len, uint64_t off, ssize_t *got)
{
    ssize_t n = write ? pwrite(fd, buf, len, (off_t)off) : pread(fd, buf, len, (off_t)off);
    *got = n;
    return n == (ssize_t)len ? 0 : -1;
}

static __attribute__((noinline, cold)) void report_short(job_t *job, int write, ssize_t n, size_t len, uint64_t off)
{
    if (n < 0)
        job_fail(job, off, "%s at offset %llu failed: %s", write ? "write" : "read",
                 (unsigned long long)off, strerror(errno));
    else
        job_fail(job, off, "short %s at offset %llu: %zd of %zu bytes (file shorter than expected?)",
                 write ? "write" : "read", (unsigned long long)off, n, len);
}

static int verify_host(worker_t *w, const void *buf, uint64_t off)
{
    uint64_t bad = pattern_check(buf, w->job->block_size, off, w->pattern_seed);
    if (bad != UINT64_MAX) {
        job_fail(w->job, bad, "verification failed: data at offset %llu does not match what was written",
                 (unsigned long long)bad);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------ timeline */

static void tl_put(worker_t *w, int kind, int lane, int buf, uint64_t t0, uint64_t t1, uint64_t off, uint64_t len)
{
    unsigned i = atomic_fetch_add_explicit(&w->tl_n, 1, memory_order_relaxed);
    if (i >= w->tl_cap)
        return;
    tl_rec_t *r = &w->tl[i];
    r->kind = (uint32_t)kind;
    r->lane = (uint32_t)lane;
    r->buf = buf;
    r->t0 = t0;
    r->t1 = t1;
    r->off = off;
    r->len = len;
}

/* Record an interval when the timeline is on; the arguments (clock reads) are not evaluated otherwise. */
#define tl_add(w, ...)              \
    do {                            \
        if ((w)->tl)                \
            tl_put((w), __VA_ARGS__); \
    } while (0)

/* ------------------------------------------------------------------ split requests
 *
 * One request of block_size bytes at file offset `off` becomes n = ceil(block_size / split)
 * sub-requests; sub-request i covers [i * split, min((i + 1) * split, block_size)) of the block
 * (the last one is shorter when split does not divide the block). The worker and its lanes take
 * sub-requests in turn from a shared counter, so up to `lanes` of them are in flight at once, and
 * the request is done when every sub-request is. xferscope.engines.split.plan_split is the same
 * plan in Python. */

static inline uint64_t split_count(uint64_t bs, uint64_t split)
{
    return split && split < bs ? (bs + split - 1) / split : 1;
}

typedef struct {
    split_t *team;
    int lane;
    pthread_t thread;
    int started;
    volatile int tid;
    uint64_t cpu_usr_us, cpu_sys_us; /* set when the lane ends */
} lane_t;

struct split_team {
    worker_t *w;
    int nlanes; /* helper threads (the worker itself is lane 0) */
    lane_t lanes[MAX_LANES];
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    uint64_t gen;   /* one per request */
    int quit;
    int active;     /* helpers taking sub-requests of the current request */
    /* the request: set by the worker while no helper is active */
    int write;
    uint64_t off;
    char *host;     /* host buffer (host and bounce modes) */
    int nsub;
    atomic_int next, remaining;
    /* the first sub-request that failed */
    int failed;
    ssize_t fail_n;
    uint64_t fail_off, fail_len;
    int fail_errno;
};

static void split_work(split_t *t, int lane)
{
    worker_t *w = t->w;
    job_t *job = w->job;
    gpu_fns_t *fn = &job->fn;
    uint64_t bs = job->block_size, sz = job->split;
    for (;;) {
        int i = atomic_fetch_add(&t->next, 1);
        if (i >= t->nsub)
            break;
        uint64_t so = (uint64_t)i * sz;
        uint64_t len = bs - so < sz ? bs - so : sz;
        uint64_t t0 = now_ns();
        ssize_t n;
        errno = 0;
        if (job->mode == MODE_CUFILE)
            n = t->write ? fn->cufile_write(w->handle, (void *)(uintptr_t)w->dev, len, (off_t)(t->off + so), (off_t)so)
                         : fn->cufile_read(w->handle, (void *)(uintptr_t)w->dev, len, (off_t)(t->off + so), (off_t)so);
        else
            n = t->write ? pwrite(w->fd, t->host + so, len, (off_t)(t->off + so))
                         : pread(w->fd, t->host + so, len, (off_t)(t->off + so));
        int err = errno;
        tl_add(w, t->write ? TL_SUB_WRITE : TL_SUB_READ, lane, -1, t0, now_ns(), t->off + so, len);
        if (n != (ssize_t)len) {
            pthread_mutex_lock(&t->mu);
            if (!t->failed) {
                t->failed = 1;
                t->fail_n = n;
                t->fail_off = t->off + so;
                t->fail_len = len;
                t->fail_errno = err;
            }
            pthread_mutex_unlock(&t->mu);
        }
        if (atomic_fetch_sub(&t->remaining, 1) == 1) {
            pthread_mutex_lock(&t->mu);
            pthread_cond_signal(&t->done);
            pthread_mutex_unlock(&t->mu);
        }
    }
}

static void *lane_main(void *arg)
{
    lane_t *l = arg;
    split_t *t = l->team;
    job_t *job = t->w->job;
    struct rusage r0, r1;
    l->tid = (int)syscall(SYS_gettid);
    if (t->w->cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(t->w->cpu, &set);
        pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    }
    if (job->mode != MODE_HOST && job->fn.ctx_set_current(t->w->ctx))
        job_fail(job, 0, "cuCtxSetCurrent failed in a lane of worker %d", t->w->id);
    memset(&r0, 0, sizeof r0);
    getrusage(RUSAGE_THREAD, &r0);
    uint64_t seen = 0;
    pthread_mutex_lock(&t->mu);
    for (;;) {
        while (t->gen == seen && !t->quit)
            pthread_cond_wait(&t->go, &t->mu);
        if (t->quit)
            break;
        seen = t->gen;
        t->active++;
        pthread_mutex_unlock(&t->mu);
        split_work(t, l->lane);
        pthread_mutex_lock(&t->mu);
        t->active--;
        pthread_cond_signal(&t->done);
    }
    pthread_mutex_unlock(&t->mu);
    if (getrusage(RUSAGE_THREAD, &r1) == 0) {
        l->cpu_usr_us = (uint64_t)(r1.ru_utime.tv_sec - r0.ru_utime.tv_sec) * 1000000u +
                        (uint64_t)(r1.ru_utime.tv_usec - r0.ru_utime.tv_usec);
        l->cpu_sys_us = (uint64_t)(r1.ru_stime.tv_sec - r0.ru_stime.tv_sec) * 1000000u +
                        (uint64_t)(r1.ru_stime.tv_usec - r0.ru_stime.tv_usec);
    }
    return NULL;
}

/* The lanes of worker w (job->lanes - 1 helper threads), started before the timed region. */
static split_t *split_start(worker_t *w)
{
    split_t *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->w = w;
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->go, NULL);
    pthread_cond_init(&t->done, NULL);
    int want = w->job->lanes - 1;
    for (int i = 0; i < want && i < MAX_LANES; i++) {
        lane_t *l = &t->lanes[i];
        l->team = t;
        l->lane = i + 1;
        if (pthread_create(&l->thread, NULL, lane_main, l))
            break;
        l->started = 1;
        t->nlanes++;
    }
    return t;
}

/* Stop and join the lanes; their CPU time goes beside the worker's. The team itself stays (its
 * thread ids may still be asked for) until split_free(). */
static void split_stop(split_t *t, wstat_t *st)
{
    if (!t || t->quit)
        return;
    pthread_mutex_lock(&t->mu);
    t->quit = 1;
    pthread_cond_broadcast(&t->go);
    pthread_mutex_unlock(&t->mu);
    for (int i = 0; i < t->nlanes; i++) {
        if (t->lanes[i].started) {
            pthread_join(t->lanes[i].thread, NULL);
            lane_t *l = &t->lanes[i];
            st->lanes_usr_us += l->cpu_usr_us;
            st->lanes_sys_us += l->cpu_sys_us;
            if (l->cpu_usr_us + l->cpu_sys_us > st->lane_max_us)
                st->lane_max_us = l->cpu_usr_us + l->cpu_sys_us;
            t->lanes[i].started = 0;
        }
    }
}

static void split_free(split_t *t)
{
    if (!t)
        return;
    pthread_mutex_destroy(&t->mu);
    pthread_cond_destroy(&t->go);
    pthread_cond_destroy(&t->done);
    free(t);
}

/* One request as parallel sub-requests: 0 when every one moved its bytes, else -1 (job failed). */
static int split_io(worker_t *w, int write, uint64_t off, void *host)
{
    split_t *t = w->team;
    job_t *job = w->job;
    pthread_mutex_lock(&t->mu);
    while (t->active > 0) /* a helper still leaving the previous request */
        pthread_cond_wait(&t->done, &t->mu);
    t->write = write;
    t->off = off;
    t->host = host;
    t->nsub = (int)split_count(job->block_size, job->split);
    t->failed = 0;
    atomic_store(&t->next, 0);
    atomic_store(&t->remaining, t->nsub);
    t->gen++;
    pthread_cond_broadcast(&t->go);
    pthread_mutex_unlock(&t->mu);
    split_work(t, 0);
    pthread_mutex_lock(&t->mu);
    while (atomic_load(&t->remaining) > 0)
        pthread_cond_wait(&t->done, &t->mu);
    int failed = t->failed;
    pthread_mutex_unlock(&t->mu);
    if (!failed)
        return 0;
    const char *what = job->mode == MODE_CUFILE ? (write ? "cuFileWrite" : "cuFileRead") : (write ? "write" : "read");
    if (t->fail_n < 0 && job->mode != MODE_CUFILE)
        job_fail(job, t->fail_off, "%s of a sub-request at offset %llu failed: %s", what,
                 (unsigned long long)t->fail_off, strerror(t->fail_errno));
    else
        job_fail(job, t->fail_off, "%s of a sub-request at offset %llu returned %zd (expected %llu)", what,
                 (unsigned long long)t->fail_off, t->fail_n, (unsigned long long)t->fail_len);
    return -1;
}

/* One whole block to or from the host buffer: split across the lanes, or one pread/pwrite (the hot
 * path of psync: inline, failures out of line). */
static inline int host_io(worker_t *w, int write, void *buf, uint64_t off)
{
    if (__builtin_expect(w->team != NULL, 0))
        return split_io(w, write, off, buf);
    size_t bs = w->job->block_size;
    ssize_t n = write ? pwrite(w->fd, buf, bs, (off_t)off) : pread(w->fd, buf, bs, (off_t)off);
    if (__builtin_expect(n == (ssize_t)bs, 1))
        return 0;
    report_short(w->job, write, n, bs, off);
    return -1;
}

/* One whole block through cuFile into (or out of) the worker's GPU buffer. */
static int cufile_io(worker_t *w, int write, uint64_t off)
{
    job_t *job = w->job;
    gpu_fns_t *fn = &job->fn;
    uint64_t bs = job->block_size;
    if (w->team)
        return split_io(w, write, off, NULL);
    ssize_t n = write ? fn->cufile_write(w->handle, (void *)(uintptr_t)w->dev, bs, (off_t)off, 0)
                      : fn->cufile_read(w->handle, (void *)(uintptr_t)w->dev, bs, (off_t)off, 0);
    if (n != (ssize_t)bs) {
        job_fail(job, off, "%s at offset %llu returned %zd (expected %llu)", write ? "cuFileWrite" : "cuFileRead",
                 (unsigned long long)off, n, (unsigned long long)bs);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------ waiting for a copy
 *
 * A worker that must wait for a copy to land (bounce: every copy; bounce-async: only when the reads
 * have come round to buffers still in flight) asks for it (cuEventQuery) until it has, and sleeps
 * first when the copy is predicted to take long enough to be worth a sleep: until just before it is
 * due. The prediction is the worker's running estimate of how long its copies take from issue to
 * landing, learnt from the copies it waits for: nudged down when one had landed by the time it woke,
 * moved towards the time seen when it had to ask. A copy still in flight past its prediction is asked
 * for between naps that double, and only long after that waited for with cuEventSynchronize.
 *
 * Measured on an H100 VM, 8 threads: asking through a 64 KiB copy costs 14 us of CPU and lands it
 * at once; any sleep costs 5-8 us of CPU and lands it 10-20 us late. Through a 1 MiB copy asking
 * costs 39 us, sleeping then asking 27 us (5-15 us late); an event made for blocking sync lands it
 * 80-160 us late and costs as much. So short copies are asked for, long ones slept through first.
 * The sleep needs a timer slack of about a microsecond (the default is 50 us): the GPU modes'
 * workers set it. */
#define SPIN_BELOW_NS 30000u /* copies predicted shorter than this are asked for without sleeping */
#define WAKE_EARLY_NS 10000u /* a sleep ends this long before the predicted landing (wake-up latency) */
#define MIN_SLEEP_NS 4000u   /* a shorter sleep is not worth its system call */
#define POLL_MIN_NS 50000u   /* ask without sleeping this long at most (or the prediction), then between naps */
#define LATE_ASK_NS 2000000u /* ask between naps this long at least (or 4 predictions), then wait on the event */
#define TIMER_SLACK_NS 1000u
#define MAX_LATE_STEPS 3     /* waits in a row that may lengthen the prediction without seeing a landing */

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static void sleep_until_ns(uint64_t t)
{
    uint64_t now = now_ns();
    if (t <= now)
        return;
    uint64_t d = t - now;
    struct timespec ts = {(time_t)(d / 1000000000ull), (long)(d % 1000000000ull)};
    nanosleep(&ts, NULL);
}

/* A copy (issued at `issued`) later than its prediction `pred`, asked about last at `t`: ask between naps
 * that double from `nap`, for a while, then wait in the driver. The prediction moves a quarter of the way to
 * what the copy took when it is seen landing; when it was only waited for, it lengthens by the time past the
 * asking (not by the asking itself), a few times in a row at most: a device that only finishes when waited
 * for (never seen landing) must not make it grow without end. 0, or the CUDA error. */
static int wait_late(worker_t *w, void *event, uint64_t issued, uint64_t pred, uint64_t t, uint64_t nap)
{
    gpu_fns_t *fn = &w->job->fn;
    uint64_t give_up = t + (4 * pred > LATE_ASK_NS ? 4 * pred : LATE_ASK_NS);
    while (t < give_up) {
        sleep_until_ns(t + nap);
        nap = nap < 1000000u ? 2 * nap : nap;
        int rc = fn->event_query(event);
        t = now_ns();
        if (rc != CUDA_ERROR_NOT_READY) {
            if (!rc) {
                w->copy_pred_ns = (uint64_t)((int64_t)pred + ((int64_t)(t - issued) - (int64_t)pred) / 4);
                w->copy_late = 0;
            }
            return rc;
        }
    }
    int rc = fn->event_sync(event);
    if (!rc && w->copy_late++ < MAX_LATE_STEPS)
        w->copy_pred_ns = pred + (now_ns() - t);
    return rc;
}

/* Wait until the copy that `event` follows (issued at `issued`, CLOCK_MONOTONIC ns) has landed.
 * 0, or the CUDA error. */
static int wait_copy(worker_t *w, void *event, uint64_t issued)
{
    gpu_fns_t *fn = &w->job->fn;
    uint64_t pred = w->copy_pred_ns;
    int rc = fn->event_query(event);
    if (rc != CUDA_ERROR_NOT_READY)
        goto early;
    if (pred >= SPIN_BELOW_NS && issued + pred - WAKE_EARLY_NS > now_ns() + MIN_SLEEP_NS) {
        sleep_until_ns(issued + pred - WAKE_EARLY_NS);
        rc = fn->event_query(event);
        if (rc != CUDA_ERROR_NOT_READY)
            goto early;
    }
    uint64_t t = now_ns();
    uint64_t deadline = t + (pred > POLL_MIN_NS ? pred : POLL_MIN_NS);
    for (;;) {
        for (int i = 0; i < 16; i++)
            cpu_relax();
        rc = fn->event_query(event);
        t = now_ns();
        if (rc != CUDA_ERROR_NOT_READY)
            goto seen;
        if (t > deadline)
            break;
    }
    return wait_late(w, event, issued, pred, t, 20000u);
seen:
    if (!rc) { /* seen landing: move the prediction a quarter of the way to what it took */
        w->copy_pred_ns = (uint64_t)((int64_t)pred + ((int64_t)(t - issued) - (int64_t)pred) / 4);
        w->copy_late = 0;
    }
    return rc;
early: /* landed before it was asked about: the prediction may be long */
    if (!rc)
        w->copy_pred_ns = pred - pred / 16;
    return rc;
}

/* ------------------------------------------------------------------ psync loop */

/* HOST, BOUNCE and CUFILE: one request in flight per worker (split across its lanes, if asked). */
static void run_sync(worker_t *w, cursor_t *c, void **bufs, int nbufs, void *scratch)
{
    job_t *job = w->job;
    uint64_t bs = job->block_size;
    gpu_fns_t *fn = &job->fn;
    void *buf = bufs[0];
    for (uint64_t n = 0; keep_going(w, c, now_ns()); n++) {
        if (nbufs > 1) /* HOST with several buffers: read into each in turn */
            buf = bufs[n % (uint64_t)nbufs];
        uint64_t off = next_offset(w, c);
        int write = next_is_write(job, c);
        if (write && job->verify) { /* the data written carries the pattern of its offset */
            if (job->mode == MODE_HOST) {
                pattern_fill(buf, bs, off, w->pattern_seed);
            } else {
                pattern_fill(scratch, bs, off, w->pattern_seed);
                if (fn->htod(w->dev, scratch, bs, w->stream) || fn->stream_sync(w->stream)) {
                    job_fail(job, off, "cuMemcpyHtoDAsync failed while preparing verification data");
                    break;
                }
            }
        }
        uint64_t t0 = now_ns(), tio_start = t0, tio = t0;
        int rc = 0;
        switch (job->mode) {
        case MODE_HOST:
            rc = host_io(w, write, buf, off);
            break;
        case MODE_BOUNCE: /* the copy is waited for (wait_copy: no spinning) before the next request */
            if (write) {
                if (fn->dtoh(buf, w->dev, bs, w->stream) || fn->event_record(w->events[0], w->stream)) {
                    job_fail(job, off, "cuMemcpyDtoHAsync failed");
                    rc = -1;
                    break;
                }
                uint64_t tw = now_ns();
                if (wait_copy(w, w->events[0], t0)) {
                    job_fail(job, off, "waiting for cuMemcpyDtoHAsync failed");
                    rc = -1;
                    break;
                }
                tio_start = now_ns();
                tl_add(w, TL_COPY, 0, 0, t0, tio_start, off, bs);
                tl_add(w, TL_WAIT, 0, 0, tw, tio_start, off, bs);
                rc = host_io(w, 1, buf, off);
            } else {
                rc = host_io(w, 0, buf, off);
                tio = now_ns();
                if (rc)
                    break;
                if (fn->htod(w->dev, buf, bs, w->stream) || fn->event_record(w->events[0], w->stream)) {
                    job_fail(job, off, "cuMemcpyHtoDAsync failed");
                    rc = -1;
                    break;
                }
                uint64_t tw = now_ns();
                if (wait_copy(w, w->events[0], tio)) {
                    job_fail(job, off, "waiting for cuMemcpyHtoDAsync failed");
                    rc = -1;
                    break;
                }
                uint64_t landed = now_ns();
                tl_add(w, TL_COPY, 0, 0, tio, landed, off, bs);
                tl_add(w, TL_WAIT, 0, 0, tw, landed, off, bs);
            }
            break;
        case MODE_CUFILE:
            rc = cufile_io(w, write, off);
            break;
        }
        if (rc)
            break;
        uint64_t t1 = now_ns();
        if (job->mode != MODE_BOUNCE || write)
            tio = t1;
        tl_add(w, write ? TL_WRITE : TL_READ, 0, nbufs > 1 ? (int)(n % (uint64_t)nbufs) : -1, tio_start, tio, off, bs);
        record(w->st, write, bs, t1 - t0);
        c->done_bytes += bs;
        if (job->verify && !write) {
            const void *check = buf;
            if (job->mode != MODE_HOST) { /* compare what reached the GPU */
                if (fn->dtoh(scratch, w->dev, bs, w->stream) || fn->stream_sync(w->stream)) {
                    job_fail(job, off, "cuMemcpyDtoHAsync failed while verifying");
                    break;
                }
                check = scratch;
            }
            if (verify_host(w, check, off))
                break;
        }
    }
}

/* ------------------------------------------------------------------ bounce-async pipeline
 *
 * K pinned buffers per worker (K = the pipeline depth), each with an event and its own block of
 * GPU memory, all copies on the worker's stream (they land in the order they were issued). Writes
 * go this way; reads go through the ring below (copy_batch >= 1), or this way with copy_batch 0.
 *
 * Reads: block n is read into a free buffer and its copy to the GPU is issued (cuMemcpyHtoDAsync,
 * then the buffer's event); the worker goes straight on to read block n+1 into another free
 * buffer, so the copy of block n runs while block n+1 is read and never sits between two reads.
 * A buffer is free again once its copy has landed (cuEventQuery, which does not wait). The free
 * buffer taken is the one whose copy landed last: when copies keep up with reads, two buffers
 * take turns and the others stay untouched; more come into play only while copies fall behind.
 * The worker waits for a copy (the oldest in flight) only when all K buffers are being copied.
 *
 * Writes: a buffer is filled from the GPU (cuMemcpyDtoHAsync) before it is written; while block n
 * is being written, the data of the next write is already being copied into another buffer.
 */
typedef struct {
    int k;
    int ring[MAX_PIPE]; /* buffers whose copy to the GPU is in flight, oldest first */
    int head, len;
    int free[MAX_PIPE]; /* free buffers; the top one's copy landed last */
    int nfree;
    int staged;         /* a buffer being filled from the GPU for the next write, or -1 */
    uint64_t offs[MAX_PIPE];
    uint64_t issued[MAX_PIPE]; /* when each buffer's copy was issued */
} pipe_t;

static inline uint64_t pipe_dev(worker_t *w, int i)
{
    return w->dev + (uint64_t)i * w->job->block_size;
}

/* The copy out of buffer i has landed: check what reached the GPU (--verify) and free the buffer. */
static int pipe_landed(worker_t *w, pipe_t *p, int i, void *scratch)
{
    job_t *job = w->job;
    gpu_fns_t *fn = &job->fn;
    uint64_t bs = job->block_size;
    if (job->verify) {
        if (fn->dtoh(scratch, pipe_dev(w, i), bs, w->stream) || fn->stream_sync(w->stream)) {
            job_fail(job, p->offs[i], "cuMemcpyDtoHAsync failed while verifying");
            return -1;
        }
        if (verify_host(w, scratch, p->offs[i]))
            return -1;
    }
    p->free[p->nfree++] = i;
    return 0;
}

/* Free every buffer whose copy has landed, without waiting. */
static int pipe_reap(worker_t *w, pipe_t *p, void *scratch)
{
    gpu_fns_t *fn = &w->job->fn;
    while (p->len) {
        int i = p->ring[p->head];
        int rc = fn->event_query(w->events[i]);
        if (rc == CUDA_ERROR_NOT_READY)
            return 0;
        if (rc) {
            job_fail(w->job, p->offs[i], "cuEventQuery failed (CUDA error %d)", rc);
            return -1;
        }
        p->head = (p->head + 1) % p->k;
        p->len--;
        if (pipe_landed(w, p, i, scratch))
            return -1;
    }
    return 0;
}

/* Wait for the oldest copy in flight, and free its buffer. */
static int pipe_wait_oldest(worker_t *w, pipe_t *p, void *scratch)
{
    int i = p->ring[p->head];
    uint64_t t0 = now_ns();
    if (wait_copy(w, w->events[i], p->issued[i])) {
        job_fail(w->job, p->offs[i], "waiting for a copy to the GPU failed");
        return -1;
    }
    tl_add(w, TL_WAIT, 0, i, t0, now_ns(), p->offs[i], w->job->block_size);
    p->head = (p->head + 1) % p->k;
    p->len--;
    return pipe_landed(w, p, i, scratch);
}

/* A free buffer (waiting for a copy only when none is): its index, or -1 on failure. */
static int pipe_acquire(worker_t *w, pipe_t *p, void *scratch)
{
    if (pipe_reap(w, p, scratch))
        return -1;
    if (!p->nfree && pipe_wait_oldest(w, p, scratch))
        return -1;
    return p->free[--p->nfree];
}

/* Buffer i, staged for a write that did not come: wait for its copy from the GPU and free it. */
static int pipe_unstage(worker_t *w, pipe_t *p)
{
    int i = p->staged;
    if (i < 0)
        return 0;
    p->staged = -1;
    if (wait_copy(w, w->events[i], p->issued[i])) {
        job_fail(w->job, 0, "waiting for a copy from the GPU failed");
        return -1;
    }
    p->free[p->nfree++] = i;
    return 0;
}

/* Start filling buffer i from its block of GPU memory (for a write). */
static int pipe_from_gpu(worker_t *w, pipe_t *p, int i)
{
    gpu_fns_t *fn = &w->job->fn;
    p->issued[i] = now_ns();
    if (fn->dtoh(w->host[i], pipe_dev(w, i), w->job->block_size, w->stream) ||
        fn->event_record(w->events[i], w->stream)) {
        job_fail(w->job, 0, "cuMemcpyDtoHAsync failed");
        return -1;
    }
    return 0;
}

static int pipe_read(worker_t *w, pipe_t *p, uint64_t off, void *scratch)
{
    job_t *job = w->job;
    gpu_fns_t *fn = &job->fn;
    uint64_t bs = job->block_size;
    if (pipe_unstage(w, p))
        return -1;
    int i = pipe_acquire(w, p, scratch);
    if (i < 0)
        return -1;
    uint64_t t0 = now_ns();
    if (host_io(w, 0, w->host[i], off))
        return -1;
    uint64_t t1 = now_ns();
    if (fn->htod(pipe_dev(w, i), w->host[i], bs, w->stream) || fn->event_record(w->events[i], w->stream)) {
        job_fail(job, off, "cuMemcpyHtoDAsync failed");
        return -1;
    }
    uint64_t t2 = now_ns();
    p->ring[(p->head + p->len) % p->k] = i;
    p->len++;
    p->offs[i] = off;
    p->issued[i] = t1;
    tl_add(w, TL_READ, 0, i, t0, t1, off, bs);
    tl_add(w, TL_COPY, 0, i, t1, t2, off, bs);
    record(w->st, 0, bs, t2 - t0);
    return 0;
}

static int pipe_write(worker_t *w, pipe_t *p, uint64_t off, void *scratch)
{
    job_t *job = w->job;
    gpu_fns_t *fn = &job->fn;
    uint64_t bs = job->block_size;
    int i;
    uint64_t t0;
    if (job->verify) { /* the GPU block must hold this offset's pattern: nothing staged ahead */
        if (pipe_unstage(w, p) || (i = pipe_acquire(w, p, scratch)) < 0)
            return -1;
        pattern_fill(scratch, bs, off, w->pattern_seed);
        if (fn->htod(pipe_dev(w, i), scratch, bs, w->stream) || fn->stream_sync(w->stream)) {
            job_fail(job, off, "cuMemcpyHtoDAsync failed while preparing verification data");
            return -1;
        }
        t0 = now_ns();
        if (pipe_from_gpu(w, p, i))
            return -1;
    } else {
        t0 = now_ns();
        if (p->staged >= 0) {
            i = p->staged;
            p->staged = -1;
        } else if ((i = pipe_acquire(w, p, scratch)) < 0 || pipe_from_gpu(w, p, i)) {
            return -1;
        }
        int j = pipe_acquire(w, p, scratch); /* the next write's data, copied while this one is written */
        if (j < 0 || pipe_from_gpu(w, p, j))
            return -1;
        p->staged = j;
    }
    uint64_t tw = now_ns();
    if (wait_copy(w, w->events[i], p->issued[i])) {
        job_fail(job, off, "waiting for a copy from the GPU failed");
        return -1;
    }
    uint64_t t1 = now_ns();
    tl_add(w, TL_WAIT, 0, i, tw, t1, off, bs);
    if (host_io(w, 1, w->host[i], off))
        return -1;
    uint64_t t2 = now_ns();
    tl_add(w, TL_WRITE, 0, i, t1, t2, off, bs);
    p->free[p->nfree++] = i;
    record(w->st, 1, bs, t2 - t0);
    return 0;
}

static void run_pipelined(worker_t *w, cursor_t *c, void *scratch)
{
    job_t *job = w->job;
    gpu_fns_t *fn = &job->fn;
    pipe_t p;
    memset(&p, 0, sizeof p);
    p.k = w->nhost;
    p.staged = -1;
    for (int i = p.k - 1; i >= 0; i--) /* buffer 0 on top */
        p.free[p.nfree++] = i;
    while (keep_going(w, c, now_ns())) {
        uint64_t off = next_offset(w, c);
        int write = next_is_write(job, c);
        if (write ? pipe_write(w, &p, off, scratch) : pipe_read(w, &p, off, scratch))
            break;
        c->done_bytes += job->block_size;
    }
    /* every copy issued must land (and be checked) before the worker counts as done */
    if (fn->stream_sync(w->stream) && !atomic_load(&job->has_error))
        job_fail(job, 0, "cuStreamSynchronize failed at the end of the run");
    while (p.len && !atomic_load(&job->has_error))
        if (pipe_wait_oldest(w, &p, scratch))
            break;
}

/* BOUNCE_PIPE reads (copy_batch >= 1), and the workloads' bounce paths (the Stager below): one read in
 * flight per worker, as in every psync mode and in gdsio, into as few pinned buffers as keep the copies
 * off the reads' path.
 *
 * On the virtual disks this was measured on, where a read lands decides its speed: 1 MiB reads took
 * 1.51 ms into one pinned buffer a worker, 1.63-1.71 ms into two taking turns with their copies, 2.04 ms
 * into twelve; reads into plain memory too, 2.08 ms into sixteen buffers (`xferscope doctor` measures it
 * on the machine at hand). Copies there land 50-70 us after they are issued whatever their size up to
 * 1 MiB. So neither way wins everywhere, and a worker measures both as it runs:
 *
 *  - one buffer, each copy waited for (serial, as bounce): the wait sleeps until the copy is predicted to
 *    land, then asks (wait_copy_lazy), or asks at once (wait_copy, `prompt`: bounce's Stager).
 *  - groups of `b` buffers taking turns: the copy of one group lands while another is read into. A
 *    group's buffers lie side by side in host and in GPU memory and go in one copy once its last block is
 *    read (a copy call costs about as much CPU as a small read: 8-10 us for 64 KiB, 10-16 us for 1 MiB,
 *    measured on an H100 VM a read apart; the engine makes groups of up to 256 KiB). The next group is the
 *    lowest-numbered one whose copy has landed: two take turns while copies keep up, and more come into
 *    play only while they fall behind (PCIe busier than storage: reads from the page cache, say); the
 *    worker waits for a copy only when every group is in flight. (Groups that grew with the copy calls'
 *    share of a fast read were measured too: on the same VM they read into more memory, and lost.)
 *
 * Under TURNS_AUTO the workers try both in alternating phases of TRIAL_PHASE_NS each on the job's clock,
 * after one of groups taking turns that is not timed (the run's start), so that every worker takes the
 * same way at once (on a shared disk one worker's way changes the others' reads); each compares the mean
 * time from the start of one read to the start of the next in each way, and goes on with the faster (one
 * buffer only when SERIAL_WINS_PCT faster: its waits cost CPU); they try again every RETRY_NS. A cycle
 * is timed in the phase it began in, and a worker leaves a timed phase only once it has timed a cycle
 * there (then for the next phase, not the clock's): so a worker whose cycles outlast a phase (a loaded
 * machine, a slow read, the drain after a switch) still times both ways, a phase behind the others.
 * TURNS_ALWAYS and TURNS_NEVER fix the way (the benches' variants; bounce's Stager).
 *
 * (Reads through io_uring, with the next read submitted before a copy is issued, were measured too:
 * on the same VM they took 5-30% longer than pread, and its kernel threads cost CPU of their own.) */
enum { TURNS_AUTO = 0, TURNS_ALWAYS = 1, TURNS_NEVER = 2 };
#define DST_OWN UINT64_MAX /* a block's destination: its slot's own block of the worker's GPU memory (run_ring) */
#define TRIAL_PHASES 7 /* the first, of groups taking turns, not timed */
#define TRIAL_PHASE_NS 40000000ull
#define RETRY_NS 10000000000ull
#define SERIAL_WINS_PCT 2 /* one buffer is kept only when its block is this much faster: it costs CPU to wait */

typedef struct {
    int b, groups;                  /* slots per group (one copy each), groups there are buffers for */
    int g, fill;                    /* the group being read into (-1: none), and its slots read so far */
    int serial;                     /* on one buffer (slot 0), each copy waited for */
    int policy;                     /* TURNS_* */
    int prompt;                     /* serial waits ask at once (wait_copy, as bounce) rather than sleep first */
    /* the trial of TURNS_AUTO, on the clock that starts at t0 */
    uint64_t t0;                    /* the trial's start (the job's, or the Stager's first read) */
    int phase;                      /* the phase the last read began in (TRIAL_PHASES and over: decided) */
    uint64_t last_start;            /* when the last read began (0: not timed) */
    uint64_t cycle_ns[2], cycles[2];/* [serial]: time from one read's start to the next's, and how many */
    uint64_t trial_ns[2];           /* the last trial's mean cycle [serial] (0: not measured) */
    int decided;                    /* the last trial's way: on one buffer (1) or groups taking turns (0) */
    int timed_here;                 /* cycles timed in the phase the worker is in */
    uint64_t used;                  /* a bit per slot read into */
    int pending[MAX_PIPE];          /* a group's copy is in flight */
    uint64_t issued[MAX_PIPE];      /* when it was issued */
    uint64_t gdst[MAX_PIPE];        /* where group g's copy goes in GPU memory */
    uint64_t gbytes[MAX_PIPE];      /* bytes read into group g so far */
    uint64_t offs[MAX_PIPE];        /* file offset of the block in each slot */
} ring_t;

static inline uint64_t ring_dev(worker_t *w, int slot)
{
    return w->dev + (uint64_t)slot * w->job->block_size;
}

/* `t0`: the clock the trial's phases run on (0: the first read's time). */
static void ring_init(ring_t *r, int nhost, int b, int policy, int prompt, uint64_t t0)
{
    memset(r, 0, sizeof *r);
    r->b = b > 0 ? b : 1;
    r->groups = nhost / r->b;
    if (r->groups < 2) { /* one slot per group then */
        r->b = 1;
        r->groups = nhost;
    }
    r->g = -1;
    r->policy = r->groups < 2 ? TURNS_NEVER : policy;
    r->serial = r->policy != TURNS_ALWAYS;
    r->prompt = prompt;
    r->phase = r->policy == TURNS_AUTO ? -1 : TRIAL_PHASES;
    r->t0 = t0;
}

/* Wait for a copy that the serial ring waits for every time: sleep until it is due, then ask, then as
 * wait_late does from short naps. Lands it a few microseconds late, and costs one sleep rather than the
 * asking through it that wait_copy does for short copies. The prediction moves down a sixteenth when the
 * copy had landed by the time it was due, up when not: so it settles where the copy is about due. */
static int wait_copy_lazy(worker_t *w, void *event, uint64_t issued)
{
    uint64_t pred = w->copy_pred_ns;
    if (issued + pred > now_ns() + MIN_SLEEP_NS)
        sleep_until_ns(issued + pred);
    int rc = w->job->fn.event_query(event);
    if (rc == CUDA_ERROR_NOT_READY)
        return wait_late(w, event, issued, pred, now_ns(), 2000u);
    if (!rc)
        w->copy_pred_ns = pred - pred / 16;
    return rc;
}

/* Check what group g's copy put in GPU memory (--verify): 0, or -1 (the job has failed). */
static int ring_verify(worker_t *w, ring_t *r, int g, void *scratch)
{
    job_t *job = w->job;
    gpu_fns_t *fn = &job->fn;
    uint64_t bs = job->block_size, n = r->gbytes[g];
    int first = g * r->b;
    if (fn->dtoh(scratch, r->gdst[g], n, w->stream) || fn->stream_sync(w->stream)) {
        job_fail(job, r->offs[first], "cuMemcpyDtoHAsync failed while verifying");
        return -1;
    }
    for (uint64_t i = 0; i * bs < n; i++)
        if (verify_host(w, (char *)scratch + i * bs, r->offs[first + (int)i]))
            return -1;
    return 0;
}

/* Group g's copy has landed (waited for, if `wait`): check it (--verify) and mark it free. 1 while it
 * is still in flight (not waiting), 0 when free, -1 on failure. */
static int ring_settle(worker_t *w, ring_t *r, int g, int wait, void *scratch)
{
    job_t *job = w->job;
    gpu_fns_t *fn = &job->fn;
    if (!r->pending[g])
        return 0;
    int rc = fn->event_query(w->events[g]);
    if (rc == CUDA_ERROR_NOT_READY) {
        if (!wait)
            return 1;
        uint64_t t0 = now_ns();
        rc = wait_copy(w, w->events[g], r->issued[g]);
        tl_add(w, TL_WAIT, 0, g, t0, now_ns(), r->offs[g * r->b], r->gbytes[g]);
    }
    if (rc) {
        job_fail(job, r->offs[g * r->b], "waiting for a copy to the GPU failed (CUDA error %d)", rc);
        return -1;
    }
    r->pending[g] = 0;
    return job->verify ? ring_verify(w, r, g, scratch) : 0;
}

/* Copy what was read into the current group to the GPU in one call: 0, or -1 (the job has failed). */
static int ring_copy(worker_t *w, ring_t *r)
{
    job_t *job = w->job;
    gpu_fns_t *fn = &job->fn;
    int g = r->g, first = g * r->b;
    r->g = -1;
    r->fill = 0;
    uint64_t t1 = now_ns();
    r->issued[g] = t1;
    if (fn->htod(r->gdst[g], w->host[first], r->gbytes[g], w->stream) ||
        fn->event_record(w->events[g], w->stream)) {
        job_fail(job, r->offs[first], "cuMemcpyHtoDAsync failed");
        return -1;
    }
    r->pending[g] = 1;
    tl_add(w, TL_COPY, 0, g, t1, now_ns(), r->offs[first], r->gbytes[g]);
    return 0;
}

/* The group to read into next: the lowest-numbered one whose copy has landed, else (every one in flight)
 * the one issued first, once it has. Its index, or -1 on failure. */
static int ring_pick(worker_t *w, ring_t *r, void *scratch)
{
    int oldest = 0;
    for (int g = 0; g < r->groups; g++) {
        int rc = ring_settle(w, r, g, 0, scratch);
        if (rc <= 0)
            return rc < 0 ? -1 : g;
        if (r->issued[g] < r->issued[oldest])
            oldest = g;
    }
    return ring_settle(w, r, oldest, 1, scratch) ? -1 : oldest;
}

/* Read `len` bytes at file offset `off` into host buffer `buf`: the whole block through host_io (split
 * across the lanes, if asked), else with one pread that may end after `need` bytes (the Stager's pieces: an
 * O_DIRECT span widened past the end of the file). */
static int ring_pread(worker_t *w, void *buf, uint64_t off, uint64_t len, uint64_t need)
{
    if (len == w->job->block_size && need == len)
        return host_io(w, 0, buf, off);
    ssize_t n = pread(w->fd, buf, (size_t)len, (off_t)off);
    if (n >= 0 && (uint64_t)n >= need)
        return 0;
    report_short(w->job, 0, n, (size_t)need, off);
    return -1;
}

/* One buffer: read, copy, wait. */
static int ring_serial(worker_t *w, ring_t *r, uint64_t off, uint64_t len, uint64_t need, uint64_t dst,
                       void *scratch)
{
    job_t *job = w->job;
    gpu_fns_t *fn = &job->fn;
    if (r->pending[0] && ring_settle(w, r, 0, 1, scratch)) /* just back from taking turns */
        return -1;
    if (dst == DST_OWN)
        dst = ring_dev(w, 0);
    uint64_t t0 = now_ns();
    r->offs[0] = off;
    r->used |= 1;
    if (ring_pread(w, w->host[0], off, len, need))
        return -1;
    uint64_t t1 = now_ns();
    if (fn->htod(dst, w->host[0], len, w->stream) || fn->event_record(w->events[0], w->stream)) {
        job_fail(job, off, "cuMemcpyHtoDAsync failed");
        return -1;
    }
    uint64_t t2 = now_ns();
    int rc = r->prompt ? wait_copy(w, w->events[0], t1) : wait_copy_lazy(w, w->events[0], t1);
    if (rc) {
        job_fail(job, off, "waiting for a copy to the GPU failed (CUDA error %d)", rc);
        return -1;
    }
    uint64_t t3 = now_ns();
    tl_add(w, TL_READ, 0, 0, t0, t1, off, len);
    tl_add(w, TL_COPY, 0, 0, t1, t2, off, len);
    tl_add(w, TL_WAIT, 0, 0, t2, t3, off, len);
    record(w->st, 0, len, t3 - t0);
    if (job->verify) {
        r->gdst[0] = dst;
        r->gbytes[0] = len;
        if (ring_verify(w, r, 0, scratch))
            return -1;
    }
    return 0;
}

/* Groups taking turns: the block goes into the current group, which is copied once full. */
static int ring_turns(worker_t *w, ring_t *r, uint64_t off, uint64_t len, uint64_t need, uint64_t dst,
                      void *scratch)
{
    uint64_t bs = w->job->block_size;
    if (r->g >= 0 && dst != DST_OWN && dst != r->gdst[r->g] + r->gbytes[r->g] && ring_copy(w, r))
        return -1; /* not where the group's copy goes on: it goes now */
    if (r->g < 0) {
        if ((r->g = ring_pick(w, r, scratch)) < 0)
            return -1;
        r->gdst[r->g] = dst == DST_OWN ? ring_dev(w, r->g * r->b) : dst;
        r->gbytes[r->g] = 0;
    }
    int slot = r->g * r->b + r->fill;
    r->offs[slot] = off;
    r->used |= 1ull << slot;
    uint64_t t0 = now_ns();
    if (ring_pread(w, w->host[slot], off, len, need))
        return -1;
    uint64_t t1 = now_ns();
    tl_add(w, TL_READ, 0, slot, t0, t1, off, len);
    r->gbytes[r->g] += len;
    uint64_t call = 0;
    if (++r->fill == r->b || len < bs) { /* the group is full, or the next slot would not follow on */
        if (ring_copy(w, r))
            return -1;
        call = now_ns() - t1;
    }
    record(w->st, 0, len, (t1 - t0) + call); /* the read, and issuing a copy where it did */
    return 0;
}

/* TURNS_AUTO's trial, before a read that begins at t: time the cycle that ends here, and take the way of
 * the phase. On the clock from t0, every RETRY_NS: TRIAL_PHASES phases (the first, of groups taking turns,
 * not timed; then one buffer and turns in alternation), then the faster way until the next trial. A cycle
 * is timed by the phase it began in (r->phase, the last read's), and not just after a switch (last_start
 * is reset there); a timed phase lasts until the clock's next and one cycle timed in it. */
static int ring_trial(worker_t *w, ring_t *r, uint64_t t, void *scratch)
{
    if (!r->t0)
        r->t0 = t;
    uint64_t rel = (t - r->t0) % RETRY_NS;
    int phase = rel / TRIAL_PHASE_NS < TRIAL_PHASES ? (int)(rel / TRIAL_PHASE_NS) : TRIAL_PHASES;
    if (phase < r->phase) { /* a new trial */
        r->cycle_ns[0] = r->cycle_ns[1] = r->cycles[0] = r->cycles[1] = 0;
        r->last_start = 0;
    }
    int timing = r->phase > 0 && r->phase < TRIAL_PHASES;
    if (r->last_start && timing) {
        r->cycle_ns[r->serial] += t - r->last_start;
        r->cycles[r->serial]++;
        r->timed_here++;
    }
    r->last_start = t;
    if (timing && phase > r->phase) /* on to the next phase, once this one has timed a cycle */
        phase = r->timed_here ? r->phase + 1 : r->phase;
    if (phase != r->phase)
        r->timed_here = 0;
    int next = phase % 2 == 1; /* phase 0, not timed, takes turns; then one buffer, turns, ... */
    if (phase == TRIAL_PHASES && r->phase < TRIAL_PHASES) { /* decided: the way whose cycle was shorter */
        for (int s = 0; s < 2; s++)
            r->trial_ns[s] = r->cycles[s] ? r->cycle_ns[s] / r->cycles[s] : 0;
        r->decided = r->trial_ns[1] && (!r->trial_ns[0] || r->trial_ns[1] * 100 < r->trial_ns[0] * (100 - SERIAL_WINS_PCT));
    }
    if (phase == TRIAL_PHASES)
        next = r->decided;
    r->phase = phase;
    if (next != r->serial) {
        r->last_start = 0; /* the first cycle after a switch carries the switch */
        if (next && r->g >= 0 && ring_copy(w, r)) /* to one buffer: the group read into so far goes first */
            return -1;
        r->serial = next;
    }
    return 0;
}

/* One block of `len` bytes (block_size, or less for the Stager's last piece, of which `need` must be there)
 * from file offset `off` to GPU address `dst`: 0, or -1 (the job has failed). */
static int ring_block(worker_t *w, ring_t *r, uint64_t off, uint64_t len, uint64_t need, uint64_t dst,
                      void *scratch)
{
    if (r->policy == TURNS_AUTO && ring_trial(w, r, now_ns(), scratch))
        return -1;
    return r->serial ? ring_serial(w, r, off, len, need, dst, scratch)
                     : ring_turns(w, r, off, len, need, dst, scratch);
}

/* Every block read so far has landed in GPU memory (and been checked): 0, or -1. */
static int ring_drain(worker_t *w, ring_t *r, void *scratch)
{
    if (r->g >= 0 && ring_copy(w, r))
        return -1;
    for (int g = 0; g < r->groups; g++)
        if (ring_settle(w, r, g, 1, scratch) < 0)
            return -1;
    r->last_start = 0; /* a pause: the next cycle is not timed */
    return 0;
}

/* What a worker read into: how many buffers, whether it ended on one, and what its last trial measured. */
static void ring_report(worker_t *w, const ring_t *r)
{
    w->bufs_used = __builtin_popcountll(r->used);
    w->ended_serial = r->serial;
    w->trial_ns[0] = r->trial_ns[0];
    w->trial_ns[1] = r->trial_ns[1];
}

static void run_ring(worker_t *w, cursor_t *c, void *scratch)
{
    job_t *job = w->job;
    gpu_fns_t *fn = &job->fn;
    ring_t r;
    ring_init(&r, w->nhost, job->copy_batch, job->turns, 0, job->t_start);
    while (keep_going(w, c, now_ns())) {
        uint64_t off = next_offset(w, c);
        if (ring_block(w, &r, off, job->block_size, job->block_size, DST_OWN, scratch))
            break;
        c->done_bytes += job->block_size;
    }
    if (!atomic_load(&job->has_error))
        ring_drain(w, &r, scratch);
    ring_report(w, &r);
    if (fn->stream_sync(w->stream) && !atomic_load(&job->has_error))
        job_fail(job, 0, "cuStreamSynchronize failed at the end of the run");
}

/* HOST at depth > 1 through io_uring: every slot has its own buffer. */
static void run_uring(worker_t *w, cursor_t *c, void **bufs, uring_t *ring)
{
    job_t *job = w->job;
    uint64_t bs = job->block_size;
    int depth = job->iodepth;
    uint64_t t_sub[MAX_SLOTS];
    uint64_t offs[MAX_SLOTS];
    int writes[MAX_SLOTS];
    int inflight = 0;
    int stopping = 0;
    for (int s = 0; s < depth && keep_going(w, c, now_ns()); s++) {
        offs[s] = next_offset(w, c);
        writes[s] = next_is_write(job, c);
        if (writes[s] && job->verify)
            pattern_fill(bufs[s], bs, offs[s], w->pattern_seed);
        t_sub[s] = now_ns();
        uring_prep(ring, writes[s], w->fd, bufs[s], (unsigned)bs, offs[s], (uint64_t)s);
        inflight++;
    }
    while (inflight > 0) {
        /* submit what was prepared at once (the queue stays full), and sleep only when
         * nothing has completed yet. No polling before the sleep: with the queue full, the
         * device has work while this thread sleeps, and a poll loop of io_uring_enter calls
         * cost more CPU per GiB than fio (which sleeps the same way) for no more IOPS */
        int rc = ring->sq_pending ? uring_enter(ring, 0) : 0;
        if (!rc && !uring_ready(ring))
            rc = uring_enter(ring, 1);
        if (rc) {
            job_fail(job, 0, "io_uring_enter failed: %s", strerror(-rc));
            return;
        }
        uint64_t user;
        int res;
        while (uring_peek(ring, &user, &res)) {
            int s = (int)user;
            uint64_t t1 = now_ns();
            inflight--;
            if (res != (int)bs) {
                if (res < 0)
                    errno = -res;
                if (!stopping)
                    report_short(job, writes[s], res, bs, offs[s]);
                stopping = 1;
                continue;
            }
            record(w->st, writes[s], bs, t1 - t_sub[s]);
            tl_add(w, writes[s] ? TL_WRITE : TL_READ, 0, s, t_sub[s], t1, offs[s], bs);
            c->done_bytes += bs;
            if (job->verify && !writes[s] && verify_host(w, bufs[s], offs[s]))
                stopping = 1;
            if (stopping || !keep_going(w, c, t1)) {
                stopping = 1;
                continue;
            }
            offs[s] = next_offset(w, c);
            writes[s] = next_is_write(job, c);
            if (writes[s] && job->verify)
                pattern_fill(bufs[s], bs, offs[s], w->pattern_seed);
            t_sub[s] = now_ns();
            uring_prep(ring, writes[s], w->fd, bufs[s], (unsigned)bs, offs[s], (uint64_t)s);
            inflight++;
            /* submit each request as soon as its slot is free, as fio does: the device's queue stays
             * full (measured on a virtio disk: 10-20 % more IOPS at depth 32 than resubmitting a batch) */
            if (uring_enter(ring, 0)) {
                job_fail(job, offs[s], "io_uring_enter failed");
                stopping = 1;
            }
        }
    }
}

static uint64_t tv_us(struct timeval tv)
{
    return (uint64_t)tv.tv_sec * 1000000u + (uint64_t)tv.tv_usec;
}

static void mark_done(worker_t *w, const struct rusage *before)
{
    job_t *job = w->job;
    struct rusage after;
    if (getrusage(RUSAGE_THREAD, &after) == 0) {
        w->st->cpu_usr_us = tv_us(after.ru_utime) - tv_us(before->ru_utime);
        w->st->cpu_sys_us = tv_us(after.ru_stime) - tv_us(before->ru_stime);
    }
    uint64_t t = now_ns();
    __atomic_store_n(&w->st->done_ns, t - job->t_start, __ATOMIC_RELEASE);
    int expected = 0;
    if (atomic_compare_exchange_strong(&job->first_done_set, &expected, 1)) {
        uint64_t bytes = 0, ops = 0;
        for (int i = 0; i < job->nworkers; i++) {
            wstat_t *s = &job->stats[i];
            bytes += __atomic_load_n(&s->bytes[0], __ATOMIC_RELAXED) + __atomic_load_n(&s->bytes[1], __ATOMIC_RELAXED);
            ops += __atomic_load_n(&s->ops[0], __ATOMIC_RELAXED) + __atomic_load_n(&s->ops[1], __ATOMIC_RELAXED);
        }
        job->first_done_ns = t - job->t_start;
        job->first_done_bytes = bytes;
        job->first_done_ops = ops;
    }
    pthread_mutex_lock(&job->lock);
    atomic_fetch_add(&job->done_count, 1);
    pthread_cond_broadcast(&job->cond);
    pthread_mutex_unlock(&job->lock);
}

#define HUGE_PAGE (2u << 20)

/* A host worker's buffers share one anonymous mapping, rounded up to whole 2 MiB pages so that,
 * with --huge-pages, transparent huge pages can back it: an O_DIRECT request then hands the device
 * a few large contiguous pieces instead of one 4 KiB page per 4 KiB of buffer. */
static size_t host_arena_size(uint64_t bytes)
{
    return (size_t)((bytes + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE);
}

static void *worker_main(void *arg)
{
    worker_t *w = arg;
    job_t *job = w->job;
    uint64_t bs = job->block_size;
    int nbufs = job->mode != MODE_HOST ? 1 : job->use_uring ? job->iodepth : job->host_buffers;
    void **bufs = calloc((size_t)nbufs, sizeof(void *));
    void *scratch = NULL;
    void *arena = NULL; /* MODE_HOST: every buffer of this worker, in one mapping */
    size_t arena_len = 0;
    uring_t ring;
    int ring_ok = 0;
    cursor_t c = {0};
    w->tid = (int)syscall(SYS_gettid);
    c.rng = splitmix64(job->seed + 0x1000u * (uint64_t)(w->id + 1));
    c.blocks = w->length / bs;
    if (!c.blocks)
        c.blocks = 1;

    if (w->cpu >= 0) { /* pin before touching memory, so buffers land on the worker's node */
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(w->cpu, &set);
        pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    }
    if (!bufs) {
        job_fail(job, 0, "out of memory for buffer table");
        goto wait_and_finish;
    }
    if (job->mode != MODE_HOST && job->fn.ctx_set_current(w->ctx)) {
        job_fail(job, 0, "cuCtxSetCurrent failed in worker %d", w->id);
        goto wait_and_finish;
    }
    if (job->mode == MODE_HOST && w->ext_buf) { /* the caller's memory, as it is (pages, pinning) */
        for (int i = 0; i < nbufs; i++) {
            bufs[i] = (char *)w->ext_buf + (size_t)i * bs;
            pattern_fill(bufs[i], bs, (uint64_t)i * bs, c.rng);
        }
    } else if (job->mode == MODE_HOST) {
        size_t need = host_arena_size((uint64_t)nbufs * bs);
        arena_len = need + HUGE_PAGE; /* room to start on a 2 MiB boundary */
        arena = mmap(NULL, arena_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (arena == MAP_FAILED) {
            arena = NULL;
            job_fail(job, 0, "cannot allocate %llu bytes of buffers", (unsigned long long)arena_len);
            goto wait_and_finish;
        }
        char *base = (char *)(((uintptr_t)arena + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
        if (job->huge_pages && madvise(base, need, MADV_HUGEPAGE)) {
            job_fail(job, 0, "transparent huge pages refused (madvise: %s)", strerror(errno));
            goto wait_and_finish;
        }
        for (int i = 0; i < nbufs; i++) {
            bufs[i] = base + (size_t)i * bs;
            pattern_fill(bufs[i], bs, (uint64_t)i * bs, c.rng); /* writes carry data, not zeros */
        }
    } else if (job->mode == MODE_BOUNCE) {
        bufs[0] = w->host[0];
    }
    if (job->verify && job->mode != MODE_HOST &&
        posix_memalign(&scratch, 4096, bs * (uint64_t)(job->copy_batch > 1 ? job->copy_batch : 1))) {
        job_fail(job, 0, "cannot allocate the verification buffer");
        goto wait_and_finish;
    }
    if (job->mode != MODE_HOST) /* the copy waits sleep to within a microsecond (wait_copy) */
        prctl(PR_SET_TIMERSLACK, TIMER_SLACK_NS, 0, 0, 0);
    if (job->use_uring) {
        int rc = uring_init(&ring, (unsigned)job->iodepth);
        if (rc) {
            job_fail(job, 0, "io_uring_setup failed: %s", strerror(-rc));
            goto wait_and_finish;
        }
        ring_ok = 1;
    }
    if (job->lanes > 1) {
        w->team = split_start(w);
        if (!w->team || w->team->nlanes < job->lanes - 1) {
            job_fail(job, 0, "cannot start the threads of split requests in worker %d", w->id);
            goto wait_and_finish;
        }
    }

wait_and_finish:
    /* everyone starts the timed region together */
    atomic_fetch_add(&job->running, 1);
    while (!atomic_load(&job->go))
        sched_yield();
    struct rusage cpu_at_start;
    memset(&cpu_at_start, 0, sizeof cpu_at_start);
    getrusage(RUSAGE_THREAD, &cpu_at_start);
    if (!atomic_load(&job->has_error)) {
        if (ring_ok)
            run_uring(w, &c, bufs, &ring);
        else if (job->mode == MODE_BOUNCE_PIPE && job->copy_batch)
            run_ring(w, &c, scratch);
        else if (job->mode == MODE_BOUNCE_PIPE)
            run_pipelined(w, &c, scratch);
        else
            run_sync(w, &c, bufs, nbufs, scratch);
    }
    split_stop(w->team, w->st);
    mark_done(w, &cpu_at_start);
    if (ring_ok)
        uring_exit(&ring);
    if (arena)
        munmap(arena, arena_len);
    free(bufs);
    free(scratch);
    return NULL;
}

/* ------------------------------------------------------------------ Python type */

static void job_join_all(job_t *job)
{
    atomic_store(&job->stop, 1);
    atomic_store(&job->go, 1);
    for (int i = 0; i < job->nworkers; i++) {
        if (job->workers[i].started) {
            pthread_join(job->workers[i].thread, NULL);
            job->workers[i].started = 0;
        }
    }
}

static void Job_dealloc(job_t *job)
{
    if (job->workers) {
        Py_BEGIN_ALLOW_THREADS
        job_join_all(job);
        Py_END_ALLOW_THREADS
    }
    if (job->workers)
        for (int i = 0; i < job->nworkers; i++) {
            free(job->workers[i].tl);
            split_free(job->workers[i].team);
        }
    free(job->workers);
    free(job->stats);
    pthread_mutex_destroy(&job->lock);
    pthread_cond_destroy(&job->cond);
    Py_TYPE(job)->tp_free((PyObject *)job);
}

static int get_u64_list(PyObject *seq, int n, uint64_t *out, const char *what)
{
    PyObject *fast = PySequence_Fast(seq, what);
    if (!fast)
        return -1;
    if (PySequence_Fast_GET_SIZE(fast) != n) {
        PyErr_Format(PyExc_ValueError, "%s: expected %d values", what, n);
        Py_DECREF(fast);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        out[i] = PyLong_AsUnsignedLongLongMask(PySequence_Fast_GET_ITEM(fast, i));
        if (PyErr_Occurred()) {
            Py_DECREF(fast);
            return -1;
        }
    }
    Py_DECREF(fast);
    return 0;
}

static uint64_t dict_u64(PyObject *d, const char *key)
{
    PyObject *v = d ? PyDict_GetItemString(d, key) : NULL;
    return v ? PyLong_AsUnsignedLongLongMask(v) : 0;
}

/* An attribute of a GPU worker (engines.gpu_native.GpuWorker), or NULL where it has none (a new reference). */
static PyObject *worker_attr(PyObject *w, const char *name)
{
    PyObject *v = PyObject_GetAttrString(w, name);
    if (!v && PyErr_ExceptionMatches(PyExc_AttributeError))
        PyErr_Clear();
    return v;
}

static uint64_t worker_u64(PyObject *w, const char *name)
{
    PyObject *v = worker_attr(w, name);
    uint64_t out = v ? PyLong_AsUnsignedLongLongMask(v) : 0;
    Py_XDECREF(v);
    return out;
}

/* The entry points of a gpu_functions dict (0 where absent). */
static int parse_gpu_fns(PyObject *d, gpu_fns_t *fn)
{
    fn->ctx_set_current = (cu_ctx_set_t)(uintptr_t)dict_u64(d, "cuCtxSetCurrent");
    fn->htod = (cu_htod_t)(uintptr_t)dict_u64(d, "cuMemcpyHtoDAsync");
    fn->dtoh = (cu_dtoh_t)(uintptr_t)dict_u64(d, "cuMemcpyDtoHAsync");
    fn->stream_sync = (cu_sync_t)(uintptr_t)dict_u64(d, "cuStreamSynchronize");
    fn->event_record = (cu_event_record_t)(uintptr_t)dict_u64(d, "cuEventRecord");
    fn->event_sync = (cu_event_sync_t)(uintptr_t)dict_u64(d, "cuEventSynchronize");
    fn->event_query = (cu_event_query_t)(uintptr_t)dict_u64(d, "cuEventQuery");
    fn->cufile_read = (cufile_rw_t)(uintptr_t)dict_u64(d, "cuFileRead");
    fn->cufile_write = (cufile_rw_t)(uintptr_t)dict_u64(d, "cuFileWrite");
    return PyErr_Occurred() ? -1 : 0;
}

static int Job_init(job_t *job, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"fds", "starts", "lengths", "block_size", "mode", "read_pct", "random", "iodepth",
                             "duration_ns", "bytes_limit", "seed", "verify", "pattern_seeds", "cpus",
                             "use_uring", "gpu_functions", "gpu_workers", "huge_pages", "split", "timeline",
                             "copy_batch", "turns", "host_buffers", "host_memory", NULL};
    PyObject *fds, *starts, *lengths, *pattern_seeds = NULL, *cpus = NULL, *gpu_fns = NULL, *gpu_workers = NULL;
    PyObject *host_memory = NULL;
    unsigned long long block_size, duration_ns = 0, bytes_limit = 0, seed = 1, split = 0;
    unsigned int timeline = 0;
    int mode = MODE_HOST, read_pct = 100, random = 0, iodepth = 1, verify = 0, use_uring = 0, huge_pages = 0;
    int copy_batch = 0, turns = TURNS_AUTO, host_buffers = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOOK|iiiiKKKpOOpOOpKIiiiO", kwlist, &fds, &starts, &lengths,
                                     &block_size, &mode, &read_pct, &random, &iodepth, &duration_ns, &bytes_limit,
                                     &seed, &verify, &pattern_seeds, &cpus, &use_uring, &gpu_fns, &gpu_workers,
                                     &huge_pages, &split, &timeline, &copy_batch, &turns, &host_buffers,
                                     &host_memory))
        return -1;
    if (turns < TURNS_AUTO || turns > TURNS_NEVER || host_buffers < 1 || host_buffers > MAX_PIPE) {
        PyErr_SetString(PyExc_ValueError, "turns: 0, 1 or 2; host_buffers: 1..64");
        return -1;
    }
    Py_ssize_t n = PySequence_Size(fds);
    if (n <= 0 || n > 65536) {
        PyErr_SetString(PyExc_ValueError, "fds: need at least one worker");
        return -1;
    }
    if (block_size == 0 || block_size % 8 || block_size > (1ull << 31)) {
        PyErr_SetString(PyExc_ValueError, "block_size must be a positive multiple of 8 below 2 GiB");
        return -1;
    }
    if (iodepth < 1 || iodepth > MAX_SLOTS || mode < MODE_HOST || mode > MODE_CUFILE) {
        PyErr_SetString(PyExc_ValueError, "iodepth or mode out of range");
        return -1;
    }
    job->nworkers = (int)n;
    job->block_size = block_size;
    job->huge_pages = huge_pages;
    job->mode = mode;
    job->read_pct = read_pct;
    job->random = random;
    job->iodepth = iodepth;
    job->duration_ns = duration_ns;
    job->bytes_limit = bytes_limit;
    job->seed = seed;
    job->verify = verify;
    job->use_uring = use_uring && mode == MODE_HOST && iodepth > 1;
    if (split && (split % 8 || (job->use_uring && split < block_size))) {
        PyErr_SetString(PyExc_ValueError, "split must be a multiple of 8, and psync (io_uring queues its own requests)");
        return -1;
    }
    job->split = split < block_size ? split : 0;
    uint64_t nsub = split_count(block_size, job->split);
    job->lanes = (int)(nsub < MAX_LANES ? nsub : MAX_LANES);
    if (timeline > (1u << 24)) {
        PyErr_SetString(PyExc_ValueError, "timeline: at most 16777216 records per worker");
        return -1;
    }
    job->timeline = timeline;
    if (copy_batch < 0 || copy_batch > MAX_PIPE) {
        PyErr_SetString(PyExc_ValueError, "copy_batch: 0 (no ring) or 1..64 blocks per copy");
        return -1;
    }
    /* the ring: bounce-async reads; writes keep the staged pipeline */
    job->copy_batch = mode == MODE_BOUNCE_PIPE && read_pct >= 100 ? copy_batch : 0;
    job->turns = turns;
    job->host_buffers = mode == MODE_HOST ? host_buffers : 1;
    pthread_mutex_init(&job->lock, NULL);
    pthread_cond_init(&job->cond, NULL);
    job->workers = calloc((size_t)n, sizeof(worker_t));
    if (posix_memalign((void **)&job->stats, 64, (size_t)n * sizeof(wstat_t)) || !job->workers) {
        PyErr_NoMemory();
        return -1;
    }
    memset(job->stats, 0, (size_t)n * sizeof(wstat_t));
    uint64_t *tmp = calloc((size_t)n, sizeof(uint64_t) * 4);
    if (!tmp) {
        PyErr_NoMemory();
        return -1;
    }
    int rc = get_u64_list(fds, (int)n, tmp, "fds") || get_u64_list(starts, (int)n, tmp + n, "starts") ||
             get_u64_list(lengths, (int)n, tmp + 2 * n, "lengths");
    if (!rc && pattern_seeds && pattern_seeds != Py_None)
        rc = get_u64_list(pattern_seeds, (int)n, tmp + 3 * n, "pattern_seeds");
    for (int i = 0; !rc && i < n; i++) {
        worker_t *w = &job->workers[i];
        w->job = job;
        w->id = i;
        w->fd = (int)tmp[i];
        w->start = tmp[n + i];
        w->length = tmp[2 * n + i];
        w->pattern_seed = tmp[3 * n + i];
        w->cpu = -1;
        w->st = &job->stats[i];
        w->st->lat_min = UINT64_MAX;
        if (timeline) {
            w->tl = calloc(timeline, sizeof(tl_rec_t));
            if (!w->tl) {
                PyErr_NoMemory();
                rc = -1;
                break;
            }
            w->tl_cap = timeline;
        }
        if (w->length < block_size) {
            PyErr_Format(PyExc_ValueError, "worker %d: region of %llu bytes is smaller than one block", i,
                         (unsigned long long)w->length);
            rc = -1;
        }
    }
    free(tmp);
    if (rc)
        return -1;
    if (host_memory && host_memory != Py_None) { /* HOST: each worker's buffers in the caller's memory */
        uint64_t *at = calloc((size_t)n, sizeof(uint64_t));
        if (!at) {
            PyErr_NoMemory();
            return -1;
        }
        rc = mode != MODE_HOST ? -1 : get_u64_list(host_memory, (int)n, at, "host_memory");
        for (int i = 0; !rc && i < n; i++) {
            if (!at[i] || at[i] % 4096) {
                PyErr_Format(PyExc_ValueError, "host_memory: worker %d's address is not 4 KiB aligned", i);
                rc = -1;
            }
            job->workers[i].ext_buf = (void *)(uintptr_t)at[i];
        }
        free(at);
        if (rc) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "host_memory is the host mode's (an address a worker)");
            return -1;
        }
    }
    if (cpus && cpus != Py_None) {
        PyObject *fast = PySequence_Fast(cpus, "cpus");
        if (!fast)
            return -1;
        for (int i = 0; i < n && i < PySequence_Fast_GET_SIZE(fast); i++)
            job->workers[i].cpu = (int)PyLong_AsLong(PySequence_Fast_GET_ITEM(fast, i));
        Py_DECREF(fast);
        if (PyErr_Occurred())
            return -1;
    }
    if (mode != MODE_HOST) {
        if (!gpu_fns || !PyDict_Check(gpu_fns) || !gpu_workers) {
            PyErr_SetString(PyExc_ValueError, "GPU modes need gpu_functions (dict) and gpu_workers (a GpuWorker each)");
            return -1;
        }
        if (parse_gpu_fns(gpu_fns, &job->fn))
            return -1;
        int need_copy = mode != MODE_CUFILE || verify;
        if (!job->fn.ctx_set_current || (need_copy && (!job->fn.htod || !job->fn.dtoh || !job->fn.stream_sync)) ||
            ((mode == MODE_BOUNCE || mode == MODE_BOUNCE_PIPE) &&
             (!job->fn.event_record || !job->fn.event_sync || !job->fn.event_query)) ||
            (mode == MODE_CUFILE && (!job->fn.cufile_read || !job->fn.cufile_write))) {
            PyErr_SetString(PyExc_ValueError, "gpu_functions lacks an entry point this mode needs");
            return -1;
        }
        PyObject *fast = PySequence_Fast(gpu_workers, "gpu_workers");
        if (!fast)
            return -1;
        if (PySequence_Fast_GET_SIZE(fast) != n) {
            Py_DECREF(fast);
            PyErr_SetString(PyExc_ValueError, "gpu_workers: one GpuWorker per worker");
            return -1;
        }
        for (int i = 0; i < n; i++) {
            PyObject *d = PySequence_Fast_GET_ITEM(fast, i);
            worker_t *w = &job->workers[i];
            w->ctx = (void *)(uintptr_t)worker_u64(d, "ctx");
            w->stream = (void *)(uintptr_t)worker_u64(d, "stream");
            w->dev = worker_u64(d, "dev");
            w->handle = (void *)(uintptr_t)worker_u64(d, "handle");
            PyObject *host = worker_attr(d, "host");
            PyObject *events = worker_attr(d, "events");
            if (events && PySequence_Size(events) <= 0) /* none: an empty list */
                Py_CLEAR(events);
            if (PyErr_Occurred()) {
                Py_XDECREF(host);
                Py_XDECREF(events);
                Py_DECREF(fast);
                return -1;
            }
            w->nhost = host ? (int)PySequence_Size(host) : 0;
            if (w->nhost > MAX_PIPE)
                w->nhost = MAX_PIPE;
            for (int k = 0; k < w->nhost; k++) {
                PyObject *item = PySequence_GetItem(host, k);
                w->host[k] = item ? (void *)(uintptr_t)PyLong_AsUnsignedLongLongMask(item) : NULL;
                Py_XDECREF(item);
                if (events) {
                    item = PySequence_GetItem(events, k);
                    w->events[k] = item ? (void *)(uintptr_t)PyLong_AsUnsignedLongLongMask(item) : NULL;
                    Py_XDECREF(item);
                }
            }
            int has_events = events != NULL;
            Py_XDECREF(host);
            Py_XDECREF(events);
            if (job->copy_batch > 1) { /* a group goes in one copy: its buffers must lie side by side */
                for (int k = 1; k < w->nhost; k++)
                    if ((char *)w->host[k] != (char *)w->host[k - 1] + block_size) {
                        Py_DECREF(fast);
                        PyErr_SetString(PyExc_ValueError, "copy_batch > 1 needs the pinned buffers side by side");
                        return -1;
                    }
                if (w->nhost < 2 * job->copy_batch) {
                    Py_DECREF(fast);
                    PyErr_SetString(PyExc_ValueError, "copy_batch needs at least two groups of buffers");
                    return -1;
                }
            }
            if ((mode == MODE_BOUNCE && (w->nhost < 1 || !has_events)) ||
                (mode == MODE_BOUNCE_PIPE && (w->nhost < 2 || !has_events))) {
                Py_DECREF(fast);
                PyErr_SetString(PyExc_ValueError, "bounce modes need pinned host buffers and an event for each");
                return -1;
            }
            if (!w->dev || (mode == MODE_CUFILE && !w->handle)) {
                Py_DECREF(fast);
                PyErr_SetString(PyExc_ValueError, "gpu_workers: dev (and handle for cuFile) required");
                return -1;
            }
        }
        Py_DECREF(fast);
        if (PyErr_Occurred())
            return -1;
    }
    return 0;
}

static PyObject *Job_start(job_t *job, PyObject *Py_UNUSED(ignored))
{
    if (job->workers[0].started || atomic_load(&job->go)) {
        PyErr_SetString(PyExc_RuntimeError, "job already started");
        return NULL;
    }
    for (int i = 0; i < job->nworkers; i++) {
        int rc = pthread_create(&job->workers[i].thread, NULL, worker_main, &job->workers[i]);
        if (rc) {
            Py_BEGIN_ALLOW_THREADS
            job_join_all(job);
            Py_END_ALLOW_THREADS
            errno = rc;
            return PyErr_SetFromErrno(PyExc_OSError);
        }
        job->workers[i].started = 1;
    }
    /* buffers and rings are set up by each worker; the clock starts when all are ready */
    Py_BEGIN_ALLOW_THREADS
    while (atomic_load(&job->running) < job->nworkers)
        sched_yield();
    job->t_start = now_ns();
    atomic_store(&job->go, 1);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyObject *Job_stop(job_t *job, PyObject *Py_UNUSED(ignored))
{
    atomic_store(&job->stop, 1);
    Py_RETURN_NONE;
}

/* wait(timeout_s) -> True when every worker has finished. */
static PyObject *Job_wait(job_t *job, PyObject *args)
{
    double timeout = -1;
    if (!PyArg_ParseTuple(args, "|d", &timeout))
        return NULL;
    int all_done;
    Py_BEGIN_ALLOW_THREADS
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    if (timeout >= 0) {
        uint64_t ns = (uint64_t)(timeout * 1e9) + (uint64_t)deadline.tv_nsec;
        deadline.tv_sec += (time_t)(ns / 1000000000ull);
        deadline.tv_nsec = (long)(ns % 1000000000ull);
    }
    pthread_mutex_lock(&job->lock);
    while (atomic_load(&job->done_count) < job->nworkers) {
        if (timeout < 0)
            pthread_cond_wait(&job->cond, &job->lock);
        else if (pthread_cond_timedwait(&job->cond, &job->lock, &deadline) == ETIMEDOUT)
            break;
    }
    all_done = atomic_load(&job->done_count) >= job->nworkers;
    pthread_mutex_unlock(&job->lock);
    if (all_done)
        job_join_all(job);
    Py_END_ALLOW_THREADS
    return PyBool_FromLong(all_done);
}

/* snapshot() -> dict of cumulative counters (see xferscope.engines.native). */
static PyObject *Job_snapshot(job_t *job, PyObject *Py_UNUSED(ignored))
{
    int n = job->nworkers;
    uint64_t t = atomic_load(&job->go) ? now_ns() - job->t_start : 0;
    PyObject *hr = PyBytes_FromStringAndSize(NULL, HIST_NBUCKETS * sizeof(uint64_t));
    PyObject *hw = PyBytes_FromStringAndSize(NULL, HIST_NBUCKETS * sizeof(uint64_t));
    PyObject *workers = PyList_New(n);
    if (!hr || !hw || !workers)
        goto fail;
    uint64_t *sr = (uint64_t *)PyBytes_AS_STRING(hr), *sw = (uint64_t *)PyBytes_AS_STRING(hw);
    memset(sr, 0, HIST_NBUCKETS * sizeof(uint64_t));
    memset(sw, 0, HIST_NBUCKETS * sizeof(uint64_t));
    uint64_t lmin = UINT64_MAX, lmax = 0;
    for (int i = 0; i < n; i++) {
        wstat_t *s = &job->stats[i];
        for (unsigned b = 0; b < HIST_NBUCKETS; b++) {
            sr[b] += __atomic_load_n(&s->hist[0][b], __ATOMIC_RELAXED);
            sw[b] += __atomic_load_n(&s->hist[1][b], __ATOMIC_RELAXED);
        }
        uint64_t mn = __atomic_load_n(&s->lat_min, __ATOMIC_RELAXED), mx = __atomic_load_n(&s->lat_max, __ATOMIC_RELAXED);
        if (mn < lmin)
            lmin = mn;
        if (mx > lmax)
            lmax = mx;
        uint64_t done = __atomic_load_n(&s->done_ns, __ATOMIC_ACQUIRE);
        PyObject *row = Py_BuildValue(
            "(KKKKKKNKKKKK)", (unsigned long long)__atomic_load_n(&s->ops[0], __ATOMIC_RELAXED),
            (unsigned long long)__atomic_load_n(&s->ops[1], __ATOMIC_RELAXED),
            (unsigned long long)__atomic_load_n(&s->bytes[0], __ATOMIC_RELAXED),
            (unsigned long long)__atomic_load_n(&s->bytes[1], __ATOMIC_RELAXED),
            (unsigned long long)__atomic_load_n(&s->lat_sum[0], __ATOMIC_RELAXED),
            (unsigned long long)__atomic_load_n(&s->lat_sum[1], __ATOMIC_RELAXED),
            done ? PyLong_FromUnsignedLongLong(done) : (Py_INCREF(Py_None), Py_None),
            (unsigned long long)(done ? s->cpu_usr_us : 0), (unsigned long long)(done ? s->cpu_sys_us : 0),
            (unsigned long long)(done ? s->lanes_usr_us : 0), (unsigned long long)(done ? s->lanes_sys_us : 0),
            (unsigned long long)(done ? s->lane_max_us : 0));
        if (!row)
            goto fail;
        PyList_SET_ITEM(workers, i, row);
    }
    PyObject *first = Py_None;
    Py_INCREF(first);
    if (atomic_load(&job->first_done_set) && atomic_load(&job->done_count) > 0) {
        Py_DECREF(first);
        first = Py_BuildValue("(KKK)", (unsigned long long)job->first_done_ns,
                              (unsigned long long)job->first_done_bytes, (unsigned long long)job->first_done_ops);
    }
    PyObject *err = Py_None;
    Py_INCREF(err);
    if (atomic_load(&job->has_error)) {
        Py_DECREF(err);
        pthread_mutex_lock(&job->lock);
        err = Py_BuildValue("(sK)", job->error, (unsigned long long)job->error_offset);
        pthread_mutex_unlock(&job->lock);
    }
    PyObject *result = Py_BuildValue("{s:K,s:N,s:N,s:N,s:K,s:K,s:N,s:i,s:N}", "t_ns", (unsigned long long)t,
                                     "workers", workers, "hist_read", hr, "hist_write", hw, "lat_min_ns",
                                     (unsigned long long)(lmin == UINT64_MAX ? 0 : lmin), "lat_max_ns",
                                     (unsigned long long)lmax, "first_done", first, "done",
                                     atomic_load(&job->done_count), "error", err);
    return result;
fail:
    Py_XDECREF(hr);
    Py_XDECREF(hw);
    Py_XDECREF(workers);
    return NULL;
}

/* tids() -> kernel thread ids of the workers (0 for one not started yet), then of their lanes. */
static PyObject *Job_tids(job_t *job, PyObject *Py_UNUSED(ignored))
{
    PyObject *out = PyList_New(0);
    if (!out)
        return NULL;
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < job->nworkers; i++) {
            worker_t *w = &job->workers[i];
            split_t *t = w->team;
            int n = pass == 0 ? 1 : (t ? t->nlanes : 0);
            for (int j = 0; j < n; j++) {
                PyObject *v = PyLong_FromLong(pass == 0 ? w->tid : t->lanes[j].tid);
                if (!v || PyList_Append(out, v)) {
                    Py_XDECREF(v);
                    Py_DECREF(out);
                    return NULL;
                }
                Py_DECREF(v);
            }
        }
    }
    return out;
}

/* timeline() -> per worker, its records as (kind, lane, buffer, t0_ns, t1_ns, offset, bytes), and how
 * many were dropped (over the capacity). Meant for after wait(): records of a running worker may be
 * half written. Times are CLOCK_MONOTONIC (time.monotonic_ns()). */
static PyObject *Job_timeline(job_t *job, PyObject *Py_UNUSED(ignored))
{
    PyObject *out = PyList_New(job->nworkers);
    if (!out)
        return NULL;
    for (int i = 0; i < job->nworkers; i++) {
        worker_t *w = &job->workers[i];
        unsigned taken = atomic_load(&w->tl_n);
        unsigned n = taken < w->tl_cap ? taken : w->tl_cap;
        PyObject *recs = PyList_New(n);
        if (!recs) {
            Py_DECREF(out);
            return NULL;
        }
        for (unsigned j = 0; j < n; j++) {
            tl_rec_t *r = &w->tl[j];
            PyObject *t = Py_BuildValue("(IIiKKKK)", r->kind, r->lane, r->buf, (unsigned long long)r->t0,
                                        (unsigned long long)r->t1, (unsigned long long)r->off,
                                        (unsigned long long)r->len);
            if (!t) {
                Py_DECREF(recs);
                Py_DECREF(out);
                return NULL;
            }
            PyList_SET_ITEM(recs, j, t);
        }
        PyObject *entry = Py_BuildValue("{s:N,s:I}", "records", recs, "dropped", taken - n);
        if (!entry) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, i, entry);
    }
    return out;
}

/* buffer_use() -> per worker of bounce-async reads: (buffers read into, ended on one buffer, the last trial's
 * mean ns a block on one buffer and with groups taking turns; 0 where not measured). After wait(). */
static PyObject *worker_use(const worker_t *w)
{
    return Py_BuildValue("(iOKK)", w->bufs_used, w->ended_serial ? Py_True : Py_False,
                         (unsigned long long)w->trial_ns[1], (unsigned long long)w->trial_ns[0]);
}

static PyObject *Job_buffer_use(job_t *job, PyObject *Py_UNUSED(ignored))
{
    PyObject *out = PyList_New(job->nworkers);
    if (!out)
        return NULL;
    for (int i = 0; i < job->nworkers; i++) {
        PyObject *t = worker_use(&job->workers[i]);
        if (!t) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, i, t);
    }
    return out;
}

static PyMethodDef Job_methods[] = {
    {"buffer_use", (PyCFunction)Job_buffer_use, METH_NOARGS, "bounce-async reads: per worker, what it read into."},
    {"tids", (PyCFunction)Job_tids, METH_NOARGS, "Kernel thread ids of the workers, then of their lanes."},
    {"timeline", (PyCFunction)Job_timeline, METH_NOARGS, "Each worker's recorded intervals (timeline=N)."},
    {"start", (PyCFunction)Job_start, METH_NOARGS, "Start the workers; the timed region begins when all are ready."},
    {"stop", (PyCFunction)Job_stop, METH_NOARGS, "Ask every worker to stop after its operation in flight."},
    {"wait", (PyCFunction)Job_wait, METH_VARARGS, "wait(timeout=-1) -> True when every worker has finished."},
    {"snapshot", (PyCFunction)Job_snapshot, METH_NOARGS, "Cumulative counters of every worker, now."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject JobType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "xferscope._iocore.Job",
    .tp_basicsize = sizeof(job_t),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Job_init,
    .tp_dealloc = (destructor)Job_dealloc,
    .tp_methods = Job_methods,
    .tp_doc = "Job(fds, starts, lengths, block_size, ...): worker threads running one I/O pattern.",
};

/* ------------------------------------------------------------------ Stager
 *
 * The bounce paths of the workloads (train, kvcache, load): one reader thread's pinned buffers, read into
 * and copied to GPU memory by the ring above, with the piece's destination given per call. It is the
 * same code `run --path bounce-async` runs (and, with turns=TURNS_NEVER and a prompt wait, bounce's). */
typedef struct {
    PyObject_HEAD
    job_t *job;   /* plain memory, not a Python Job: the function table, block size and error */
    worker_t w;
    wstat_t st;
    ring_t r;
    int ready;
} stager_t;

static void Stager_dealloc(stager_t *s)
{
    if (s->job) {
        pthread_mutex_destroy(&s->job->lock);
        free(s->job);
    }
    Py_TYPE(s)->tp_free((PyObject *)s);
}

static int Stager_init(stager_t *s, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"gpu_functions", "ctx", "stream", "host", "events", "block_size", "copy_batch",
                             "turns", "prompt", NULL};
    PyObject *fns, *host, *events;
    unsigned long long ctx, stream, bs;
    int b = 1, turns = TURNS_AUTO, prompt = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!KKOOK|iip", kwlist, &PyDict_Type, &fns, &ctx, &stream, &host,
                                     &events, &bs, &b, &turns, &prompt))
        return -1;
    Py_ssize_t n = PySequence_Size(host);
    if (n < 1 || n > MAX_PIPE || PySequence_Size(events) != n || bs == 0 || bs > (1ull << 31) || b < 1 ||
        turns < TURNS_AUTO || turns > TURNS_NEVER) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "Stager: 1..64 host buffers with an event each, a block size, "
                                              "copy_batch >= 1, turns 0..2");
        return -1;
    }
    if (!s->job && !(s->job = calloc(1, sizeof(job_t)))) {
        PyErr_NoMemory();
        return -1;
    }
    job_t *job = s->job;
    pthread_mutex_init(&job->lock, NULL);
    if (parse_gpu_fns(fns, &job->fn))
        return -1;
    if (!job->fn.ctx_set_current || !job->fn.htod || !job->fn.event_record || !job->fn.event_query ||
        !job->fn.event_sync || !job->fn.stream_sync) {
        PyErr_SetString(PyExc_ValueError, "gpu_functions lacks an entry point the bounce paths need");
        return -1;
    }
    job->mode = MODE_BOUNCE_PIPE;
    job->nworkers = 1;
    job->block_size = bs;
    job->lanes = 1;
    memset(&s->w, 0, sizeof s->w);
    memset(&s->st, 0, sizeof s->st);
    s->st.lat_min = UINT64_MAX;
    worker_t *w = &s->w;
    w->job = job;
    w->st = &s->st;
    w->fd = -1;
    w->ctx = (void *)(uintptr_t)ctx;
    w->stream = (void *)(uintptr_t)stream;
    w->nhost = (int)n;
    for (int k = 0; k < n; k++) {
        PyObject *a = PySequence_GetItem(host, k), *e = PySequence_GetItem(events, k);
        w->host[k] = a ? (void *)(uintptr_t)PyLong_AsUnsignedLongLongMask(a) : NULL;
        w->events[k] = e ? (void *)(uintptr_t)PyLong_AsUnsignedLongLongMask(e) : NULL;
        Py_XDECREF(a);
        Py_XDECREF(e);
        if (PyErr_Occurred())
            return -1;
        if (k && b > 1 && (char *)w->host[k] != (char *)w->host[k - 1] + bs) {
            PyErr_SetString(PyExc_ValueError, "copy_batch > 1 needs the pinned buffers side by side");
            return -1;
        }
    }
    ring_init(&s->r, (int)n, b, turns, prompt, 0);
    s->ready = 1;
    return 0;
}

/* The job's failure as a RuntimeError, and the stager ready for the next call. */
static PyObject *stager_failed(stager_t *s)
{
    job_t *job = s->job;
    PyErr_SetString(PyExc_RuntimeError, job->error[0] ? job->error : "the bounce path failed");
    job->error[0] = 0;
    atomic_store(&job->has_error, 0);
    atomic_store(&job->stop, 0);
    return NULL;
}

/* read(fd, offset, length, dst, need=length): length bytes of fd from offset into GPU memory at dst, block by
 * block; the read may end early after `need` bytes (an O_DIRECT span widened past the end of the file). */
static PyObject *Stager_read(stager_t *s, PyObject *args)
{
    int fd;
    unsigned long long off, len, dst, need = ULLONG_MAX;
    if (!s->ready) {
        PyErr_SetString(PyExc_RuntimeError, "Stager not initialised");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "iKKK|K", &fd, &off, &len, &dst, &need))
        return NULL;
    if (need > len)
        need = len;
    worker_t *w = &s->w;
    job_t *job = s->job;
    uint64_t bs = job->block_size;
    int rc = 0;
    Py_BEGIN_ALLOW_THREADS
    w->fd = fd;
    if (job->fn.ctx_set_current(w->ctx)) {
        job_fail(job, off, "cuCtxSetCurrent failed");
        rc = -1;
    }
    for (uint64_t pos = 0; !rc && pos < len; pos += bs) {
        uint64_t n = len - pos < bs ? len - pos : bs;
        uint64_t must = need > pos ? (need - pos < n ? need - pos : n) : 0;
        rc = ring_block(w, &s->r, off + pos, n, must, dst + pos, NULL);
    }
    Py_END_ALLOW_THREADS
    if (rc || atomic_load(&job->has_error))
        return stager_failed(s);
    Py_RETURN_NONE;
}

/* drain(): every copy issued has landed. */
static PyObject *Stager_drain(stager_t *s, PyObject *Py_UNUSED(ignored))
{
    if (!s->ready)
        Py_RETURN_NONE;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = s->job->fn.ctx_set_current(s->w.ctx) ? -1 : ring_drain(&s->w, &s->r, NULL);
    Py_END_ALLOW_THREADS
    if (rc)
        return stager_failed(s);
    Py_RETURN_NONE;
}

/* use() -> (buffers read into, on one buffer now, the last trial's mean ns a block on one buffer and taking
 * turns). */
static PyObject *Stager_use(stager_t *s, PyObject *Py_UNUSED(ignored))
{
    ring_report(&s->w, &s->r);
    return worker_use(&s->w);
}

static PyMethodDef Stager_methods[] = {
    {"read", (PyCFunction)Stager_read, METH_VARARGS, "read(fd, offset, length, dst): file bytes into GPU memory."},
    {"drain", (PyCFunction)Stager_drain, METH_NOARGS, "Wait until every copy issued has landed."},
    {"use", (PyCFunction)Stager_use, METH_NOARGS, "(buffers read into, on one buffer, trial ns: one, turns)."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject StagerType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "xferscope._iocore.Stager",
    .tp_basicsize = sizeof(stager_t),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Stager_init,
    .tp_dealloc = (destructor)Stager_dealloc,
    .tp_methods = Stager_methods,
    .tp_doc = "Stager(gpu_functions, ctx, stream, host, events, block_size, ...): a bounce path's pinned buffers.",
};

/* ------------------------------------------------------------------ module functions */

static PyObject *py_fill_pattern(PyObject *self, PyObject *args)
{
    Py_buffer view;
    unsigned long long off, seed;
    if (!PyArg_ParseTuple(args, "w*KK", &view, &off, &seed))
        return NULL;
    if (view.len % 8 || off % 8) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "length and offset must be multiples of 8");
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    pattern_fill(view.buf, (size_t)view.len, off, seed);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    Py_RETURN_NONE;
}

static PyObject *py_check_pattern(PyObject *self, PyObject *args)
{
    Py_buffer view;
    unsigned long long off, seed;
    if (!PyArg_ParseTuple(args, "y*KK", &view, &off, &seed))
        return NULL;
    uint64_t bad;
    Py_BEGIN_ALLOW_THREADS
    bad = pattern_check(view.buf, (size_t)view.len & ~(size_t)7, off, seed);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    if (bad == UINT64_MAX)
        Py_RETURN_NONE;
    return PyLong_FromUnsignedLongLong(bad);
}

static PyObject *py_bucket_index(PyObject *self, PyObject *arg)
{
    unsigned long long v = PyLong_AsUnsignedLongLong(arg);
    if (PyErr_Occurred())
        return NULL;
    return PyLong_FromUnsignedLong(hist_index(v));
}

/* split_plan(block_size, split) -> [(offset, length), ...]: the sub-requests of one request, as the
 * workers issue them. */
static PyObject *py_split_plan(PyObject *self, PyObject *args)
{
    unsigned long long bs, split;
    if (!PyArg_ParseTuple(args, "KK", &bs, &split))
        return NULL;
    uint64_t n = split_count(bs, split);
    uint64_t sz = n > 1 ? split : bs;
    PyObject *out = PyList_New((Py_ssize_t)n);
    if (!out)
        return NULL;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t so = i * sz, len = bs - so < sz ? bs - so : sz;
        PyObject *t = Py_BuildValue("(KK)", (unsigned long long)so, (unsigned long long)len);
        if (!t) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, (Py_ssize_t)i, t);
    }
    return out;
}

/* uring_probe() -> 0 when io_uring works here, else the errno that io_uring_setup gave. */
static PyObject *py_uring_probe(PyObject *self, PyObject *Py_UNUSED(ignored))
{
    uring_t r;
    int rc = uring_init(&r, 4);
    if (rc == 0)
        uring_exit(&r);
    return PyLong_FromLong(rc ? -rc : 0);
}

static PyMethodDef module_methods[] = {
    {"fill_pattern", py_fill_pattern, METH_VARARGS, "fill_pattern(buffer, file_offset, seed): write the data pattern."},
    {"check_pattern", py_check_pattern, METH_VARARGS,
     "check_pattern(buffer, file_offset, seed) -> None, or the offset of the first bad word."},
    {"bucket_index", py_bucket_index, METH_O, "Histogram bucket of a latency in ns."},
    {"uring_probe", py_uring_probe, METH_NOARGS, "0 when io_uring works here, else the errno."},
    {"split_plan", py_split_plan, METH_VARARGS, "split_plan(block_size, split) -> [(offset, length)]."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {PyModuleDef_HEAD_INIT, "_iocore", "xferscope's I/O hot loop.", -1,
                                       module_methods};

PyMODINIT_FUNC PyInit__iocore(void)
{
    if (PyType_Ready(&JobType) < 0 || PyType_Ready(&StagerType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&moduledef);
    if (!m)
        return NULL;
    Py_INCREF(&JobType);
    PyModule_AddObject(m, "Job", (PyObject *)&JobType);
    Py_INCREF(&StagerType);
    PyModule_AddObject(m, "Stager", (PyObject *)&StagerType);
    PyModule_AddIntConstant(m, "TURNS_AUTO", TURNS_AUTO);
    PyModule_AddIntConstant(m, "TURNS_ALWAYS", TURNS_ALWAYS);
    PyModule_AddIntConstant(m, "TURNS_NEVER", TURNS_NEVER);
    PyModule_AddIntConstant(m, "SERIAL_WINS_PCT", SERIAL_WINS_PCT);
    PyModule_AddIntConstant(m, "HIST_SUB", HIST_SUB);
    PyModule_AddIntConstant(m, "HIST_NBUCKETS", HIST_NBUCKETS);
    PyModule_AddIntConstant(m, "MODE_HOST", MODE_HOST);
    PyModule_AddIntConstant(m, "MODE_BOUNCE", MODE_BOUNCE);
    PyModule_AddIntConstant(m, "MODE_BOUNCE_PIPE", MODE_BOUNCE_PIPE);
    PyModule_AddIntConstant(m, "MODE_CUFILE", MODE_CUFILE);
    PyModule_AddIntConstant(m, "MAX_SLOTS", MAX_SLOTS);
    PyModule_AddIntConstant(m, "MAX_PIPE", MAX_PIPE);
    PyModule_AddIntConstant(m, "MAX_LANES", MAX_LANES);
    PyModule_AddIntConstant(m, "TL_READ", TL_READ);
    PyModule_AddIntConstant(m, "TL_WRITE", TL_WRITE);
    PyModule_AddIntConstant(m, "TL_COPY", TL_COPY);
    PyModule_AddIntConstant(m, "TL_WAIT", TL_WAIT);
    PyModule_AddIntConstant(m, "TL_SUB_READ", TL_SUB_READ);
    PyModule_AddIntConstant(m, "TL_SUB_WRITE", TL_SUB_WRITE);
    return m;
}
