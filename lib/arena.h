/* arena.h - the address space that holds sampled blocks' slots, claimed a chunk at a time: a window (and
 * on 32-bit platforms, once it is full, chunks anywhere: MPROF_ARENA_WHOLE, the chunk map covers the
 * whole address space) */
#ifndef MPROF_ARENA_H
#define MPROF_ARENA_H

#include "internal.h"

#define MPROF_CHUNK_SHIFT 20
#define MPROF_CHUNK       ((size_t)1 << MPROF_CHUNK_SHIFT)
#define MPROF_CHUNK_SLOTS 1                  /* a chunk map entry: sheap.c's slots */
#if UINTPTR_MAX > 0xffffffffu
#define MPROF_ARENA_WHOLE 0
#else
#define MPROF_ARENA_WHOLE 1
extern uint8_t *mprof_arena_map MPROF_HIDDEN; /* a byte per chunk of the address space; NULL before init */
#endif
bool      mprof_arena_init(void);             /* the window and its chunk map; false: no window */
size_t    mprof_arena_page(void);
bool      mprof_arena_contains(const void *p); /* exactly: p lies in a chunk of ours (lock-free) */
void      mprof_arena_window(uintptr_t *lo, uintptr_t *hi);
uintptr_t mprof_arena_base(void);             /* the lowest address a chunk can have */
size_t    mprof_arena_limit(void);            /* the address space its chunks may take at once */
void  *mprof_arena_chunk_alloc(void);          /* a fresh chunk; NULL with errno ENOSPC or ENOMEM */
void   mprof_arena_chunk_free(void *chunk);
/* The same with sheap_lock released for the system call (arena.c). */
void  *mprof_arena_chunk_reserve(void);        /* lock held; NULL: use mprof_arena_chunk_alloc */
bool   mprof_arena_chunk_map(void *at);        /* no lock; false with errno */
void   mprof_arena_chunk_settle(void *at, int err);   /* lock held; 0, EEXIST, else: free again */
void   mprof_arena_chunk_retire(void *chunk);  /* lock held; then munmap, then settle with ENOENT */
size_t mprof_arena_mapped(void);

#endif /* MPROF_ARENA_H */
