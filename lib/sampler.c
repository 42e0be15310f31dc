/* sampler.c - per-thread byte sampling and the slow paths of the malloc family.
 *
 * Sampling: the bytes a thread allocates are marked by a Poisson process with mean distance
 * R = sample_rate bytes.  An allocation that contains a mark is sampled, so an allocation of s bytes is
 * sampled with probability p(s) = 1 - exp(-s/R), independently of everything before it (memoryless),
 * and a sample stands for 1/p objects and s/p bytes: unbiased estimates of what was allocated.
 *
 * Each thread draws the distance to its next mark, X ~ Exp(R), and counts it down by the sizes it
 * allocates.  The allocation during which the count runs out is sampled; the next distance is drawn
 * from the end of that allocation.  (Drawing afresh there is the same as carrying the overshoot past the
 * mark into the next interval: by memorylessness, the distance from any point to the next mark is again
 * Exp(R); it also avoids a loop of s/R draws for very large allocations.)
 *
 * The countdown the fast path sees is the distance capped at MI_PROF_RECHECK_BYTES; the rest waits in
 * `remaining`.  So every thread reaches this file at least once per MI_PROF_RECHECK_BYTES of its own
 * allocation, and that is when it notices a start, stop or restart (a new session word): the bound
 * documented for mi_prof_start().  A thread whose session is out of date draws a full fresh interval
 * (no phantom period, no state from the old session).  A new thread starts with countdown 0, so its
 * first allocation lands here and draws in full.
 *
 * Reentrancy: `guard` is set while the profiler runs on a thread (sampling, observer callbacks); an
 * allocation then is served unsampled, and the countdown is restored when the guard is left, so what a
 * callback allocates never shifts the sampling of the program's own allocations.
 */
#include "internal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

__thread mprof_tls_t mprof_tls __attribute__((tls_model("initial-exec")));
mprof_session_t mprof_session;

static uint32_t thread_ordinals;   /* last thread ordinal handed out (atomic) */

void mprof_session_publish(uint64_t id, bool running, uint64_t rate, uint64_t seed)
{
  __atomic_store_n(&mprof_session.rate, rate, __ATOMIC_RELAXED);
  __atomic_store_n(&mprof_session.seed, seed, __ATOMIC_RELAXED);
  __atomic_store_n(&mprof_session.word, (id << 1) | (running ? 1u : 0u), __ATOMIC_RELEASE);
}

/* After fork only the forking thread exists in the child, with its parent's cached thread id. */
void mprof_sampler_postfork_child(void) { mprof_tls.tid = 0; }

/* ---------------------------------------------------------------------------------------------------
   Intervals
--------------------------------------------------------------------------------------------------- */

static uint64_t splitmix64(uint64_t x)
{
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/* xorshift64*: small state, good enough for drawing intervals. */
static uint64_t rng_next(mprof_tls_t *t)
{
  uint64_t x = t->rng;
  x ^= x >> 12, x ^= x << 25, x ^= x >> 27;
  t->rng = x;
  return x * 0x2545f4914f6cdd1dull;
}

/* Seeds this thread's generator for a new session: from (seed, thread ordinal) when the session has a
 * seed, so a single-threaded program repeats its samples exactly; else from the kernel's entropy. */
static void rng_seed(mprof_tls_t *t, uint64_t seed)
{
  uint64_t x;
  if (seed != 0) {
    if (t->ordinal == 0) t->ordinal = __atomic_add_fetch(&thread_ordinals, 1, __ATOMIC_RELAXED);
    x = splitmix64(seed ^ splitmix64(t->ordinal));
  } else if (getrandom(&x, sizeof x, GRND_NONBLOCK) != (ssize_t)sizeof x) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    x = splitmix64((uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ (uintptr_t)t);
  }
  t->rng = x != 0 ? x : 0x853c49e6748fea9bull;   /* xorshift state must not be 0 */
}

/* A distance to the next mark, in whole bytes: ceil(X) for X ~ Exp(rate), so an allocation of s bytes
 * that starts the interval contains the mark with probability P(X <= s) = 1 - exp(-s/rate). */
static uint64_t draw_interval(mprof_tls_t *t)
{
  double u = (double)((rng_next(t) >> 11) + 1) * 0x1.0p-53;   /* (0, 1] */
  return (uint64_t)(-log(u) * (double)t->rate) + 1;           /* at most ~37 * rate */
}

static void set_interval(mprof_tls_t *t, uint64_t interval)
{
  t->countdown = interval < MI_PROF_RECHECK_BYTES ? (size_t)interval : MI_PROF_RECHECK_BYTES;
  t->remaining = interval - t->countdown;
}

/* Decides whether this allocation of `size` bytes, whose countdown ran out, is a sample; re-arms the
 * countdown either way.  On entry the countdown has already had `size` subtracted (and wrapped). */
static bool take_sample(mprof_tls_t *t, size_t size)
{
  uint64_t left = (uint64_t)t->countdown + size;    /* countdown before this allocation */
  uint64_t word = __atomic_load_n(&mprof_session.word, __ATOMIC_ACQUIRE);
  if (mprof_unlikely(word != t->session)) {         /* new thread, or start/stop/restart */
    t->session = word;
    if (word & 1) {
      t->rate = __atomic_load_n(&mprof_session.rate, __ATOMIC_RELAXED);
      rng_seed(t, __atomic_load_n(&mprof_session.seed, __ATOMIC_RELAXED));
      left = draw_interval(t);                      /* a full interval: no phantom period */
      t->remaining = 0;
    }
  }
  if (!(word & 1)) {                                /* stopped: look again after the recheck bound */
    t->countdown = MI_PROF_RECHECK_BYTES;
    t->remaining = 0;
    return false;
  }
  left += t->remaining;
  if (size < left) {                                /* the mark is further on */
    set_interval(t, left - size);
    return false;
  }
  set_interval(t, draw_interval(t));                /* next mark, from the end of this allocation */
  return true;
}

/* ---------------------------------------------------------------------------------------------------
   Samples
--------------------------------------------------------------------------------------------------- */

static uint32_t thread_id(mprof_tls_t *t)
{
  if (mprof_unlikely(t->tid == 0)) t->tid = (uint32_t)gettid();
  return t->tid;
}

static uint64_t now_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The stack of the allocation being sampled, interned: its id, or 0 with *why set. */
static uint64_t sample_stack(mprof_tls_t *t, mi_prof_drop_reason_t *why)
{
  size_t max = (size_t)mprof_option(MPROF_OPT_BT_MAX);     /* 1..MPROF_BT_MAX_CAP */
  uintptr_t frames[max + MPROF_UNWIND_SLACK];                 /* 640 bytes at the default: small stacks */
  size_t depth = mprof_unwind(frames, max);
  if (mprof_unlikely(depth == 0)) {
    *why = MI_PROF_DROP_UNWIND;
    return 0;
  }
  return mprof_stack_intern(frames, depth, t->session, why);
}

/* Allocates a sampled block in the sampled-block heap and records it with its stack and its weight
 * (computed with the rate its interval was drawn with).  NULL when the sample must be dropped: the
 * caller then serves the request unsampled, so the program never sees the difference.  The stack is
 * captured first, before any profiler lock is taken. */
static void *sample_alloc(mprof_tls_t *t, size_t size, size_t alignment, bool zero)
{
  mi_prof_drop_reason_t why;
  int saved_errno = errno;
  size_t countdown = mprof_guard_enter();
  uint64_t stack_id = sample_stack(t, &why);
  void *p = stack_id != 0 ? mprof_sheap_alloc(size, alignment, zero, &why) : NULL;
  if (mprof_unlikely(p == NULL)) {
    if (why != MI_PROF_DROP_REASONS) mprof_drop(why);   /* else the session ended under us */
    errno = saved_errno;             /* the request itself will still succeed */
    mprof_guard_leave(countdown);
    return NULL;
  }
  double prob = -expm1(-(double)size / (double)t->rate);      /* p(s) = 1 - exp(-s/R) */
  mprof_observer_t obs;
  mprof_observer_get(&obs);
  mprof_record_t r = {
    .addr = (uintptr_t)p,
    .size = size,
    .obj_fx = (uint64_t)(MPROF_FX_ONE / prob + 0.5),
    .inuse_bytes = (uint64_t)((double)size / prob + 0.5),
    .stack_id = stack_id,
    .time_ns = now_ns(),
    .tid = thread_id(t),
    .flags = obs.on_sample != NULL ? MPROF_RECORD_OBSERVED : 0,
  };
  mprof_insert_t rc = mprof_record_insert(&r, t->session);
  if (rc == MPROF_INSERT_MEMORY) mprof_drop(MI_PROF_DROP_MEMORY);   /* the block stays, untracked */
  if (rc == MPROF_INSERT_OK) {
    mprof_dump_note_alloc(r.inuse_bytes);
    if (obs.on_sample != NULL) obs.on_sample(p, size, (size_t)r.inuse_bytes, (size_t)t->rate, r.tid, obs.arg);
  }
  mprof_guard_leave(countdown);
  return p;
}

static void *plain_alloc(size_t size, size_t alignment, bool zero)
{
  if (alignment == 0) return zero ? mi_zalloc(size) : mi_malloc(size);
  return zero ? mprof_mi_zalloc_aligned(size, alignment) : mprof_mi_malloc_aligned(size, alignment);
}

/* An impossible request: undo its subtraction (the countdown wrapped) and fail with ENOMEM. */
static void *too_large(mprof_tls_t *t, size_t size)
{
  t->countdown += size;
  errno = ENOMEM;
  return NULL;
}

void *mprof_alloc_slow(size_t size, size_t alignment, bool zero)
{
  mprof_tls_t *t = &mprof_tls;
  if (mprof_unlikely(size > MPROF_MAX_REQUEST)) return too_large(t, size);
  if (mprof_unlikely(t->guard != 0)) {
    t->countdown += size;            /* the profiler's own allocation: not counted */
    return plain_alloc(size, alignment, zero);
  }
  if (take_sample(t, size)) {
    void *p = sample_alloc(t, size, alignment, zero);
    if (p != NULL) return p;
  }
  return plain_alloc(size, alignment, zero);
}

/* ---------------------------------------------------------------------------------------------------
   Free and realloc of sampled blocks
--------------------------------------------------------------------------------------------------- */

/* Forgets p's record (if it has one: blocks sampled before a stop have none) and tells the observer,
 * then returns the block to the sampled-block heap. */
static void forget(void *p)
{
  mprof_record_t r;
  if (!mprof_record_remove((uintptr_t)p, &r)) return;
  mprof_dump_note_inuse(-(int64_t)r.inuse_bytes);
  if (r.flags & MPROF_RECORD_OBSERVED) {
    mprof_observer_t obs;
    mprof_observer_get(&obs);
    if (obs.on_free != NULL) {
      size_t countdown = mprof_guard_enter();
      obs.on_free(p, r.size, obs.arg);
      mprof_guard_leave(countdown);
    }
  }
}

static void free_sampled(void *p)
{
  forget(p);
  mprof_sheap_free(p);
}

/* free() of NULL, of a sampled block, or of an ordinary block below the arena's end. */
void mprof_free_slow(void *p)
{
  if (p == NULL) return;
  if (mprof_sheap_contains(p)) free_sampled(p);
  else mi_free(p);
}

/* Moves a sampled block to a new allocation of `size` bytes (which may itself be sampled: it goes through the
 * exported malloc path) and frees the old one.  Like realloc, leaves p alone on failure. */
static void *move_sampled(void *p, size_t size)
{
  void *q = malloc(size);
  if (mprof_unlikely(q == NULL)) return NULL;
  size_t old = mi_usable_size(p);
  memcpy(q, p, old < size ? old : size);
  free_sampled(p);
  return q;
}

/* In place, as mimalloc's own realloc would do it: the new size fits and does not waste half. */
static void *resize_sampled(mprof_tls_t *t, void *p, size_t size)
{
  mprof_record_t old, now;
  if (!mprof_record_resize((uintptr_t)p, size, &old, &now)) return p;
  mprof_dump_note_inuse((int64_t)now.inuse_bytes - (int64_t)old.inuse_bytes);
  if (old.flags & MPROF_RECORD_OBSERVED) {
    mprof_observer_t obs;             /* the observer sees a resize as a free and a new sample */
    mprof_observer_get(&obs);
    size_t countdown = mprof_guard_enter();
    if (obs.on_free != NULL) obs.on_free(p, old.size, obs.arg);
    if (obs.on_sample != NULL)   /* the rate of the session that holds the record */
      obs.on_sample(p, size, (size_t)now.inuse_bytes,
                    (size_t)__atomic_load_n(&mprof_session.rate, __ATOMIC_RELAXED), thread_id(t), obs.arg);
    mprof_guard_leave(countdown);
  }
  return p;
}

/* realloc of a sampled block (the countdown was not touched). */
static void *realloc_sampled(mprof_tls_t *t, void *p, size_t size)
{
  if (mprof_unlikely(size > MPROF_MAX_REQUEST)) {
    errno = ENOMEM;
    return NULL;
  }
  size_t usable = mi_usable_size(p);
  if (size != 0 && size <= usable && size >= usable / 2) return resize_sampled(t, p, size);
  return move_sampled(p, size);
}

void *mprof_realloc_slow(void *p, size_t size)
{
  mprof_tls_t *t = &mprof_tls;
  if (mprof_maybe_sampled(p)) {
    if (mprof_sheap_contains(p)) return realloc_sampled(t, p, size);
    /* NULL or an ordinary block below the arena: the fast path did not charge the countdown yet. */
    if (mprof_skip(size)) return mi_realloc(p, size);
  }
  /* The countdown ran out for `size` (it has wrapped). */
  if (mprof_unlikely(size > MPROF_MAX_REQUEST)) return too_large(t, size);
  if (mprof_unlikely(t->guard != 0)) {
    t->countdown += size;
    return mi_realloc(p, size);
  }
  if (take_sample(t, size)) {
    void *q = sample_alloc(t, size, 0, false);
    if (q != NULL) {
      if (p != NULL) {
        size_t old = mi_usable_size(p);
        memcpy(q, p, old < size ? old : size);
        mi_free(p);
      }
      return q;
    }
  }
  return mi_realloc(p, size);
}
