/* A minimal io_uring over the raw system calls, so the build needs no liburing. */
#ifndef XFERSCOPE_URING_H
#define XFERSCOPE_URING_H
#include <errno.h>
#include <linux/io_uring.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

typedef struct {
    int fd;
    unsigned *sq_head, *sq_tail, *sq_mask, *sq_array;
    unsigned *cq_head, *cq_tail, *cq_mask;
    struct io_uring_sqe *sqes;
    struct io_uring_cqe *cqes;
    void *sq_ptr, *cq_ptr;
    size_t sq_len, cq_len, sqes_len;
    unsigned sq_pending;
} uring_t;

#ifndef IORING_SETUP_COOP_TASKRUN
#define IORING_SETUP_COOP_TASKRUN (1U << 8)
#endif
#ifndef IORING_SETUP_SINGLE_ISSUER
#define IORING_SETUP_SINGLE_ISSUER (1U << 12)
#endif
#ifndef IORING_SETUP_DEFER_TASKRUN
#define IORING_SETUP_DEFER_TASKRUN (1U << 13)
#endif

/* Set up a ring owned by the calling thread. Completion work is run when that
 * thread asks for events (as fio does on kernels that allow it); older kernels
 * get a plain ring. */
static int uring_init(uring_t *r, unsigned entries)
{
    static const unsigned flag_sets[] = {
        IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN,
        IORING_SETUP_COOP_TASKRUN | IORING_SETUP_SINGLE_ISSUER,
        IORING_SETUP_COOP_TASKRUN,
        0,
    };
    struct io_uring_params p;
    int fd = -1;
    memset(r, 0, sizeof *r);
    r->fd = -1;
    for (unsigned i = 0; i < sizeof flag_sets / sizeof flag_sets[0]; i++) {
        memset(&p, 0, sizeof p);
        p.flags = flag_sets[i];
        fd = (int)syscall(__NR_io_uring_setup, entries, &p);
        if (fd >= 0 || errno != EINVAL)
            break;
    }
    if (fd < 0)
        return -errno;
    r->fd = fd;
    r->sq_len = p.sq_off.array + p.sq_entries * sizeof(unsigned);
    r->cq_len = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
    int single = (p.features & IORING_FEAT_SINGLE_MMAP) != 0;
    if (single && r->cq_len > r->sq_len)
        r->sq_len = r->cq_len;
    r->sq_ptr = mmap(0, r->sq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, IORING_OFF_SQ_RING);
    if (r->sq_ptr == MAP_FAILED)
        goto fail;
    if (single) {
        r->cq_ptr = r->sq_ptr;
        r->cq_len = 0;
    } else {
        r->cq_ptr = mmap(0, r->cq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, IORING_OFF_CQ_RING);
        if (r->cq_ptr == MAP_FAILED)
            goto fail;
    }
    r->sqes_len = p.sq_entries * sizeof(struct io_uring_sqe);
    r->sqes = mmap(0, r->sqes_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, IORING_OFF_SQES);
    if (r->sqes == MAP_FAILED)
        goto fail;
    char *sq = r->sq_ptr, *cq = r->cq_ptr;
    r->sq_head = (unsigned *)(sq + p.sq_off.head);
    r->sq_tail = (unsigned *)(sq + p.sq_off.tail);
    r->sq_mask = (unsigned *)(sq + p.sq_off.ring_mask);
    r->sq_array = (unsigned *)(sq + p.sq_off.array);
    r->cq_head = (unsigned *)(cq + p.cq_off.head);
    r->cq_tail = (unsigned *)(cq + p.cq_off.tail);
    r->cq_mask = (unsigned *)(cq + p.cq_off.ring_mask);
    r->cqes = (struct io_uring_cqe *)(cq + p.cq_off.cqes);
    return 0;
fail:;
    int err = -errno;
    close(fd);
    r->fd = -1;
    return err;
}

static void uring_exit(uring_t *r)
{
    if (r->fd < 0)
        return;
    if (r->sqes && r->sqes != MAP_FAILED)
        munmap(r->sqes, r->sqes_len);
    if (r->cq_ptr && r->cq_ptr != MAP_FAILED && r->cq_ptr != r->sq_ptr)
        munmap(r->cq_ptr, r->cq_len);
    if (r->sq_ptr && r->sq_ptr != MAP_FAILED)
        munmap(r->sq_ptr, r->sq_len);
    close(r->fd);
    r->fd = -1;
}

/* Queue one read or write; submitted by the next uring_enter(). */
static void uring_prep(uring_t *r, int write, int fd, void *buf, unsigned len, uint64_t off, uint64_t user)
{
    unsigned tail = *r->sq_tail;
    unsigned idx = tail & *r->sq_mask;
    struct io_uring_sqe *sqe = &r->sqes[idx];
    memset(sqe, 0, sizeof *sqe);
    sqe->opcode = write ? IORING_OP_WRITE : IORING_OP_READ;
    sqe->fd = fd;
    sqe->addr = (uint64_t)(uintptr_t)buf;
    sqe->len = len;
    sqe->off = off;
    sqe->user_data = user;
    r->sq_array[idx] = idx;
    __atomic_store_n(r->sq_tail, tail + 1, __ATOMIC_RELEASE);
    r->sq_pending++;
}

static int uring_enter(uring_t *r, unsigned min_complete)
{
    for (;;) {
        /* GETEVENTS also when only submitting: with deferred task work it is what posts the
         * completions that are already there, so they can be reaped without sleeping */
        int n = (int)syscall(__NR_io_uring_enter, r->fd, r->sq_pending, min_complete, IORING_ENTER_GETEVENTS,
                             NULL, 0);
        if (n >= 0) {
            r->sq_pending -= (unsigned)n < r->sq_pending ? (unsigned)n : r->sq_pending;
            return 0;
        }
        if (errno != EINTR && errno != EAGAIN && errno != EBUSY)
            return -errno;
    }
}

static inline int uring_ready(uring_t *r)
{
    return *r->cq_head != __atomic_load_n(r->cq_tail, __ATOMIC_ACQUIRE);
}

/* Take one completion if there is one: returns 1 and fills user/res, or 0. */
static int uring_peek(uring_t *r, uint64_t *user, int *res)
{
    unsigned head = *r->cq_head;
    if (head == __atomic_load_n(r->cq_tail, __ATOMIC_ACQUIRE))
        return 0;
    struct io_uring_cqe *cqe = &r->cqes[head & *r->cq_mask];
    *user = cqe->user_data;
    *res = cqe->res;
    __atomic_store_n(r->cq_head, head + 1, __ATOMIC_RELEASE);
    return 1;
}
#endif
