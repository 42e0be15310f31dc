/* mi_heap.c - mimalloc's first-class heaps, with the sampled blocks they own.
 *
 * A sampled block belongs to the heap it was asked from (the default heap for the malloc family, so a
 * program that switched it with mi_heap_set_default gets its malloc'd blocks counted to that heap, as
 * mimalloc does), and its record names that heap.  A large one is a block of that heap's own pages
 * (sheap.c), which mimalloc's heap functions handle as any other; a small one lives in a slot of ours,
 * so the heap functions that concern blocks answer for it from the records, as mimalloc would:
 *   - mi_heap_destroy(heap) frees every block of the heap at once: every sampled block of it is reported
 *     freed (observer on_free exactly once, in-use estimate and profile drop) and a slot's memory
 *     returned; mimalloc frees the rest.  mimalloc destroys only heaps made by mi_heap_new; the backing
 *     heap it deletes instead, and so do we.
 *   - mi_heap_delete(heap) moves the heap's blocks to its thread's backing heap (the backing heap itself
 *     abandons them): the records follow.  mimalloc deletes a thread's heaps this way when the thread
 *     exits, through the PLT, after it has set the thread's default heap to its empty one: then nothing
 *     may ask mimalloc about the thread (mi_heap_get_backing() would set the thread up again, inside its
 *     teardown), so the backing heap is learnt when the thread makes a heap, on that thread.
 *   - mi_heap_visit_blocks visits the sampled blocks in slots as well, each once as an area of one block
 *     of its usable size; mi_heap_contains_block, mi_heap_check_owned and mi_check_owned answer for them;
 *     mi_is_in_heap_region says yes.
 * A tag is only a pointer: after a thread exits, its backing heap's address may be reused by a later
 * thread's, and a sampled block malloc'd by the first would then answer to the second's queries.
 * Nothing is ever freed on such an answer: only mi_heap_destroy frees, and only non-backing heaps.
 *
 * mi_heap_set_default is passed through (exported so the allocation API is complete from this library).
 */
#include "internal.h"
#include "mireal.h"

#if MPROF_PPROF
#include "observer.h"
#include "record.h"
#include "sampler.h"
#include "sheap.h"
#endif

#define API MPROF_EXPORT

API mi_heap_t *mi_heap_set_default(mi_heap_t *heap) { return mprof_mi.mi_heap_set_default(heap); }

#if MPROF_PPROF

/* The calling thread's backing heap, once it has made a heap through this library (NULL before): every
 * heap that mi_heap_delete or mi_heap_destroy is given on a thread, other than its backing heap, was
 * made on that thread (a mimalloc heap belongs to the thread that made it). */
static __thread mi_heap_t *thread_backing __attribute__((tls_model("initial-exec")));

static mi_heap_t *made(mi_heap_t *heap)
{
  if (heap != NULL && thread_backing == NULL) thread_backing = mprof_mi.mi_heap_get_backing();
  return heap;
}

API mi_heap_t *mi_heap_new(void) { return made(mprof_mi.mi_heap_new()); }
API mi_heap_t *mi_heap_new_in_arena(mi_arena_id_t id) { return made(mprof_mi.mi_heap_new_in_arena(id)); }

/* ---------------------------------------------------------------------------------------------------
   destroy and delete
--------------------------------------------------------------------------------------------------- */

#define BATCH 64

typedef struct batch_s {
  size_t         n;
  mprof_record_t r[BATCH];
} batch_t;

static bool take_one(const mprof_record_t *r, void *arg)
{
  batch_t *b = arg;
  b->r[b->n++] = *r;
  return b->n < BATCH;
}

/* The sampled blocks of a heap about to be destroyed: each one's record goes (on_free for a sample's),
 * then a slot's memory (mimalloc's destroy frees the others).  A batch at a time, no lock held while the
 * observer runs. */
static void release_heap(mi_heap_t *heap)
{
  if (mprof_frozen || !mprof_record_heap_may_have(heap)) return;   /* frozen: slots leaked, as by free */
  size_t countdown = mprof_guard_enter();
  batch_t b;
  do {
    b.n = 0;
    mprof_record_take_heap(heap, take_one, &b);
    mprof_observer_t obs;
    mprof_observer_get(&obs);
    for (size_t i = 0; i < b.n; i++) {
      const mprof_record_t *r = &b.r[i];
      void *p = (void *)r->addr;
      mprof_sheap_untrack(p);
      if (!(r->flags & MPROF_RECORD_ORPHAN) && (r->flags & MPROF_RECORD_OBSERVED) && obs.on_free != NULL)
        obs.on_free(p, r->size, obs.arg);
      if (mprof_sheap_in_slot(p)) mprof_sheap_free(p);
    }
  } while (b.n == BATCH);
  mprof_guard_leave(countdown);
}

API void mi_heap_destroy(mi_heap_t *heap)
{
  /* A heap this thread made: its sampled blocks first, then mimalloc frees its pages.  Any other (the
   * backing heap) mimalloc deletes instead, through our mi_heap_delete. */
  if (heap != NULL && thread_backing != NULL && heap != thread_backing) release_heap(heap);
  mprof_mi.mi_heap_destroy(heap);
}

API void mi_heap_delete(mi_heap_t *heap)
{
  mprof_mi.mi_heap_delete(heap);
  if (heap != NULL && !mprof_frozen && mprof_record_heap_may_have(heap)) {
    size_t countdown = mprof_guard_enter();
    mprof_record_retag(heap, heap == thread_backing ? NULL : thread_backing);
    mprof_guard_leave(countdown);
  }
}

/* ---------------------------------------------------------------------------------------------------
   Questions about blocks
--------------------------------------------------------------------------------------------------- */

/* The heap of the sampled block in a slot holding p; false when p is not in a slot.  *heap is NULL for a
 * block with no record (one the budget could not record) or whose heap is gone. */
static bool slot_heap(const void *p, mi_heap_t **heap)
{
  if (!mprof_maybe_sampled_block(p) || !mprof_sheap_in_slot(p)) return false;
  *heap = NULL;
  if (mprof_frozen) return true;            /* a fork child's records may be half-done: not read */
  mprof_record_t r;
  size_t countdown = mprof_guard_enter();
  bool found = mprof_record_find((uintptr_t)p, &r);
  mprof_guard_leave(countdown);
  *heap = found ? r.heap : NULL;
  return true;
}

API bool mi_heap_contains_block(mi_heap_t *heap, const void *p)
{
  mi_heap_t *h;
  if (slot_heap(p, &h)) return heap != NULL && h == heap;
  return mprof_mi.mi_heap_contains_block(heap, p);
}

API bool mi_heap_check_owned(mi_heap_t *heap, const void *p)
{
  mi_heap_t *h;
  if (slot_heap(p, &h)) return heap != NULL && h == heap;
  return mprof_mi.mi_heap_check_owned(heap, p);
}

API bool mi_check_owned(const void *p) { return mi_heap_check_owned(mprof_mi.mi_heap_get_default(), p); }

API bool mi_is_in_heap_region(const void *p)
{
  if (mprof_maybe_sampled_block(p) && mprof_sheap_in_slot(p)) return true;
  return mprof_mi.mi_is_in_heap_region(p);
}

/* mimalloc's visit, then each sampled block in a slot of the heap as an area of its own: once with block
 * NULL (the area), then, when all blocks are asked for, with the block.  The blocks are copied a batch
 * at a time, so the visitor runs with no lock held (it may allocate, free, even destroy the heap). */
typedef struct visit_s {
  mi_heap_t *heap;
  uintptr_t  after;                          /* resume past this address */
  size_t     n;
  uintptr_t  addr[BATCH];
} visit_t;

static bool visit_one(const mprof_record_t *r, void *arg)
{
  visit_t *v = arg;
  if (r->addr <= v->after || !mprof_sheap_in_slot((void *)r->addr)) return true;
  /* Keep the BATCH lowest addresses above `after`, so successive batches cover every block once. */
  size_t i = v->n < BATCH ? v->n++ : BATCH;
  if (i == BATCH && r->addr >= v->addr[BATCH - 1]) return true;
  if (i == BATCH) i = BATCH - 1;
  while (i > 0 && v->addr[i - 1] > r->addr) {
    v->addr[i] = v->addr[i - 1];
    i--;
  }
  v->addr[i] = r->addr;
  return true;
}

/* The program's visitor, watched: mimalloc's visit returns false both when the visitor stopped it and
 * when the heap has no pages (all of its blocks may be sampled ones). */
typedef struct watched_s {
  mi_block_visit_fun *visitor;
  void               *arg;
  bool                stopped;
} watched_t;

static bool watch(const mi_heap_t *heap, const mi_heap_area_t *area, void *block, size_t size, void *arg)
{
  watched_t *w = arg;
  bool go_on = w->visitor(heap, area, block, size, w->arg);
  w->stopped |= !go_on;
  return go_on;
}

API bool mi_heap_visit_blocks(const mi_heap_t *heap, bool visit_all_blocks, mi_block_visit_fun *visitor,
                              void *arg)
{
  watched_t w = {visitor, arg, false};
  bool found = mprof_mi.mi_heap_visit_blocks(heap, visit_all_blocks, watch, &w);
  if (w.stopped) return false;
  if (heap == NULL || mprof_frozen || !mprof_record_heap_may_have((mi_heap_t *)(uintptr_t)heap)) return found;
  visit_t v = {.heap = (mi_heap_t *)(uintptr_t)heap};
  do {
    v.n = 0;
    size_t countdown = mprof_guard_enter();
    mprof_record_each_heap(v.heap, visit_one, &v);
    mprof_guard_leave(countdown);
    for (size_t i = 0; i < v.n; i++) {
      void *block = (void *)v.addr[i];
      size_t size = mprof_sheap_usable(block);
      mi_heap_area_t area = {.blocks = block, .reserved = size, .committed = size, .used = 1,
                             .block_size = size, .full_block_size = size};
      found = true;                         /* a heap with a block has a page, as mimalloc sees it */
      if (!visitor(heap, &area, NULL, size, arg)) return false;
      if (visit_all_blocks && !visitor(heap, &area, block, size, arg)) return false;
    }
    if (v.n != 0) v.after = v.addr[v.n - 1];
  } while (v.n == BATCH);
  return found;
}

#else /* !MPROF_PPROF: nothing is sampled; pass everything through */

API mi_heap_t *mi_heap_new(void) { return mprof_mi.mi_heap_new(); }
API mi_heap_t *mi_heap_new_in_arena(mi_arena_id_t arena) { return mprof_mi.mi_heap_new_in_arena(arena); }
API void mi_heap_destroy(mi_heap_t *heap) { mprof_mi.mi_heap_destroy(heap); }
API void mi_heap_delete(mi_heap_t *heap) { mprof_mi.mi_heap_delete(heap); }
API bool mi_heap_contains_block(mi_heap_t *heap, const void *p)
{
  return mprof_mi.mi_heap_contains_block(heap, p);
}
API bool mi_heap_check_owned(mi_heap_t *heap, const void *p) { return mprof_mi.mi_heap_check_owned(heap, p); }
API bool mi_check_owned(const void *p) { return mprof_mi.mi_check_owned(p); }
API bool mi_is_in_heap_region(const void *p) { return mprof_mi.mi_is_in_heap_region(p); }
API bool mi_heap_visit_blocks(const mi_heap_t *heap, bool visit_all_blocks, mi_block_visit_fun *visitor,
                              void *arg)
{
  return mprof_mi.mi_heap_visit_blocks(heap, visit_all_blocks, visitor, arg);
}

#endif
