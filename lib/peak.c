/* peak.c - the heap over time: the estimated in-use and allocated totals, their high-water mark (the
 * peak) with the in-use of every label set at that moment, and the timeline.
 *
 * Every change of an estimate (a sample, the free of a sampled block, a dropped sample's allocated
 * weight) comes here, in record.c, under the record shard lock of the block concerned, and takes
 * peak_lock (rank 5, the innermost lock): so the changes have one order, and the moment the in-use total
 * reaches a new high is a point in that order.  A snapshot holds every record shard lock, so everything
 * here stands still while it reads.  peak_lock is a spinlock: what it guards is a few dozen instructions,
 * always taken inside a record shard lock and never by a thread that could interrupt itself there (the
 * reentrancy guard is up), and every sampled block already takes the sampled-block heap's one lock; a
 * mutex cost 90 instructions more per sample and free (callgrind, bench/malloc_loop.c), a third of what
 * the peak, the timeline and the labels may cost there.  A fork cannot find it held: the fork handlers
 * hold every record shard lock.
 *
 * The peak without copying.  The recorded peak has a generation, `gen`, which each new peak increments:
 * O(1), whatever the number of stacks.  Each label set keeps peak counters and the generation they
 * belong to.  Before its in-use changes, a set whose generation is older saves its in-use into its peak
 * counters and takes the current generation ("copy on write"): it has not changed since the peak, so
 * that in-use is what it had then.  Reading a set's peak: its peak counters if their generation is the
 * current one, else its in-use now (unchanged since the peak).  So every new high is recorded exactly,
 * with no threshold, for two stores per set and change; the sum of the sets' peaks is the peak total.
 * The estimate of the peak is the maximum of an estimate that moves by whole sample weights: the
 * maximum of a noisy quantity, biased upwards where the program churns at its peak (doc/design.md has
 * the measured bias).
 *
 * The timeline: points (time, in-use, allocated) at each change and each snapshot, in a fixed buffer of
 * MPROF_TIMELINE_POINTS.  Changes closer than `spacing_ns` to the start of the last point's window update
 * that point when they are higher (a point is the highest state of its window, at its time); when the
 * buffer is full, neighbouring points are merged pairwise, the higher one kept, and the spacing doubles.
 * So the buffer covers the whole session with a resolution that halves each time it fills, and the peak,
 * the highest state of all, is never thinned away.  The buffer is static (24 KiB of bss, touched only
 * while a session runs): it needs no profiler memory and cannot fail.
 */
#include "internal.h"

#include <sched.h>
#include <string.h>

bool mprof_lifetimes;

static int peak_lock;                        /* 0: free; 1: held (a spinlock) */

/* peak_lock inside a record shard lock; or every record shard lock */
static uint64_t gen;                         /* generation of the recorded peak */
static uint64_t inuse_obj_fx, inuse_bytes;   /* estimated in-use totals now */
static uint64_t alloc_bytes;                 /* estimated allocated total since start or reset */
static uint64_t peak_obj_fx, peak_bytes;     /* in-use totals at the peak */
static uint64_t peak_mono;                   /* CLOCK_MONOTONIC then; 0 = no session yet */
static uint64_t realtime_offset;             /* CLOCK_REALTIME - CLOCK_MONOTONIC at the session's start */

/* The interval and peak triggers (MIMALLOC_PROF_INTERVAL, _GDUMP; profiler.c writes their profiles):
 * UINT64_MAX when off. */
static uint64_t interval_bytes, gdump_floor;
static uint64_t next_interval = UINT64_MAX, next_gdump = UINT64_MAX;

static mprof_point_t points[MPROF_TIMELINE_POINTS];
static size_t n_points;
static uint64_t spacing_ns;                  /* least distance between windows; 0 until the first thinning */
static uint64_t window_ns;                   /* start of the last point's window */

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ volatile("yield");
#endif
}

/* peak_lock is held by another thread: spins, then yields (its holder may have been preempted). */
static MPROF_NOINLINE MPROF_COLD void peak_wait(void)
{
  do {
    for (unsigned spins = 0; __atomic_load_n(&peak_lock, __ATOMIC_RELAXED) != 0; spins++) {
      if (spins < 64) cpu_relax();
      else sched_yield();
    }
  } while (__atomic_exchange_n(&peak_lock, 1, __ATOMIC_ACQUIRE) != 0);
}

static inline void peak_acquire(void)
{
  if (mprof_unlikely(__atomic_exchange_n(&peak_lock, 1, __ATOMIC_ACQUIRE) != 0)) peak_wait();
}

static inline void peak_release(void) { __atomic_store_n(&peak_lock, 0, __ATOMIC_RELEASE); }

/* ---------------------------------------------------------------------------------------------------
   The timeline
--------------------------------------------------------------------------------------------------- */

/* Halves the buffer: each pair of points becomes its higher one (the earlier of two equal). */
static MPROF_NOINLINE void thin(void)
{
  size_t n = 0;
  for (size_t i = 0; i < n_points; i += 2) {
    const mprof_point_t *a = &points[i], *b = i + 1 < n_points ? &points[i + 1] : a;
    points[n++] = b->inuse_bytes > a->inuse_bytes ? *b : *a;
  }
  uint64_t span = points[n - 1].t_ns - points[0].t_ns, even = span / (MPROF_TIMELINE_POINTS / 2);
  spacing_ns = 2 * spacing_ns > even ? 2 * spacing_ns : even;
  if (spacing_ns == 0) spacing_ns = 1;
  n_points = n;
}

/* The state now becomes a point: a new one when `now` is past the last window, else the last one if higher
 * (the window's highest state). */
static inline void timeline_add(uint64_t now)
{
  mprof_point_t p = {.t_ns = now, .inuse_bytes = inuse_bytes, .alloc_bytes = alloc_bytes};
  if (mprof_likely(now - window_ns >= spacing_ns || n_points == 0)) {
    if (mprof_unlikely(n_points == MPROF_TIMELINE_POINTS)) thin();
    points[n_points++] = p;
    window_ns = now;
  } else if (p.inuse_bytes > points[n_points - 1].inuse_bytes) {
    points[n_points - 1] = p;
  }
}

static void timeline_clear(uint64_t now)
{
  n_points = 0;
  spacing_ns = 0;
  timeline_add(now);
}

/* ---------------------------------------------------------------------------------------------------
   Changes
--------------------------------------------------------------------------------------------------- */

/* e's in-use at the recorded peak, saved before it changes (peak_lock). */
static inline void save_peak(mprof_stack_t *e)
{
  if (e->peak_gen == gen) return;
  e->peak_obj_fx = e->inuse_obj_fx;
  e->peak_bytes = e->inuse_bytes;
  e->peak_gen = gen;
}

void mprof_peak_sample(mprof_stack_t *e, uint64_t obj_fx, uint64_t bytes, uint64_t now_ns)
{
  peak_acquire();
  save_peak(e);
  e->inuse_obj_fx += obj_fx;
  e->inuse_bytes += bytes;
  e->alloc_obj_fx += obj_fx;
  e->alloc_bytes += bytes;
  inuse_obj_fx += obj_fx;
  inuse_bytes += bytes;
  alloc_bytes += bytes;
  unsigned triggers = 0;
  if (inuse_bytes > peak_bytes) {            /* a new high: this moment is the peak */
    gen++;
    peak_obj_fx = inuse_obj_fx;
    peak_bytes = inuse_bytes;
    peak_mono = now_ns;
    if (mprof_unlikely(inuse_bytes >= next_gdump)) {   /* the number of peak profiles grows with the */
      uint64_t step = inuse_bytes / 10;                /* logarithm of the peak */
      next_gdump = inuse_bytes + (step > gdump_floor ? step : gdump_floor);
      triggers |= MPROF_TRIGGER_PEAK;
    }
  }
  if (mprof_unlikely(alloc_bytes >= next_interval)) {
    next_interval = alloc_bytes + interval_bytes;
    triggers |= MPROF_TRIGGER_INTERVAL;
  }
  timeline_add(now_ns);
  peak_release();
  if (mprof_unlikely(triggers != 0)) mprof_profiler_trigger(triggers);
}

void mprof_peak_free(mprof_stack_t *e, uint64_t obj_fx, uint64_t bytes, uint64_t now_ns)
{
  peak_acquire();
  save_peak(e);
  e->inuse_obj_fx -= obj_fx;
  e->inuse_bytes -= bytes;
  inuse_obj_fx -= obj_fx;
  inuse_bytes -= bytes;
  timeline_add(now_ns);
  peak_release();
}

void mprof_peak_alloc_only(mprof_stack_t *e, uint64_t obj_fx, uint64_t bytes, uint64_t now_ns)
{
  peak_acquire();
  e->alloc_obj_fx += obj_fx;
  e->alloc_bytes += bytes;
  alloc_bytes += bytes;
  unsigned triggers = 0;
  if (mprof_unlikely(alloc_bytes >= next_interval)) {
    next_interval = alloc_bytes + interval_bytes;
    triggers = MPROF_TRIGGER_INTERVAL;
  }
  timeline_add(now_ns);
  peak_release();
  if (mprof_unlikely(triggers != 0)) mprof_profiler_trigger(triggers);
}

/* ---------------------------------------------------------------------------------------------------
   Sessions and readers (every record shard lock held: nothing above runs meanwhile)
--------------------------------------------------------------------------------------------------- */

static uint64_t realtime_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void mprof_peak_begin(uint64_t now_ns)
{
  realtime_offset = realtime_ns() - now_ns;
  gen = 1;                                   /* fresh entries hold generation 0: older */
  inuse_obj_fx = inuse_bytes = alloc_bytes = 0;
  peak_obj_fx = peak_bytes = 0;
  peak_mono = now_ns;
  timeline_clear(now_ns);
}

void mprof_peak_end(void) { inuse_obj_fx = inuse_bytes = 0; }

void mprof_peak_triggers(uint64_t interval, uint64_t floor)
{
  interval_bytes = interval;
  gdump_floor = floor;
  next_interval = interval != 0 ? interval : UINT64_MAX;
  next_gdump = floor != 0 ? floor : UINT64_MAX;
}

/* mi_prof_reset: the allocated total starts over and so does the peak, from what is in use now (every
 * set's peak is then its in-use: the new generation is newer than all of theirs). */
void mprof_peak_reset(uint64_t now_ns)
{
  gen++;
  peak_obj_fx = inuse_obj_fx;
  peak_bytes = inuse_bytes;
  peak_mono = now_ns;
  alloc_bytes = 0;
  if (interval_bytes != 0) next_interval = interval_bytes;
  timeline_clear(now_ns);
}

void mprof_peak_totals(mprof_totals_t *t)
{
  t->peak_obj_fx = peak_obj_fx;
  t->peak_bytes = peak_bytes;
  t->peak_ns = peak_mono != 0 ? peak_mono + realtime_offset : 0;
}

void mprof_peak_of(const mprof_stack_t *e, uint64_t *obj_fx, uint64_t *bytes)
{
  bool saved = e->peak_gen == gen;
  *obj_fx = saved ? e->peak_obj_fx : e->inuse_obj_fx;
  *bytes = saved ? e->peak_bytes : e->inuse_bytes;
}

/* The timeline into out (room for MPROF_TIMELINE_POINTS + 1), with a last point for now; its length.  The
 * snapshot is a point of the timeline too. */
size_t mprof_peak_timeline(mprof_point_t *out, uint64_t *realtime_offset_ns)
{
  *realtime_offset_ns = realtime_offset;
  if (peak_mono == 0) return 0;              /* no session yet */
  uint64_t now = mprof_mono_ns();
  timeline_add(now);
  memcpy(out, points, n_points * sizeof *out);
  size_t n = n_points;
  const mprof_point_t *last = &points[n - 1];
  if (last->t_ns != now || last->inuse_bytes != inuse_bytes)   /* the window's high is not the state now */
    out[n++] = (mprof_point_t){.t_ns = now, .inuse_bytes = inuse_bytes, .alloc_bytes = alloc_bytes};
  return n;
}

void mprof_peak_postfork_reinit(void) { peak_lock = 0; }
