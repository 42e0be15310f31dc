/* internal.h - what every file of the library shares: the configuration, the attributes and per-thread
 * state of inline.h, a request as the slow paths see it, the session, the fixed point of estimated object
 * counts, the lock order, the locks and the reentrancy guard.  Each concern's interface is in its own
 * header (sampler.h, sheap.h, record.h, ...), which includes this one.
 * Internal names that cross files are mprof_<concern>_<verb>; they are hidden (-fvisibility=hidden) and
 * never match the ^mi_prof_ export pattern. */
#ifndef MPROF_INTERNAL_H
#define MPROF_INTERNAL_H

#include "config.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <mimalloc.h>

#include "inline.h"

/* A request as the slow paths (slow.c), the sampler and sheap.c see it, from the C malloc family and from
 * mimalloc's API alike: */
typedef struct mprof_req_s mprof_req_t;
struct mprof_req_s {
  mi_heap_t *heap;                /* the heap asked for; NULL: the thread's default heap */
  size_t     size;                /* bytes */
  size_t     alignment, offset;   /* (p + offset) % alignment == 0; alignment 0: none asked */
  bool       zero;
  void *(*plain)(const mprof_req_t *r);                 /* serves it unsampled: the entry point's own
                                                         * semantics (errno, NULL) */
  void *(*plain_realloc)(void *p, const mprof_req_t *r); /* realloc entry points: p ordinary, unsampled */
};

#if MPROF_PPROF

#include <pthread.h>
#include <sys/types.h>
#include <time.h>

#include "mimalloc-prof.h"

/* Fixed point for estimated object counts: a sample of an s-byte allocation stands for 1/p objects,
 * kept in units of 1/MPROF_FX_ONE object so sums of many samples add and subtract exactly. */
#define MPROF_FX_ONE 1024

/* Locks, in the one global order every path and the atfork handlers take them (a lower rank is taken
 * first; no path takes a lower rank while holding a higher one):
 *  -1. glibc     dl_load_lock, dl_load_write_lock   the dynamic loader's, and the locks libunwind and
 *                libgcc take inside them.  dlopen and dlclose hold dl_load_lock while constructors and
 *                destructors run: any code, which may malloc (and be sampled), call mi_prof_*, or fork.
 *                dl_iterate_phdr holds dl_load_write_lock while its callback runs (unwinders'; a sampled
 *                malloc in one).  dlopen, dlsym, dladdr, dl_iterate_phdr, the unwinders' first calls
 *                (mprof_unwind_prime) and pthread_create take them.  So no profiler lock is ever held
 *                while calling any of these, and nothing waits for a thread that may be waiting for them:
 *                stacks are captured before any profiler lock (unwind.c); priming is never waited for and
 *                the fork handlers do not wait for unwinds; dumps copy the loaded objects before taking
 *                dump_lock and read names without the loader (objects.c).
 *   0. dump.c    dump_lock       one dump at a time, and exit waiting for one being written (a dump
 *                                then takes 1, 3 and 4 briefly); its holder never waits for a loader lock.
 *                                fork does not take it (a writer may wait on a pipe the forking thread
 *                                reads): the child re-initialises it (dump.c).
 *   1. api.c     api_lock        start, stop, reset, stats, observer changes
 *   2. sheap.c   sheap_lock      every operation on the slots of sampled blocks
 *   3. record.c  shard[i].lock   one shard of the record table, in index order when taking several
 *   4. stacktab.c shard[i].lock  one shard of the stack table, in index order when taking several
 *   5. peak.c    peak_lock       every change of the estimates (in-use, allocated, freed), the peak and the
 *                                timeline; taken only inside one record shard lock, nothing inside it
 * The profiler thread serving the control socket (control.c) holds none of these while it waits for a client
 * or talks to one: it takes dump_lock (through mi_prof_dump_fd) to write a profile into memory, and sends it
 * afterwards; start, stop, reset and stats take api_lock as the API does.
 * fork: glibc runs the atfork prepare handlers (api.c: 1..4 in order; unwinds are never waited for) before
 * it takes its own fork locks (stdio's list, malloc's); nothing of the profiler uses stdio streams.
 * Profiler memory (pmem.c) and the counters of dropped samples are lock-free atomics. */

/* The session every thread compares its own against on each slow path (sampler.c publishes it).  `word`
 * is (id << 1) | running; rate and seed are written before word (release) and stay fixed for the session. */
typedef struct mprof_session_s {
  uint64_t word;
  uint64_t rate;     /* sample rate, bytes */
  uint64_t seed;     /* 0 = fresh entropy per thread */
} mprof_session_t;

extern mprof_session_t mprof_session;

/* The reentrancy guard.  It is up while the profiler runs on this thread: a sample, the free or realloc
 * of a sampled block, an observer callback, an API call that takes profiler locks.  An allocation then
 * (by the profiler, a callback, or a signal handler that interrupted the profiler) is served unsampled;
 * a free of a sampled block then is deferred until the guard goes down, so no profiler lock is ever
 * taken twice by one thread; and the countdown is put back when the guard goes down, so what happens
 * inside never shifts the sampling of the program's own allocations.  The fast paths keep charging the
 * countdown meanwhile; only the slow paths know to serve those allocations unsampled. */
static inline size_t mprof_guard_enter(void)
{
  mprof_tls.guard++;
  return mprof_tls.countdown;
}

void mprof_guard_drain(mprof_tls_t *t);   /* frees what was deferred; guard still up (slow.c) */

/* The profiler's own mutexes (ranks 1..4; peak_lock is a futex word of peak.c's), counted per thread: a
 * fork from a signal handler that interrupted its thread while that thread held one must not take them
 * again (api.c's fork handlers).  One seen taken (glibc's lock word) is taken by mprof_lock_wait
 * (lock.c), which spins briefly before it sleeps. */
void mprof_lock_wait(pthread_mutex_t *m);

/* A waiter's watch of a lock word (lock.c, and peak.c's peak_lock): MPROF_WAIT_SPINS rounds of a pause,
 * 10-40 us on today's x86-64 cores (pause: 40-140 cycles), longer than any hold of a running holder. */
#define MPROF_WAIT_SPINS 1000

static inline void mprof_cpu_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ volatile("yield" ::: "memory");
#else
  __asm__ volatile("" ::: "memory");
#endif
}

static inline void mprof_lock(pthread_mutex_t *m)
{
  mprof_tls.locks++;
  if (mprof_unlikely(__atomic_load_n(&m->__data.__lock, __ATOMIC_RELAXED) != 0)) mprof_lock_wait(m);
  else pthread_mutex_lock(m);
}

static inline void mprof_unlock(pthread_mutex_t *m)
{
  pthread_mutex_unlock(m);
  mprof_tls.locks--;
}

static inline void mprof_guard_leave(size_t countdown)
{
  mprof_tls_t *t = &mprof_tls;
  t->countdown = countdown;
  if (t->guard == 1 && __atomic_load_n(&t->deferred, __ATOMIC_RELAXED) != NULL) mprof_guard_drain(t);
  t->guard--;
}

#endif /* MPROF_PPROF */

#endif /* MPROF_INTERNAL_H */
