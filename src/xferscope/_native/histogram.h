/* Log-linear latency histogram (HdrHistogram style), values in nanoseconds.
 *
 * Values below 128 get one bucket each; above, every power of two is split in
 * 64 buckets, so a bucket is at most 1/64 (1.6%) of its value wide. Values are
 * capped at 2^40 ns (18 minutes). The Python side (xferscope.stats) mirrors
 * hist_bucket_low() to turn buckets back into values.
 */
#ifndef XFERSCOPE_HISTOGRAM_H
#define XFERSCOPE_HISTOGRAM_H
#include <stdint.h>

#define HIST_SUB 64u
#define HIST_MAX_SHIFT 34u
#define HIST_NBUCKETS (2u * HIST_SUB + HIST_SUB * HIST_MAX_SHIFT)
#define HIST_MAX_VALUE ((uint64_t)1 << 40)

static inline unsigned hist_index(uint64_t v)
{
    if (v < 2 * HIST_SUB)
        return (unsigned)v;
    if (v >= HIST_MAX_VALUE)
        v = HIST_MAX_VALUE - 1;
    unsigned msb = 63u - (unsigned)__builtin_clzll(v);
    unsigned shift = msb - 6u;
    return HIST_SUB * shift + (unsigned)(v >> shift);
}

static inline uint64_t hist_bucket_low(unsigned idx)
{
    if (idx < 2 * HIST_SUB)
        return idx;
    unsigned shift = idx / HIST_SUB - 1u;
    return (uint64_t)(idx % HIST_SUB + HIST_SUB) << shift;
}
#endif
