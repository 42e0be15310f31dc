/* inline.h - the few helpers the malloc-family fast paths inline (see alloc.c).
 *
 * A fast path is one predicted branch and then mimalloc: it never locks, never uses a read-modify-write
 * atomic, never touches errno, never reads an option and never allocates.  With --disable-pprof the
 * helpers are constants and every entry point compiles to a tail call into mimalloc.
 */
#ifndef MPROF_INLINE_H
#define MPROF_INLINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define mprof_likely(x)   __builtin_expect(!!(x), 1)
#define mprof_unlikely(x) __builtin_expect(!!(x), 0)
#define MPROF_NOINLINE    __attribute__((noinline))
#define MPROF_COLD        __attribute__((cold))
#define MPROF_EXPORT      __attribute__((visibility("default")))

#if MPROF_PPROF

/* Per-thread sampling state, in initial-exec TLS so the fast path reaches it with one %fs-relative
 * access.  Only `countdown` is touched by the fast paths; the rest belongs to sampler.c.  Keep it small:
 * a library loaded with dlopen gets initial-exec TLS from glibc's small static-TLS surplus. */
typedef struct mprof_tls_s {
  size_t   countdown;      /* bytes left before this thread takes the slow path */
  size_t   remaining;      /* bytes of the current sampling interval not yet given to countdown */
  uint64_t session;        /* session number the interval was drawn in (0 = none yet) */
  uint64_t rng;            /* xorshift state of the interval generator */
  uint64_t rate;           /* sample rate in force when the interval was drawn, bytes */
  uint32_t ordinal;        /* thread ordinal, for seeded sessions (0 = not assigned yet) */
  uint32_t guard;          /* nonzero while the profiler itself runs on this thread */
  uint32_t tid;            /* cached gettid() (0 = not yet; reset in a fork child) */
} mprof_tls_t;             /* 56 bytes of static TLS */

extern __thread mprof_tls_t mprof_tls __attribute__((tls_model("initial-exec")));

/* Address range of the sampled-block arena.  Written once, before the first sampled block exists, and
 * never changed afterwards; {0, 0} until then, which no pointer falls into. */
typedef struct mprof_range_s {
  uintptr_t start;
  uintptr_t size;
} mprof_range_t;

extern mprof_range_t mprof_sheap_range;

/* True when an allocation of `size` bytes is not sampled: the thread's countdown covers it.  On false
 * the countdown has wrapped; the slow path recovers the old value as countdown + size. */
static inline bool mprof_skip(size_t size)
{
  return !__builtin_sub_overflow(mprof_tls.countdown, size, &mprof_tls.countdown);
}

/* True when p is a sampled block: it lies in the sampled-block arena.  No memory of p is read. */
static inline bool mprof_in_sheap(const void *p)
{
  return (uintptr_t)p - mprof_sheap_range.start < mprof_sheap_range.size;
}

#else /* !MPROF_PPROF: a thin wrapper; nothing is ever sampled. */

/* Only impossible requests (above PTRDIFF_MAX) leave the fast path, to get errno = ENOMEM. */
static inline bool mprof_skip(size_t size) { return size <= (size_t)PTRDIFF_MAX; }
static inline bool mprof_in_sheap(const void *p) { (void)p; return false; }

#endif

#endif /* MPROF_INLINE_H */
