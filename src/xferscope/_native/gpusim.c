/* xferscope._gpusim: host stand-ins for the CUDA driver and cuFile entry points that the I/O
 * core (_iocore) calls through addresses.
 *
 * The GPU modes of _iocore call cuMemcpyHtoDAsync, cuEventRecord, cuFileRead, ... through a
 * table of function addresses that the Python side passes in (gpu_functions). This module
 * provides functions with the same signatures that work on host memory, so that the native
 * loop's scheduling (and, with --verify, the data it moves) can be tested on a machine without
 * a GPU. It is a test seam, not a GPU: "device memory" is host memory, a copy is a memcpy.
 *
 * The device's clock: a copy is issued (cuMemcpy*Async), then lands; the memcpy happens when it
 * lands, so a host buffer reused before its copy landed shows up as wrong data on the "GPU".
 * Copies on a stream land in the order they were issued, each no earlier than `copy_ns` (plus
 * `copy_ns_per_mib`) after it was issued, and, by `landing`:
 *   LAND_EAGER (0)    then, as soon as anybody looks (cuEventQuery, a later call on the stream);
 *   LAND_LAZY (1)     only once a later copy was issued on its stream or somebody waits for it
 *                     (cuEventSynchronize, cuStreamSynchronize): the default. Copies take as long
 *                     as they possibly can, so a loop that waits for a copy it did not need shows
 *                     it, deterministically, whatever the machine's load;
 *   LAND_ON_WAIT (2)  only when somebody waits for it: a device slower than any storage.
 * Asking (cuEventQuery) never makes a lazy copy land. A wait spins, as CUDA's does by default
 * (cuStreamSynchronize, and cuEventSynchronize on an event made without blocking sync), or sleeps
 * (an event made with event(blocking=True)): a loop that spins through its copies shows it in its
 * threads' CPU time.
 *
 * cuFileRead/cuFileWrite: the handle is a file descriptor wrapped by file(); the call is a
 * pread/pwrite into or out of the "device" address. With gather=N, each call waits (up to
 * gather_timeout_s) until N calls are inside at once: sub-requests issued in parallel meet,
 * serial ones do not, and the log says which.
 *
 * Every copy and cuFile call is logged: log() returns
 *   ("htod"|"dtoh", stream_id, dst, src, bytes, issued_ns, landed_ns)
 *   ("cufile_read"|"cufile_write", handle_id, dev_address, file_offset, bytes, t0_ns, t1_ns, met)
 * with CLOCK_MONOTONIC times (time.monotonic_ns()).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#define NOT_READY 600 /* CUDA_ERROR_NOT_READY */

static inline uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* How CUDA waits by default (cuStreamSynchronize; cuEventSynchronize on an event without
 * CU_EVENT_BLOCKING_SYNC): the calling thread spins until the work is done. */
static void spin_until(uint64_t t)
{
    while (now_ns() < t)
        ;
}

static void sleep_until(uint64_t t)
{
    for (uint64_t now = now_ns(); now < t; now = now_ns()) {
        uint64_t d = t - now;
        struct timespec ts = {(time_t)(d / 1000000000ull), (long)(d % 1000000000ull)};
        nanosleep(&ts, NULL);
    }
}

/* ------------------------------------------------------------------ configuration and log */

static struct {
    uint64_t copy_ns, copy_ns_per_mib, cufile_ns;
    int landing;
    int gather;
    uint64_t gather_timeout_ns;
} cfg = {0, 0, 0, 1, 0, 5000000000ull};

enum { LAND_EAGER = 0, LAND_LAZY = 1, LAND_ON_WAIT = 2 };

enum { LOG_HTOD, LOG_DTOH, LOG_CUFILE_READ, LOG_CUFILE_WRITE };

typedef struct {
    int kind, id, met;
    uint64_t a, b, n, t0, t1;
} log_rec_t;

static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static log_rec_t *log_recs;
static size_t log_n, log_cap;

static void log_add(int kind, int id, uint64_t a, uint64_t b, uint64_t n, uint64_t t0, uint64_t t1, int met)
{
    pthread_mutex_lock(&log_mu);
    if (log_n == log_cap) {
        size_t cap = log_cap ? log_cap * 2 : 1024;
        log_rec_t *r = realloc(log_recs, cap * sizeof *r);
        if (!r) {
            pthread_mutex_unlock(&log_mu);
            return;
        }
        log_recs = r;
        log_cap = cap;
    }
    log_recs[log_n++] = (log_rec_t){kind, id, met, a, b, n, t0, t1};
    pthread_mutex_unlock(&log_mu);
}

/* ------------------------------------------------------------------ streams and events */

typedef struct {
    int kind; /* 0 copy to device, 1 copy to host, 2 marker (event) */
    void *dst;
    const void *src;
    size_t n;
    uint64_t issued, due, seq;
    int triggered; /* lazy mode: a later copy was issued on the stream, or someone waited */
} op_t;

typedef struct {
    int id;
    pthread_mutex_t mu;
    op_t *ops; /* in flight, oldest first */
    size_t nops, cap;
    uint64_t next_seq, landed_seq;
} stream_t;

typedef struct {
    stream_t *s;
    uint64_t seq; /* 0: never recorded */
    int blocking; /* CU_EVENT_BLOCKING_SYNC: a wait sleeps; else it spins, as CUDA's does */
} event_t;

typedef struct {
    int id, fd;
} file_t;

/* Every object handed out, freed by reset(). */
static pthread_mutex_t objs_mu = PTHREAD_MUTEX_INITIALIZER;
static void **objs;
static int *obj_kinds; /* 0 stream, 1 event, 2 file, 3 mapping */
static size_t *obj_sizes;
static size_t nobjs, objs_cap;
static int next_id = 1;

static int keep(void *p, int kind, size_t size)
{
    pthread_mutex_lock(&objs_mu);
    if (nobjs == objs_cap) {
        size_t cap = objs_cap ? objs_cap * 2 : 64;
        void **o = realloc(objs, cap * sizeof *o);
        int *k = realloc(obj_kinds, cap * sizeof *k);
        size_t *z = realloc(obj_sizes, cap * sizeof *z);
        if (o)
            objs = o;
        if (k)
            obj_kinds = k;
        if (z)
            obj_sizes = z;
        if (!o || !k || !z) {
            pthread_mutex_unlock(&objs_mu);
            return -1;
        }
        objs_cap = cap;
    }
    objs[nobjs] = p;
    obj_kinds[nobjs] = kind;
    obj_sizes[nobjs] = size;
    nobjs++;
    int id = next_id++;
    pthread_mutex_unlock(&objs_mu);
    return id;
}

/* Land the oldest op of s (the caller holds s->mu and has waited for its due time). */
static void land_one(stream_t *s)
{
    op_t op = s->ops[0];
    memmove(s->ops, s->ops + 1, (s->nops - 1) * sizeof(op_t));
    s->nops--;
    uint64_t t = now_ns();
    if (op.kind == 0) {
        memcpy(op.dst, op.src, op.n);
        log_add(LOG_HTOD, s->id, (uint64_t)(uintptr_t)op.dst, (uint64_t)(uintptr_t)op.src, op.n, op.issued, t, 1);
    } else if (op.kind == 1) {
        memcpy(op.dst, op.src, op.n);
        log_add(LOG_DTOH, s->id, (uint64_t)(uintptr_t)op.dst, (uint64_t)(uintptr_t)op.src, op.n, op.issued, t, 1);
    }
    s->landed_seq = op.seq;
}

/* Land, in order, the ops that may land now (without waiting). */
static void land_ready(stream_t *s)
{
    uint64_t t = now_ns();
    while (s->nops && s->ops[0].due <= t &&
           (s->ops[0].kind == 2 || cfg.landing == LAND_EAGER || (cfg.landing == LAND_LAZY && s->ops[0].triggered)))
        land_one(s);
}

/* Land every op up to seq, waiting for their due times (a wait makes them land): asleep, or spinning. */
static void land_upto(stream_t *s, uint64_t seq, int sleep)
{
    while (s->nops && s->ops[0].seq <= seq) {
        if (sleep)
            sleep_until(s->ops[0].due);
        else
            spin_until(s->ops[0].due);
        land_one(s);
    }
}

static int issue(stream_t *s, int kind, void *dst, const void *src, size_t n)
{
    if (!s)
        return 1; /* CUDA_ERROR_INVALID_VALUE */
    pthread_mutex_lock(&s->mu);
    if (kind != 2) /* a later copy: the ones before it may land */
        for (size_t i = 0; i < s->nops; i++)
            s->ops[i].triggered = 1;
    land_ready(s);
    if (s->nops == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 16;
        op_t *o = realloc(s->ops, cap * sizeof *o);
        if (!o) {
            pthread_mutex_unlock(&s->mu);
            return 2; /* CUDA_ERROR_OUT_OF_MEMORY */
        }
        s->ops = o;
        s->cap = cap;
    }
    uint64_t t = now_ns();
    uint64_t dur = kind == 2 ? 0 : cfg.copy_ns + (uint64_t)((double)cfg.copy_ns_per_mib * (double)n / 1048576.0);
    uint64_t seq = ++s->next_seq;
    s->ops[s->nops++] = (op_t){kind, dst, src, n, t, t + dur, seq, 0};
    pthread_mutex_unlock(&s->mu);
    return 0;
}

static int sim_ctx_set_current(void *ctx)
{
    (void)ctx;
    return 0;
}

static int sim_htod(uint64_t dst, const void *src, size_t n, void *stream)
{
    return issue(stream, 0, (void *)(uintptr_t)dst, src, n);
}

static int sim_dtoh(void *dst, uint64_t src, size_t n, void *stream)
{
    return issue(stream, 1, dst, (const void *)(uintptr_t)src, n);
}

static int sim_stream_sync(void *stream)
{
    stream_t *s = stream;
    if (!s)
        return 1;
    pthread_mutex_lock(&s->mu);
    land_upto(s, UINT64_MAX, 0); /* the default scheduling of a context: spin */
    pthread_mutex_unlock(&s->mu);
    return 0;
}

static int sim_event_record(void *event, void *stream)
{
    event_t *e = event;
    stream_t *s = stream;
    if (!e || !s)
        return 1;
    int rc = issue(s, 2, NULL, NULL, 0);
    pthread_mutex_lock(&s->mu);
    e->s = s;
    e->seq = s->next_seq;
    pthread_mutex_unlock(&s->mu);
    return rc;
}

/* Has the event's copy landed (wait: make it land, waiting for its due time)? 0 when it has. */
static int event_land(void *event, int wait)
{
    event_t *e = event;
    if (!e)
        return 1;
    if (!e->s)
        return 0;
    pthread_mutex_lock(&e->s->mu);
    if (wait)
        land_upto(e->s, e->seq, e->blocking);
    else
        land_ready(e->s);
    int done = e->s->landed_seq >= e->seq;
    pthread_mutex_unlock(&e->s->mu);
    return done ? 0 : NOT_READY;
}

static int sim_event_sync(void *event)
{
    return event_land(event, 1);
}

static int sim_event_query(void *event)
{
    return event_land(event, 0);
}

/* ------------------------------------------------------------------ cuFile */

static pthread_mutex_t gather_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gather_cv = PTHREAD_COND_INITIALIZER;
static int gather_arrived;
static uint64_t gather_gen;

/* Wait until cfg.gather calls are here at once: 1 when they met, 0 after the timeout. */
static int gather(void)
{
    if (cfg.gather < 2)
        return 1;
    int met = 1;
    pthread_mutex_lock(&gather_mu);
    uint64_t gen = gather_gen;
    if (++gather_arrived >= cfg.gather) {
        gather_arrived = 0;
        gather_gen++;
        pthread_cond_broadcast(&gather_cv);
    } else {
        struct timespec deadline;
        clock_gettime(CLOCK_REALTIME, &deadline);
        uint64_t ns = (uint64_t)deadline.tv_nsec + cfg.gather_timeout_ns;
        deadline.tv_sec += (time_t)(ns / 1000000000ull);
        deadline.tv_nsec = (long)(ns % 1000000000ull);
        while (gather_gen == gen) {
            if (pthread_cond_timedwait(&gather_cv, &gather_mu, &deadline) == ETIMEDOUT) {
                if (gather_gen == gen) {
                    gather_arrived--;
                    met = 0;
                }
                break;
            }
        }
    }
    pthread_mutex_unlock(&gather_mu);
    return met;
}

static ssize_t cufile_rw(int write, void *handle, void *dev, size_t size, off_t file_off, off_t dev_off)
{
    file_t *f = handle;
    if (!f)
        return -5030; /* a cuFile error code: invalid handle */
    int met = gather();
    uint64_t t0 = now_ns();
    char *p = (char *)dev + dev_off;
    ssize_t n = write ? pwrite(f->fd, p, size, file_off) : pread(f->fd, p, size, file_off);
    if (cfg.cufile_ns)
        sleep_until(t0 + cfg.cufile_ns);
    log_add(write ? LOG_CUFILE_WRITE : LOG_CUFILE_READ, f->id, (uint64_t)(uintptr_t)p, (uint64_t)file_off, size, t0,
            now_ns(), met);
    return n < 0 ? -errno : n;
}

static ssize_t sim_cufile_read(void *handle, void *dev, size_t size, off_t file_off, off_t dev_off)
{
    return cufile_rw(0, handle, dev, size, file_off, dev_off);
}

static ssize_t sim_cufile_write(void *handle, void *dev, size_t size, off_t file_off, off_t dev_off)
{
    return cufile_rw(1, handle, dev, size, file_off, dev_off);
}

/* ------------------------------------------------------------------ Python functions */

static PyObject *py_configure(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"copy_ns", "copy_ns_per_mib", "landing", "cufile_ns", "gather", "gather_timeout_s",
                             NULL};
    unsigned long long copy_ns = 0, per_mib = 0, cufile_ns = 0;
    int landing = LAND_LAZY, g = 0;
    double timeout = 5.0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|KKiKid", kwlist, &copy_ns, &per_mib, &landing, &cufile_ns, &g,
                                     &timeout))
        return NULL;
    if (landing < LAND_EAGER || landing > LAND_ON_WAIT) {
        PyErr_SetString(PyExc_ValueError, "landing: 0 (eager), 1 (lazy) or 2 (on wait)");
        return NULL;
    }
    cfg.copy_ns = copy_ns;
    cfg.copy_ns_per_mib = per_mib;
    cfg.landing = landing;
    cfg.cufile_ns = cufile_ns;
    cfg.gather = g;
    cfg.gather_timeout_ns = (uint64_t)(timeout * 1e9);
    Py_RETURN_NONE;
}

static PyObject *py_stream(PyObject *self, PyObject *Py_UNUSED(ignored))
{
    stream_t *s = calloc(1, sizeof *s);
    if (!s)
        return PyErr_NoMemory();
    pthread_mutex_init(&s->mu, NULL);
    s->id = keep(s, 0, 0);
    return PyLong_FromVoidPtr(s);
}

static PyObject *py_event(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"blocking", NULL};
    int blocking = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|p", kwlist, &blocking))
        return NULL;
    event_t *e = calloc(1, sizeof *e);
    if (!e)
        return PyErr_NoMemory();
    e->blocking = blocking;
    keep(e, 1, 0);
    return PyLong_FromVoidPtr(e);
}

static PyObject *py_file(PyObject *self, PyObject *args)
{
    int fd;
    if (!PyArg_ParseTuple(args, "i", &fd))
        return NULL;
    file_t *f = calloc(1, sizeof *f);
    if (!f)
        return PyErr_NoMemory();
    f->fd = fd;
    f->id = keep(f, 2, 0);
    return PyLong_FromVoidPtr(f);
}

/* alloc(size) -> address of `size` zeroed, page-aligned bytes ("device" memory or pinned buffers). */
static PyObject *py_alloc(PyObject *self, PyObject *args)
{
    unsigned long long size;
    if (!PyArg_ParseTuple(args, "K", &size))
        return NULL;
    void *p = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return PyErr_SetFromErrno(PyExc_OSError);
    keep(p, 3, (size_t)size);
    return PyLong_FromVoidPtr(p);
}

static PyObject *py_functions(PyObject *self, PyObject *Py_UNUSED(ignored))
{
    return Py_BuildValue("{s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K}", "cuCtxSetCurrent",
                         (unsigned long long)(uintptr_t)sim_ctx_set_current, "cuMemcpyHtoDAsync",
                         (unsigned long long)(uintptr_t)sim_htod, "cuMemcpyDtoHAsync",
                         (unsigned long long)(uintptr_t)sim_dtoh, "cuStreamSynchronize",
                         (unsigned long long)(uintptr_t)sim_stream_sync, "cuEventRecord",
                         (unsigned long long)(uintptr_t)sim_event_record, "cuEventSynchronize",
                         (unsigned long long)(uintptr_t)sim_event_sync, "cuEventQuery",
                         (unsigned long long)(uintptr_t)sim_event_query, "cuFileRead",
                         (unsigned long long)(uintptr_t)sim_cufile_read, "cuFileWrite",
                         (unsigned long long)(uintptr_t)sim_cufile_write);
}

static PyObject *py_log(PyObject *self, PyObject *Py_UNUSED(ignored))
{
    static const char *names[] = {"htod", "dtoh", "cufile_read", "cufile_write"};
    pthread_mutex_lock(&log_mu);
    PyObject *out = PyList_New((Py_ssize_t)log_n);
    for (size_t i = 0; out && i < log_n; i++) {
        log_rec_t *r = &log_recs[i];
        PyObject *t = r->kind <= LOG_DTOH
                          ? Py_BuildValue("(siKKKKK)", names[r->kind], r->id, r->a, r->b, r->n, r->t0, r->t1)
                          : Py_BuildValue("(siKKKKKO)", names[r->kind], r->id, r->a, r->b, r->n, r->t0, r->t1,
                                          r->met ? Py_True : Py_False);
        if (!t) {
            Py_CLEAR(out);
            break;
        }
        PyList_SET_ITEM(out, (Py_ssize_t)i, t);
    }
    pthread_mutex_unlock(&log_mu);
    return out;
}

/* reset(): free every stream, event, file handle and allocation, clear the log, default settings. */
static PyObject *py_reset(PyObject *self, PyObject *Py_UNUSED(ignored))
{
    pthread_mutex_lock(&objs_mu);
    for (size_t i = 0; i < nobjs; i++) {
        if (obj_kinds[i] == 0) {
            stream_t *s = objs[i];
            pthread_mutex_destroy(&s->mu);
            free(s->ops);
            free(s);
        } else if (obj_kinds[i] == 3) {
            munmap(objs[i], obj_sizes[i]);
        } else {
            free(objs[i]);
        }
    }
    nobjs = 0;
    pthread_mutex_unlock(&objs_mu);
    pthread_mutex_lock(&log_mu);
    log_n = 0;
    pthread_mutex_unlock(&log_mu);
    pthread_mutex_lock(&gather_mu);
    gather_arrived = 0;
    pthread_mutex_unlock(&gather_mu);
    cfg.copy_ns = cfg.copy_ns_per_mib = cfg.cufile_ns = 0;
    cfg.landing = LAND_LAZY;
    cfg.gather = 0;
    cfg.gather_timeout_ns = 5000000000ull;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"configure", (PyCFunction)(void (*)(void))py_configure, METH_VARARGS | METH_KEYWORDS,
     "configure(copy_ns=0, copy_ns_per_mib=0, landing=LAND_LAZY, cufile_ns=0, gather=0, gather_timeout_s=5.0)"},
    {"stream", py_stream, METH_NOARGS, "A new stream (its address)."},
    {"event", (PyCFunction)(void (*)(void))py_event, METH_VARARGS | METH_KEYWORDS,
     "event(blocking=False) -> a new event (its address); a wait on it spins unless blocking."},
    {"file", py_file, METH_VARARGS, "file(fd) -> a cuFile handle stand-in for this descriptor."},
    {"alloc", py_alloc, METH_VARARGS, "alloc(size) -> address of zeroed, page-aligned memory."},
    {"functions", py_functions, METH_NOARGS, "Addresses of the stand-ins, keyed as _iocore.Job's gpu_functions."},
    {"log", py_log, METH_NOARGS, "Every copy and cuFile call so far."},
    {"reset", py_reset, METH_NOARGS, "Free everything, clear the log, default settings."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {PyModuleDef_HEAD_INIT, "_gpusim",
                                       "Host stand-ins for the CUDA and cuFile calls of the I/O core (a test seam).",
                                       -1, methods};

PyMODINIT_FUNC PyInit__gpusim(void)
{
    PyObject *m = PyModule_Create(&moduledef);
    if (!m)
        return NULL;
    PyModule_AddIntConstant(m, "LAND_EAGER", LAND_EAGER);
    PyModule_AddIntConstant(m, "LAND_LAZY", LAND_LAZY);
    PyModule_AddIntConstant(m, "LAND_ON_WAIT", LAND_ON_WAIT);
    return m;
}
