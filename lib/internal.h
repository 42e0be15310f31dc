/* internal.h - types and prototypes shared between the library's files, a section per file.
 * Internal names that cross files are mprof_<concern>_<verb>; they are hidden (-fvisibility=hidden) and
 * never match the ^mi_prof_ export pattern. */
#ifndef MPROF_INTERNAL_H
#define MPROF_INTERNAL_H

#include "config.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "inline.h"

#include <mimalloc.h>

/* Debian's mimalloc 2.0.9 mi_malloc_aligned() returns misaligned blocks for power-of-two sizes of
 * 256..1024 bytes at an alignment of 32..size (mimalloc issue #700, fixed after 2.0.9; seen here with
 * aligned_alloc(256, 512) and C++ aligned new).  The _at variants take mimalloc's general aligned path,
 * which checks the block it got. */
#define mprof_mi_malloc_aligned(size, alignment)  mi_malloc_aligned_at((size), (alignment), 0)
#define mprof_mi_zalloc_aligned(size, alignment)  mi_zalloc_aligned_at((size), (alignment), 0)

/* Requests above PTRDIFF_MAX can never be served; mimalloc then returns NULL without setting errno, so
 * the slow paths (which every such request reaches: no countdown is that large) set ENOMEM. */
#define MPROF_MAX_REQUEST ((size_t)PTRDIFF_MAX)

#if MPROF_PPROF
/* "sampler.c": the slow paths the fast paths fall into when a countdown runs out or a block is sampled */
void *mprof_alloc_slow(size_t size, size_t alignment, bool zero) MPROF_NOINLINE MPROF_COLD;
void *mprof_realloc_slow(void *p, size_t size) MPROF_NOINLINE MPROF_COLD;
void  mprof_free_sampled(void *p) MPROF_NOINLINE MPROF_COLD;
#else
/* A --disable-pprof build reaches these only for requests above MPROF_MAX_REQUEST (see inline.h). */
#include <errno.h>
static inline void *mprof_alloc_slow(size_t size, size_t alignment, bool zero)
{
  (void)size, (void)alignment, (void)zero;
  errno = ENOMEM;
  return NULL;
}
static inline void *mprof_realloc_slow(void *p, size_t size) { return mprof_alloc_slow(size, 0, !p); }
static inline void mprof_free_sampled(void *p) { mi_free(p); }
#endif

#endif /* MPROF_INTERNAL_H */
