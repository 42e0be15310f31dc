/* slow.h - the slow paths the fast paths fall into when a countdown runs out or a block may be sampled;
 * with --disable-pprof, the stubs that serve requests above MPROF_MAX_REQUEST. */
#ifndef MPROF_SLOW_H
#define MPROF_SLOW_H

#include "mireal.h"

/* Requests above PTRDIFF_MAX can never be served; mimalloc then returns NULL without setting errno, so
 * the slow paths (which every such request reaches: no countdown is that large) set ENOMEM. */
#define MPROF_MAX_REQUEST ((size_t)PTRDIFF_MAX)

#if MPROF_PPROF


void  *mprof_alloc_slow(size_t size, size_t alignment, bool zero) MPROF_NOINLINE MPROF_COLD;   /* C family */
void  *mprof_realloc_slow(void *p, size_t size) MPROF_NOINLINE MPROF_COLD;
void  *mprof_alloc_slow_req(const mprof_req_t *r) MPROF_NOINLINE MPROF_COLD;
/* realloc: `wrapped` when the caller charged the countdown and it ran out; else it did not charge (p may
 * be sampled) */
void  *mprof_realloc_slow_req(void *p, const mprof_req_t *r, bool wrapped) MPROF_NOINLINE MPROF_COLD;
/* a realloc mimalloc can only do in place: p kept, or NULL */
void  *mprof_realloc_keep_req(void *p, const mprof_req_t *r) MPROF_NOINLINE MPROF_COLD;
void   mprof_free_slow(void *p) MPROF_NOINLINE MPROF_COLD;
size_t mprof_usable_size_slow(const void *p) MPROF_NOINLINE MPROF_COLD;

/* An unsampled allocation straight from mimalloc (the slow paths' fallback). */
static inline void *mprof_plain_alloc(size_t size, size_t alignment, bool zero)
{
  if (alignment == 0) return zero ? mprof_mi.mi_zalloc(size) : mprof_mi.mi_malloc(size);
  return zero ? mprof_mi_zalloc_aligned(size, alignment) : mprof_mi_malloc_aligned(size, alignment);
}

#else /* !MPROF_PPROF */

/* A --disable-pprof build reaches these only for requests above MPROF_MAX_REQUEST (see inline.h). */
#include <errno.h>
static inline void *mprof_alloc_slow(size_t size, size_t alignment, bool zero)
{
  (void)size, (void)alignment, (void)zero;
  errno = ENOMEM;
  return NULL;
}
static inline void *mprof_realloc_slow(void *p, size_t size) { return mprof_alloc_slow(size, 0, !p); }
static inline void mprof_free_slow(void *p) { mprof_mi.mi_free(p); }

/* mimalloc's API (mi_api.c) passes everything through. */
static inline void *mprof_alloc_slow_req(const mprof_req_t *r) { return r->plain(r); }
static inline void *mprof_realloc_slow_req(void *p, const mprof_req_t *r, bool wrapped)
{
  (void)wrapped;
  return r->plain_realloc(p, r);
}
static inline void *mprof_realloc_keep_req(void *p, const mprof_req_t *r) { return r->plain_realloc(p, r); }
static inline size_t mprof_usable_size_slow(const void *p) { return mprof_mi.mi_usable_size(p); }

#endif /* MPROF_PPROF */

#endif /* MPROF_SLOW_H */
