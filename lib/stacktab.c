/* stacktab.c - interned stack traces with per-stack counters.
 *
 * Each distinct stack (its frames, innermost first) is stored once; a sample's record holds the stack's
 * id.  The table is sharded by the stack's hash; a shard has its own lock (rank 4, innermost), an
 * open-addressing index of entry numbers, entries in fixed chunks that never move (so an id names the
 * same memory for the whole session), and a bump pool for the frames.  All of it is profiler memory
 * (pmem.c) under the budget; when it cannot grow the sample is dropped (MI_PROF_DROP_STACKS).  Each stack
 * added also reserves the memory a dump of it needs (mprof_pmem_reserve; internal.h derives the amount),
 * so the table never takes what a dump needs; a stack that cannot is dropped for memory too.
 *
 * Counters: allocated and in-use objects (fixed point) and bytes per stack, changed with relaxed
 * atomics by record.c while it holds the record shard lock of the block concerned.  Ids are resolved
 * only there, after record.c checked the session, and the table is released at stop only while every
 * record shard lock is held: a sampler that interned a stack before a stop can never touch freed memory.
 */
#include "internal.h"

#include <string.h>

#define SHARDS         16
#define CHUNK_ENTRIES  64                 /* entries per chunk: 4 KiB */
#define MAX_CHUNKS     2048               /* so at most 131072 stacks per shard */
#define POOL_BYTES     ((size_t)16 << 10) /* frame pool chunk: 2047 frames */
#define INDEX_MIN      1024               /* one page of entry numbers */
#define CHUNK_BYTES    (CHUNK_ENTRIES * sizeof(mprof_stack_t))

typedef struct pool_s {                   /* header of a frame pool chunk */
  struct pool_s *next;
  size_t bytes;
} pool_t;

#define POOL_FRAMES    ((POOL_BYTES - sizeof(pool_t)) / sizeof(uintptr_t))

typedef struct shard_s {
  pthread_mutex_t lock;
  uint64_t        session;                /* session word stacks are interned for; 0 = closed */
  uint32_t        count;                  /* entries in use */
  uint32_t       *index;                  /* entry number + 1 per slot, 0 = empty */
  size_t          index_cap;              /* power of two */
  mprof_stack_t  *chunk[MAX_CHUNKS];
  pool_t         *pools;                  /* newest first */
  uintptr_t      *pool_next;              /* free frame space in pools */
  size_t          pool_left;              /* frames */
  size_t          reserved;               /* dump reserve held for these stacks (pmem.c), bytes */
} shard_t;

/* The "dropped (reason)" stacks: one frame, MI_PROF_FRAME_DROPPED(reason), outside the shards so they
 * exist whatever the budget; ids (SHARDS << 32) | (reason + 1). */
static uintptr_t     dropped_frame[MI_PROF_DROP_REASONS];
static mprof_stack_t dropped_stack[MI_PROF_DROP_REASONS];

static shard_t shards[SHARDS] = {
#define S {.lock = PTHREAD_MUTEX_INITIALIZER}
  S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S
#undef S
};

static uint64_t frames_hash(const uintptr_t *frames, size_t depth)
{
  uint64_t h = 0x9ae16a3b2f90404full ^ depth;
  for (size_t i = 0; i < depth; i++) {
    h ^= frames[i];
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 32;
  }
  return h ? h : 1;
}

static inline mprof_stack_t *entry(shard_t *s, uint32_t n) { return &s->chunk[n / CHUNK_ENTRIES][n % CHUNK_ENTRIES]; }

static inline uint64_t make_id(size_t shard, uint32_t n) { return ((uint64_t)shard << 32) | ((uint64_t)n + 1); }

static void shard_release(shard_t *s)
{
  for (uint32_t c = 0; c < MAX_CHUNKS && s->chunk[c] != NULL; c++) {
    mprof_pmem_unmap(s->chunk[c], CHUNK_BYTES);
    s->chunk[c] = NULL;
  }
  while (s->pools != NULL) {
    pool_t *next = s->pools->next;
    mprof_pmem_unmap(s->pools, POOL_BYTES);
    s->pools = next;
  }
  mprof_pmem_unmap(s->index, s->index_cap * sizeof(uint32_t));
  mprof_pmem_unreserve(s->reserved);
  s->reserved = 0;
  s->index = NULL;
  s->index_cap = 0;
  s->count = 0;
  s->pool_next = NULL;
  s->pool_left = 0;
}

/* Doubles the index when it is half full (or creates it). */
static bool index_reserve(shard_t *s)
{
  if (s->index_cap != 0 && (size_t)(s->count + 1) * 2 <= s->index_cap) return true;
  size_t cap = s->index_cap ? s->index_cap * 2 : INDEX_MIN;
  uint32_t *index = mprof_pmem_map(cap * sizeof(uint32_t));
  if (index == NULL) return false;
  for (uint32_t n = 0; n < s->count; n++) {
    size_t i = (size_t)entry(s, n)->hash & (cap - 1);
    while (index[i] != 0) i = (i + 1) & (cap - 1);
    index[i] = n + 1;
  }
  mprof_pmem_unmap(s->index, s->index_cap * sizeof(uint32_t));
  s->index = index;
  s->index_cap = cap;
  return true;
}

static uintptr_t *pool_take(shard_t *s, size_t depth)
{
  if (s->pool_left < depth) {
    pool_t *pool = mprof_pmem_map(POOL_BYTES);
    if (pool == NULL) return NULL;
    pool->bytes = POOL_BYTES;
    pool->next = s->pools;
    s->pools = pool;
    s->pool_next = (uintptr_t *)(pool + 1);
    s->pool_left = POOL_FRAMES;
  }
  uintptr_t *frames = s->pool_next;
  s->pool_next += depth;
  s->pool_left -= depth;
  return frames;
}

/* Adds a stack as entry number s->count.  False, with *why, when the shard is full or profiler memory is
 * exhausted. */
static bool shard_append(shard_t *s, uint64_t hash, const uintptr_t *frames, size_t depth,
                         mi_prof_drop_reason_t *why)
{
  uint32_t n = s->count, c = n / CHUNK_ENTRIES;
  *why = MI_PROF_DROP_MEMORY;
  if (c >= MAX_CHUNKS) {
    *why = MI_PROF_DROP_STACKS;
    return false;
  }
  size_t reserve = MPROF_DUMP_STACK_BYTES + depth * MPROF_DUMP_FRAME_BYTES;
  if (!mprof_pmem_reserve(reserve)) return false;
  if (s->chunk[c] == NULL) s->chunk[c] = mprof_pmem_map(CHUNK_BYTES);
  uintptr_t *copy = s->chunk[c] != NULL ? pool_take(s, depth) : NULL;
  if (copy == NULL) {
    mprof_pmem_unreserve(reserve);
    return false;
  }
  s->reserved += reserve;
  memcpy(copy, frames, depth * sizeof(uintptr_t));
  mprof_stack_t *e = entry(s, n);
  memset(e, 0, sizeof *e);
  e->hash = hash;
  e->depth = (uint32_t)depth;
  e->frames = copy;
  s->count = n + 1;
  return true;
}

uint64_t mprof_stack_intern(const uintptr_t *frames, size_t depth, uint64_t session_word,
                            mi_prof_drop_reason_t *why)
{
  uint64_t hash = frames_hash(frames, depth), id = 0;
  size_t k = (size_t)(hash >> 60);
  shard_t *s = &shards[k];
  *why = MI_PROF_DROP_REASONS;       /* no drop: the session is over */
  mprof_lock(&s->lock);
  if (s->session != session_word) {
    /* leave id 0 */
  } else if (!index_reserve(s)) {
    *why = MI_PROF_DROP_MEMORY;
  } else {
    size_t i = (size_t)hash & (s->index_cap - 1);
    for (; s->index[i] != 0; i = (i + 1) & (s->index_cap - 1)) {
      mprof_stack_t *e = entry(s, s->index[i] - 1);
      if (e->hash == hash && e->depth == depth && memcmp(e->frames, frames, depth * sizeof(uintptr_t)) == 0) {
        id = make_id(k, s->index[i] - 1);
        break;
      }
    }
    if (id == 0 && shard_append(s, hash, frames, depth, why)) {
      s->index[i] = s->count;
      id = make_id(k, s->count - 1);
    }
  }
  mprof_unlock(&s->lock);
  return id;
}

/* The entry of an id (not 0).  Only for record.c, under a record shard lock of the current session. */
mprof_stack_t *mprof_stack_get(uint64_t id)
{
  if (mprof_unlikely((id >> 32) == SHARDS)) return &dropped_stack[(id & 0xffffffffu) - 1];
  shard_t *s = &shards[id >> 32];
  return entry(s, (uint32_t)(id & 0xffffffffu) - 1);
}

uint64_t mprof_stack_dropped(mi_prof_drop_reason_t why) { return make_id(SHARDS, (uint32_t)why); }

static void dropped_reset(bool alloc_only)
{
  for (size_t r = 0; r < MI_PROF_DROP_REASONS; r++) {
    mprof_stack_t *e = &dropped_stack[r];
    __atomic_store_n(&e->alloc_obj_fx, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&e->alloc_bytes, 0, __ATOMIC_RELAXED);
    if (alloc_only) continue;
    dropped_frame[r] = (uintptr_t)MI_PROF_FRAME_DROPPED(r);
    *e = (mprof_stack_t){.hash = r + 1, .depth = 1, .frames = &dropped_frame[r]};
  }
}

/* Session boundaries: called with every record shard lock held (record.c). */
void mprof_stacks_begin(uint64_t session_word)
{
  dropped_reset(false);
  for (size_t k = 0; k < SHARDS; k++) {
    mprof_lock(&shards[k].lock);
    shard_release(&shards[k]);
    shards[k].session = session_word;
    mprof_unlock(&shards[k].lock);
  }
}

void mprof_stacks_end(void) { mprof_stacks_begin(0); }

/* mi_prof_reset: allocated counters to zero (every record shard lock held). */
void mprof_stacks_reset_alloc(void)
{
  dropped_reset(true);
  for (size_t k = 0; k < SHARDS; k++) {
    shard_t *s = &shards[k];
    mprof_lock(&s->lock);
    for (uint32_t n = 0; n < s->count; n++) {
      mprof_stack_t *e = entry(s, n);
      __atomic_store_n(&e->alloc_obj_fx, 0, __ATOMIC_RELAXED);
      __atomic_store_n(&e->alloc_bytes, 0, __ATOMIC_RELAXED);
    }
    mprof_unlock(&s->lock);
  }
}

/* Calls fn for every stack (every record shard lock held, so the counters stand still); a "dropped"
 * stack only when it has counted something. */
void mprof_stacks_each(void (*fn)(const mprof_stack_t *e, void *arg), void *arg)
{
  for (size_t r = 0; r < MI_PROF_DROP_REASONS; r++) {
    const mprof_stack_t *e = &dropped_stack[r];
    if (__atomic_load_n(&e->alloc_obj_fx, __ATOMIC_RELAXED) != 0 ||
        __atomic_load_n(&e->inuse_obj_fx, __ATOMIC_RELAXED) != 0)
      fn(e, arg);
  }
  for (size_t k = 0; k < SHARDS; k++) {
    shard_t *s = &shards[k];
    mprof_lock(&s->lock);
    for (uint32_t n = 0; n < s->count; n++) fn(entry(s, n), arg);
    mprof_unlock(&s->lock);
  }
}

void mprof_stacks_prefork(void)
{
  for (size_t k = 0; k < SHARDS; k++) mprof_lock(&shards[k].lock);
}

void mprof_stacks_postfork_reinit(void)
{
  for (size_t k = 0; k < SHARDS; k++) pthread_mutex_init(&shards[k].lock, NULL);
}

void mprof_stacks_postfork(void)
{
  for (size_t k = SHARDS; k-- > 0;) mprof_unlock(&shards[k].lock);
}
