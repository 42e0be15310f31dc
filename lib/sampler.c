/* sampler.c - per-thread sample countdown and the slow paths of the malloc family.
 *
 * (Skeleton: the sampling engine is not wired in yet; every slow path re-arms the countdown with the
 * recheck interval and serves the request from mimalloc.)
 */
#include "internal.h"

#include <errno.h>
#include <mimalloc.h>

#include "mimalloc-prof.h"

__thread mprof_tls_t mprof_tls __attribute__((tls_model("initial-exec")));
mprof_range_t mprof_sheap_range;

static void rearm(void) { mprof_tls.countdown = MI_PROF_RECHECK_BYTES; }

/* An impossible request: undo its subtraction (the countdown wrapped) and fail with ENOMEM. */
static void *too_large(size_t size)
{
  mprof_tls.countdown += size;
  errno = ENOMEM;
  return NULL;
}

void *mprof_alloc_slow(size_t size, size_t alignment, bool zero)
{
  if (mprof_unlikely(size > MPROF_MAX_REQUEST)) return too_large(size);
  rearm();
  if (alignment == 0) return zero ? mi_zalloc(size) : mi_malloc(size);
  return zero ? mprof_mi_zalloc_aligned(size, alignment) : mprof_mi_malloc_aligned(size, alignment);
}

void *mprof_realloc_slow(void *p, size_t size)
{
  if (mprof_unlikely(size > MPROF_MAX_REQUEST)) return too_large(size);
  rearm();
  return mi_realloc(p, size);
}

void mprof_free_sampled(void *p) { mi_free(p); }
