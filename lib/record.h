/* record.h - live sampled blocks, a sharded address -> record table */
#ifndef MPROF_RECORD_H
#define MPROF_RECORD_H

#include "internal.h"

#define MPROF_RECORD_OBSERVED 1u              /* the observer's on_sample saw this block */
#define MPROF_RECORD_ORPHAN   2u              /* no longer a sample: no weight, no stack (record.c) */
#define MPROF_RECORD_HALF_A   4u              /* in half A, half B of the samples (peak.c), or both */
#define MPROF_RECORD_HALF_B   8u

typedef struct mprof_record_s {
  uintptr_t addr;         /* block address; 0 = empty slot */
  size_t    size;         /* requested bytes (current size after an in-place realloc) */
  uint64_t  obj_fx;       /* estimated objects this sample stands for, 1/MPROF_FX_ONE units */
  uint64_t  inuse_bytes;  /* estimated bytes it adds to in-use: size * obj_fx / MPROF_FX_ONE */
  uint64_t  half_bytes;   /* the bytes it stands for in its half, or halves (peak.c) */
  uint64_t  stack_id;     /* interned label set (0 = none) */
  mi_heap_t *heap;        /* the mimalloc heap it was allocated from (mi_heap_destroy frees it) */
  uint64_t  alloc_ns : 60; /* CLOCK_MONOTONIC when it was sampled (lifetimes, the timeline): 36 years */
  uint64_t  flags : 4;    /* MPROF_RECORD_* */
} mprof_record_t;         /* 64 bytes: one cache line */

/* Sums over the live records and the session's samples. */
typedef struct mprof_totals_s {
  uint64_t samples;          /* recorded since start or reset */
  uint64_t live;             /* live records */
  uint64_t live_req_bytes;   /* their requested bytes */
  uint64_t inuse_obj_fx;
  uint64_t inuse_bytes;
  uint64_t alloc_obj_fx;
  uint64_t alloc_bytes;
  uint64_t untracked_frees;  /* stale records replaced by a new sample at the same address */
  uint64_t peak_obj_fx;      /* the estimated in-use total at its high-water mark since start or reset */
  uint64_t peak_bytes;       /*   (peak.c) */
  uint64_t peak_ns;          /*   when it was reached, CLOCK_REALTIME; 0 = no session yet */
} mprof_totals_t;

typedef enum { MPROF_INSERT_OK, MPROF_INSERT_SESSION, MPROF_INSERT_MEMORY } mprof_insert_t;

/* Every record shard lock, in order (stats snapshots, visits, session changes, fork). */
void           mprof_record_lock_all(void);
void           mprof_record_postfork_reinit(void);
void           mprof_record_unlock_all(void);

/* What a start, or a reset while stopped, discarded of an earlier session's data (control.c says it). */
typedef struct mprof_discarded_s {
  uint64_t live;             /* live samples, and their estimated bytes in use */
  uint64_t inuse_bytes;
  uint64_t samples;          /* samples taken, and their estimated bytes allocated */
  uint64_t alloc_bytes;
  uint64_t peak_bytes;       /* the peak's estimate */
  uint64_t stacks;           /* distinct stack traces */
} mprof_discarded_t;

void           mprof_record_begin(uint64_t session_word, mprof_discarded_t *gone);
void           mprof_record_end(void);
void           mprof_record_discard(mprof_discarded_t *gone);
mprof_insert_t mprof_record_insert(const mprof_record_t *r, uint64_t session_word);
bool           mprof_record_remove(uintptr_t addr, mprof_record_t *out);
bool           mprof_record_count(uint64_t stack_id, uint64_t obj_fx, uint64_t bytes, uint64_t session_word);
bool           mprof_record_orphan(uintptr_t addr, size_t size, mi_heap_t *heap);
bool           mprof_record_find(uintptr_t addr, mprof_record_t *out);
size_t         mprof_record_take_heap(mi_heap_t *heap, bool (*fn)(const mprof_record_t *r, void *arg),
                                      void *arg);
void           mprof_record_retag(mi_heap_t *from, mi_heap_t *to);
void           mprof_record_each_heap(mi_heap_t *heap, bool (*fn)(const mprof_record_t *r, void *arg),
                                      void *arg);
bool           mprof_record_heap_may_have(const mi_heap_t *heap);   /* false: certainly no record of it */
void           mprof_record_totals(mprof_totals_t *out);
void           mprof_record_totals_locked(mprof_totals_t *out);   /* every shard lock held */
void           mprof_record_reset_alloc(void);

#endif /* MPROF_RECORD_H */
