/* stacktab.c - interned stack traces, their label sets and per-label-set counters.
 *
 * Each distinct stack (its frames, innermost first) is stored once.  A sample is counted under a label set
 * of its stack (its thread label and bucketed size: a pprof sample), whose id its record holds; with
 * MIMALLOC_PROF_LIFETIMES the free of a sampled block is counted under a lifetime bucket of its label set.
 * All three are entries of one table (mprof_stack_t: STACK, SET, FREED), sharded by the hash of the
 * frames, so a stack and everything under it share a shard and one lock.  A shard has its own lock (rank
 * 4), an open-addressing index of entry numbers, entries in fixed chunks that never move (so an id names
 * the same memory for the whole session), and a bump pool for the frames.  All of it is profiler memory
 * (pmem.c) under the stack table's share of the budget; when it cannot grow the sample is dropped
 * (MI_PROF_DROP_STACKS).  Each entry added also reserves the memory a dump of it needs (mprof_pmem_reserve;
 * pmem.h derives the amount), so the table never takes what a dump needs; an entry that cannot is dropped
 * for memory too.
 *
 * Lookups without the lock.  A sample whose set is in the table already (nearly every sample, once a
 * program's stacks are known) finds it without the shard's lock: the threads of a program that allocate
 * through one stack share its shard, and a holder preempted on a machine with fewer cores than threads
 * made the others wait and sleep (bench/mstress_like: 8 threads on 2 cores; a sleep hands the CPU to a
 * thread that fills its heap, doc/performance.md).  Entries never move, and an entry's number is stored in
 * the index (release) only after the entry is written; a lookup counts itself in the shard's `readers`
 * and reads the index only while the shard's session is its own.  So the table is released only after
 * the session word changed and `readers` came to zero, and an index replaced by a larger one stays mapped
 * until then, its pages given back (a lookup that still reads it finds nothing, and takes the lock).
 *
 * Label sets are bounded per stack: after MPROF_LABEL_SETS of them, a sample with new labels goes to the
 * set of thread "[other]" and its size rounded down to a power of two (at most 64 more sets).
 *
 * Counters: allocated, in-use and peak, changed by peak.c under peak_lock while record.c holds the
 * record shard lock of the block concerned.  Ids are resolved only there, after record.c checked the
 * session, and the table is released (when a session's data is discarded: a start, or a reset while
 * stopped) only while every record shard lock is held: a sampler that interned a stack before then can
 * never touch freed memory.  A stop only closes it to new stacks.
 */
#include "stacktab.h"
#include "internal.h"
#include "options.h"
#include "pmem.h"

#include <sched.h>
#include <string.h>

#define SHARDS         16
#define CHUNK_ENTRIES  (8192 / sizeof(mprof_stack_t)) /* entries per chunk of two pages: 56 on 64-bit */
#define MAX_ENTRIES    131072u            /* per shard */
#define MAX_CHUNKS     ((MAX_ENTRIES + CHUNK_ENTRIES - 1) / CHUNK_ENTRIES)
#define POOL_BYTES     ((size_t)16 << 10) /* frame pool chunk: 2047 frames */
#define POOL_FIRST     ((size_t)4 << 10)  /* a shard's first one: 511 frames, more than MIMALLOC_PROF_BT_MAX's
                                           * 256 (a small budget's sixteen shards take a page each) */
#define INDEX_MIN      1024               /* one page of entry numbers */
#define CHUNK_BYTES    (CHUNK_ENTRIES * sizeof(mprof_stack_t))

typedef struct pool_s {                   /* header of a frame pool chunk */
  struct pool_s *next;
  size_t bytes;
} pool_t;


/* Aligned to 64 bytes: a shard's lock shares no cache line with another shard's, and a shard is 128 bytes on
 * x86-64 and aarch64 (64 on i386), so its number (s - shards, chunk_of) is a shift. */
typedef struct shard_s {
  _Alignas(64) pthread_mutex_t lock;
  uint64_t        session;                /* atomic: session word stacks are interned for; 0 = closed */
  uint32_t        count;                  /* entries in use */
  uint32_t        readers;                /* atomic: lookups under way without the lock */
  uint32_t       *index;                  /* atomic: entry number + 1 per slot (atomic), 0 = empty */
  size_t          index_cap;              /* atomic: power of two */
  pool_t         *pools;                  /* newest first */
  uintptr_t      *pool_next;              /* free frame space in pools */
  size_t          pool_left;              /* frames */
  size_t          reserved;               /* dump reserve held for these stacks (pmem.c), bytes */
  struct spares_s *spares;                /* the lock holder's, while it interns (shard_map) */
} shard_t;

/* Mappings an intern makes outside the shard lock.  A mapping takes the kernel's lock of the address space
 * for writing: made under the shard lock, it kept every sampling thread that wanted the shard waiting while
 * the program's page faults went first, and each of them slept (a sleep lets another thread of a threaded
 * program run and fill its heap: bench/mstress_like, doc/performance.md).  So an intern that finds the
 * shard short of memory (its index, an entry chunk, a frame pool) asks for it (`need`), releases the lock,
 * maps it and tries again, and unmaps what it replaced or did not use once the lock is released. */
typedef struct spares_s {
  size_t need;                            /* bytes asked for; 0: none */
  size_t n;                               /* spare[0..n) mapped (NULL once used) */
  struct { void *p; size_t bytes; } spare[3], gone;   /* mapped, not yet used; an index replaced */
} spares_t;

/* The "dropped (reason)" entries, outside the shards so they exist whatever the budget: a one-frame set
 * per reason (frame MI_PROF_FRAME_DROPPED(reason), no labels), and with lifetimes a FREED entry per reason
 * and bucket: dropped[n], n = reason, or MI_PROF_DROP_REASONS + reason * buckets + b. */
#define DROPPED_ENTRIES (MI_PROF_DROP_REASONS * (1 + MPROF_LIFETIME_BUCKETS))
_Static_assert(MPROF_DUMP_LIFETIMES_BYTES ==
                   MI_PROF_DROP_REASONS * MPROF_LIFETIME_BUCKETS * MPROF_DUMP_STACK_BYTES,
               "MPROF_DUMP_LIFETIMES_BYTES: the dropped sets' lifetime buckets");
static uintptr_t     dropped_frame[MI_PROF_DROP_REASONS];
static mprof_stack_t dropped[DROPPED_ENTRIES];

/* Indexes replaced by larger ones, mapped until the shard is released (lookups without the lock may read
 * them): from INDEX_MIN entries up to the one below the largest (MAX_ENTRIES at most half full): 9. */
#define OLD_INDEXES 9
static struct { void *p; size_t bytes; } old_index[SHARDS][OLD_INDEXES];

static shard_t shards[SHARDS] = {
#define S {.lock = PTHREAD_MUTEX_INITIALIZER}
  S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S
#undef S
};

static inline uint64_t mix(uint64_t h, uint64_t v)
{
  h ^= v;
  h *= 0xff51afd7ed558ccdull;
  return h ^ (h >> 32);
}

static uint64_t frames_hash(const uintptr_t *frames, size_t depth)
{
  uint64_t h = 0x9ae16a3b2f90404full ^ depth;
  for (size_t i = 0; i < depth; i++) h = mix(h, frames[i]);
  return h ? h : 1;
}

static inline uint64_t set_hash(uint64_t stack_hash, const mprof_labels_t *l)
{
  return mix(stack_hash ^ l->thread_words[0] ^ (l->thread_words[1] * 0x9e3779b97f4a7c15ull), l->bytes) | 1;
}

static uint64_t freed_hash(uint64_t set_hash, unsigned b) { return mix(set_hash, 0x100u + b) | 1; }

/* Chunk c of shard k is chunk_at[c][k]: the shards' first chunks share a page, so a session that uses every
 * shard touches one page of this table, not one a shard (16 pages of bss, 64 KiB resident). */
static mprof_stack_t *chunk_at[MAX_CHUNKS][SHARDS];

static inline mprof_stack_t **chunk_of(const shard_t *s, uint32_t c) { return &chunk_at[c][s - shards]; }

static inline mprof_stack_t *entry(const shard_t *s, uint32_t n)
{
  return &(*chunk_of(s, n / CHUNK_ENTRIES))[n % CHUNK_ENTRIES];
}

static inline uint64_t id_of(const mprof_stack_t *e) { return (uint64_t)(uintptr_t)e; }

/* Memory for shard s (its lock held): a spare of that size if the holder mapped one, else a request for
 * it (NULL, the holder maps it after the lock), or, outside an intern, a mapping made now. */
static void *shard_map(shard_t *s, size_t bytes)
{
  spares_t *sp = s->spares;
  if (sp == NULL) return mprof_pmem_map_stacks(bytes);
  for (size_t i = 0; i < sp->n; i++) {
    void *p = sp->spare[i].p;
    if (p != NULL && sp->spare[i].bytes == bytes) {
      sp->spare[i].p = NULL;
      return p;
    }
  }
  if (sp->need == 0) sp->need = bytes;
  return NULL;
}

/* Keeps index p, which shard s (its lock held) replaced, mapped until the shard is released; its pages are
 * given back now, or after the lock when an intern holds it. */
static void retire_index(shard_t *s, void *p, size_t bytes)
{
  size_t k = 0;
  while (k < OLD_INDEXES - 1 && old_index[s - shards][k].p != NULL) k++;
  old_index[s - shards][k].p = p;
  old_index[s - shards][k].bytes = bytes;
  spares_t *sp = s->spares;
  if (sp != NULL && sp->gone.p == NULL) {
    sp->gone.p = p;
    sp->gone.bytes = bytes;
  } else {
    mprof_pmem_discard(p, bytes);
  }
}

static void shard_release(shard_t *s)
{
  for (uint32_t c = 0; c < MAX_CHUNKS && *chunk_of(s, c) != NULL; c++) {
    mprof_stack_t **chunk = chunk_of(s, c);
    mprof_pmem_unmap_stacks(*chunk, CHUNK_BYTES);
    *chunk = NULL;
  }
  while (s->pools != NULL) {
    pool_t *next = s->pools->next;
    mprof_pmem_unmap_stacks(s->pools, s->pools->bytes);
    s->pools = next;
  }
  mprof_pmem_unmap_stacks(s->index, s->index_cap * sizeof(uint32_t));
  for (size_t k = 0; k < OLD_INDEXES && old_index[s - shards][k].p != NULL; k++) {
    mprof_pmem_unmap_stacks(old_index[s - shards][k].p, old_index[s - shards][k].bytes);
    old_index[s - shards][k].p = NULL;
  }
  mprof_pmem_unreserve_stacks(s->reserved);
  s->reserved = 0;
  s->index = NULL;
  s->index_cap = 0;
  s->count = 0;
  s->pool_next = NULL;
  s->pool_left = 0;
}

/* Makes room in the index for `more` entries (at most half full), creating or doubling it. */
static MPROF_NOINLINE bool index_grow(shard_t *s, uint32_t more)
{
  if (s->index_cap != 0 && (size_t)(s->count + more) * 2 <= s->index_cap) return true;
  size_t cap = s->index_cap ? s->index_cap * 2 : INDEX_MIN;
  uint32_t *index = shard_map(s, cap * sizeof(uint32_t));
  if (index == NULL) return false;
  for (uint32_t n = 0; n < s->count; n++) {
    size_t i = (size_t)entry(s, n)->hash & (cap - 1);
    while (index[i] != 0) i = (i + 1) & (cap - 1);
    index[i] = n + 1;
  }
  uint32_t *old = s->index;
  size_t old_bytes = s->index_cap * sizeof(uint32_t);
  __atomic_store_n(&s->index, index, __ATOMIC_RELEASE);      /* before its capacity: find_unlocked */
  __atomic_store_n(&s->index_cap, cap, __ATOMIC_RELEASE);
  if (old != NULL) retire_index(s, old, old_bytes);
  return true;
}

static inline bool index_reserve(shard_t *s, uint32_t more)
{
  return mprof_likely(s->index_cap != 0 && (size_t)(s->count + more) * 2 <= s->index_cap) ||
         index_grow(s, more);
}

static uintptr_t *pool_take(shard_t *s, size_t depth)
{
  if (s->pool_left < depth) {
    size_t bytes = s->pools != NULL ? POOL_BYTES : POOL_FIRST;
    pool_t *pool = shard_map(s, bytes);
    if (pool == NULL) return NULL;
    pool->bytes = bytes;
    pool->next = s->pools;
    s->pools = pool;
    s->pool_next = (uintptr_t *)(pool + 1);
    s->pool_left = (bytes - sizeof(pool_t)) / sizeof(uintptr_t);
  }
  uintptr_t *frames = s->pool_next;
  s->pool_next += depth;
  s->pool_left -= depth;
  return frames;
}

/* What an entry is looked up by: a stack by its frames; a set by its stack's frames and its labels (one
 * probe finds a sample's set; its stack is looked up only when the set is new); a FREED entry by its set
 * and lifetime bucket. */
typedef struct lookup_s {
  uint64_t              hash;
  uint8_t               kind;
  const uintptr_t      *frames;    /* STACK, SET */
  size_t                depth;     /* STACK, SET */
  const mprof_labels_t *labels;    /* SET */
  uint32_t              link;      /* FREED: the set's entry number */
  unsigned              lifetime;  /* FREED */
} lookup_t;

static inline bool same_labels(const mprof_labels_t *a, const mprof_labels_t *b)
{
  return ((a->thread_words[0] ^ b->thread_words[0]) | (a->thread_words[1] ^ b->thread_words[1]) |
          (a->bytes ^ b->bytes)) == 0;
}

static inline bool matches(const mprof_stack_t *e, const lookup_t *k)
{
  if (e->hash != k->hash || e->kind != k->kind) return false;
  if (k->kind == MPROF_ENTRY_FREED) return e->link == k->link && e->lifetime == k->lifetime;
  if (k->kind == MPROF_ENTRY_SET && !same_labels(&e->labels, k->labels)) return false;
  return e->depth == k->depth && memcmp(e->frames, k->frames, k->depth * sizeof(uintptr_t)) == 0;
}

/* Whether e is the set of (frames, labels) at hash: matches() for the one key every sample looks up. */
static inline bool is_set(const mprof_stack_t *e, uint64_t hash, const uintptr_t *frames, size_t depth,
                          const mprof_labels_t *labels)
{
  return e->hash == hash && e->kind == MPROF_ENTRY_SET && same_labels(&e->labels, labels) &&
         e->depth == depth && memcmp(e->frames, frames, depth * sizeof(uintptr_t)) == 0;
}

/* The set of (frames, labels) at hash: its entry number + 1, or 0 with *slot the index slot where it goes
 * (shard lock held, index room made): a sample's lookup when find_unlocked did not find it. */
static inline uint32_t find_set(const shard_t *s, uint64_t hash, const uintptr_t *frames, size_t depth,
                                const mprof_labels_t *labels, size_t *slot)
{
  size_t mask = s->index_cap - 1, i = (size_t)hash & mask;
  for (uint32_t n; (n = s->index[i]) != 0; i = (i + 1) & mask) {
    if (is_set(entry(s, n - 1), hash, frames, depth, labels)) return n;
  }
  *slot = i;
  return 0;
}

/* The id of the set of (frames, labels) at hash h in session session_word, found without the lock; 0 when
 * it is not there, or the session is another. */
static uint64_t find_unlocked(shard_t *s, uint64_t session_word, uint64_t h, const uintptr_t *frames,
                              size_t depth, const mprof_labels_t *labels)
{
  uint64_t id = 0;
  __atomic_fetch_add(&s->readers, 1, __ATOMIC_SEQ_CST);      /* before the session: mprof_stacks_begin */
  if (__atomic_load_n(&s->session, __ATOMIC_SEQ_CST) == session_word && session_word != 0) {
    size_t cap = __atomic_load_n(&s->index_cap, __ATOMIC_ACQUIRE);     /* then an index at least as large */
    const uint32_t *index = __atomic_load_n(&s->index, __ATOMIC_ACQUIRE);
    size_t mask = cap - 1, i = (size_t)h & mask;
    for (size_t probes = 0; probes < cap; probes++, i = (i + 1) & mask) {
      uint32_t n = __atomic_load_n(&index[i], __ATOMIC_ACQUIRE);
      if (n == 0) break;
      const mprof_stack_t *e = entry(s, n - 1);
      if (is_set(e, h, frames, depth, labels)) {
        id = id_of(e);
        break;
      }
    }
  }
  __atomic_fetch_sub(&s->readers, 1, __ATOMIC_RELEASE);
  return id;
}

/* k's entry number + 1, or 0 with *slot the index slot where it goes (shard lock held, index room made). */
static inline uint32_t find(const shard_t *s, const lookup_t *k, size_t *slot)
{
  size_t mask = s->index_cap - 1, i = (size_t)k->hash & mask;
  for (uint32_t n; (n = s->index[i]) != 0; i = (i + 1) & mask) {
    if (matches(entry(s, n - 1), k)) return n;
  }
  *slot = i;
  return 0;
}

/* Adds k's entry as entry number s->count at index slot `slot`, under `up` (the stack of a SET, the set
 * of a FREED entry), whose frames it shares; a STACK gets a copy of its frames.  Its number + 1; 0, with
 * *why, when the shard is full or profiler memory is exhausted. */
static uint32_t append(shard_t *s, const lookup_t *k, size_t slot, const mprof_stack_t *up,
                       uint32_t up_n, mi_prof_drop_reason_t *why)
{
  uint32_t n = s->count, c = n / CHUNK_ENTRIES;
  *why = MI_PROF_DROP_MEMORY;
  if (n >= MAX_ENTRIES) {
    *why = MI_PROF_DROP_STACKS;
    return 0;
  }
  size_t depth = up != NULL ? up->depth : k->depth;   /* a stack's share: its frames (pmem.h) */
  size_t reserve = up == NULL ? depth * MPROF_DUMP_FRAME_BYTES : MPROF_DUMP_STACK_BYTES;
  if (!mprof_pmem_reserve_stacks(reserve)) return 0;
  mprof_stack_t **chunk = chunk_of(s, c);
  if (*chunk == NULL) *chunk = shard_map(s, CHUNK_BYTES);
  const uintptr_t *frames = NULL;
  if (*chunk != NULL) frames = up != NULL ? up->frames : pool_take(s, depth);
  if (frames == NULL) {
    mprof_pmem_unreserve_stacks(reserve);
    return 0;
  }
  s->reserved += reserve;
  if (up == NULL) memcpy((uintptr_t *)(uintptr_t)frames, k->frames, depth * sizeof(uintptr_t));
  mprof_stack_t *e = entry(s, n);
  memset(e, 0, sizeof *e);
  e->hash = k->hash;
  e->kind = k->kind;
  e->shard = (uint8_t)(s - shards);
  e->number = n;
  e->depth = (uint32_t)depth;
  e->frames = frames;
  e->link = up != NULL ? up_n : 0;
  if (k->kind == MPROF_ENTRY_SET) e->labels = *k->labels;
  if (k->kind == MPROF_ENTRY_FREED) {
    e->labels = up->labels;
    e->lifetime = (uint8_t)k->lifetime;
  }
  s->count = n + 1;
  __atomic_store_n(&s->index[slot], n + 1, __ATOMIC_RELEASE);   /* the entry first: find_unlocked */
  return n + 1;
}

/* The set for labels beyond the stack's limit: thread "[other]", the size's power of two. */
static void other_labels(mprof_labels_t *l)
{
  memset(l->thread, 0, sizeof l->thread);
  memcpy(l->thread, MPROF_OTHER_THREAD, sizeof MPROF_OTHER_THREAD);
  if (l->bytes != 0) l->bytes = (uint64_t)1 << (63 - __builtin_clzll(l->bytes));
}

/* A set that is not in the table yet (shard lock held, room for two entries made): under its stack,
 * added first if new, or under the stack's "[other]" set when the stack has its MPROF_LABEL_SETS.  Its
 * entry number + 1; 0 with *why. */
static uint32_t add_set(shard_t *s, uint64_t stack_hash, lookup_t *k, size_t slot, mi_prof_drop_reason_t *why)
{
  lookup_t sk = {.hash = stack_hash, .kind = MPROF_ENTRY_STACK, .frames = k->frames, .depth = k->depth};
  size_t stack_slot;
  uint32_t n = find(s, &sk, &stack_slot);
  if (n == 0 && (n = append(s, &sk, stack_slot, NULL, 0, why)) == 0) return 0;
  mprof_stack_t *stack = entry(s, n - 1);
  bool over = stack->link >= MPROF_LABEL_SETS;
  mprof_labels_t other;
  if (over) {
    other = *k->labels;
    other_labels(&other);
    k->labels = &other;
    k->hash = set_hash(stack_hash, &other);
  }
  uint32_t m = find(s, k, &slot);                     /* again: the stack may have taken its slot */
  if (m == 0 && (m = append(s, k, slot, stack, n - 1, why)) != 0 && !over) stack->link++;
  return m;
}

uint64_t mprof_stack_intern(const uintptr_t *frames, size_t depth, const mprof_labels_t *labels,
                            uint64_t session_word, mi_prof_drop_reason_t *why)
{
  uint64_t hash = frames_hash(frames, depth);
  size_t k = (size_t)(hash >> 60);
  shard_t *s = &shards[k];
  *why = MI_PROF_DROP_REASONS;
  uint64_t id = find_unlocked(s, session_word, set_hash(hash, labels), frames, depth, labels);
  if (id != 0) return id;
  spares_t sp;                       /* only what the loop asks for is set: this runs on every sample */
  sp.n = 0;
  sp.gone.p = NULL;
  for (size_t tries = 0; id == 0; tries++) {
    *why = MI_PROF_DROP_REASONS;     /* no drop: the session is over */
    sp.need = 0;
    mprof_lock(&s->lock);
    s->spares = tries < 3 ? &sp : NULL;   /* an index, a chunk, a pool: then whatever is still short */
    if (s->session != session_word) {
      /* leave id 0 */
    } else if (!index_reserve(s, 2)) {
      *why = MI_PROF_DROP_MEMORY;
    } else {
      uint64_t h = set_hash(hash, labels);
      size_t slot;
      uint32_t m = find_set(s, h, frames, depth, labels, &slot);
      if (m == 0) {
        lookup_t key = {.hash = h, .kind = MPROF_ENTRY_SET, .frames = frames, .depth = depth,
                        .labels = labels};
        m = add_set(s, hash, &key, slot, why);
      }
      if (m != 0) id = id_of(entry(s, m - 1));
    }
    s->spares = NULL;
    mprof_unlock(&s->lock);
    if (id != 0 || sp.need == 0 || *why != MI_PROF_DROP_MEMORY) break;
    char *p = mprof_pmem_map_stacks(sp.need);       /* what the shard lacked, mapped unlocked ... */
    if (p == NULL) break;                           /* the budget: dropped, as under the lock */
    __atomic_store_n(p, 0, __ATOMIC_RELAXED);       /* ... its first page faulted in, the one written at
                                                     * once (a pool's or chunk's later pages are written as
                                                     * they fill: faulting them now kept up to 12 KiB more
                                                     * a shard resident, python3 +100 KiB) */
    sp.spare[sp.n].p = p;
    sp.spare[sp.n++].bytes = sp.need;
  }
  for (size_t i = 0; i < sp.n; i++) mprof_pmem_unmap_stacks(sp.spare[i].p, sp.spare[i].bytes);
  if (sp.gone.p != NULL) mprof_pmem_discard(sp.gone.p, sp.gone.bytes);
  return id;
}

uint64_t mprof_stack_freed(uint64_t set_id, unsigned b)
{
  const mprof_stack_t *set = mprof_stack_get(set_id);
  mi_prof_drop_reason_t reason = MI_PROF_DROP_MEMORY;
  if (set->shard == SHARDS) {
    if (set->number < MI_PROF_DROP_REASONS) reason = (mi_prof_drop_reason_t)set->number;
  } else {
    shard_t *s = &shards[set->shard];
    uint64_t id = 0;
    mprof_lock(&s->lock);
    if (index_reserve(s, 1)) {
      lookup_t key = {.hash = freed_hash(set->hash, b), .kind = MPROF_ENTRY_FREED, .link = set->number,
                      .lifetime = b};
      size_t slot;
      uint32_t m = find(s, &key, &slot);
      if (m == 0) m = append(s, &key, slot, set, set->number, &reason);
      if (m != 0) id = id_of(entry(s, m - 1));
    }
    mprof_unlock(&s->lock);
    if (id != 0) return id;
  }
  return id_of(&dropped[MI_PROF_DROP_REASONS + (uint32_t)reason * MPROF_LIFETIME_BUCKETS + b]);
}

uint64_t mprof_stack_dropped(mi_prof_drop_reason_t why) { return id_of(&dropped[why]); }

static void counts_reset(mprof_stack_t *e)
{
  e->alloc_obj_fx = e->alloc_bytes = 0;
}

/* The "dropped" entries afresh (a session starts), or only their allocated counts (mi_prof_reset). */
static void dropped_reset(bool alloc_only)
{
  size_t n = mprof_lifetimes ? DROPPED_ENTRIES : MI_PROF_DROP_REASONS;
  for (size_t i = 0; i < n; i++) {
    mprof_stack_t *e = &dropped[i];
    if (alloc_only) {
      counts_reset(e);
      continue;
    }
    size_t r = i < MI_PROF_DROP_REASONS ? i : (i - MI_PROF_DROP_REASONS) / MPROF_LIFETIME_BUCKETS;
    dropped_frame[r] = (uintptr_t)MI_PROF_FRAME_DROPPED(r);
    *e = (mprof_stack_t){.hash = i + 1, .depth = 1, .frames = &dropped_frame[r], .link = MPROF_ENTRY_NONE,
                         .shard = SHARDS, .number = (uint32_t)i};
    if (i >= MI_PROF_DROP_REASONS) {
      e->kind = MPROF_ENTRY_FREED;
      e->lifetime = (uint8_t)((i - MI_PROF_DROP_REASONS) % MPROF_LIFETIME_BUCKETS);
    } else {
      e->kind = MPROF_ENTRY_SET;
    }
  }
}

/* Session boundaries: called with every record shard lock held (record.c). */
void mprof_stacks_begin(uint64_t session_word)
{
  dropped_reset(false);
  for (size_t k = 0; k < SHARDS; k++) {
    shard_t *s = &shards[k];
    mprof_lock(&s->lock);
    __atomic_store_n(&s->session, 0, __ATOMIC_SEQ_CST);       /* no lookup without the lock starts, */
    for (unsigned spins = 0; __atomic_load_n(&s->readers, __ATOMIC_SEQ_CST) != 0; spins++)  /* none is left */
      if (spins < MPROF_WAIT_SPINS) mprof_cpu_pause();
      else sched_yield();                                    /* a lookup's thread lost its CPU */
    shard_release(s);
    __atomic_store_n(&s->session, session_word, __ATOMIC_RELAXED);
    mprof_unlock(&s->lock);
  }
}

void mprof_stacks_end(void) { mprof_stacks_begin(0); }

void mprof_stacks_close(void)
{
  for (size_t k = 0; k < SHARDS; k++) {
    mprof_lock(&shards[k].lock);
    __atomic_store_n(&shards[k].session, 0, __ATOMIC_RELAXED);
    mprof_unlock(&shards[k].lock);
  }
}

/* mi_prof_reset: allocated and freed counters to zero (every record shard lock held). */
void mprof_stacks_reset_alloc(void)
{
  dropped_reset(true);
  for (size_t k = 0; k < SHARDS; k++) {
    shard_t *s = &shards[k];
    mprof_lock(&s->lock);
    for (uint32_t n = 0; n < s->count; n++) counts_reset(entry(s, n));
    mprof_unlock(&s->lock);
  }
}

void mprof_stacks_each(void (*fn)(mprof_stack_t *e, mprof_stack_t *stack, void *arg), void *arg)
{
  size_t n = mprof_lifetimes ? DROPPED_ENTRIES : MI_PROF_DROP_REASONS;
  for (size_t i = 0; i < n; i++) {
    mprof_stack_t *e = &dropped[i];
    if (e->alloc_obj_fx != 0 || e->peak_gen != 0) fn(e, NULL, arg);   /* it has counted something */
  }
  for (size_t k = 0; k < SHARDS; k++) {
    shard_t *s = &shards[k];
    mprof_lock(&s->lock);
    for (uint32_t i = 0; i < s->count; i++) {
      mprof_stack_t *e = entry(s, i), *stack = e;
      if (e->kind == MPROF_ENTRY_FREED) stack = entry(s, e->link);
      if (stack->kind == MPROF_ENTRY_SET) stack = entry(s, stack->link);
      fn(e, stack, arg);
    }
    mprof_unlock(&s->lock);
  }
}

void mprof_stacks_prefork(void)
{
  for (size_t k = 0; k < SHARDS; k++) mprof_lock(&shards[k].lock);
}

void mprof_stacks_postfork_reinit(void)
{
  for (size_t k = 0; k < SHARDS; k++) {
    pthread_mutex_init(&shards[k].lock, NULL);
    shards[k].spares = NULL;                 /* the forking thread's stack, if it was interning */
  }
}

void mprof_stacks_postfork_child(void)
{
  for (size_t k = 0; k < SHARDS; k++) shards[k].readers = 0;   /* lookups of threads not in the child */
}

void mprof_stacks_postfork(void)
{
  for (size_t k = SHARDS; k-- > 0;) mprof_unlock(&shards[k].lock);
}
