/* record.c - the live sampled blocks: a table from block address to record, sharded by address.
 *
 * Each shard is an open-addressing hash table (linear probing, backward-shift deletion, no tombstones)
 * in profiler memory (pmem.c), doubled when 70% full and released when a session's data is discarded
 * and it holds no record.  The shard's lock protects its slots, its counters and its session; sampling
 * is rare, so the locks are cold, and sharding only keeps concurrent samples and frees of different
 * blocks from meeting.
 *
 * A shard accepts samples only for the session it was opened for (mprof_record_begin): a thread that
 * drew its interval before a stop or restart cannot leak a sample with the old rate's weight into the new
 * session.
 *
 * A stopped session's records keep their weights and stacks (mi_prof_stop keeps what was recorded) until
 * the next start or a reset while stopped discards them.
 *
 * Orphans.  Every sampled block keeps a record for as long as it lives, so that its
 * free, and mi_heap_destroy() of its heap, always find it.  A block that is no longer a sample (its
 * session's data was discarded; a realloc that was not sampled kept it in place) keeps an orphan
 * record: its heap and size, no weight, no stack, outside every total.  So the table outlives a
 * session while such blocks live.  A record whose address comes back in a new sample is stale (its block
 * was freed behind our back) and is replaced; that counts as an untracked free.
 *
 * Each record names its label set (stacktab.c); the set's counters change here, under the record's shard
 * lock, together with the shard's totals, so a snapshot taken with every shard lock held sees per-set
 * counters that add up to the totals.  The changes go through peak.c, which keeps the process's totals
 * over time (the peak, the timeline) and, with MIMALLOC_PROF_LIFETIMES, counts each freed sample under
 * the lifetime bucket of its set.
 */
#include "record.h"
#include "internal.h"
#include "options.h"
#include "peak.h"
#include "peak_inline.h"
#include "pmem.h"
#include "stacktab.h"

#include <string.h>

#define MPROF_SHARDS     16
#define MPROF_SLOTS_MIN  64                  /* 4 KiB: one page of 64-byte records */

typedef struct shard_s {
  pthread_mutex_t lock;
  mprof_record_t *slots;      /* capacity slots, or NULL */
  size_t          capacity;   /* power of two, or 0 */
  size_t          used;       /* records, orphans included */
  uint64_t        session;    /* session word records are accepted for; 0 = closed */
  mprof_totals_t  totals;
} __attribute__((aligned(64))) shard_t;

static shard_t shards[MPROF_SHARDS] = {
#define S {.lock = PTHREAD_MUTEX_INITIALIZER}
  S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S
#undef S
};

/* Records per heap, approximately: counts per bucket of heap addresses, so that the delete or destroy of a
 * heap with no sampled block (nearly all of them) skips the scan of every record. */
#define HEAP_BUCKETS 1024
static uint32_t heap_records[HEAP_BUCKETS];   /* relaxed atomics */

static inline uint32_t *heap_bucket(const mi_heap_t *heap)
{
  return &heap_records[((uintptr_t)heap >> 4) * 0x9e3779b97f4a7c15ull >> 54];
}
static inline void heap_count(const mi_heap_t *heap, int delta)
{
  if (heap != NULL) __atomic_add_fetch(heap_bucket(heap), (uint32_t)delta, __ATOMIC_RELAXED);
}

bool mprof_record_heap_may_have(const mi_heap_t *heap)
{
  return heap != NULL && __atomic_load_n(heap_bucket(heap), __ATOMIC_RELAXED) != 0;
}

static inline uint64_t addr_hash(uintptr_t addr) { return (uint64_t)(addr >> 4) * 0x9e3779b97f4a7c15ull; }
static inline shard_t *shard_of(uintptr_t addr) { return &shards[addr_hash(addr) >> 60]; }
static inline size_t home_slot(const shard_t *s, uintptr_t addr)
{
  return (size_t)(addr_hash(addr) >> 24) & (s->capacity - 1);
}

static void shard_release(shard_t *s)
{
  mprof_pmem_unmap(s->slots, s->capacity * sizeof(mprof_record_t));
  s->slots = NULL;
  s->capacity = 0;
}

/* Index of addr's slot, or of the empty slot where it would go. */
static size_t probe(const shard_t *s, uintptr_t addr)
{
  size_t mask = s->capacity - 1, i = home_slot(s, addr);
  while (s->slots[i].addr != 0 && s->slots[i].addr != addr) i = (i + 1) & mask;
  return i;
}

/* Whether addr has a record in s (its lock held), at *at. */
static bool slot_of(const shard_t *s, uintptr_t addr, size_t *at)
{
  if (s->capacity == 0) return false;
  *at = probe(s, addr);
  return s->slots[*at].addr == addr;
}

static inline bool shard_has_room(const shard_t *s)   /* for one more record: load <= 70% */
{
  return s->capacity != 0 && (s->used + 1) * 10 <= s->capacity * 7;
}

static inline size_t shard_next_capacity(const shard_t *s)
{
  return s->capacity ? s->capacity * 2 : MPROF_SLOTS_MIN;
}

/* A table for shard_grow, mapped with no lock held and its pages faulted in: under the shard lock the
 * mapping (the kernel's address-space lock, taken for writing, waits behind the program's page faults) and
 * the faults kept every thread that wanted the shard asleep, and every sleep lets another thread of a
 * threaded program run and fill its heap (bench/mstress_like: two sleeps a run lift its peak under mimalloc
 * by 0.6-1 MiB; doc/performance.md).  The rehash writes every page anyway. */
static mprof_record_t *table_map(size_t cap)
{
  char *p = mprof_pmem_map(cap * sizeof(mprof_record_t));
  for (size_t at = 0; p != NULL && at < cap * sizeof(mprof_record_t); at += 4096)
    __atomic_store_n(p + at, 0, __ATOMIC_RELAXED);
  return (mprof_record_t *)p;
}

/* Shard s (its lock held) moves to `slots`, of the next capacity; the old table is returned in *old, for
 * the caller to unmap once the lock is released. */
static void shard_grow(shard_t *s, mprof_record_t *slots, mprof_record_t **old, size_t *old_cap)
{
  *old = s->slots;
  *old_cap = s->capacity;
  s->slots = slots;
  s->capacity = shard_next_capacity(s);
  for (size_t i = 0; i < *old_cap; i++) {
    if ((*old)[i].addr != 0) s->slots[probe(s, (*old)[i].addr)] = (*old)[i];
  }
}

/* Makes room for one more record under the lock (a rare path: orphans).  False when profiler memory is
 * exhausted. */
static bool shard_reserve(shard_t *s)
{
  if (shard_has_room(s)) return true;
  mprof_record_t *slots = table_map(shard_next_capacity(s)), *old;
  size_t old_cap;
  if (slots == NULL) return false;
  shard_grow(s, slots, &old, &old_cap);
  mprof_pmem_unmap(old, old_cap * sizeof(mprof_record_t));
  return true;
}

/* Removes slot i, shifting later members of its probe run back so no lookup crosses a hole. */
static void slot_delete(shard_t *s, size_t i)
{
  size_t mask = s->capacity - 1;
  for (size_t j = (i + 1) & mask; s->slots[j].addr != 0; j = (j + 1) & mask) {
    size_t k = home_slot(s, s->slots[j].addr);
    /* slots[j] may move to i when its home k is not cyclically within (i, j]. */
    bool stays = (i <= j) ? (i < k && k <= j) : (i < k || k <= j);
    if (!stays) {
      s->slots[i] = s->slots[j];
      i = j;
    }
  }
  s->slots[i].addr = 0;
}

/* r's freed weight into its set's lifetime bucket (r freed at `now`): the set's last bucket when the same,
 * else looked up (mprof_stack_freed, under a stack shard lock); frees of a site come in runs of one
 * bucket, and the hint saves the lookup and the lock for them. */
static void lifetime_add(const mprof_record_t *r, uint64_t now)
{
  mprof_stack_t *set = mprof_stack_get(r->stack_id);
  unsigned b = mprof_lifetime_bucket(now > r->alloc_ns ? now - r->alloc_ns : 0);
  mprof_stack_t *f = __atomic_load_n(&set->freed_hint, __ATOMIC_RELAXED);
  if (f == NULL || f->lifetime != b) {
    f = mprof_stack_get(mprof_stack_freed(r->stack_id, b));
    __atomic_store_n(&set->freed_hint, f, __ATOMIC_RELAXED);
  }
  __atomic_fetch_add(&f->alloc_obj_fx, r->obj_fx, __ATOMIC_RELAXED);
  __atomic_fetch_add(&f->alloc_bytes, r->inuse_bytes, __ATOMIC_RELAXED);
}

/* r's weight leaves the totals and its set's in-use at `now` (0: not read); `freed`: its block was freed
 * (with lifetimes, its lifetime is counted), else released behind our back (a stale record). */
static void totals_sub_live(mprof_totals_t *t, const mprof_record_t *r, uint64_t now, bool freed)
{
  if (r->flags & MPROF_RECORD_ORPHAN) return;
  t->live--;
  t->live_req_bytes -= r->size;
  t->inuse_obj_fx -= r->obj_fx;
  t->inuse_bytes -= r->inuse_bytes;
  mprof_peak_free(mprof_stack_get(r->stack_id), r, now);
  if (freed && mprof_lifetimes) lifetime_add(r, now);
}

/* When a record's block is freed: with lifetimes, now, for a sample; else 0 (the timeline reads the clock
 * when it needs to: peak_inline.h). */
static uint64_t free_time(const mprof_record_t *r)
{
  return mprof_lifetimes && !(r->flags & MPROF_RECORD_ORPHAN) ? mprof_mono_ns() : 0;
}

void mprof_record_lock_all(void)
{
  for (size_t i = 0; i < MPROF_SHARDS; i++) mprof_lock(&shards[i].lock);
}

/* A fork child whose forking thread held profiler locks (a signal handler forked): fresh locks. */
void mprof_record_postfork_reinit(void)
{
  for (size_t i = 0; i < MPROF_SHARDS; i++) pthread_mutex_init(&shards[i].lock, NULL);
  mprof_peak_postfork_reinit();
}

void mprof_record_unlock_all(void)
{
  for (size_t i = MPROF_SHARDS; i-- > 0;) mprof_unlock(&shards[i].lock);
}

/* Counts the stacks (not their label sets or lifetime buckets) that a discard releases. */
static void count_stack(mprof_stack_t *e, mprof_stack_t *stack, void *arg)
{
  if (e == stack) (*(uint64_t *)arg)++;
}

/* What the tables hold goes (every record shard lock held): every record loses its weight and stack and
 * becomes an orphan (its block still lives), the stacks go, every total and the peak start from 0; what
 * went is counted in *gone. */
static void discard_locked(mprof_discarded_t *gone)
{
  mprof_totals_t t;
  mprof_record_totals_locked(&t);
  *gone = (mprof_discarded_t){.live = t.live, .inuse_bytes = t.inuse_bytes, .samples = t.samples,
                              .alloc_bytes = t.alloc_bytes, .peak_bytes = t.peak_bytes};
  mprof_stacks_each(count_stack, &gone->stacks);
  for (size_t i = 0; i < MPROF_SHARDS; i++) {
    shard_t *s = &shards[i];
    for (size_t k = 0; k < s->capacity; k++) {
      mprof_record_t *r = &s->slots[k];
      if (r->addr == 0) continue;
      r->stack_id = r->obj_fx = r->inuse_bytes = r->half_bytes = 0;
      r->flags = MPROF_RECORD_ORPHAN;
    }
    if (s->used == 0) shard_release(s);
    memset(&s->totals, 0, sizeof s->totals);
    s->session = 0;
  }
  mprof_stacks_end();
  mprof_peak_end();
}

/* Start: what an earlier session kept is discarded (*gone), then fresh counters and stacks, accepting
 * only this session (orphans stay).  A shard without a table gets its first one here, by the thread that
 * starts the session: mapped by a sampling thread, even with the lock released, it was a system call that
 * slept behind the program's page faults about once a run of bench/mstress_like (16 shards).  Its page is
 * not touched: address space only until the first sample (a fault, which does not wait for mappings). */
void mprof_record_begin(uint64_t session_word, mprof_discarded_t *gone)
{
  mprof_record_lock_all();
  discard_locked(gone);
  for (size_t i = 0; i < MPROF_SHARDS; i++) {
    shard_t *s = &shards[i];
    s->session = session_word;
    mprof_record_t *first = NULL, *none;
    size_t none_cap;
    if (s->capacity == 0) first = mprof_pmem_map(MPROF_SLOTS_MIN * sizeof(mprof_record_t));
    if (first != NULL) shard_grow(s, first, &none, &none_cap);   /* from no table: nothing to move */
  }
  mprof_stacks_begin(session_word);
  mprof_peak_begin(mprof_mono_ns());
  mprof_record_unlock_all();
}

/* Stop: no sample is accepted any more; the records keep their weights and stacks, so that dumps still
 * show the session, and frees of its blocks still leave its in-use totals, until the next start or a
 * reset discards them. */
void mprof_record_end(void)
{
  mprof_record_lock_all();
  for (size_t i = 0; i < MPROF_SHARDS; i++) shards[i].session = 0;
  mprof_stacks_close();
  mprof_record_unlock_all();
}

/* mi_prof_reset while stopped: what the stopped session kept goes (*gone). */
void mprof_record_discard(mprof_discarded_t *gone)
{
  mprof_record_lock_all();
  discard_locked(gone);
  mprof_record_unlock_all();
}

/* Puts r in its slot (shard lock held, room reserved): a stale record at the address is replaced. */
static void slot_put(shard_t *s, const mprof_record_t *r)
{
  mprof_record_t *slot = &s->slots[probe(s, r->addr)];
  if (slot->addr != 0) {                       /* stale: freed behind our back */
    totals_sub_live(&s->totals, slot, 0, false);
    s->totals.untracked_frees++;
    heap_count(slot->heap, -1);
  } else {
    s->used++;
  }
  *slot = *r;
  heap_count(r->heap, +1);
}

/* A shard without room gets its next table mapped with the lock released (table_map), then the insert
 * starts over; a table another thread's growth made stale meanwhile is unmapped and mapped again. */
mprof_insert_t mprof_record_insert(const mprof_record_t *r, uint64_t session_word)
{
  shard_t *s = shard_of(r->addr);
  mprof_insert_t rc;
  mprof_record_t *spare = NULL, *old = NULL;
  size_t spare_cap = 0, old_cap = 0;
  for (;;) {
    rc = MPROF_INSERT_OK;
    mprof_lock(&s->lock);
    bool room = shard_has_room(s);
    size_t want = shard_next_capacity(s);
    if (mprof_unlikely(s->session != session_word)) {
      rc = MPROF_INSERT_SESSION;
    } else if (mprof_unlikely(!room) && spare != NULL && spare_cap == want) {
      shard_grow(s, spare, &old, &old_cap);
      spare = NULL;
      room = true;
    }
    if (rc == MPROF_INSERT_OK && room) {
      slot_put(s, r);
      s->totals.samples++;
      s->totals.live++;
      s->totals.live_req_bytes += r->size;
      s->totals.inuse_obj_fx += r->obj_fx;
      s->totals.inuse_bytes += r->inuse_bytes;
      s->totals.alloc_obj_fx += r->obj_fx;
      s->totals.alloc_bytes += r->inuse_bytes;
      mprof_peak_sample(mprof_stack_get(r->stack_id), r);
    }
    mprof_unlock(&s->lock);
    if (rc != MPROF_INSERT_OK || room) break;
    mprof_pmem_unmap(spare, spare_cap * sizeof(mprof_record_t));
    spare_cap = want;
    spare = table_map(want);
    if (spare == NULL) {
      rc = MPROF_INSERT_MEMORY;
      break;
    }
  }
  if (mprof_unlikely(spare != NULL)) mprof_pmem_unmap(spare, spare_cap * sizeof(mprof_record_t));
  if (mprof_unlikely(old != NULL)) mprof_pmem_unmap(old, old_cap * sizeof(mprof_record_t));
  return rc;
}

bool mprof_record_remove(uintptr_t addr, mprof_record_t *out)
{
  shard_t *s = shard_of(addr);
  size_t i;
  mprof_lock(&s->lock);
  bool found = slot_of(s, addr, &i);
  if (found) {
    *out = s->slots[i];
    totals_sub_live(&s->totals, out, free_time(out), true);
    slot_delete(s, i);
    s->used--;
    heap_count(out->heap, -1);
  }
  mprof_unlock(&s->lock);
  return found;
}

/* The block at addr stays, no longer a sample: its record (if any) becomes an orphan of `heap`.  False
 * when no record could be kept (profiler memory). */
bool mprof_record_orphan(uintptr_t addr, size_t size, mi_heap_t *heap)
{
  shard_t *s = shard_of(addr);
  mprof_record_t r = {.addr = addr, .size = size, .heap = heap, .flags = MPROF_RECORD_ORPHAN};
  bool ok;
  mprof_lock(&s->lock);
  ok = shard_reserve(s);
  if (ok) slot_put(s, &r);
  mprof_unlock(&s->lock);
  return ok;
}

/* Calls visit(s, k, arg) on each record of `heap`, with its shard's lock held (one shard at a time).
 * visit returns 1 to go on to the next slot, 0 when it deleted slot k (a later record may move into it:
 * look again), -1 to stop. */
static void records_of(mi_heap_t *heap, int (*visit)(shard_t *s, size_t k, void *arg), void *arg)
{
  int step = 1;
  for (size_t i = 0; i < MPROF_SHARDS && step >= 0; i++) {
    shard_t *s = &shards[i];
    mprof_lock(&s->lock);
    for (size_t k = 0; k < s->capacity && step >= 0; k += (size_t)step) {
      step = s->slots[k].addr != 0 && s->slots[k].heap == heap ? visit(s, k, arg) : 1;
    }
    mprof_unlock(&s->lock);
  }
}

typedef struct heap_fn_s {
  bool (*fn)(const mprof_record_t *r, void *arg);
  void *arg;
  size_t n;
  mi_heap_t *to;
} heap_fn_t;

static int take_one(shard_t *s, size_t k, void *arg)
{
  heap_fn_t *h = arg;
  mprof_record_t *r = &s->slots[k];
  bool more = h->fn(r, h->arg);
  totals_sub_live(&s->totals, r, free_time(r), true);
  heap_count(r->heap, -1);
  slot_delete(s, k);
  s->used--;
  h->n++;
  return more ? 0 : -1;
}

/* Removes records of `heap` (mi_heap_destroy), calling fn on each with its shard lock held (fn may only
 * copy it), until fn returns false.  Returns how many. */
size_t mprof_record_take_heap(mi_heap_t *heap, bool (*fn)(const mprof_record_t *r, void *arg), void *arg)
{
  heap_fn_t h = {.fn = fn, .arg = arg};
  records_of(heap, take_one, &h);
  return h.n;
}

static int retag_one(shard_t *s, size_t k, void *arg)
{
  heap_fn_t *h = arg;
  heap_count(s->slots[k].heap, -1);
  heap_count(h->to, +1);
  s->slots[k].heap = h->to;
  return 1;
}

/* Every record of heap `from` now belongs to `to` (mi_heap_delete moves the blocks so). */
void mprof_record_retag(mi_heap_t *from, mi_heap_t *to)
{
  heap_fn_t h = {.to = to};
  records_of(from, retag_one, &h);
}

static int each_one(shard_t *s, size_t k, void *arg)
{
  heap_fn_t *h = arg;
  h->fn(&s->slots[k], h->arg);
  return 1;
}

/* Calls fn on every record of `heap` (shard locks held one at a time: fn may only copy; its result is
 * ignored). */
void mprof_record_each_heap(mi_heap_t *heap, bool (*fn)(const mprof_record_t *r, void *arg), void *arg)
{
  heap_fn_t h = {.fn = fn, .arg = arg};
  records_of(heap, each_one, &h);
}

/* The record at addr, copied; false when there is none. */
bool mprof_record_find(uintptr_t addr, mprof_record_t *out)
{
  shard_t *s = shard_of(addr);
  size_t i;
  mprof_lock(&s->lock);
  bool found = slot_of(s, addr, &i);
  if (found) *out = s->slots[i];
  mprof_unlock(&s->lock);
  return found;
}

/* A sample that could not be recorded (no room for its block or its record): its allocated weight
 * still counts, in the totals and on the stack (a "dropped" stack), under the shard its stack id picks.
 * False when the session is over. */
bool mprof_record_count(uint64_t stack_id, uint64_t obj_fx, uint64_t bytes, uint64_t session_word)
{
  shard_t *s = &shards[(stack_id * 0x9e3779b97f4a7c15ull) >> 60];
  bool ok;
  mprof_lock(&s->lock);
  ok = s->session == session_word;
  if (ok) {
    s->totals.samples++;
    s->totals.alloc_obj_fx += obj_fx;
    s->totals.alloc_bytes += bytes;
    mprof_peak_alloc_only(mprof_stack_get(stack_id), obj_fx, bytes);
  }
  mprof_unlock(&s->lock);
  return ok;
}

void mprof_record_totals_locked(mprof_totals_t *out)
{
  memset(out, 0, sizeof *out);
  for (size_t i = 0; i < MPROF_SHARDS; i++) {
    const mprof_totals_t *t = &shards[i].totals;
    out->samples += t->samples;
    out->live += t->live;
    out->live_req_bytes += t->live_req_bytes;
    out->inuse_obj_fx += t->inuse_obj_fx;
    out->inuse_bytes += t->inuse_bytes;
    out->alloc_obj_fx += t->alloc_obj_fx;
    out->alloc_bytes += t->alloc_bytes;
    out->untracked_frees += t->untracked_frees;
  }
  mprof_peak_totals(out);
}

/* A consistent snapshot: every shard lock is held (in order) while summing. */
void mprof_record_totals(mprof_totals_t *out)
{
  mprof_record_lock_all();
  mprof_record_totals_locked(out);
  mprof_record_unlock_all();
}

void mprof_record_reset_alloc(void)
{
  mprof_record_lock_all();
  for (size_t i = 0; i < MPROF_SHARDS; i++) {
    shard_t *s = &shards[i];
    s->totals.samples = s->totals.alloc_obj_fx = s->totals.alloc_bytes = s->totals.untracked_frees = 0;
  }
  mprof_stacks_reset_alloc();
  mprof_peak_reset(mprof_mono_ns());
  mprof_record_unlock_all();
}
