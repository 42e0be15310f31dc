/* snapshot.c - one consistent copy of every stack (or label set) and the totals, the peak and the
 * timeline, for mi_prof_visit() and dumps.
 *
 * With every record shard lock held (so no sample or free of a sampled block changes a counter) the
 * wanted stacks and the record totals are copied into profiler memory; the locks are then released and
 * the caller works on the copy.  So a visitor may do anything: allocate, free sampled blocks, even stop
 * the profiler; what it sees stays as it was when the snapshot was taken.  The copy is temporary profiler
 * memory, which the tables leave free for it (pmem.c): a visit or a dump at a time always gets it.
 */
#include "snapshot.h"
#include "api.h"
#include "internal.h"
#include "options.h"
#include "peak.h"
#include "pmem.h"
#include "record.h"
#include "sampler.h"
#include "stacktab.h"

#include <errno.h>
#include <string.h>

/* pmem.c keeps this much per entry of the stack table free for a dump's snapshot. */
_Static_assert(sizeof(mprof_snap_stack_t) + MPROF_THREAD_LABEL + sizeof(uint64_t) <= MPROF_DUMP_STACK_BYTES,
               "MPROF_DUMP_STACK_BYTES");

/* A snapshot has an entry per label set and lifetime bucket (dumps: pprof's samples) or per stack
 * (visits, the leak report: the sum of the stack's sets).  A stack's frames are copied once, when the
 * stack is met (before its sets: mprof_stacks_each's order), and its place in the copy is kept in the
 * stack's `snap` (every record shard lock is held: no other snapshot runs). */

static bool wanted(const mprof_snapshot_t *s, const mprof_snap_stack_t *out)
{
  if (out->lifetime != 0) return s->all && out->freed_objects != 0;
  return s->all || out->counts.inuse_objects != 0 || out->counts.peak_objects != 0;
}

static uint64_t fx_objects(uint64_t fx) { return (fx + MPROF_FX_ONE / 2) / MPROF_FX_ONE; }

typedef struct sizing_s {
  bool   sets;
  size_t stacks, frames;
} sizing_t;

/* A stack's entry in a snapshot per stack: one that has a label set (a stack whose set could not be
 * added counts nothing, and has no reserve of its own for it: stacktab.c). */
static bool stack_counted(const mprof_stack_t *e) { return e->kind == MPROF_ENTRY_STACK && e->link != 0; }

static void size_one(mprof_stack_t *e, mprof_stack_t *stack, void *arg)
{
  sizing_t *s = arg;
  if (stack == NULL || e == stack) s->frames += e->depth;    /* its own frames: a stack, or "dropped" */
  if (s->sets ? e->kind != MPROF_ENTRY_STACK : stack == NULL || stack_counted(e)) s->stacks++;
}

/* e's counts (a SET, or a "dropped" set) add into out's, in fixed point until whole_objects. */
static void accumulate(mprof_snap_stack_t *out, const mprof_stack_t *e)
{
  uint64_t peak_fx, peak_bytes;
  mprof_peak_of(e, &peak_fx, &peak_bytes);
  out->counts.alloc_objects += e->alloc_obj_fx;
  out->counts.alloc_bytes += e->alloc_bytes;
  out->counts.inuse_objects += e->inuse_obj_fx;
  out->counts.inuse_bytes += e->inuse_bytes;
  out->counts.peak_objects += peak_fx;
  out->counts.peak_bytes += peak_bytes;
}

static void whole_objects(mprof_snap_stack_t *out)
{
  out->counts.alloc_objects = fx_objects(out->counts.alloc_objects);
  out->counts.inuse_objects = fx_objects(out->counts.inuse_objects);
  out->counts.peak_objects = fx_objects(out->counts.peak_objects);
}

/* The frames of an entry's stack in the copy (copied now when it is the stack itself); NULL when there
 * was no room (entries interned between the sizing and the copy). */
static uintptr_t *frames_of(mprof_snapshot_t *s, mprof_stack_t *e, mprof_stack_t *stack)
{
  if (stack != NULL && e != stack) return stack->snap;
  if (s->frames_left < e->depth) return NULL;
  uintptr_t *frames = s->frame_next;
  memcpy(frames, e->frames, e->depth * sizeof(uintptr_t));
  s->frame_next += e->depth;
  s->frames_left -= e->depth;
  return frames;
}

/* Per stack: a snapshot entry for each stack and "dropped" set; the sets add into their stack's. */
static void copy_stack(mprof_stack_t *e, mprof_stack_t *stack, void *arg)
{
  mprof_snapshot_t *s = arg;
  if (e->kind == MPROF_ENTRY_FREED) return;
  if (stack != NULL && e != stack) {                          /* a set of a stack met before */
    if (stack->snap != NULL) accumulate(stack->snap, e);
    return;
  }
  if (stack != NULL) stack->snap = NULL;
  if (stack != NULL && !stack_counted(e)) return;
  uintptr_t *frames = s->n < s->cap ? frames_of(s, e, stack) : NULL;
  if (frames == NULL) return;
  mprof_snap_stack_t *out = &s->stack[s->n++];
  memset(out, 0, sizeof *out);
  out->depth = e->depth;
  out->frames = frames;
  if (stack == NULL) accumulate(out, e);                      /* a "dropped" set: counts of its own */
  else stack->snap = out;
}

/* Per label set and lifetime bucket: an entry each; a stack only copies its frames. */
static void copy_set(mprof_stack_t *e, mprof_stack_t *stack, void *arg)
{
  mprof_snapshot_t *s = arg;
  if (e == stack) {
    e->snap = frames_of(s, e, NULL);
    return;
  }
  uintptr_t *frames = s->n < s->cap ? frames_of(s, e, stack) : NULL;
  if (frames == NULL) return;
  mprof_snap_stack_t *out = &s->stack[s->n];
  memset(out, 0, sizeof *out);
  out->depth = e->depth;
  out->frames = frames;
  out->labels = e->labels;
  if (e->kind == MPROF_ENTRY_FREED) {
    out->lifetime = (uint64_t)e->lifetime + 1;
    out->freed_objects = fx_objects(e->alloc_obj_fx);
    out->freed_bytes = e->alloc_bytes;
  } else {
    accumulate(out, e);
    whole_objects(out);
  }
  if (wanted(s, out)) {
    s->n++;
  } else if (stack == NULL) {                                /* a "dropped" entry's own frame: given back */
    s->frame_next -= e->depth;
    s->frames_left += e->depth;
  }
}

bool mprof_snapshot_take(mprof_snapshot_t *s, bool all, bool sets)
{
  memset(s, 0, sizeof *s);
  if (mprof_unlikely(mprof_frozen)) {           /* the tables may be half-done: nothing to read */
    errno = ENOTRECOVERABLE;
    return false;
  }
  s->all = all;
  s->sets = sets;
  sizing_t size = {.sets = sets};
  size_t countdown = mprof_guard_enter();       /* a handler's free of a sampled block waits (internal.h) */
  mprof_record_lock_all();
  mprof_stacks_each(size_one, &size);
  size_t points = MPROF_TIMELINE_POINTS + 2;
  s->bytes = size.stacks * sizeof(mprof_snap_stack_t) + size.frames * sizeof(uintptr_t) +
             points * sizeof(mprof_point_t);
  s->mem = mprof_pmem_map_temp(s->bytes);
  if (s->mem != NULL) {
    s->timeline = s->mem;
    s->stack = (mprof_snap_stack_t *)(s->timeline + points);
    s->cap = size.stacks;
    s->frame_next = (uintptr_t *)(s->stack + size.stacks);
    s->frames_left = size.frames;
    mprof_stacks_each(sets ? copy_set : copy_stack, s);
    s->n_points = mprof_peak_timeline(s->timeline, &s->realtime_offset_ns);
  }
  mprof_record_totals_locked(&s->totals);
  mprof_record_unlock_all();
  mprof_guard_leave(countdown);
  if (s->mem == NULL) {
    errno = ENOMEM;
    return false;
  }
  if (!sets) {                                  /* per stack: the sums in whole objects, the wanted ones */
    size_t n = 0;
    for (size_t i = 0; i < s->n; i++) {
      whole_objects(&s->stack[i]);
      if (wanted(s, &s->stack[i])) s->stack[n++] = s->stack[i];
    }
    s->n = n;
  }
  return true;
}

void mprof_snapshot_release(mprof_snapshot_t *s)
{
  mprof_pmem_unmap_temp(s->mem, s->bytes);
  s->mem = NULL;
}

bool mi_prof_visit(mi_prof_visit_fn *visitor, void *arg)
{
  mprof_fork_handlers();
  if (visitor == NULL) {
    errno = EINVAL;
    return false;
  }
  mprof_snapshot_t s;
  if (!mprof_snapshot_take(&s, mprof_option(MPROF_OPT_ACCUM) != 0, false)) return false;
  for (size_t i = 0; i < s.n; i++) {
    if (!visitor((void *const *)s.stack[i].frames, s.stack[i].depth, &s.stack[i].counts, arg)) break;
  }
  mprof_snapshot_release(&s);
  return true;
}
