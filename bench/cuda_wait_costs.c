/* The CPU a bounce worker's CUDA calls cost per block when they come a read apart (a sleep stands in for the read),
 * with 1, 4 and 8 threads at once: issuing a copy without waiting (bounce-async), and waiting for it by asking,
 * by cuEventSynchronize, by a sleep then asking, by cuStreamSynchronize (bounce); each with events made with and
 * without CU_EVENT_BLOCKING_SYNC, into 2 MiB huge pages pinned with cuMemHostRegister (and cuMemHostAlloc'd
 * memory for comparison), at 64 KiB and 1 MiB.
 *
 *     gcc -O2 -o /tmp/cuda_wait_costs bench/cuda_wait_costs.c -ldl -lpthread && /tmp/cuda_wait_costs
 *
 * It loads libcuda itself: no CUDA headers or toolkit needed. The figures are in bench/RESULTS.md. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

static int (*cuInit)(unsigned);
static int (*cuDeviceGet)(int *, int);
static int (*cuDevicePrimaryCtxRetain)(void **, int);
static int (*cuCtxSetCurrent)(void *);
static int (*cuStreamCreate)(void **, unsigned);
static int (*cuMemAlloc)(uint64_t *, size_t);
static int (*cuMemHostRegister)(void *, size_t, unsigned);
static int (*cuMemHostAlloc)(void **, size_t, unsigned);
static int (*cuMemcpyHtoDAsync)(uint64_t, const void *, size_t, void *);
static int (*cuEventCreate)(void **, unsigned);
static int (*cuEventRecord)(void *, void *);
static int (*cuEventQuery)(void *);
static int (*cuEventSynchronize)(void *);
static int (*cuStreamSynchronize)(void *);
static void *ctx;

static uint64_t now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000ull + t.tv_nsec;
}
static uint64_t cpu(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1000000000ull + t.tv_nsec;
}
static void nsleep(uint64_t ns)
{
    struct timespec ts = {0, (long)ns};
    nanosleep(&ts, NULL);
}

typedef struct {
    int mode;      // 0 async (no wait, 3 buffers), 1 serial spin-query, 2 serial blocking sync, 3 serial sleep-then-query, 4 serial stream sync
    int blocking;  // events with BLOCKING_SYNC
    int hostalloc; // pinned by cuMemHostAlloc instead of THP+register
    size_t size;
    uint64_t read_ns;
    int iters;
    double cpu_us, wall_us, extra_us;
} arg_t;

static void *worker(void *p)
{
    arg_t *a = p;
    prctl(PR_SET_TIMERSLACK, 1000);
    cuCtxSetCurrent(ctx);
    void *st, *ev[3];
    cuStreamCreate(&st, 1);
    for (int i = 0; i < 3; i++)
        cuEventCreate(&ev[i], 2 | (a->blocking ? 1 : 0));
    uint64_t d;
    cuMemAlloc(&d, 3 * a->size);
    char *b;
    if (a->hostalloc) {
        cuMemHostAlloc((void **)&b, 3 * a->size, 1);
    } else {
        char *raw = mmap(NULL, 3 * a->size + (4 << 20), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        b = (char *)(((uintptr_t)raw + (2 << 20) - 1) & ~((uintptr_t)(2 << 20) - 1));
        madvise(b, 3 * a->size, MADV_HUGEPAGE);
        memset(b, 1, 3 * a->size);
        cuMemHostRegister(b, 3 * a->size, 1);
    }
    uint64_t c0 = cpu(), t0 = now(), sleeping = 0, extra = 0;
    for (int i = 0; i < a->iters; i++) {
        uint64_t s = cpu();
        nsleep(a->read_ns); // the read
        sleeping += cpu() - s;
        int k = i % 3;
        if (a->mode == 0)
            cuEventQuery(ev[k]); // is the buffer free (landed long ago)
        uint64_t t1 = now();
        cuMemcpyHtoDAsync(d + k * a->size, b + k * a->size, a->size, st);
        if (a->mode != 4)
            cuEventRecord(ev[k], st);
        if (a->mode == 1)
            while (cuEventQuery(ev[k]) == 600)
                ;
        else if (a->mode == 2)
            cuEventSynchronize(ev[k]);
        else if (a->mode == 3) {
            nsleep(10000);
            while (cuEventQuery(ev[k]) == 600)
                ;
        } else if (a->mode == 4)
            cuStreamSynchronize(st);
        extra += now() - t1;
    }
    cuStreamSynchronize(st);
    a->cpu_us = (double)(cpu() - c0 - sleeping) / 1000.0 / a->iters;
    a->wall_us = (double)(now() - t0) / 1000.0 / a->iters;
    a->extra_us = (double)extra / 1000.0 / a->iters;
    return NULL;
}

#define L(name) *(void **)&name = dlsym(lib, #name)
#define L2(name, sym) *(void **)&name = dlsym(lib, sym)

int main(void)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW);
    L(cuInit); L(cuDeviceGet); L2(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"); L(cuCtxSetCurrent);
    L(cuStreamCreate); L2(cuMemAlloc, "cuMemAlloc_v2"); L2(cuMemHostRegister, "cuMemHostRegister_v2");
    L(cuMemHostAlloc); L2(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2"); L(cuEventCreate); L(cuEventRecord);
    L(cuEventQuery); L(cuEventSynchronize); L(cuStreamSynchronize);
    int dev;
    cuInit(0);
    cuDeviceGet(&dev, 0);
    cuDevicePrimaryCtxRetain(&ctx, dev);
    cuCtxSetCurrent(ctx);
    const char *modes[] = {"async (query, copy, record)", "serial spin-query", "serial blocking sync",
                           "serial sleep10us+query", "serial stream sync"};
    size_t sizes[] = {64 << 10, 1 << 20};
    uint64_t reads[] = {300000, 1800000};
    int threads[] = {1, 4, 8};
    for (int si = 0; si < 2; si++)
        for (int mode = 0; mode < 5; mode++)
            for (int blocking = 0; blocking < 2; blocking++) {
                for (int ti = 0; ti < 3; ti++) {
                    int T = threads[ti];
                    arg_t a[8];
                    pthread_t th[8];
                    for (int t = 0; t < T; t++) {
                        a[t] = (arg_t){mode, blocking, 0, sizes[si], reads[si], si ? 300 : 1500, 0, 0, 0};
                        pthread_create(&th[t], NULL, worker, &a[t]);
                    }
                    double c = 0, w = 0, e = 0;
                    for (int t = 0; t < T; t++) {
                        pthread_join(th[t], NULL);
                        c += a[t].cpu_us;
                        w += a[t].wall_us;
                        e += a[t].extra_us;
                    }
                    printf("%5zuK %-28s %-9s T=%d: CPU %.1f us/block beyond the read, copy+wait %.1f us\n",
                           sizes[si] >> 10, modes[mode], blocking ? "blocking" : "spin-ev", T, c / T, e / T);
                    fflush(stdout);
                }
            }
    // the same async pattern into cuMemHostAlloc memory, 8 threads
    for (int si = 0; si < 2; si++) {
        arg_t a[8];
        pthread_t th[8];
        for (int t = 0; t < 8; t++) {
            a[t] = (arg_t){0, 0, 1, sizes[si], reads[si], si ? 300 : 1500, 0, 0, 0};
            pthread_create(&th[t], NULL, worker, &a[t]);
        }
        double c = 0;
        for (int t = 0; t < 8; t++) {
            pthread_join(th[t], NULL);
            c += a[t].cpu_us;
        }
        printf("%5zuK async into cuMemHostAlloc T=8: CPU %.1f us/block\n", sizes[si] >> 10, c / 8);
    }
    return 0;
}
