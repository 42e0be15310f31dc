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
/* Cold: the slow paths and the set-up every process runs once.  GCC puts cold functions in .text.unlikely
 * and optimises them for size. */
#define MPROF_COLD        __attribute__((cold))
/* The code every process runs at load and at exit, profiling or not, where it sits in an object of the
 * profiler's (the constructors' set-up, the exit checks): lib/stopped.ld links it into the small
 * executable segment that holds all a stopped process runs (doc/design.md, "Pages a stopped process
 * maps"). */
#define MPROF_LOAD_TEXT   __attribute__((section(".text.mprof_load")))
/* What a session's start, stop and reset and the sampling path call in the objects that write profiles:
 * kept with the sampling code, out of the segment lib/stopped.ld gives to the code only writing a
 * profile or serving the control socket runs. */
#define MPROF_SESSION_TEXT __attribute__((section(".text.mprof_session")))
/* Variables every process writes at load: in .data, on the page the loader writes anyway, rather than
 * dirtying a page of .bss each (doc/design.md, "Pages a stopped process maps"). */
#define MPROF_LOAD_DATA   __attribute__((section(".data.mprof_load")))
#define MPROF_EXPORT      __attribute__((visibility("default")))
#define MPROF_HIDDEN      __attribute__((visibility("hidden")))

/* bench/run.sh's planted control only (configure CPPFLAGS=-DMPROF_BENCH_PLANT=n): n extra nops in each
 * fast-path test, a known slowdown the benchmark report must detect.  Never defined otherwise. */
#ifdef MPROF_BENCH_PLANT
#define MPROF_PLANT() __asm__ volatile(".rept %c0\n\tnop\n\t.endr" ::"i"(MPROF_BENCH_PLANT))
#else
#define MPROF_PLANT() ((void)0)
#endif

#if MPROF_PPROF

/* Per-thread sampling state, in initial-exec TLS so the fast path reaches it with one %fs-relative
 * access.  Only `countdown` is touched by the fast paths; the rest belongs to sampler.c.  Keep it small:
 * a library loaded with dlopen gets initial-exec TLS from glibc's small static-TLS surplus. */
typedef struct mprof_tls_s {
  size_t   countdown;      /* bytes this thread may allocate before its next sample point, capped */
  size_t   remaining;      /* bytes of the distance to the sample point not yet given to countdown */
  uint64_t session;        /* session word the distance was drawn in (0 = none yet) */
  uint64_t rng;            /* xorshift state of the interval generator and the weights' rounding */
  uint64_t rate;           /* sample rate in force when the distance was drawn, bytes */
  void    *deferred;       /* sampled blocks freed while the guard was up, to free when it goes down */
  uint32_t ordinal;        /* thread ordinal, for seeded sessions (0 = not assigned yet) */
  uint32_t guard;          /* nonzero while the profiler itself runs on this thread */
  uint32_t tid;            /* cached gettid() (0 = not yet; reset in a fork child) */
  uint32_t locks;          /* profiler locks this thread holds or waits for (internal.h) */
} mprof_tls_t;             /* 64 bytes of static TLS (x86-64) */

extern __thread mprof_tls_t mprof_tls MPROF_HIDDEN __attribute__((tls_model("initial-exec")));

/* Every sampled block starts on one of mimalloc's slices (sheap.c): 64 KiB on 64-bit platforms, 32 KiB on
 * 32-bit ones (mimalloc 2.0's MI_SEGMENT_SLICE_SIZE).  mimalloc puts no block of 1 KiB or less there,
 * and most larger ones elsewhere too, so "p may be a sampled block" is one test of p's low bits.  NULL
 * passes it as well; the slow paths tell them apart. */
#if UINTPTR_MAX > 0xffffffffu
#define MPROF_SLICE_SHIFT 16
#else
#define MPROF_SLICE_SHIFT 15
#endif
#define MPROF_SLICE ((size_t)1 << MPROF_SLICE_SHIFT)

/* True when an allocation of `size` bytes is not sampled: the thread's countdown covers it.  On false
 * the countdown has wrapped; the slow path recovers the old value as countdown + size.
 * On x86-64 the subtraction is done in place on the TLS word and its carry flag is the answer: two
 * instructions less than the load/sub/store gcc makes of __builtin_sub_overflow (callgrind: -2 per call,
 * the difference between 1.14 and 1.10 on bench/'s malloc loop). */
static inline bool mprof_skip(size_t size)
{
  MPROF_PLANT();
#if defined(__x86_64__) && defined(__GCC_ASM_FLAG_OUTPUTS__)
  bool fits;
  __asm__("subq %2, %0" : "+m"(mprof_tls.countdown), "=@ccae"(fits) : "r"(size) : "cc");
  return fits;
#else
  return !__builtin_sub_overflow(mprof_tls.countdown, size, &mprof_tls.countdown);
#endif
}

/* True when p may be a sampled block (it starts a slice, or is NULL); false means it certainly is not.
 * No memory is read. */
static inline bool mprof_maybe_sampled(const void *p)
{
  MPROF_PLANT();
  return ((uintptr_t)p & (MPROF_SLICE - 1)) == 0;
}

/* The same for a block that a realloc is given: NULL too is certainly not sampled, so realloc(NULL, n)
 * keeps the fast path (one more test, for pointers that start a slice only). */
static inline bool mprof_maybe_sampled_block(const void *p) { return mprof_maybe_sampled(p) && p != NULL; }

#else /* !MPROF_PPROF: a thin wrapper; nothing is ever sampled. */

/* Only impossible requests (above PTRDIFF_MAX) leave the fast path, to get errno = ENOMEM. */
static inline bool mprof_skip(size_t size) { return size <= (size_t)PTRDIFF_MAX; }
static inline bool mprof_maybe_sampled(const void *p) { (void)p; return false; }
static inline bool mprof_maybe_sampled_block(const void *p) { (void)p; return false; }

#endif

#endif /* MPROF_INLINE_H */
