/* xferscope._memcore: memory latency under load, the way Intel MLC measures it.
 *
 * A Session owns plain pthreads that never touch Python objects:
 *   - one chaser: a dependent pointer chase over one cycle through every
 *     stride-sized element of its buffer, built with multichase's -T locality:
 *     the elements are cut into windows of `window` bytes, the windows are
 *     visited in random order and each window's elements in a random order of
 *     their own before the chase moves on (a window as large as the buffer is
 *     one random cycle over all of it). A second, whole-buffer cycle may share
 *     the buffer, in the second pointer of each element, so that idle latency
 *     is measured both ways without a second buffer. The chaser publishes its
 *     step count every CHASE_BATCH loads (never an atomic per load);
 *   - N loaders: each streams its own buffers per a traffic type and spins a
 *     plain countdown loop of `delay` iterations after every step.
 * Every thread pins itself to its CPU before it touches its memory (or, for
 * memory placed on another NUMA node, to a CPU of that node, and binds the
 * memory there, moving to its own CPU afterwards), and asks for the page size
 * chosen: 4 KiB (THP refused), transparent huge pages, or hugetlbfs 2 MiB or
 * 1 GiB pages from the reserved pool. The Python side calls measure() once per point
 * (the GIL is released while it runs): it releases the threads, drops a
 * warm-up, then reads the counters at the edges of its sub-windows.
 *
 * A "step" of a loader is one 64-byte line written (or read, for R) plus the
 * lines read with it; traffic_info() says how many bytes each step moves at
 * the memory controller. A regular store costs a read for ownership and a
 * write; a non-temporal store only a write.
 *
 * stop() may be called from any thread at any time: measure() and start()
 * return within a few milliseconds.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__) && !defined(XFERSCOPE_PORTABLE)
#include <emmintrin.h>
#include <xmmintrin.h>
#define HAVE_NT_STORES 1
#else
#define HAVE_NT_STORES 0
#endif

#define LINE 64
#define HUGE_PAGE (2u << 20)
#define CHASE_BATCH 1024 /* loads between two publications of the chaser's count */
#define NAP_NS 1000000L  /* a paused thread polls its flags this often */
#define SLICE_NS 5000000L /* the coordinator checks stop() this often */

/* ------------------------------------------------------------------ helpers */

static inline uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void nap(long ns)
{
    struct timespec ts = {ns / 1000000000L, ns % 1000000000L};
    nanosleep(&ts, NULL);
}

static inline uint64_t splitmix64(uint64_t *state)
{
    uint64_t x = (*state += 0x9E3779B97F4A7C15ull);
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* A uniform integer in [0, bound). */
static inline uint64_t below(uint64_t *state, uint64_t bound)
{
#if defined(__SIZEOF_INT128__)
    return (uint64_t)(((unsigned __int128)splitmix64(state) * bound) >> 64);
#else
    return splitmix64(state) % bound;
#endif
}

/* The delay between two steps: a plain countdown, one iteration per cycle or so. */
static inline void spin(uint64_t d)
{
    while (d) {
        __asm__ __volatile__("" : "+r"(d));
        d--;
    }
}

static int pin_self(int cpu)
{
    if (cpu < 0)
        return 0;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

/* The page sizes a buffer may ask for. */
enum { PAGES_4K = 0, PAGES_THP = 1, PAGES_2M = 2, PAGES_1G = 3 };
static const char *const PAGE_NAMES[] = {"4k", "thp", "2m", "1g"};
#define N_PAGE_MODES 4

#ifndef MAP_HUGE_SHIFT
#define MAP_HUGE_SHIFT 26
#endif
#ifndef MPOL_BIND
#define MPOL_BIND 2
#endif
#define MAX_NODES 1024

/* An anonymous mapping: for 4 KiB and THP aligned to 2 MiB with THP refused or
 * asked for (madvise); for hugetlbfs pages mapped from the reserved pool. */
typedef struct {
    void *base;
    size_t length;
    char *data;
    size_t bytes;
} region_t;

static int region_map(region_t *r, size_t bytes, int pages)
{
    if (pages == PAGES_2M || pages == PAGES_1G) {
        size_t page = pages == PAGES_2M ? HUGE_PAGE : ((size_t)1 << 30);
        int shift = pages == PAGES_2M ? 21 : 30;
        size_t length = (bytes + page - 1) & ~(page - 1);
#ifdef MAP_HUGETLB
        void *base = mmap(NULL, length, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | (shift << MAP_HUGE_SHIFT), -1, 0);
        if (base == MAP_FAILED)
            return errno;
        r->base = base;
        r->length = length;
        r->data = (char *)base;
        r->bytes = bytes;
        return 0;
#else
        (void)length, (void)shift;
        return ENOTSUP;
#endif
    }
    size_t length = bytes + HUGE_PAGE;
    void *base = mmap(NULL, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED)
        return errno;
    uintptr_t aligned = ((uintptr_t)base + HUGE_PAGE - 1) & ~((uintptr_t)HUGE_PAGE - 1);
    size_t span = (bytes + HUGE_PAGE - 1) & ~((size_t)HUGE_PAGE - 1);
#if defined(MADV_HUGEPAGE) && defined(MADV_NOHUGEPAGE)
    madvise((void *)aligned, span, pages == PAGES_THP ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
#else
    (void)span;
#endif
    r->base = base;
    r->length = length;
    r->data = (char *)aligned;
    r->bytes = bytes;
    return 0;
}

/* Bind a region's pages to one NUMA node before they are touched; 0 or errno. */
static int region_bind(region_t *r, int node)
{
    if (node < 0)
        return 0;
    if (node >= MAX_NODES - 1)
        return EINVAL;
#ifdef SYS_mbind
    unsigned long mask[MAX_NODES / (8 * sizeof(unsigned long))];
    memset(mask, 0, sizeof(mask));
    mask[node / (8 * sizeof(unsigned long))] |= 1ul << (node % (8 * sizeof(unsigned long)));
    size_t span = (r->bytes + 4095) & ~(size_t)4095;
    if (syscall(SYS_mbind, r->data, span, MPOL_BIND, mask, (unsigned long)MAX_NODES, 0) != 0)
        return errno;
    return 0;
#else
    return ENOSYS;
#endif
}

static void region_unmap(region_t *r)
{
    if (r->base)
        munmap(r->base, r->length);
    memset(r, 0, sizeof(*r));
}

/* ------------------------------------------------------------- the chase */

/* Shuffle a[0..n) in place (Fisher-Yates). */
static void shuffle(uint32_t *a, size_t n, uint64_t *rng)
{
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)below(rng, i);
        uint32_t t = a[i - 1];
        a[i - 1] = a[j];
        a[j] = t;
    }
}

/* The visiting order of n elements cut into windows of w elements (the last
 * window may be shorter): the windows in random order, each window's elements
 * in a random order of their own, every element once. Returns 0, ENOMEM, or
 * EINTR when *stop was raised meanwhile. */
static int chase_order(uint32_t *order, size_t n, size_t w, uint64_t seed, atomic_int *stop)
{
    if (w == 0 || w > n)
        w = n;
    size_t windows = (n + w - 1) / w;
    uint32_t *win = malloc(windows * sizeof(uint32_t));
    if (!win)
        return ENOMEM;
    uint64_t rng = seed;
    for (size_t k = 0; k < windows; k++)
        win[k] = (uint32_t)k;
    shuffle(win, windows, &rng);
    size_t at = 0;
    for (size_t k = 0; k < windows; k++) {
        size_t first = (size_t)win[k] * w, count = first + w > n ? n - first : w;
        for (size_t i = 0; i < count; i++)
            order[at + i] = (uint32_t)(first + i);
        shuffle(order + at, count, &rng);
        at += count;
        if ((k & 0x3FF) == 0 && stop && atomic_load_explicit(stop, memory_order_relaxed)) {
            free(win);
            return EINTR;
        }
    }
    free(win);
    return 0;
}

/* Link n elements of `stride` bytes at `base` into one cycle that follows
 * chase_order(): element order[i] points to element order[i + 1], the last to
 * the first, so every element is visited once per cycle. The pointer sits at
 * byte `offset` of each element (0, or 8 for the second chase of a buffer).
 * *start is set to the element the cycle starts from. */
static int build_chase(char *base, size_t n, size_t stride, size_t offset, size_t w, uint64_t seed,
                       atomic_int *stop, void **start)
{
    uint32_t *order = malloc(n * sizeof(uint32_t));
    if (!order)
        return ENOMEM;
    int rc = chase_order(order, n, w, seed, stop);
    if (rc) {
        free(order);
        return rc;
    }
    for (size_t i = 0; i < n; i++) {
        size_t next = order[i + 1 == n ? 0 : i + 1];
        *(void **)(base + (size_t)order[i] * stride + offset) = base + next * stride + offset;
    }
    *start = base + (size_t)order[0] * stride + offset;
    free(order);
    return 0;
}

/* Walk 16 dependent loads. */
#define CHASE16(p)                                                                               \
    do {                                                                                         \
        p = *(void **)p; p = *(void **)p; p = *(void **)p; p = *(void **)p;                      \
        p = *(void **)p; p = *(void **)p; p = *(void **)p; p = *(void **)p;                      \
        p = *(void **)p; p = *(void **)p; p = *(void **)p; p = *(void **)p;                      \
        p = *(void **)p; p = *(void **)p; p = *(void **)p; p = *(void **)p;                      \
    } while (0)

/* ------------------------------------------------------------ the traffic */

enum { ST_NONE = 0, ST_REGULAR = 1, ST_NT = 2, ST_INPLACE = 3 };

typedef struct {
    const char *name;
    int rd0_lines; /* lines read per step from the first read buffer */
    int rd1_lines; /* lines read per step from the second read buffer */
    int store;     /* how the step's line is written */
} traffic_t;

/* MLC's read:write ratios at the memory controller. */
static const traffic_t TRAFFIC[] = {
    {"R", 1, 0, ST_NONE},      /* all reads */
    {"W2", 1, 0, ST_REGULAR},  /* 2:1, the store's read for ownership counts as a read */
    {"W3", 2, 0, ST_REGULAR},  /* 3:1 */
    {"W5", 1, 0, ST_INPLACE},  /* 1:1, read and write back the same line */
    {"W6", 0, 0, ST_NT},       /* 0:1, non-temporal writes only */
    {"W7", 2, 0, ST_NT},       /* 2:1 with a non-temporal write */
    {"W8", 1, 0, ST_NT},       /* 1:1 with a non-temporal write */
    {"W9", 3, 0, ST_NT},       /* 3:1 with a non-temporal write */
    {"W10", 1, 1, ST_NT},      /* 2:1 stream-triad-like: two read buffers, non-temporal write */
};
#define N_TRAFFIC ((int)(sizeof(TRAFFIC) / sizeof(TRAFFIC[0])))

static int traffic_index(const char *name)
{
    for (int i = 0; i < N_TRAFFIC; i++)
        if (strcmp(TRAFFIC[i].name, name) == 0)
            return i;
    return -1;
}

static int effective_store(int store)
{
    return (store == ST_NT && !HAVE_NT_STORES) ? ST_REGULAR : store;
}

static uint64_t traffic_read_bytes(const traffic_t *t)
{
    return (uint64_t)LINE * (t->rd0_lines + t->rd1_lines) + (effective_store(t->store) == ST_REGULAR ? LINE : 0);
}

static uint64_t traffic_write_bytes(const traffic_t *t)
{
    return t->store == ST_NONE ? 0 : LINE;
}

/* Steps before the fastest stream reaches the end of a buffer of `bytes`. */
static size_t steps_per_pass(const traffic_t *t, size_t bytes, size_t stride)
{
    size_t per_step = (size_t)(t->rd0_lines > 1 ? t->rd0_lines : 1) * stride;
    return bytes / per_step;
}

typedef struct {
    char *rd0, *rd1, *wr;
    size_t stride;
    size_t pass; /* steps in one pass */
} streams_t;

#if defined(__x86_64__) && !defined(XFERSCOPE_PORTABLE)
typedef __m128i acc_t;
static inline acc_t acc_zero(void) { return _mm_setzero_si128(); }
static inline uint64_t acc_sum(acc_t a)
{
    uint64_t w[2];
    _mm_storeu_si128((__m128i *)w, a);
    return w[0] + w[1];
}
static inline acc_t read_line(const char *p, acc_t acc)
{
    const __m128i *v = (const __m128i *)p;
    __m128i a = _mm_add_epi64(_mm_load_si128(v), _mm_load_si128(v + 1));
    __m128i b = _mm_add_epi64(_mm_load_si128(v + 2), _mm_load_si128(v + 3));
    return _mm_add_epi64(acc, _mm_add_epi64(a, b));
}
static inline void write_line(char *p, int nt)
{
    __m128i *v = (__m128i *)p;
    const __m128i x = _mm_set1_epi64x(1);
    if (nt) {
        _mm_stream_si128(v, x);
        _mm_stream_si128(v + 1, x);
        _mm_stream_si128(v + 2, x);
        _mm_stream_si128(v + 3, x);
    } else {
        _mm_store_si128(v, x);
        _mm_store_si128(v + 1, x);
        _mm_store_si128(v + 2, x);
        _mm_store_si128(v + 3, x);
    }
}
static inline acc_t update_line(char *p, acc_t acc)
{
    __m128i *v = (__m128i *)p;
    const __m128i one = _mm_set1_epi64x(1);
    for (int k = 0; k < 4; k++) {
        __m128i x = _mm_load_si128(v + k);
        acc = _mm_add_epi64(acc, x);
        _mm_store_si128(v + k, _mm_add_epi64(x, one));
    }
    return acc;
}
static inline void store_fence(void) { _mm_sfence(); }
#else
typedef uint64_t acc_t;
static inline acc_t acc_zero(void) { return 0; }
static inline uint64_t acc_sum(acc_t a) { return a; }
static inline acc_t read_line(const char *p, acc_t acc)
{
    const uint64_t *w = (const uint64_t *)p;
    return acc + (w[0] + w[1]) + (w[2] + w[3]) + (w[4] + w[5]) + (w[6] + w[7]);
}
static inline void write_line(char *p, int nt)
{
    (void)nt;
    uint64_t *w = (uint64_t *)p;
    for (int k = 0; k < 8; k++)
        w[k] = 1;
}
static inline acc_t update_line(char *p, acc_t acc)
{
    uint64_t *w = (uint64_t *)p;
    for (int k = 0; k < 8; k++) {
        acc += w[k];
        w[k] += 1;
    }
    return acc;
}
static inline void store_fence(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
#endif

/* Run `steps` steps of one traffic shape from step index *pos; inlined with
 * constant shapes so that each traffic type gets its own tight loop. */
static inline __attribute__((always_inline)) acc_t
stream_steps(const streams_t *s, size_t *pos, int nr0, int nr1, int store, uint64_t delay, uint64_t steps,
             acc_t acc)
{
    const size_t stride = s->stride;
    const size_t step0 = (size_t)(nr0 > 1 ? nr0 : 1) * stride;
    size_t i = *pos;
    for (uint64_t n = 0; n < steps; n++) {
        if (store == ST_INPLACE) {
            acc = update_line(s->rd0 + i * stride, acc);
        } else {
            const char *p0 = s->rd0 + i * step0;
            for (int k = 0; k < nr0; k++)
                acc = read_line(p0 + (size_t)k * stride, acc);
            for (int k = 0; k < nr1; k++)
                acc = read_line(s->rd1 + i * stride, acc);
            if (store == ST_REGULAR)
                write_line(s->wr + i * stride, 0);
            else if (store == ST_NT)
                write_line(s->wr + i * stride, 1);
        }
        spin(delay);
        if (++i == s->pass) {
            i = 0;
            if (store == ST_NT)
                store_fence();
        }
    }
    *pos = i;
    return acc;
}

static acc_t run_traffic(int traffic, const streams_t *s, size_t *pos, uint64_t delay, uint64_t steps, acc_t acc)
{
    switch (traffic) {
    case 0: return stream_steps(s, pos, 1, 0, ST_NONE, delay, steps, acc);
    case 1: return stream_steps(s, pos, 1, 0, ST_REGULAR, delay, steps, acc);
    case 2: return stream_steps(s, pos, 2, 0, ST_REGULAR, delay, steps, acc);
    case 3: return stream_steps(s, pos, 1, 0, ST_INPLACE, delay, steps, acc);
    case 4: return stream_steps(s, pos, 0, 0, ST_NT, delay, steps, acc);
    case 5: return stream_steps(s, pos, 2, 0, ST_NT, delay, steps, acc);
    case 6: return stream_steps(s, pos, 1, 0, ST_NT, delay, steps, acc);
    case 7: return stream_steps(s, pos, 3, 0, ST_NT, delay, steps, acc);
    case 8: return stream_steps(s, pos, 1, 1, ST_NT, delay, steps, acc);
    default: return acc;
    }
}

/* Steps between two looks at the control flags: about 10k cycles of work. */
static uint64_t chunk_steps(uint64_t delay)
{
    uint64_t c = 8192 / (delay + 32);
    return c < 1 ? 1 : (c > 256 ? 256 : c);
}

/* ------------------------------------------------------------ the session */

typedef struct {
    _Alignas(64) atomic_uint_fast64_t steps;
    char pad[64 - sizeof(atomic_uint_fast64_t)];
} counter_t;

struct session;

typedef struct {
    struct session *s;
    int cpu;
    int touch_cpu; /* the CPU that allocates and fills its buffers (-1: its own) */
    region_t rd0, rd1, wr;
    pthread_t thread;
    int started;
    counter_t *count; /* its own cache line */
    uint64_t sink;
} loader_t;

typedef struct session {
    PyObject_HEAD
    /* configuration */
    size_t chase_bytes, load_bytes, stride;
    int chase_cpu;
    int n_loaders;
    int *load_cpus;
    int needs_rd0, needs_rd1, needs_wr;
    int pages;            /* PAGES_* */
    size_t window;        /* chase locality in elements (0: the whole buffer) */
    int whole_chase;      /* also build the whole-buffer chase (second pointer of each element) */
    int chase_touch_cpu;  /* CPU that allocates and links the chase buffer (-1: the chaser's own) */
    int *load_touch_cpus; /* per loader: CPU that allocates and fills its buffers (-1: its own) */
    int mem_node;         /* NUMA node every buffer is bound to (-1: no binding) */
    uint64_t seed;
    /* threads and memory */
    region_t chase;
    void *chase_start[2]; /* the locality chase, the whole-buffer chase */
    pthread_t chase_thread;
    int chase_started;
    counter_t *counters; /* [0] the chaser, [1 + i] loader i: one cache line each */
    void *chase_sink;
    atomic_int chase_kind; /* which chase measure() asked for: 0 locality, 1 whole buffer */
    clockid_t chase_clock; /* the chaser's CPU-time clock: how long it really ran in a window */
    int has_chase_clock;
    atomic_int bind_errno; /* the first error of binding memory to mem_node, 0 when none */
    loader_t *loaders;
    /* control */
    atomic_int exit_flag, stop_flag, run_chase, run_loads;
    atomic_int traffic, ready, failed, fail_errno, fail_cpu;
    atomic_uint_fast64_t delay, generation;
    atomic_int busy;
    int state; /* 0 configured, 1 running, 2 closed */
    const char *fail_what;
} Session;

static void record_failure(Session *s, const char *what, int err, int cpu)
{
    int expected = 0;
    if (atomic_compare_exchange_strong(&s->failed, &expected, 1)) {
        s->fail_what = what;
        atomic_store(&s->fail_errno, err);
        atomic_store(&s->fail_cpu, cpu);
    }
}

static void touch(region_t *r)
{
    for (size_t off = 0; off < r->bytes; off += 4096)
        r->data[off] = 0;
}

static void fill_words(region_t *r, uint64_t value)
{
    uint64_t *w = (uint64_t *)r->data;
    for (size_t i = 0; i < r->bytes / 8; i++)
        w[i] = value;
}

/* Map a buffer for memory placed by this session's rules; 0 or errno. */
static int place_region(Session *s, region_t *r, size_t bytes)
{
    int rc = region_map(r, bytes, s->pages);
    if (rc)
        return rc;
    int bound = region_bind(r, s->mem_node);
    if (bound) {
        int expected = 0;
        atomic_compare_exchange_strong(&s->bind_errno, &expected, bound);
    }
    return 0;
}

static void *chaser_main(void *arg)
{
    Session *s = arg;
    int toucher = s->chase_touch_cpu >= 0 ? s->chase_touch_cpu : s->chase_cpu;
    int rc = pin_self(toucher);
    if (rc) {
        record_failure(s, "cannot pin the latency thread to CPU", rc, toucher);
        return NULL;
    }
    size_t n = s->chase_bytes / s->stride;
    rc = place_region(s, &s->chase, s->chase_bytes);
    if (!rc) {
        touch(&s->chase);
        rc = build_chase(s->chase.data, n, s->stride, 0, s->window, s->seed, &s->stop_flag, &s->chase_start[0]);
        s->chase_start[1] = s->chase_start[0];
        if (!rc && s->whole_chase)
            rc = build_chase(s->chase.data, n, s->stride, sizeof(void *), 0, s->seed ^ 0x9E3779B97F4A7C15ull,
                             &s->stop_flag, &s->chase_start[1]);
    }
    if (rc) {
        record_failure(s, rc == EINTR ? "stopped" : "cannot allocate the latency buffer", rc, toucher);
        return NULL;
    }
    if (toucher != s->chase_cpu && (rc = pin_self(s->chase_cpu))) {
        record_failure(s, "cannot pin the latency thread to CPU", rc, s->chase_cpu);
        return NULL;
    }
    atomic_fetch_add(&s->ready, 1);

    int kind = 0;
    void *p = s->chase_start[0];
    uint64_t steps = 0;
    while (!atomic_load_explicit(&s->exit_flag, memory_order_relaxed)) {
        if (!atomic_load_explicit(&s->run_chase, memory_order_relaxed)) {
            nap(NAP_NS);
            continue;
        }
        int want = atomic_load_explicit(&s->chase_kind, memory_order_relaxed);
        if (want != kind) {
            kind = want;
            p = s->chase_start[kind];
        }
        for (int k = 0; k < CHASE_BATCH / 16; k++)
            CHASE16(p);
        steps += CHASE_BATCH;
        atomic_store_explicit(&s->counters[0].steps, steps, memory_order_relaxed);
    }
    s->chase_sink = p;
    return NULL;
}

static void *loader_main(void *arg)
{
    loader_t *L = arg;
    Session *s = L->s;
    int toucher = L->touch_cpu >= 0 ? L->touch_cpu : L->cpu;
    int rc = pin_self(toucher);
    if (rc) {
        record_failure(s, "cannot pin a load thread to CPU", rc, toucher);
        return NULL;
    }
    if ((s->needs_rd0 && (rc = place_region(s, &L->rd0, s->load_bytes))) ||
        (s->needs_rd1 && (rc = place_region(s, &L->rd1, s->load_bytes))) ||
        (s->needs_wr && (rc = place_region(s, &L->wr, s->load_bytes)))) {
        record_failure(s, "cannot allocate a load buffer on CPU", rc, L->cpu);
        return NULL;
    }
    /* First touch by a pinned thread: the pages land on its node (or the bound one). */
    if (L->rd0.data) fill_words(&L->rd0, 1);
    if (L->rd1.data) fill_words(&L->rd1, 1);
    if (L->wr.data) fill_words(&L->wr, 0);
    if (toucher != L->cpu && (rc = pin_self(L->cpu))) {
        record_failure(s, "cannot pin a load thread to CPU", rc, L->cpu);
        return NULL;
    }
    atomic_fetch_add(&s->ready, 1);

    streams_t st = {L->rd0.data, L->rd1.data, L->wr.data, s->stride, 1};
    uint64_t seen = (uint64_t)-1, delay = 0, chunk = 1, steps = 0;
    int traffic = 0;
    size_t pos = 0;
    acc_t acc = acc_zero();
    while (!atomic_load_explicit(&s->exit_flag, memory_order_relaxed)) {
        if (!atomic_load_explicit(&s->run_loads, memory_order_relaxed)) {
            nap(NAP_NS);
            continue;
        }
        uint64_t gen = atomic_load_explicit(&s->generation, memory_order_acquire);
        if (gen != seen) {
            seen = gen;
            traffic = atomic_load_explicit(&s->traffic, memory_order_relaxed);
            delay = atomic_load_explicit(&s->delay, memory_order_relaxed);
            chunk = chunk_steps(delay);
            st.pass = steps_per_pass(&TRAFFIC[traffic], s->load_bytes, s->stride);
            pos = 0;
        }
        acc = run_traffic(traffic, &st, &pos, delay, chunk, acc);
        steps += chunk;
        atomic_store_explicit(&L->count->steps, steps, memory_order_relaxed);
    }
    if (TRAFFIC[traffic].store == ST_NT)
        store_fence();
    L->sink = acc_sum(acc);
    return NULL;
}

static void session_shutdown(Session *s)
{
    atomic_store(&s->exit_flag, 1);
    if (s->chase_started) {
        pthread_join(s->chase_thread, NULL);
        s->chase_started = 0;
    }
    for (int i = 0; s->loaders && i < s->n_loaders; i++) {
        loader_t *L = &s->loaders[i];
        if (L->started) {
            pthread_join(L->thread, NULL);
            L->started = 0;
        }
        region_unmap(&L->rd0);
        region_unmap(&L->rd1);
        region_unmap(&L->wr);
    }
    region_unmap(&s->chase);
    s->state = 2;
}

/* Check for Ctrl-C with the GIL held for a moment; returns -1 with the exception set. */
static int check_signals(void)
{
    PyGILState_STATE g = PyGILState_Ensure();
    int rc = PyErr_CheckSignals();
    PyGILState_Release(g);
    return rc;
}

static void Session_dealloc(Session *s)
{
    if (s->state != 2) {
        Py_BEGIN_ALLOW_THREADS
        session_shutdown(s);
        Py_END_ALLOW_THREADS
    }
    free(s->loaders);
    free(s->load_cpus);
    free(s->counters);
    Py_TYPE(s)->tp_free((PyObject *)s);
}

static int Session_init(Session *s, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"chase_bytes", "stride", "chase_cpu", "load_cpus", "load_bytes", "traffic", "seed",
                             "pages", "window", "whole_chase", "chase_touch_cpu", "load_touch_cpus", "mem_node",
                             NULL};
    Py_ssize_t chase_bytes = 0, stride = 64, load_bytes = 0, window = 0;
    int chase_cpu = -1, whole_chase = 0, chase_touch_cpu = -1, mem_node = -1;
    unsigned long long seed = 0x5eed;
    const char *pages_name = "thp";
    PyObject *cpus = NULL, *traffic = NULL, *touch = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "nniOnO|KsnpiOi", kwlist, &chase_bytes, &stride, &chase_cpu, &cpus,
                                     &load_bytes, &traffic, &seed, &pages_name, &window, &whole_chase,
                                     &chase_touch_cpu, &touch, &mem_node))
        return -1;
    int pages = -1;
    for (int i = 0; i < N_PAGE_MODES; i++)
        if (strcmp(pages_name, PAGE_NAMES[i]) == 0)
            pages = i;
    if (pages < 0) {
        PyErr_Format(PyExc_ValueError, "pages must be 4k, thp, 2m or 1g, not %s", pages_name);
        return -1;
    }
    if (window < 0 || (window > 0 && (window < stride || window % stride))) {
        PyErr_SetString(PyExc_ValueError, "window must be 0 (the whole buffer) or a multiple of stride");
        return -1;
    }
    if (mem_node < -1 || mem_node >= MAX_NODES - 1) {
        PyErr_SetString(PyExc_ValueError, "mem_node must be -1 (no binding) or a NUMA node number");
        return -1;
    }
    if (s->state != 0 || s->loaders) {
        PyErr_SetString(PyExc_RuntimeError, "a Session is configured once");
        return -1;
    }
    if (stride < LINE || stride % LINE) {
        PyErr_SetString(PyExc_ValueError, "stride must be a multiple of 64 bytes");
        return -1;
    }
    if (chase_bytes < 0 || (chase_bytes > 0 && chase_bytes < 2 * stride) ||
        (size_t)chase_bytes / (size_t)stride > UINT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "chase_bytes must be 0 or hold 2 to 2^32 elements");
        return -1;
    }
    PyObject *cpu_seq = PySequence_Fast(cpus, "load_cpus must be a sequence of CPU numbers");
    if (!cpu_seq)
        return -1;
    PyObject *traffic_seq = PySequence_Fast(traffic, "traffic must be a sequence of traffic names");
    if (!traffic_seq) {
        Py_DECREF(cpu_seq);
        return -1;
    }
    int ok = 0;
    PyObject *touch_seq = NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(cpu_seq);
    s->needs_rd0 = s->needs_rd1 = s->needs_wr = 0;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(traffic_seq); i++) {
        const char *name = PyUnicode_AsUTF8(PySequence_Fast_GET_ITEM(traffic_seq, i));
        int t = name ? traffic_index(name) : -1;
        if (t < 0) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_ValueError, "unknown traffic type %s", name);
            goto out;
        }
        s->needs_rd0 |= TRAFFIC[t].rd0_lines > 0 || TRAFFIC[t].store == ST_INPLACE;
        s->needs_rd1 |= TRAFFIC[t].rd1_lines > 0;
        s->needs_wr |= TRAFFIC[t].store == ST_REGULAR || TRAFFIC[t].store == ST_NT;
    }
    if (n > 0 && (load_bytes < 16 * stride || load_bytes % stride)) {
        PyErr_SetString(PyExc_ValueError, "load_bytes must be a multiple of stride, at least 16 strides");
        goto out;
    }
    s->load_cpus = calloc(n ? (size_t)n : 1, sizeof(int));
    s->loaders = calloc(n ? (size_t)n : 1, sizeof(loader_t));
    if (posix_memalign((void **)&s->counters, 64, (size_t)(n + 1) * sizeof(counter_t)))
        s->counters = NULL;
    if (!s->load_cpus || !s->loaders || !s->counters) {
        PyErr_NoMemory();
        goto out;
    }
    memset(s->counters, 0, (size_t)(n + 1) * sizeof(counter_t));
    if (touch != Py_None) {
        touch_seq = PySequence_Fast(touch, "load_touch_cpus must be None or one CPU per load CPU");
        if (!touch_seq)
            goto out;
        if (PySequence_Fast_GET_SIZE(touch_seq) != n) {
            PyErr_SetString(PyExc_ValueError, "load_touch_cpus must name one CPU per load CPU");
            goto out;
        }
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        long cpu = PyLong_AsLong(PySequence_Fast_GET_ITEM(cpu_seq, i));
        if (cpu == -1 && PyErr_Occurred())
            goto out;
        long toucher = -1;
        if (touch_seq) {
            toucher = PyLong_AsLong(PySequence_Fast_GET_ITEM(touch_seq, i));
            if (toucher == -1 && PyErr_Occurred())
                goto out;
        }
        s->load_cpus[i] = (int)cpu;
        s->loaders[i].s = s;
        s->loaders[i].cpu = (int)cpu;
        s->loaders[i].touch_cpu = (int)toucher;
        s->loaders[i].count = &s->counters[1 + i];
    }
    s->n_loaders = (int)n;
    s->chase_bytes = (size_t)chase_bytes - (size_t)chase_bytes % (size_t)stride;
    s->stride = (size_t)stride;
    s->load_bytes = (size_t)load_bytes;
    s->chase_cpu = chase_cpu;
    s->seed = seed;
    s->pages = pages;
    s->window = (size_t)window / (size_t)stride;
    s->whole_chase = whole_chase && s->window && s->window < s->chase_bytes / (size_t)stride;
    s->chase_touch_cpu = chase_touch_cpu;
    s->mem_node = mem_node;
    ok = 1;
out:
    Py_DECREF(cpu_seq);
    Py_DECREF(traffic_seq);
    Py_XDECREF(touch_seq);
    return ok ? 0 : -1;
}

static PyObject *Session_start(Session *s, PyObject *unused)
{
    if (s->state != 0) {
        PyErr_SetString(PyExc_RuntimeError, "the session was already started");
        return NULL;
    }
    s->state = 1;
    int expected = s->n_loaders + (s->chase_bytes ? 1 : 0);
    int interrupted = 0, rc = 0, failed = 0;
    Py_BEGIN_ALLOW_THREADS
    if (s->chase_bytes) {
        rc = pthread_create(&s->chase_thread, NULL, chaser_main, s);
        if (rc) record_failure(s, "cannot start the latency thread", rc, s->chase_cpu);
        else {
            s->chase_started = 1;
            s->has_chase_clock = pthread_getcpuclockid(s->chase_thread, &s->chase_clock) == 0;
        }
    }
    for (int i = 0; !rc && i < s->n_loaders; i++) {
        rc = pthread_create(&s->loaders[i].thread, NULL, loader_main, &s->loaders[i]);
        if (rc) record_failure(s, "cannot start a load thread on CPU", rc, s->loaders[i].cpu);
        else s->loaders[i].started = 1;
    }
    uint64_t last_check = now_ns();
    while (!rc && atomic_load(&s->ready) < expected && !atomic_load(&s->failed)) {
        if (atomic_load(&s->stop_flag))
            break;
        nap(SLICE_NS);
        if (now_ns() - last_check > 100000000ull) {
            last_check = now_ns();
            if (check_signals() < 0) {
                interrupted = 1;
                atomic_store(&s->stop_flag, 1);
                break;
            }
        }
    }
    failed = atomic_load(&s->failed) || rc || atomic_load(&s->ready) < expected;
    if (failed)
        session_shutdown(s);
    Py_END_ALLOW_THREADS
    if (interrupted)
        return NULL;
    if (failed) {
        if (atomic_load(&s->stop_flag) || (s->fail_what && strcmp(s->fail_what, "stopped") == 0)) {
            Py_RETURN_FALSE;
        }
        int err = atomic_load(&s->fail_errno);
        PyObject *exc = (err == ENOMEM) ? PyExc_MemoryError : PyExc_OSError;
        PyErr_Format(exc, "%s %d: %s", s->fail_what ? s->fail_what : "cannot start", atomic_load(&s->fail_cpu),
                     strerror(err));
        return NULL;
    }
    Py_RETURN_TRUE;
}

/* Sleep `ns` in slices, watching stop() and Ctrl-C. Returns 0, 1 when stopped, -1 on a signal. */
static int wait_for(Session *s, uint64_t ns, uint64_t *last_check)
{
    uint64_t end = now_ns() + ns;
    for (;;) {
        if (atomic_load(&s->stop_flag))
            return 1;
        uint64_t t = now_ns();
        if (t >= end)
            return 0;
        if (t - *last_check > 100000000ull) {
            *last_check = t;
            if (check_signals() < 0) {
                atomic_store(&s->stop_flag, 1);
                return -1;
            }
        }
        uint64_t left = end - t;
        nap((long)(left < (uint64_t)SLICE_NS ? left : (uint64_t)SLICE_NS));
    }
}

/* CPU time the chaser has run, in ns; 0 when its clock cannot be read. */
static uint64_t chase_cpu_ns(Session *s)
{
    struct timespec ts;
    if (!s->has_chase_clock || clock_gettime(s->chase_clock, &ts) != 0)
        return 0;
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t sum_load_steps(Session *s)
{
    uint64_t total = 0;
    for (int i = 0; i < s->n_loaders; i++)
        total += atomic_load_explicit(&s->loaders[i].count->steps, memory_order_relaxed);
    return total;
}

static PyObject *Session_measure(Session *s, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"traffic", "delay", "loads", "chase", "warmup", "window", "windows", "whole", NULL};
    const char *traffic_name = "R";
    unsigned long long delay = 0;
    int loads = 1, chase = 1, windows = 5, whole = 0;
    double warmup = 0.1, window = 0.1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "sKppddi|p", kwlist, &traffic_name, &delay, &loads, &chase, &warmup,
                                     &window, &windows, &whole))
        return NULL;
    int traffic = traffic_index(traffic_name);
    if (traffic < 0) {
        PyErr_Format(PyExc_ValueError, "unknown traffic type %s", traffic_name);
        return NULL;
    }
    if (s->state != 1) {
        PyErr_SetString(PyExc_RuntimeError, "the session is not running");
        return NULL;
    }
    const traffic_t *tr = &TRAFFIC[traffic];
    if (loads && s->n_loaders && ((!s->needs_rd0 && (tr->rd0_lines || tr->store == ST_INPLACE)) ||
                         (!s->needs_rd1 && tr->rd1_lines) ||
                         (!s->needs_wr && (tr->store == ST_REGULAR || tr->store == ST_NT)))) {
        PyErr_Format(PyExc_ValueError, "traffic %s was not named when the session was made", traffic_name);
        return NULL;
    }
    if (windows < 1 || windows > 100000 || window <= 0 || warmup < 0) {
        PyErr_SetString(PyExc_ValueError, "windows must be 1..100000, window > 0, warmup >= 0");
        return NULL;
    }
    if (loads && s->n_loaders == 0)
        loads = 0;
    if (chase && !s->chase_bytes)
        chase = 0;
    if (whole && !s->whole_chase && s->window) {
        PyErr_SetString(PyExc_ValueError, "this session has no whole-buffer chase (pass whole_chase=True)");
        return NULL;
    }
    int expected = 0;
    if (!atomic_compare_exchange_strong(&s->busy, &expected, 1)) {
        PyErr_SetString(PyExc_RuntimeError, "measure() is already running on this session");
        return NULL;
    }
    uint64_t *dt = calloc((size_t)windows, sizeof(uint64_t) * 4);
    if (!dt) {
        atomic_store(&s->busy, 0);
        return PyErr_NoMemory();
    }
    int done = 0, outcome = 0;
    Py_BEGIN_ALLOW_THREADS
    uint64_t last_check = now_ns();
    atomic_store(&s->traffic, traffic);
    atomic_store(&s->delay, (uint64_t)delay);
    atomic_store(&s->chase_kind, whole ? 1 : 0);
    atomic_fetch_add_explicit(&s->generation, 1, memory_order_release);
    atomic_store(&s->run_loads, loads);
    atomic_store(&s->run_chase, chase);
    outcome = wait_for(s, (uint64_t)(warmup * 1e9), &last_check);
    uint64_t t0 = now_ns(), c0 = atomic_load(&s->counters[0].steps), l0 = sum_load_steps(s);
    uint64_t r0 = chase_cpu_ns(s);
    for (; outcome == 0 && done < windows; done++) {
        outcome = wait_for(s, (uint64_t)(window * 1e9), &last_check);
        if (outcome)
            break;
        uint64_t t1 = now_ns(), c1 = atomic_load(&s->counters[0].steps), l1 = sum_load_steps(s);
        uint64_t r1 = chase_cpu_ns(s);
        dt[4 * done] = t1 - t0;
        dt[4 * done + 1] = c1 - c0;
        dt[4 * done + 2] = l1 - l0;
        dt[4 * done + 3] = (chase && r0 && r1) ? r1 - r0 : 0;
        t0 = t1, c0 = c1, l0 = l1, r0 = r1;
    }
    atomic_store(&s->run_loads, 0);
    atomic_store(&s->run_chase, 0);
    Py_END_ALLOW_THREADS
    atomic_store(&s->busy, 0);
    if (outcome < 0) {
        free(dt);
        return NULL;
    }
    PyObject *list = PyList_New(done);
    for (int i = 0; list && i < done; i++) {
        PyObject *row = Py_BuildValue("(KKKK)", (unsigned long long)dt[4 * i], (unsigned long long)dt[4 * i + 1],
                                      (unsigned long long)dt[4 * i + 2], (unsigned long long)dt[4 * i + 3]);
        if (!row) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, i, row);
    }
    free(dt);
    if (!list)
        return NULL;
    return Py_BuildValue("{s:N,s:O}", "windows", list, "cancelled", outcome ? Py_True : Py_False);
}

static PyObject *Session_stop(Session *s, PyObject *unused)
{
    atomic_store(&s->stop_flag, 1);
    Py_RETURN_NONE;
}

static PyObject *Session_close(Session *s, PyObject *unused)
{
    if (s->state == 1) {
        atomic_store(&s->stop_flag, 1);
        Py_BEGIN_ALLOW_THREADS
        session_shutdown(s);
        Py_END_ALLOW_THREADS
    }
    s->state = 2;
    Py_RETURN_NONE;
}

/* The mapped ranges (address, bytes) of every buffer, for the huge page coverage read from smaps. */
static PyObject *Session_regions(Session *s, PyObject *unused)
{
    PyObject *list = PyList_New(0);
    if (!list)
        return NULL;
    if (s->chase.data) {
        PyObject *t = Py_BuildValue("(Kn)", (unsigned long long)(uintptr_t)s->chase.data, (Py_ssize_t)s->chase.bytes);
        if (!t || PyList_Append(list, t) < 0) {
            Py_XDECREF(t);
            goto fail;
        }
        Py_DECREF(t);
    }
    for (int i = 0; s->loaders && i < s->n_loaders; i++) {
        const region_t *rs[3] = {&s->loaders[i].rd0, &s->loaders[i].rd1, &s->loaders[i].wr};
        for (int k = 0; k < 3; k++) {
            if (!rs[k]->data)
                continue;
            PyObject *t = Py_BuildValue("(Kn)", (unsigned long long)(uintptr_t)rs[k]->data, (Py_ssize_t)rs[k]->bytes);
            if (!t || PyList_Append(list, t) < 0) {
                Py_XDECREF(t);
                goto fail;
            }
            Py_DECREF(t);
        }
    }
    return list;
fail:
    Py_DECREF(list);
    return NULL;
}

/* What the session asked for and what it got: page mode, chase window, whether binding worked. */
static PyObject *Session_info(Session *s, PyObject *unused)
{
    return Py_BuildValue("{s:s,s:n,s:n,s:O,s:i,s:i}", "pages", PAGE_NAMES[s->pages], "window_bytes",
                         (Py_ssize_t)(s->window * s->stride), "chase_bytes", (Py_ssize_t)s->chase_bytes,
                         "whole_chase", s->whole_chase ? Py_True : Py_False, "mem_node", s->mem_node, "bind_errno",
                         atomic_load(&s->bind_errno));
}

static PyMethodDef Session_methods[] = {
    {"start", (PyCFunction)Session_start, METH_NOARGS,
     "start() -> bool: start the threads, pin them, allocate and touch their memory, build the chase.\n"
     "False when stop() was called meanwhile."},
    {"measure", (PyCFunction)(void (*)(void))Session_measure, METH_VARARGS | METH_KEYWORDS,
     "measure(traffic, delay, loads, chase, warmup, window, windows, whole=False) -> "
     "{'windows': [(ns, chase_steps, load_steps, chase_cpu_ns)], 'cancelled': bool}; whole: chase the whole-buffer\n"
     "cycle; chase_cpu_ns: how long the latency thread ran in the window (0 when not known)"},
    {"stop", (PyCFunction)Session_stop, METH_NOARGS, "stop(): make start()/measure() return within milliseconds"},
    {"close", (PyCFunction)Session_close, METH_NOARGS, "close(): stop and join the threads, free every buffer"},
    {"regions", (PyCFunction)Session_regions, METH_NOARGS, "regions() -> [(address, bytes)] of every buffer"},
    {"info", (PyCFunction)Session_info, METH_NOARGS,
     "info() -> {'pages', 'window_bytes', 'chase_bytes', 'whole_chase', 'mem_node', 'bind_errno'}"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject SessionType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "xferscope._memcore.Session",
    .tp_basicsize = sizeof(Session),
    .tp_dealloc = (destructor)Session_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Session(chase_bytes, stride, chase_cpu, load_cpus, load_bytes, traffic, seed=..., pages='thp',\n"
              "        window=0, whole_chase=False, chase_touch_cpu=-1, load_touch_cpus=None, mem_node=-1)\n"
              "One latency thread (chase_bytes > 0) and one load thread per CPU in load_cpus; traffic lists\n"
              "the traffic types measure() may ask for (it decides which buffers exist). pages: 4k, thp, 2m\n"
              "or 1g (hugetlbfs). window: chase locality in bytes (0: the whole buffer); whole_chase: also\n"
              "link a whole-buffer chase in the same buffer. *_touch_cpu(s): the CPU that allocates and\n"
              "touches a buffer (memory on its node); mem_node: bind every buffer to that NUMA node.",
    .tp_methods = Session_methods,
    .tp_init = (initproc)Session_init,
    .tp_new = PyType_GenericNew,
};

/* ------------------------------------------------------- module functions */

static PyObject *mod_traffic_info(PyObject *m, PyObject *arg)
{
    const char *name = PyUnicode_AsUTF8(arg);
    if (!name)
        return NULL;
    int t = traffic_index(name);
    if (t < 0) {
        PyErr_Format(PyExc_ValueError, "unknown traffic type %s", name);
        return NULL;
    }
    const traffic_t *tr = &TRAFFIC[t];
    int store = effective_store(tr->store);
    return Py_BuildValue("{s:K,s:K,s:i,s:i,s:s}", "read_bytes", (unsigned long long)traffic_read_bytes(tr),
                         "write_bytes", (unsigned long long)traffic_write_bytes(tr), "read_buffers",
                         (tr->rd0_lines > 0 || tr->store == ST_INPLACE) + (tr->rd1_lines > 0), "lines_read",
                         tr->rd0_lines + tr->rd1_lines, "store",
                         store == ST_NONE ? "none" : store == ST_REGULAR ? "regular" : store == ST_NT ? "nt" : "inplace");
}

static PyObject *mod_traffic_probe(PyObject *m, PyObject *args)
{
    const char *name;
    Py_ssize_t steps, stride = LINE;
    if (!PyArg_ParseTuple(args, "sn|n", &name, &steps, &stride))
        return NULL;
    int t = traffic_index(name);
    if (t < 0 || steps < 1 || steps > (1 << 20) || stride < LINE || stride % LINE) {
        PyErr_SetString(PyExc_ValueError, "probe needs a known traffic type, 1..2^20 steps, stride a multiple of 64");
        return NULL;
    }
    const traffic_t *tr = &TRAFFIC[t];
    size_t bytes = (size_t)steps * (size_t)(tr->rd0_lines > 1 ? tr->rd0_lines : 1) * (size_t)stride;
    region_t rd0 = {0}, rd1 = {0}, wr = {0};
    int rc = region_map(&rd0, bytes, 0);
    if (!rc) rc = region_map(&rd1, bytes, 0);
    if (!rc) rc = region_map(&wr, bytes, 0);
    if (rc) {
        region_unmap(&rd0), region_unmap(&rd1), region_unmap(&wr);
        errno = rc;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    fill_words(&rd0, 1);
    fill_words(&rd1, 1);
    fill_words(&wr, 0);
    streams_t st = {rd0.data, rd1.data, wr.data, (size_t)stride, steps_per_pass(tr, bytes, (size_t)stride)};
    size_t pos = 0;
    acc_t acc = run_traffic(t, &st, &pos, 0, (uint64_t)steps, acc_zero());
    store_fence();
    uint64_t words_read = acc_sum(acc);
    uint64_t lines_written = 0;
    for (size_t off = 0; off < bytes; off += LINE) {
        const uint64_t *a = (const uint64_t *)(rd0.data + off), *b = (const uint64_t *)(wr.data + off);
        int changed_a = 0, changed_b = 0;
        for (int k = 0; k < 8; k++) {
            changed_a |= a[k] != 1;
            changed_b |= b[k] != 0;
        }
        lines_written += changed_a + changed_b;
    }
    region_unmap(&rd0), region_unmap(&rd1), region_unmap(&wr);
    return Py_BuildValue("{s:K,s:K,s:O}", "bytes_loaded", (unsigned long long)(words_read * 8), "bytes_stored",
                         (unsigned long long)(lines_written * LINE), "nt_stores",
                         (effective_store(tr->store) == ST_NT) ? Py_True : Py_False);
}

static PyObject *mod_chase_successors(PyObject *m, PyObject *args)
{
    Py_ssize_t n, stride = LINE, window = 0, offset = 0;
    unsigned long long seed = 0x5eed;
    if (!PyArg_ParseTuple(args, "n|nKnn", &n, &stride, &seed, &window, &offset))
        return NULL;
    if (n < 2 || n > (1 << 22) || stride < 2 * (Py_ssize_t)sizeof(void *) || stride % (Py_ssize_t)sizeof(void *) ||
        window < 0 || (offset != 0 && offset != (Py_ssize_t)sizeof(void *))) {
        PyErr_SetString(PyExc_ValueError, "n must be 2..2^22, stride a multiple of the pointer size holding two, "
                                          "window >= 0 elements, offset 0 or one pointer");
        return NULL;
    }
    char *base = malloc((size_t)n * (size_t)stride);
    if (!base)
        return PyErr_NoMemory();
    void *start = NULL;
    int rc = build_chase(base, (size_t)n, (size_t)stride, (size_t)offset, (size_t)window, seed, NULL, &start);
    if (rc) {
        free(base);
        return PyErr_NoMemory();
    }
    PyObject *list = PyList_New(n);
    for (Py_ssize_t i = 0; list && i < n; i++) {
        char *target = *(char **)(base + (size_t)i * (size_t)stride + offset);
        PyObject *v = PyLong_FromSsize_t((target - offset - base) / stride);
        if (!v) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, i, v);
    }
    free(base);
    return list;
}

static PyObject *mod_calibrate_delay(PyObject *m, PyObject *args)
{
    unsigned long long iterations = 1u << 22;
    int repeats = 5;
    if (!PyArg_ParseTuple(args, "|Ki", &iterations, &repeats))
        return NULL;
    if (iterations < 1000 || repeats < 1) {
        PyErr_SetString(PyExc_ValueError, "calibrate_delay needs at least 1000 iterations and 1 repeat");
        return NULL;
    }
    double best = 0;
    Py_BEGIN_ALLOW_THREADS
    for (int r = 0; r < repeats; r++) {
        uint64_t t0 = now_ns();
        spin((uint64_t)iterations);
        double ns = (double)(now_ns() - t0) / (double)iterations;
        if (r == 0 || ns < best)
            best = ns;
    }
    Py_END_ALLOW_THREADS
    return PyFloat_FromDouble(best);
}

static PyObject *mod_traffic_names(PyObject *m, PyObject *unused)
{
    PyObject *t = PyTuple_New(N_TRAFFIC);
    for (int i = 0; t && i < N_TRAFFIC; i++)
        PyTuple_SET_ITEM(t, i, PyUnicode_FromString(TRAFFIC[i].name));
    return t;
}

static PyMethodDef module_methods[] = {
    {"traffic_info", mod_traffic_info, METH_O,
     "traffic_info(name) -> bytes read and written at the memory controller per step, and the step's shape"},
    {"traffic_probe", mod_traffic_probe, METH_VARARGS,
     "traffic_probe(name, steps, stride=64) -> bytes the kernel actually loaded and stored in `steps` steps"},
    {"chase_successors", mod_chase_successors, METH_VARARGS,
     "chase_successors(n, stride=64, seed=..., window=0, offset=0) -> next index of each element of a chase\n"
     "built like the real one (window: locality in elements, 0 = all of them; offset: the pointer's byte)"},
    {"calibrate_delay", mod_calibrate_delay, METH_VARARGS,
     "calibrate_delay(iterations=2**22, repeats=5) -> nanoseconds per iteration of the delay loop (best of repeats)"},
    {"traffic_names", mod_traffic_names, METH_NOARGS, "traffic_names() -> the traffic types this build knows"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef memcore_module = {
    PyModuleDef_HEAD_INIT, "_memcore", "Pointer chase and load kernels for memory latency/bandwidth sweeps.", -1,
    module_methods,
};

PyMODINIT_FUNC PyInit__memcore(void)
{
    if (PyType_Ready(&SessionType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&memcore_module);
    if (!m)
        return NULL;
    Py_INCREF(&SessionType);
    if (PyModule_AddObject(m, "Session", (PyObject *)&SessionType) < 0) {
        Py_DECREF(&SessionType);
        Py_DECREF(m);
        return NULL;
    }
    PyModule_AddIntConstant(m, "LINE_BYTES", LINE);
    PyModule_AddIntConstant(m, "CHASE_BATCH", CHASE_BATCH);
    PyModule_AddIntConstant(m, "PAGE_BYTES", (long)sysconf(_SC_PAGESIZE));
    PyModule_AddObject(m, "NT_STORES", PyBool_FromLong(HAVE_NT_STORES));
    return m;
}
