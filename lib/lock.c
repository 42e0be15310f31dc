/* lock.c - the profiler's mutexes wait by spinning briefly before they sleep.
 *
 * Their holders keep them for 20-170 ns (sheap_lock in bench/mstress_like, 8 threads on 2 cores: 98% of
 * 11,800 holds per run under 512 cycles).  glibc's default mutex puts a thread that finds one taken to
 * sleep at once, and a thread that sleeps hands its CPU to another of the program's threads: a threaded
 * program whose threads each fill a heap then has more of them running at once, and its peak follows (two
 * sleeps a run lift mstress_like's peak under mimalloc by 0.6-1 MiB; doc/performance.md).  So a waiter
 * first watches the lock for up to MPROF_WAIT_SPINS rounds (10-40 us), and asks for it as soon as it
 * reads free; a holder that is not running (preempted, or in a page fault) outlasts that, and the waiter
 * then sleeps as before.  The watch is plain loads of glibc's lock word, so waiters do not take the
 * holder's cache line away; mprof_lock (internal.h) reads the word once and locks as before when it reads
 * free, so an uncontended lock costs one load more than pthread_mutex_lock. */
#include "internal.h"

#if MPROF_PPROF

/* Takes m, which was seen taken: as soon as its lock word reads free, or by sleeping after
 * MPROF_WAIT_SPINS pauses. */
void mprof_lock_wait(pthread_mutex_t *m)
{
  for (int i = 0; i < MPROF_WAIT_SPINS; i++) {
    if (__atomic_load_n(&m->__data.__lock, __ATOMIC_RELAXED) == 0 && pthread_mutex_trylock(m) == 0) return;
    mprof_cpu_pause();
  }
  pthread_mutex_lock(m);
}

#endif /* MPROF_PPROF */
