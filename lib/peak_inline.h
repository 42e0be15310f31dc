/* peak_inline.h - the changes of the estimates on the sample and free paths, inline in record.c (peak.c has
 * the rest and says how it works): the state they change and the two changes.  Only peak.c and record.c
 * include it.  Out of line, the two cost 30 instructions more per sample and free (their calls, saved
 * registers and arguments: callgrind, bench/malloc_loop.c), a third of the peak and timeline's cost.
 */
#ifndef MPROF_PEAK_INLINE_H
#define MPROF_PEAK_INLINE_H

#include "peak.h"
#include "pmem.h"
#include "profiler.h"
#include "record.h"
#include "stacktab.h"

/* Under peak_lock inside a record shard lock, or every record shard lock. */
typedef struct mprof_peak_state_s {
  int           lock;                        /* peak_lock: 0 free, 1 held, 2 held and waited for */
  uint64_t      gen;                         /* generation of the recorded peak */
  uint64_t      inuse_bytes, alloc_bytes;    /* the full estimates: in use, allocated since start or reset */
  uint64_t      half_a_bytes, best_a;        /* half A's in-use estimate, its highest since start or reset */
  uint64_t      half_obj_fx, half_bytes;     /* half B's in-use estimate */
  uint64_t      peak_obj_fx, peak_bytes;     /* half B's at the peak */
  mprof_point_t peak_point;                  /* the peak's moment and the full estimates then; t 0: none */
  uint64_t      realtime_offset;             /* CLOCK_REALTIME - CLOCK_MONOTONIC at the session's start */
  uint64_t      interval_bytes, gdump_floor; /* the interval and peak triggers (MIMALLOC_PROF_INTERVAL, */
  uint64_t      next_interval, next_gdump;   /*   _GDUMP; profiler.c writes their profiles): UINT64_MAX off */
  size_t        n_points;                    /* the timeline: mprof_peak_points[0 .. n_points) */
  uint64_t      spacing_ns;                  /* least distance between windows; 0 until the first thinning */
  uint64_t      window_ns;                   /* start of the last point's window */
  uint64_t      mark_bytes;                  /* the full in-use estimate when the clock was last read */
  uint64_t      least_step;                  /* four sample periods: the least move that reads the clock */
} mprof_peak_state_t;

extern mprof_peak_state_t mprof_peak MPROF_HIDDEN;
extern mprof_point_t mprof_peak_points[MPROF_TIMELINE_POINTS] MPROF_HIDDEN;   /* static: no budget, no fail */

void mprof_peak_wait(void) MPROF_NOINLINE MPROF_COLD;   /* peak_lock is held: waits for it */
void mprof_peak_wake(void) MPROF_NOINLINE MPROF_COLD;   /* peak_lock released with a waiter: wakes one */
void mprof_peak_thin(void) MPROF_NOINLINE;              /* the timeline is full: halves it */

static inline void mprof_peak_acquire(void)
{
  int free_ = 0;
  if (mprof_unlikely(!__atomic_compare_exchange_n(&mprof_peak.lock, &free_, 1, false, __ATOMIC_ACQUIRE,
                                                  __ATOMIC_RELAXED)))
    mprof_peak_wait();
}

static inline void mprof_peak_release(void)
{
  if (mprof_unlikely(__atomic_exchange_n(&mprof_peak.lock, 0, __ATOMIC_RELEASE) == 2)) mprof_peak_wake();
}

/* The state now becomes a point: a new one when `now` is past the last window, else the last one if higher
 * (the window's highest state). */
static inline void mprof_peak_timeline_add(uint64_t now)
{
  mprof_peak_state_t *st = &mprof_peak;
  mprof_point_t p = {.t_ns = now, .inuse_bytes = st->inuse_bytes, .alloc_bytes = st->alloc_bytes};
  st->mark_bytes = st->inuse_bytes;
  if (mprof_likely(now - st->window_ns >= st->spacing_ns || st->n_points == 0)) {
    if (mprof_unlikely(st->n_points == MPROF_TIMELINE_POINTS)) mprof_peak_thin();
    mprof_peak_points[st->n_points++] = p;
    st->window_ns = now;
  } else if (p.inuse_bytes > mprof_peak_points[st->n_points - 1].inuse_bytes) {
    mprof_peak_points[st->n_points - 1] = p;
  }
}

/* Whether the in-use estimate moved far enough from its last point for a new one: by a sixteenth of it, and
 * at least four sample periods (the clock is read only then: a change smaller than a few samples' weight
 * is within the estimate's noise, and shows at the next point). */
static inline bool mprof_peak_moved(const mprof_peak_state_t *st)
{
  uint64_t now = st->inuse_bytes, mark = st->mark_bytes, step = mark / 16;
  uint64_t moved = now > mark ? now - mark : mark - now;
  return moved >= (step > st->least_step ? step : st->least_step);
}

/* e's half B in-use at the recorded peak, saved before it changes. */
static inline void mprof_peak_save(mprof_stack_t *e)
{
  if (e->peak_gen == mprof_peak.gen) return;
  e->peak_obj_fx = e->half_obj_fx;
  e->peak_bytes = e->half_bytes;
  e->peak_gen = mprof_peak.gen;
}

/* r's objects in its half: its half bytes over its size, in fixed point (at most 2^42 bytes times 2^10). */
static inline uint64_t mprof_peak_half_objects(const mprof_record_t *r)
{
  return r->half_bytes * MPROF_FX_ONE / r->size;
}

/* The sample r in its label set e: in use and allocated, at r->alloc_ns (0: not read). */
static inline void mprof_peak_sample(mprof_stack_t *e, const mprof_record_t *r)
{
  mprof_peak_state_t *st = &mprof_peak;
  uint64_t obj_fx = r->obj_fx, bytes = r->inuse_bytes;
  unsigned triggers = 0;
  bool peak = false;
  mprof_peak_acquire();
  e->inuse_obj_fx += obj_fx;
  e->inuse_bytes += bytes;
  e->alloc_obj_fx += obj_fx;
  e->alloc_bytes += bytes;
  st->inuse_bytes += bytes;
  st->alloc_bytes += bytes;
  if (r->flags & MPROF_RECORD_HALF_B) {
    uint64_t h_obj = mprof_peak_half_objects(r);
    mprof_peak_save(e);
    e->half_obj_fx += h_obj;
    e->half_bytes += r->half_bytes;
    st->half_obj_fx += h_obj;
    st->half_bytes += r->half_bytes;
  }
  if (r->flags & MPROF_RECORD_HALF_A) {
    st->half_a_bytes += r->half_bytes;
    if (st->half_a_bytes > st->best_a) {     /* A's new high: this moment is the peak */
      st->best_a = st->half_a_bytes;
      st->gen++;
      st->peak_obj_fx = st->half_obj_fx;
      st->peak_bytes = st->half_bytes;
      peak = true;
    }
  }
  if (mprof_unlikely(st->inuse_bytes >= st->next_gdump)) {   /* the number of peak profiles grows with */
    uint64_t step = st->inuse_bytes / 10;                    /* the logarithm of the peak */
    st->next_gdump = st->inuse_bytes + (step > st->gdump_floor ? step : st->gdump_floor);
    triggers |= MPROF_TRIGGER_PEAK;
  }
  if (mprof_unlikely(st->alloc_bytes >= st->next_interval)) {
    st->next_interval = st->alloc_bytes + st->interval_bytes;
    triggers |= MPROF_TRIGGER_INTERVAL;
  }
  if (peak || mprof_peak_moved(st)) {
    uint64_t now = r->alloc_ns != 0 ? r->alloc_ns : mprof_mono_ns();
    if (peak) st->peak_point = (mprof_point_t){now, st->inuse_bytes, st->alloc_bytes};
    mprof_peak_timeline_add(now);
  }
  mprof_peak_release();
  if (mprof_unlikely(triggers != 0)) mprof_profiler_trigger(triggers);
}

/* The free at now_ns (0: not read) of the block of sample r, in its label set e. */
static inline void mprof_peak_free(mprof_stack_t *e, const mprof_record_t *r, uint64_t now_ns)
{
  mprof_peak_state_t *st = &mprof_peak;
  mprof_peak_acquire();
  e->inuse_obj_fx -= r->obj_fx;
  e->inuse_bytes -= r->inuse_bytes;
  st->inuse_bytes -= r->inuse_bytes;
  if (r->flags & MPROF_RECORD_HALF_B) {
    uint64_t h_obj = mprof_peak_half_objects(r);
    mprof_peak_save(e);
    e->half_obj_fx -= h_obj;
    e->half_bytes -= r->half_bytes;
    st->half_obj_fx -= h_obj;
    st->half_bytes -= r->half_bytes;
  }
  if (r->flags & MPROF_RECORD_HALF_A) st->half_a_bytes -= r->half_bytes;
  if (mprof_peak_moved(st)) mprof_peak_timeline_add(now_ns != 0 ? now_ns : mprof_mono_ns());
  mprof_peak_release();
}

#endif /* MPROF_PEAK_INLINE_H */
