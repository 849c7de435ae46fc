/* What the CUDA calls of a bounce worker cost, back to back, one thread (cuMemcpyHtoDAsync, cuEventRecord,
 * cuEventQuery; waiting by asking, by a blocking-sync event, by cuStreamSynchronize, by a sleep then asking), from
 * cuMemHostAlloc'd memory and from 2 MiB huge pages pinned with cuMemHostRegister; then O_DIRECT reads of 64K, 1M
 * and 16M into 4 KiB pages, huge pages, cuMemHostAlloc'd and registered huge pages, in rotated rounds.
 *
 *     gcc -O2 -o /tmp/cuda_copy_and_read_costs bench/cuda_copy_and_read_costs.c -ldl
 *     /tmp/cuda_copy_and_read_costs /var/tmp/probe.dat      (creates and removes a 1 GiB file there)
 *
 * It loads libcuda itself: no CUDA headers or toolkit needed. The figures are in bench/RESULTS.md. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

typedef int (*f0)(void);
static int (*cuInit)(unsigned);
static int (*cuDeviceGet)(int *, int);
static int (*cuDevicePrimaryCtxRetain)(void **, int);
static int (*cuCtxSetCurrent)(void *);
static int (*cuStreamCreate)(void **, unsigned);
static int (*cuMemAlloc)(uint64_t *, size_t);
static int (*cuMemHostAlloc)(void **, size_t, unsigned);
static int (*cuMemHostRegister)(void *, size_t, unsigned);
static int (*cuMemcpyHtoDAsync)(uint64_t, const void *, size_t, void *);
static int (*cuEventCreate)(void **, unsigned);
static int (*cuEventRecord)(void *, void *);
static int (*cuEventQuery)(void *);
static int (*cuEventSynchronize)(void *);
static int (*cuStreamSynchronize)(void *);

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
static int cmp(const void *a, const void *b)
{
    uint64_t x = *(uint64_t *)a, y = *(uint64_t *)b;
    return x < y ? -1 : x > y;
}
static double med(uint64_t *v, int n)
{
    qsort(v, n, sizeof *v, cmp);
    return v[n / 2] / 1000.0;
}
#define N 300
#define L(name) *(void **)&name = dlsym(lib, #name); if (!name) { fprintf(stderr, "no %s\n", #name); return 1; }
#define L2(name, sym) *(void **)&name = dlsym(lib, sym); if (!name) { fprintf(stderr, "no %s\n", sym); return 1; }

static void *thp(size_t n)
{
    char *raw = mmap(NULL, n + (2 << 20), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    char *b = (char *)(((uintptr_t)raw + (2 << 20) - 1) & ~((uintptr_t)(2 << 20) - 1));
    madvise(b, n, MADV_HUGEPAGE);
    memset(b, 1, n);
    return b;
}
static void *small(size_t n)
{
    char *b = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    madvise(b, n, MADV_NOHUGEPAGE);
    memset(b, 1, n);
    return b;
}

int main(int argc, char **argv)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (!lib) { fprintf(stderr, "no libcuda\n"); return 1; }
    L(cuInit) L(cuDeviceGet) L2(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain") L(cuCtxSetCurrent)
    L(cuStreamCreate) L2(cuMemAlloc, "cuMemAlloc_v2") L(cuMemHostAlloc) L2(cuMemHostRegister, "cuMemHostRegister_v2")
    L2(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2") L(cuEventCreate) L(cuEventRecord) L(cuEventQuery)
    L(cuEventSynchronize) L(cuStreamSynchronize)
    prctl(PR_SET_TIMERSLACK, 1000);
    int dev; void *ctx, *st, *ev, *evb; uint64_t d;
    cuInit(0); cuDeviceGet(&dev, 0); cuDevicePrimaryCtxRetain(&ctx, dev); cuCtxSetCurrent(ctx);
    cuStreamCreate(&st, 1); cuMemAlloc(&d, 16 << 20);
    cuEventCreate(&ev, 2); cuEventCreate(&evb, 3);
    void *pin; cuMemHostAlloc(&pin, 16 << 20, 1);
    void *reg = thp(16 << 20); int rr = cuMemHostRegister(reg, 16 << 20, 1);
    printf("register rc %d\n", rr);
    size_t sizes[] = {64 << 10, 1 << 20, 16 << 20};
    const char *bn[] = {"cuMemHostAlloc", "THP+register"};
    void *bufs[] = {pin, reg};
    uint64_t a[N], b[N], c[N], e[N], f[N], g[N], h[N], k[N], m[N];
    for (int bi = 0; bi < 2; bi++)
        for (int si = 0; si < 3; si++) {
            size_t n = sizes[si];
            for (int i = 0; i < N; i++) {
                // issue cost, record cost, spin-to-landed
                uint64_t t0 = now();
                cuMemcpyHtoDAsync(d, bufs[bi], n, st);
                uint64_t t1 = now();
                cuEventRecord(ev, st);
                uint64_t t2 = now();
                int q = 0;
                while (cuEventQuery(ev) == 600) q++;
                uint64_t t3 = now();
                uint64_t t4 = now(); cuEventQuery(ev); uint64_t t5 = now();
                a[i] = t1 - t0; b[i] = t2 - t1; c[i] = t3 - t0; e[i] = t5 - t4;
                // blocking event sync: latency and CPU
                uint64_t c0 = cpu(), s0 = now();
                cuMemcpyHtoDAsync(d, bufs[bi], n, st);
                cuEventRecord(evb, st);
                cuEventSynchronize(evb);
                uint64_t s1 = now(), c1 = cpu();
                f[i] = s1 - s0; g[i] = c1 - c0;
                // stream sync (default context: spin?)
                c0 = cpu(); s0 = now();
                cuMemcpyHtoDAsync(d, bufs[bi], n, st);
                cuStreamSynchronize(st);
                s1 = now(); c1 = cpu();
                h[i] = s1 - s0; k[i] = c1 - c0;
                // sleep then poll: sleep 80% of the spin latency measured
                c0 = cpu(); s0 = now();
                cuMemcpyHtoDAsync(d, bufs[bi], n, st);
                cuEventRecord(ev, st);
                uint64_t want = (c[i] * 8) / 10;
                struct timespec ts = {0, (long)want};
                if (want > 5000) nanosleep(&ts, NULL);
                while (cuEventQuery(ev) == 600);
                s1 = now(); c1 = cpu();
                m[i] = (s1 - s0) * 1000000 + (c1 - c0); // packed
            }
            uint64_t ml[N], mc[N];
            for (int i = 0; i < N; i++) { ml[i] = m[i] / 1000000; mc[i] = m[i] % 1000000; }
            printf("%-15s %6zuK: htod call %.1f us, record %.1f, query %.1f, issue->landed (spin) %.1f | "
                   "blocking event sync: %.1f us wall %.1f cpu | stream sync: %.1f wall %.1f cpu | sleep+poll %.1f wall %.1f cpu\n",
                   bn[bi], n >> 10, med(a, N), med(b, N), med(e, N), med(c, N), med(f, N), med(g, N), med(h, N), med(k, N),
                   med(ml, N), med(mc, N));
        }
    // O_DIRECT reads into each kind of buffer
    const char *file = argc > 1 ? argv[1] : "/var/tmp/probe.dat";
    size_t fsz = 1ull << 30;
    int fd = open(file, O_RDWR | O_CREAT, 0600);
    char *w = malloc(16 << 20);
    for (size_t i = 0; i < 16 << 20; i++) w[i] = (char)(i * 131 + 7);
    for (size_t o = 0; o < fsz; o += 16 << 20)
        if (pwrite(fd, w, 16 << 20, o) != 16 << 20) { perror("pwrite"); return 1; }
    fsync(fd); close(fd);
    fd = open(file, O_RDONLY | O_DIRECT);
    void *sm = small(16 << 20), *th = thp(16 << 20);
    const char *kn[] = {"4K pages", "THP", "cuMemHostAlloc", "THP+register"};
    void *kb[] = {sm, th, pin, reg};
    for (int si = 0; si < 3; si++)
        for (int round = 0; round < 3; round++)
            for (int j = 0; j < 4; j++) {
                int ki = (j + round) % 4;
                size_t n = sizes[si];
                uint64_t t0 = now(), c0 = cpu(), bytes = 0, off = 0;
                while (now() - t0 < 700000000ull) {
                    if (pread(fd, kb[ki], n, off) != (ssize_t)n) { perror("pread"); return 1; }
                    bytes += n; off = (off + n) % fsz;
                }
                uint64_t t1 = now(), c1 = cpu();
                printf("read %6zuK round %d %-15s %8.1f MiB/s  %.3f CPU-s/GiB\n", n >> 10, round, kn[ki],
                       bytes / 1048576.0 / ((t1 - t0) / 1e9), (c1 - c0) / 1e9 / (bytes / 1073741824.0));
            }
    unlink(file);
    return 0;
}
