/* visit.c - mi_prof_visit(): every stack with its frames and counters, as one consistent view.
 *
 * The view is a snapshot: with every record shard lock held (so no sample or free of a sampled block
 * changes a counter) the stacks are copied into profiler memory; the locks are released and only then is
 * the visitor called.  So a visitor may do anything: allocate, free sampled blocks, even stop the
 * profiler; what it sees stays as it was when the snapshot was taken.
 */
#include "internal.h"

#include <errno.h>
#include <string.h>

typedef struct snap_stack_s {
  mi_prof_stack_counts_t counts;
  size_t                 depth;
  void                 **frames;   /* into the snapshot */
} snap_stack_t;

typedef struct snapshot_s {
  bool          all;               /* MIMALLOC_PROF_ACCUM: also stacks with nothing in use */
  size_t        stacks, frames;    /* sizing pass */
  snap_stack_t *stack;             /* copy pass */
  void        **frame_next;
  size_t        n;
} snapshot_t;

static bool wanted(const snapshot_t *s, const mprof_stack_t *e)
{
  return s->all || __atomic_load_n(&e->inuse_obj_fx, __ATOMIC_RELAXED) != 0;
}

static void size_one(const mprof_stack_t *e, void *arg)
{
  snapshot_t *s = arg;
  if (!wanted(s, e)) return;
  s->stacks++;
  s->frames += e->depth;
}

static uint64_t fx_objects(uint64_t fx) { return (fx + MPROF_FX_ONE / 2) / MPROF_FX_ONE; }

static void copy_one(const mprof_stack_t *e, void *arg)
{
  snapshot_t *s = arg;
  if (!wanted(s, e) || s->n == s->stacks) return;
  snap_stack_t *out = &s->stack[s->n++];
  out->counts.alloc_objects = fx_objects(__atomic_load_n(&e->alloc_obj_fx, __ATOMIC_RELAXED));
  out->counts.alloc_bytes = __atomic_load_n(&e->alloc_bytes, __ATOMIC_RELAXED);
  out->counts.inuse_objects = fx_objects(__atomic_load_n(&e->inuse_obj_fx, __ATOMIC_RELAXED));
  out->counts.inuse_bytes = __atomic_load_n(&e->inuse_bytes, __ATOMIC_RELAXED);
  out->depth = e->depth;
  out->frames = s->frame_next;
  memcpy(out->frames, e->frames, e->depth * sizeof(void *));
  s->frame_next += e->depth;
}

bool mi_prof_visit(mi_prof_visit_fn *visitor, void *arg)
{
  if (visitor == NULL) {
    errno = EINVAL;
    return false;
  }
  snapshot_t s = {.all = mprof_option(MPROF_OPT_ACCUM) != 0};
  size_t bytes = 0;
  void *mem = NULL;
  mprof_record_lock_all();
  mprof_stacks_each(size_one, &s);
  if (s.stacks != 0) {
    bytes = s.stacks * sizeof(snap_stack_t) + s.frames * sizeof(void *);
    mem = mprof_pmem_map(bytes);
    if (mem != NULL) {
      s.stack = mem;
      s.frame_next = (void **)(s.stack + s.stacks);
      mprof_stacks_each(copy_one, &s);
    }
  }
  mprof_record_unlock_all();
  if (s.stacks != 0 && mem == NULL) {
    errno = ENOMEM;
    return false;
  }
  for (size_t i = 0; i < s.n; i++) {
    if (!visitor((void *const *)s.stack[i].frames, s.stack[i].depth, &s.stack[i].counts, arg)) break;
  }
  mprof_pmem_unmap(mem, bytes);
  return true;
}
