/* peak.c - the heap over time: the estimated in-use and allocated totals, their high-water mark (the
 * peak) with the in-use of every label set at that moment, and the timeline.
 *
 * Every change of an estimate (a sample, the free of a sampled block, a dropped sample's allocated
 * weight) comes here, in record.c, under the record shard lock of the block concerned, and takes
 * peak_lock (rank 5, the innermost lock): so the changes have one order, and the peak is a moment of
 * that order.  A snapshot holds every record shard lock, so everything here stands still while it reads.
 * peak_lock is a word of our own, not a mutex: what it guards is a few dozen instructions, always taken
 * inside a record shard lock and never by a thread that could interrupt itself there (the reentrancy guard
 * is up), and every sampled block already takes the sampled-block heap's one lock; a mutex cost 90
 * instructions more per sample and free (callgrind, bench/malloc_loop.c).  A waiter watches it, then
 * sleeps on it (mprof_peak_wait).  A fork cannot find it held: the fork handlers hold every record shard
 * lock.
 *
 * Which moment is the peak.  The in-use estimate moves by whole sample weights.  Where the program churns
 * at its peak (a cache turning over, temporaries on top of a plateau), its noise is drawn again and
 * again, and the highest value it reaches overshoots the truth, by more the longer the plateau: 1600
 * blocks of 64 KiB turning over at rate 64 KiB read +1.8% after one turnover, +4.2% after ten, +6.1%
 * after a hundred (bench/peak_sim.py); the noise's sd is sqrt(R B), so at the default rate and 100 MiB
 * that is +14% and more, and every label set's value at that moment shares the overshoot.  So the samples
 * are split into two independent halves (sampler.c: each mark of the sampling process goes to half A or
 * half B at random, so each half is the same estimator at twice the rate, independent of the other).
 * Half A's in-use estimate chooses the moment, where it is highest; half B's estimate at that moment is
 * the peak, in total and per label set.  B's noise has no part in the choice, so the choice does not bias
 * it: it estimates without bias what was in use at the moment A chose (the simulation: -0.2% .. +0.0%
 * over the same turnovers), with twice the variance of the full estimate.  Where the peak is a top
 * between a rise and a fall, A's highest point is at its last sample of the rise, on average 2R bytes of
 * allocation before the top: that much is missing (1% of 100 MiB at the default rate).  The full estimate
 * stays what in-use, allocated and the timeline show.
 *
 * The peak without copying.  The recorded peak has a generation, `gen`, which each new peak increments:
 * O(1), whatever the number of stacks.  Each label set keeps its half B in-use, peak counters and the
 * generation they belong to.  Before its half B in-use changes, a set whose generation is older saves it
 * into its peak counters and takes the current generation ("copy on write"): it has not changed since the
 * peak, so that is what it had then.  Reading a set's peak: its peak counters if their generation is the
 * current one, else its half B in-use now (unchanged since the peak).  So every new high of A is recorded
 * exactly, with no threshold, for two stores per set and change, and the sets' peaks add up to the peak.
 *
 * The timeline: points (time, in-use, allocated: the full estimates) in a fixed buffer of
 * MPROF_TIMELINE_POINTS: at each snapshot, at each new peak, and at each change that moves the in-use
 * estimate from the last point by a sixteenth of it and at least four sample periods (peak_inline.h: only
 * then is the clock read, 15 instructions under callgrind and 25 ns here; a move smaller than a few samples'
 * weight is within the estimate's noise and shows at the next point).  Points closer than `spacing_ns` to
 * the start of the last point's window update that point when they are higher (a point is the highest
 * state of its window, at its time); when the buffer is full, neighbouring points are merged pairwise,
 * the higher one kept, and the spacing doubles.  So the buffer covers the whole session with a resolution
 * that halves each time it fills.  The peak's moment is kept as a point of its own and always written.
 * The buffer is static (24 KiB of bss, touched only while a session runs): it needs no profiler memory
 * and cannot fail.
 */
#include "peak.h"
#include "internal.h"
#include "options.h"
#include "peak_inline.h"
#include "pmem.h"
#include "profiler.h"
#include "record.h"
#include "stacktab.h"

#include <linux/futex.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

bool mprof_lifetimes MPROF_LOAD_DATA;

mprof_peak_state_t mprof_peak = {.next_interval = UINT64_MAX, .next_gdump = UINT64_MAX};
mprof_point_t mprof_peak_points[MPROF_TIMELINE_POINTS];

/* peak_lock is held by another thread: watched for up to MPROF_WAIT_SPINS pauses and taken as soon as it
 * reads free; then marked contended (2) and slept on in the kernel until the holder's release wakes one.
 * It never yields: a sched_yield at every turn, while the holder is off its CPU, hands the CPU to another
 * thread of the program each time (mstress_like, 8 threads on 2 cores: 300 calls in one run of four), and
 * that lifts a threaded program's peak as a sleep does (lock.c).  The wait is Drepper's three-state futex
 * mutex: the fast path and the watch only ever take a free lock (compare-and-swap 0 -> 1), a sleeper
 * takes it as contended, so its release wakes the next one. */
void mprof_peak_wait(void)
{
  int *lock = &mprof_peak.lock;
  for (int i = 0; i < MPROF_WAIT_SPINS; i++) {
    int free_ = 0;
    if (__atomic_load_n(lock, __ATOMIC_RELAXED) == 0 &&
        __atomic_compare_exchange_n(lock, &free_, 1, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
      return;
    mprof_cpu_pause();
  }
  while (__atomic_exchange_n(lock, 2, __ATOMIC_ACQUIRE) != 0)
    syscall(SYS_futex, lock, FUTEX_WAIT_PRIVATE, 2, NULL, NULL, 0);
}

void mprof_peak_wake(void) { syscall(SYS_futex, &mprof_peak.lock, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0); }

/* ---------------------------------------------------------------------------------------------------
   The timeline
--------------------------------------------------------------------------------------------------- */

/* Halves the buffer: each pair of points becomes its higher one (the earlier of two equal). */
void mprof_peak_thin(void)
{
  mprof_peak_state_t *st = &mprof_peak;
  mprof_point_t *points = mprof_peak_points;
  size_t n = 0;
  for (size_t i = 0; i < st->n_points; i += 2) {
    const mprof_point_t *a = &points[i], *b = i + 1 < st->n_points ? &points[i + 1] : a;
    points[n++] = b->inuse_bytes > a->inuse_bytes ? *b : *a;
  }
  uint64_t span = points[n - 1].t_ns - points[0].t_ns, even = span / (MPROF_TIMELINE_POINTS / 2);
  st->spacing_ns = 2 * st->spacing_ns > even ? 2 * st->spacing_ns : even;
  if (st->spacing_ns == 0) st->spacing_ns = 1;
  st->n_points = n;
}

static void timeline_clear(uint64_t now)
{
  mprof_peak.n_points = 0;
  mprof_peak.spacing_ns = 0;
  mprof_peak_timeline_add(now);
}

/* A dropped sample's allocated weight, with nothing in use (samples and frees: peak_inline.h); the allocated
 * estimate shows at the timeline's next point. */
void mprof_peak_alloc_only(mprof_stack_t *e, uint64_t obj_fx, uint64_t bytes)
{
  mprof_peak_state_t *st = &mprof_peak;
  unsigned triggers = 0;
  mprof_peak_acquire();
  e->alloc_obj_fx += obj_fx;
  e->alloc_bytes += bytes;
  st->alloc_bytes += bytes;
  if (mprof_unlikely(st->alloc_bytes >= st->next_interval)) {
    st->next_interval = st->alloc_bytes + st->interval_bytes;
    triggers = MPROF_TRIGGER_INTERVAL;
  }
  mprof_peak_release();
  if (mprof_unlikely(triggers != 0)) mprof_profiler_trigger(triggers);
}

/* ---------------------------------------------------------------------------------------------------
   Sessions and readers (every record shard lock held: nothing above runs meanwhile)
--------------------------------------------------------------------------------------------------- */

/* CLOCK_REALTIME less CLOCK_MONOTONIC, read between two readings of the monotonic clock and taken against
 * their midpoint: its error is at most half the time between them, where a pair of readings is off by all
 * of it (8 us under qemu-user: a peak dated after what the program read once the peak had passed). */
static uint64_t realtime_offset(void)
{
  struct timespec ts;
  uint64_t before = mprof_mono_ns();
  clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t after = mprof_mono_ns();
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec - (before + (after - before) / 2);
}

void mprof_peak_begin(uint64_t now_ns)
{
  mprof_peak_state_t *st = &mprof_peak;
  st->realtime_offset = realtime_offset();
  st->gen = 1;                               /* fresh entries hold generation 0: older */
  st->inuse_bytes = st->alloc_bytes = st->half_a_bytes = st->best_a = 0;
  st->half_obj_fx = st->half_bytes = st->peak_obj_fx = st->peak_bytes = 0;
  st->peak_point = (mprof_point_t){.t_ns = now_ns};
  timeline_clear(now_ns);
}

void mprof_peak_end(void)
{
  mprof_peak_state_t *st = &mprof_peak;
  st->inuse_bytes = st->alloc_bytes = st->half_a_bytes = st->best_a = 0;
  st->half_obj_fx = st->half_bytes = st->peak_obj_fx = st->peak_bytes = 0;
  st->peak_point = (mprof_point_t){.t_ns = 0};   /* no session: no peak comment, no timeline */
  st->n_points = 0;
}

void mprof_peak_configure(uint64_t rate, uint64_t interval, uint64_t floor)
{
  mprof_peak_state_t *st = &mprof_peak;
  st->least_step = 4 * rate;
  st->interval_bytes = interval;
  st->gdump_floor = floor;
  st->next_interval = interval != 0 ? interval : UINT64_MAX;
  st->next_gdump = floor != 0 ? floor : UINT64_MAX;
}

/* mi_prof_reset: the allocated total starts over and so does the peak, from what is in use now (every
 * set's peak is then its half B in-use: the new generation is newer than all of theirs). */
void mprof_peak_reset(uint64_t now_ns)
{
  mprof_peak_state_t *st = &mprof_peak;
  st->gen++;
  st->best_a = st->half_a_bytes;
  st->peak_obj_fx = st->half_obj_fx;
  st->peak_bytes = st->half_bytes;
  if (st->interval_bytes != 0) st->next_interval -= st->alloc_bytes;   /* the interval goes on (see the */
  st->alloc_bytes = 0;                                                /* option): what is left of it */
  st->peak_point = (mprof_point_t){.t_ns = now_ns, .inuse_bytes = st->inuse_bytes};
  timeline_clear(now_ns);
}

void mprof_peak_totals(mprof_totals_t *t)
{
  const mprof_peak_state_t *st = &mprof_peak;
  t->peak_obj_fx = st->peak_obj_fx;
  t->peak_bytes = st->peak_bytes;
  t->peak_ns = st->peak_point.t_ns != 0 ? st->peak_point.t_ns + st->realtime_offset : 0;
}

void mprof_peak_of(const mprof_stack_t *e, uint64_t *obj_fx, uint64_t *bytes)
{
  bool saved = e->peak_gen == mprof_peak.gen;
  *obj_fx = saved ? e->peak_obj_fx : e->half_obj_fx;
  *bytes = saved ? e->peak_bytes : e->half_bytes;
}

/* The timeline into out (room for MPROF_TIMELINE_POINTS + 2), with the peak's moment and a last point for
 * now; its length.  The snapshot is a point of the timeline too. */
size_t mprof_peak_timeline(mprof_point_t *out, uint64_t *realtime_offset_ns)
{
  const mprof_peak_state_t *st = &mprof_peak;
  const mprof_point_t *peak = &st->peak_point;
  *realtime_offset_ns = st->realtime_offset;
  if (peak->t_ns == 0) return 0;             /* no session yet */
  uint64_t now = mprof_mono_ns();
  mprof_peak_timeline_add(now);
  size_t n = 0;
  bool peak_done = false;
  for (size_t i = 0; i < st->n_points; i++) {
    const mprof_point_t *p = &mprof_peak_points[i];
    if (!peak_done && peak->t_ns <= p->t_ns) {
      peak_done = true;
      if (peak->t_ns < p->t_ns) out[n++] = *peak;
    }
    out[n++] = *p;
  }
  if (!peak_done) out[n++] = *peak;
  if (out[n - 1].t_ns != now || out[n - 1].inuse_bytes != st->inuse_bytes)   /* the window's high is not */
    out[n++] = (mprof_point_t){.t_ns = now, .inuse_bytes = st->inuse_bytes, .alloc_bytes = st->alloc_bytes};
  return n;                                  /* the state now */
}

void mprof_peak_postfork_reinit(void) { mprof_peak.lock = 0; }
