/* snapshot.c - one consistent copy of every stack and the totals, for mi_prof_visit() and dumps.
 *
 * With every record shard lock held (so no sample or free of a sampled block changes a counter) the
 * wanted stacks and the record totals are copied into profiler memory; the locks are then released and
 * the caller works on the copy.  So a visitor may do anything: allocate, free sampled blocks, even stop
 * the profiler; what it sees stays as it was when the snapshot was taken.  The copy is temporary profiler
 * memory, which the tables leave free for it (pmem.c): a visit or a dump at a time always gets it.
 */
#include "internal.h"

#include <errno.h>
#include <string.h>

/* pmem.c keeps this much per stack free for a dump's snapshot. */
_Static_assert(sizeof(mprof_snap_stack_t) <= MPROF_DUMP_STACK_BYTES, "MPROF_DUMP_STACK_BYTES");

typedef struct sizing_s {
  bool   all;
  size_t stacks, frames;
} sizing_t;

static bool wanted(bool all, const mprof_stack_t *e)
{
  return all || __atomic_load_n(&e->inuse_obj_fx, __ATOMIC_RELAXED) != 0;
}

static void size_one(const mprof_stack_t *e, void *arg)
{
  sizing_t *s = arg;
  if (!wanted(s->all, e)) return;
  s->stacks++;
  s->frames += e->depth;
}

static uint64_t fx_objects(uint64_t fx) { return (fx + MPROF_FX_ONE / 2) / MPROF_FX_ONE; }

static void copy_one(const mprof_stack_t *e, void *arg)
{
  mprof_snapshot_t *s = arg;
  if (!wanted(s->all, e) || s->n == s->cap) return;
  mprof_snap_stack_t *out = &s->stack[s->n++];
  out->counts.alloc_objects = fx_objects(__atomic_load_n(&e->alloc_obj_fx, __ATOMIC_RELAXED));
  out->counts.alloc_bytes = __atomic_load_n(&e->alloc_bytes, __ATOMIC_RELAXED);
  out->counts.inuse_objects = fx_objects(__atomic_load_n(&e->inuse_obj_fx, __ATOMIC_RELAXED));
  out->counts.inuse_bytes = __atomic_load_n(&e->inuse_bytes, __ATOMIC_RELAXED);
  out->depth = e->depth;
  out->frames = s->frame_next;
  memcpy(out->frames, e->frames, e->depth * sizeof(uintptr_t));
  s->frame_next += e->depth;
}

bool mprof_snapshot_take(mprof_snapshot_t *s, bool all)
{
  memset(s, 0, sizeof *s);
  if (mprof_unlikely(mprof_frozen)) {           /* the tables may be half-done: nothing to read */
    errno = ENOTRECOVERABLE;
    return false;
  }
  s->all = all;
  sizing_t size = {.all = all};
  size_t countdown = mprof_guard_enter();       /* a handler's free of a sampled block waits (internal.h) */
  mprof_record_lock_all();
  mprof_stacks_each(size_one, &size);
  s->bytes = size.stacks * sizeof(mprof_snap_stack_t) + size.frames * sizeof(uintptr_t);
  if (s->bytes != 0) s->mem = mprof_pmem_map_temp(s->bytes);
  if (s->mem != NULL) {
    s->stack = s->mem;
    s->cap = size.stacks;
    s->frame_next = (uintptr_t *)(s->stack + size.stacks);
    mprof_stacks_each(copy_one, s);
  }
  mprof_record_totals_locked(&s->totals);
  mprof_record_unlock_all();
  mprof_guard_leave(countdown);
  if (s->bytes != 0 && s->mem == NULL) {
    errno = ENOMEM;
    return false;
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
  if (visitor == NULL) {
    errno = EINVAL;
    return false;
  }
  mprof_snapshot_t s;
  if (!mprof_snapshot_take(&s, mprof_option(MPROF_OPT_ACCUM) != 0)) return false;
  for (size_t i = 0; i < s.n; i++) {
    if (!visitor((void *const *)s.stack[i].frames, s.stack[i].depth, &s.stack[i].counts, arg)) break;
  }
  mprof_snapshot_release(&s);
  return true;
}
