/* sheap.h - where sampled blocks live (each at the start of a slice: a slot of ours, or mimalloc's own
 * block); lock rank 2.  With --disable-pprof nothing is sampled: the stubs say so. */
#ifndef MPROF_SHEAP_H
#define MPROF_SHEAP_H

#include "arena.h"
#include "mireal.h"

#if MPROF_PPROF

typedef struct mprof_sheap_usage_s {
  size_t limit_bytes;      /* the address space the slots may take (MIMALLOC_PROF_ARENA_SIZE) */
  size_t mapped_bytes;     /* slot chunks mapped, and the live sampled blocks in mimalloc */
  size_t resident_bytes;   /* at most resident: slots' pages written and not given back, and the former */
  size_t live_blocks;
  size_t live_bytes;       /* usable bytes of the live recorded blocks, as the program sees them */
} mprof_sheap_usage_t;

bool     mprof_sheap_init(void);                /* the window and the filter (once, under api_lock) */
bool     mprof_sheap_init_done(void);
bool     mprof_sheap_in_slot(const void *p);    /* exactly, lock-free */
void    *mprof_sheap_alloc(const mprof_req_t *r, mi_prof_drop_reason_t *why);
void     mprof_sheap_free(void *p);             /* its record is gone (or it never had one) */
size_t   mprof_sheap_usable(const void *p);     /* what the program may use of sampled p; lock-free */
bool     mprof_sheap_fits(const void *p, size_t size);   /* realloc in place: true if p holds size ... */
void     mprof_sheap_resize(void *p, size_t size);       /* ... which it then does */
void     mprof_sheap_track(const void *p);      /* beside every record insert ... */
void     mprof_sheap_untrack(const void *p);    /* ... and removal */
void     mprof_sheap_orphan(void *p, size_t size, mi_heap_t *heap);   /* an orphan record, tracked */
void     mprof_sheap_purge_all(void);           /* every free slot's pages, now (stop, reset) */
uint64_t mprof_sheap_purge_due(void);           /* CLOCK_MONOTONIC_COARSE ns; 0: none waiting */
void     mprof_sheap_purge_tick(void);          /* the purge that is due (the profiler thread) */
void     mprof_sheap_usage(mprof_sheap_usage_t *out);
void     mprof_sheap_prefork(void);
void     mprof_sheap_postfork(void);
void     mprof_sheap_postfork_reinit(void);   /* a child forked with profiler locks held: a fresh lock */

/* True when p, which starts a slice and is not NULL, may be a sampled block: it lies in the slots'
 * window (32-bit platforms: in a chunk of slots, by the chunk map), or the filter counts a record at its
 * slice (sheap.c).  Lock-free; false means certainly not (an ordinary block that starts a slice: the slow
 * paths hand it straight to mimalloc). */
#define MPROF_FILTER_SLOTS ((size_t)1 << 16)
extern uintptr_t mprof_sheap_window_lo MPROF_HIDDEN, mprof_sheap_window_size MPROF_HIDDEN;
extern uint8_t *mprof_sheap_filter MPROF_HIDDEN;
static inline bool mprof_sheap_maybe(const void *p)
{
  uintptr_t a = (uintptr_t)p;
#if MPROF_ARENA_WHOLE
  const uint8_t *m = __atomic_load_n(&mprof_arena_map, __ATOMIC_ACQUIRE);
  if (m == NULL) return false;                /* nothing was ever sampled */
  if (__atomic_load_n(&m[a >> MPROF_CHUNK_SHIFT], __ATOMIC_RELAXED) == MPROF_CHUNK_SLOTS) return true;
#else
  if (a - mprof_sheap_window_lo < mprof_sheap_window_size) return true;
#endif
  const uint8_t *f = __atomic_load_n(&mprof_sheap_filter, __ATOMIC_ACQUIRE);
  if (f == NULL) return false;
  return __atomic_load_n(&f[(a >> MPROF_SLICE_SHIFT) & (MPROF_FILTER_SLOTS - 1)], __ATOMIC_RELAXED) != 0;
}

#else /* !MPROF_PPROF */

static inline size_t mprof_sheap_usable(const void *p) { return mprof_mi.mi_usable_size(p); }
static inline bool mprof_sheap_in_slot(const void *p) { (void)p; return false; }
static inline bool mprof_sheap_maybe(const void *p) { (void)p; return false; }

#endif /* MPROF_PPROF */

#endif /* MPROF_SHEAP_H */
