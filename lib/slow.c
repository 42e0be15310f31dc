/* slow.c - the slow paths of the malloc family: a countdown that ran out, and any block that may be
 * sampled (it starts a slice of mimalloc's: sheap.c).
 *
 * realloc, the accounting rule.  realloc(p, n) is the allocation of an n-byte block at the realloc's
 * stack (allocated: +1 object, +n bytes) and the free of p's block (in-use: p's object and bytes leave
 * the stack that allocated it) — whether it moves or not, and whatever the fate of p was.  So each
 * realloc draws from the countdown like any allocation of n bytes, independently of everything else:
 *   - sampled, p sampled:   p's record goes (observer: on_free), a new record at the block's address (in
 *                           place when it fits as a fresh request would, else a move to a new sampled
 *                           block);
 *   - sampled, p ordinary:  the block moves to a sampled block (sheap.c) and is recorded;
 *   - not sampled, p sampled: p's record goes; the block moves to an ordinary block, or stays where it
 *                           is, an orphan, when it fits and a move would copy more than MOVE_OUT_MAX;
 *   - not sampled, p ordinary: mi_realloc (the fast path does this without coming here).
 * Then the estimates of allocated and in-use objects and bytes are unbiased per stack for chains of any
 * length, in place or moving (the rule it replaces — a sampled block kept its record through in-place
 * resizes while an unsampled one was drawn again at each — read in-place chains ~3x too high).
 *
 * Frees and reallocs of sampled blocks run with the guard up (internal.h): a signal handler that
 * interrupts them and frees a sampled block has that free deferred, never taking a profiler lock twice.
 */
#include "slow.h"
#include "internal.h"
#include "mireal.h"
#include "observer.h"
#include "record.h"
#include "sampler.h"
#include "sheap.h"

#include <errno.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------------
   The guard's deferred frees
--------------------------------------------------------------------------------------------------- */

/* Free of a sampled block while the guard is up: pushed on the thread's list (a compare-and-swap, so a
 * signal handler that interrupts a push cannot lose one), freed when the guard goes down. */
static void defer_free(mprof_tls_t *t, void *p)
{
  void *head = __atomic_load_n(&t->deferred, __ATOMIC_RELAXED);
  do {
    memcpy(p, &head, sizeof head);
  } while (!__atomic_compare_exchange_n(&t->deferred, &head, p, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
}

static void free_sampled(void *p);

void mprof_guard_drain(mprof_tls_t *t)
{
  void *list;
  while ((list = __atomic_exchange_n(&t->deferred, NULL, __ATOMIC_RELAXED)) != NULL) {
    while (list != NULL) {
      void *next;
      memcpy(&next, list, sizeof next);
      free_sampled(list);
      list = next;
    }
  }
}

/* ---------------------------------------------------------------------------------------------------
   Allocation
--------------------------------------------------------------------------------------------------- */

/* The C malloc family's unsampled path: mimalloc, and errno = ENOMEM on failure (mimalloc leaves it for
 * requests above PTRDIFF_MAX and for aligned ones). */
static void *c_plain(const mprof_req_t *r)
{
  void *p = mprof_plain_alloc(r->size, r->alignment, r->zero);
  if (mprof_unlikely(p == NULL)) errno = ENOMEM;
  return p;
}

static void *c_plain_realloc(void *p, const mprof_req_t *r)
{
  void *q = mprof_mi_realloc(p, r->size);
  if (mprof_unlikely(q == NULL)) errno = ENOMEM;
  return q;
}

/* The countdown ran out for an allocation of r->size bytes (it has wrapped). */
void *mprof_alloc_slow_req(const mprof_req_t *r)
{
  mprof_tls_t *t = &mprof_tls;
  size_t before = t->countdown + r->size;       /* the fast path's subtraction undone, in size_t */
  if (mprof_unlikely(r->size > MPROF_MAX_REQUEST || t->guard != 0)) {
    t->countdown = before;                      /* impossible (not a sample, nothing counted), or the
                                                 * profiler's own, or a handler's inside it */
    return r->plain(r);
  }
  t->guard++;
  if (mprof_take_sample(t, r->size, before)) {
    size_t next = t->countdown;                 /* what the sample allocates is not charged */
    void *p = mprof_sample_alloc(t, r);
    mprof_guard_leave(next);
    return p;
  }
  mprof_guard_leave(t->countdown);
  return r->plain(r);
}

void *mprof_alloc_slow(size_t size, size_t alignment, bool zero)
{
  mprof_req_t r = {.size = size, .alignment = alignment, .zero = zero, .plain = c_plain};
  return mprof_alloc_slow_req(&r);
}

/* ---------------------------------------------------------------------------------------------------
   Free
--------------------------------------------------------------------------------------------------- */

/* Forgets p's record (orphans too) and tells the observer about a sample's; the record is copied to
 * *out when asked.  Guard up. */
static void forget(void *p, mprof_record_t *out)
{
  mprof_record_t r;
  if (!mprof_record_remove((uintptr_t)p, &r)) return;
  mprof_sheap_untrack(p);
  if (out != NULL) *out = r;
  if (r.flags & MPROF_RECORD_ORPHAN) return;
  if (r.flags & MPROF_RECORD_OBSERVED) {
    mprof_observer_t obs;
    mprof_observer_get(&obs);
    if (obs.on_free != NULL) obs.on_free(p, r.size, obs.arg);
  }
}

/* Guard up. */
static void free_sampled(void *p)
{
  forget(p, NULL);
  mprof_sheap_free(p);
}

/* free() of NULL or of a block at the start of a slice. */
void mprof_free_slow(void *p)
{
  if (p == NULL) return;
  if (!mprof_sheap_maybe(p)) {
    mprof_mi.mi_free(p);
    return;
  }
  /* A fork child that froze the tables reads no record: a slot is leaked (the slots may be half-done
   * there), a block of mimalloc's goes back to it. */
  if (mprof_unlikely(mprof_frozen)) {
    if (!mprof_sheap_in_slot(p)) mprof_mi.mi_free(p);
    return;
  }
  mprof_tls_t *t = &mprof_tls;
  if (mprof_unlikely(t->guard != 0)) {
    defer_free(t, p);
    return;
  }
  size_t countdown = mprof_guard_enter();
  free_sampled(p);
  mprof_guard_leave(countdown);
}

/* malloc_usable_size() of NULL or of a block at the start of a slice: for a sampled block, what an
 * unsampled one of its request would have (lock-free). */
size_t mprof_usable_size_slow(const void *p)
{
  if (p == NULL) return 0;
  return mprof_sheap_in_slot(p) ? mprof_sheap_usable(p) : mprof_mi.mi_usable_size(p);
}

/* ---------------------------------------------------------------------------------------------------
   realloc
--------------------------------------------------------------------------------------------------- */

static bool aligned(const void *p, const mprof_req_t *r)
{
  return r->alignment == 0 || ((uintptr_t)p + r->offset) % r->alignment == 0;
}

/* Moves the block p (of `old` usable bytes) to q and frees p.  Guard up. */
static void *move_to(void *q, void *p, size_t old, size_t size, bool p_sampled)
{
  memcpy(q, p, old < size ? old : size);
  if (p_sampled) free_sampled(p);
  else mprof_mi.mi_free(p);
  return q;
}

/* Sampled block p stays where it is with r's size: its record goes (*old gets it).  A zeroing realloc
 * zeroes what the block now holds beyond its old usable size.  Guard up. */
static void keep_in_place(void *p, const mprof_req_t *r, mprof_record_t *old)
{
  size_t usable = mprof_sheap_usable(p);
  forget(p, old);
  mprof_sheap_resize(p, r->size);
  if (r->zero && r->size > usable) memset((char *)p + usable, 0, r->size - usable);
}

/* The realloc is sampled.  Guard up. */
static void *realloc_sampled(mprof_tls_t *t, void *p, const mprof_req_t *r, bool p_sampled)
{
  if (p_sampled && aligned(p, r) && mprof_sheap_fits(p, r->size)) {   /* in place: a new record there */
    mi_prof_drop_reason_t why;
    uint64_t now, stack_id = mprof_sample_stack(t, r->size, &now, &why);
    mprof_record_t old = {.heap = NULL};
    keep_in_place(p, r, &old);                    /* a block realloc'ed in place stays in its heap */
    mi_heap_t *heap = old.heap != NULL ? old.heap : mprof_sample_heap(r);
    if (stack_id != 0) mprof_sample_record(t, p, r->size, heap, stack_id, why, now);
    else mprof_sheap_orphan(p, r->size, heap);
    return p;
  }
  size_t old = p == NULL ? 0 : p_sampled ? mprof_sheap_usable(p) : mprof_mi.mi_usable_size(p);
  void *q = mprof_sample_alloc(t, r);
  if (q == NULL) return NULL;                         /* p is left as it was */
  return p == NULL ? q : move_to(q, p, old, r->size, p_sampled);
}

/* An unsampled realloc of a sampled block moves it to an ordinary block when that copies at most this
 * many bytes, even where it would fit in place: kept, it would be an orphan whose every later realloc and
 * free takes the slow path (bench/realloc_heavy.c: 16 slow reallocs per sample, ~870 instructions each,
 * 1.40x the instructions of stopped), and such a copy costs about what one of those does.  A block that
 * copies more stays when it fits. */
#define MOVE_OUT_MAX ((size_t)16 * 1024)

/* The realloc is not sampled, and p is a sampled block.  Guard up. */
static void *realloc_unsampled(void *p, const mprof_req_t *r)
{
  size_t usable = mprof_sheap_usable(p);
  if ((usable < r->size ? usable : r->size) > MOVE_OUT_MAX && aligned(p, r) && mprof_sheap_fits(p, r->size)) {
    mprof_record_t old = {.heap = NULL};          /* stays where it is, an orphan */
    keep_in_place(p, r, &old);
    mprof_sheap_orphan(p, r->size, old.heap != NULL ? old.heap : mprof_sample_heap(r));
    return p;
  }
  void *q = r->plain(r);
  return q == NULL ? NULL : move_to(q, p, usable, r->size, true);
}

/* realloc of p, which may be sampled, as a move to an ordinary block.  With the guard up (a signal
 * handler inside the profiler) the free of p is deferred (its record, if any, goes then); in a fork
 * child that froze the tables p is freed as free() does there (a slot leaked, mimalloc's block given
 * back). */
static void *realloc_moved(void *p, const mprof_req_t *r, bool frozen)
{
  void *q = r->plain(r);
  if (q == NULL) return NULL;
  size_t old = mprof_usable_size_slow(p);
  memcpy(q, p, old < r->size ? old : r->size);
  if (frozen) mprof_free_slow(p);
  else defer_free(&mprof_tls, p);
  return q;
}

/* Whether p, which may be sampled, is: a slot, or a block with a record.  Guard up. */
static bool is_sampled(const void *p)
{
  mprof_record_t r;
  return mprof_sheap_in_slot(p) || mprof_record_find((uintptr_t)p, &r);
}

/* realloc of NULL, of a block at the start of a slice (sampled or not), or a countdown that ran out. */
void *mprof_realloc_slow_req(void *p, const mprof_req_t *r, bool wrapped)
{
  mprof_tls_t *t = &mprof_tls;
  bool charged = !wrapped && mprof_skip(r->size);     /* not yet charged: now */
  bool maybe = mprof_maybe_sampled_block(p) && mprof_sheap_maybe(p);
  if (charged && !maybe) return r->plain_realloc(p, r);
  if (mprof_unlikely(mprof_frozen) && maybe) return realloc_moved(p, r, true);
  size_t before = charged ? t->countdown : t->countdown + r->size;       /* wrapped: undo, in size_t */
  if (mprof_unlikely(r->size > MPROF_MAX_REQUEST || t->guard != 0)) {
    t->countdown = before;
    return maybe ? realloc_moved(p, r, false) : r->plain_realloc(p, r);
  }
  t->guard++;
  bool p_sampled = maybe && is_sampled(p);
  bool sampled = !charged && mprof_take_sample(t, r->size, before);
  size_t next = t->countdown;                         /* nothing done below is charged */
  void *q = sampled ? realloc_sampled(t, p, r, p_sampled)
                    : p_sampled ? realloc_unsampled(p, r) : r->plain_realloc(p, r);
  mprof_guard_leave(next);
  return q;
}

void *mprof_realloc_slow(void *p, size_t size)
{
  mprof_req_t r = {.size = size, .plain = c_plain, .plain_realloc = c_plain_realloc};
  return mprof_realloc_slow_req(p, &r, !mprof_maybe_sampled_block(p));
}

/* A realloc that mimalloc can only do in place (its alignment is not a power of two, or takes an offset
 * above mimalloc's largest alignment): p is kept when it holds the size, wastes at most half of its
 * usable size and stays aligned, as mimalloc keeps an ordinary block; else NULL.  A sampled p kept so
 * loses its sample, as in any unsampled realloc, and stays as an orphan. */
void *mprof_realloc_keep_req(void *p, const mprof_req_t *r)
{
  if (!mprof_maybe_sampled_block(p) || !mprof_sheap_maybe(p) || mprof_frozen || mprof_tls.guard != 0)
    return r->plain_realloc(p, r);
  size_t countdown = mprof_guard_enter();
  void *q = NULL;
  if (!is_sampled(p)) {
    q = r->plain_realloc(p, r);
  } else {
    size_t usable = mprof_sheap_usable(p);
    if (r->size <= usable && r->size >= usable - usable / 2 && aligned(p, r)) {
      mprof_record_t old = {.heap = NULL};
      keep_in_place(p, r, &old);
      mprof_sheap_orphan(p, r->size, old.heap != NULL ? old.heap : mprof_sample_heap(r));
      q = p;
    }
  }
  mprof_guard_leave(countdown);
  return q;
}
