/* alloc.c - the exported malloc family: fast paths only.
 *
 * Each entry point checks the calling thread's sample countdown (mprof_skip) or, for a free, whether
 * the block may be sampled (mprof_maybe_sampled: it starts a slice of mimalloc's), and otherwise goes
 * straight to mimalloc's public API.  Everything else (sampling, tracking, the C rules that need more than
 * one line) lives in cold functions, so the common path is a handful of instructions and a tail call.
 *
 * C++ operator new/delete are in new_delete.c (exported too, because libmimalloc.so.2 exports them).
 */
#include "alloc.h"
#include "internal.h"
#include "mireal.h"
#include "slow.h"

#include <errno.h>
#include <malloc.h>
#include <mimalloc.h>
#include <stdlib.h>
#include <unistd.h>

/* Names glibc's headers do not declare (or no longer declare). */
MPROF_EXPORT int reallocarr(void *p, size_t count, size_t size);
MPROF_EXPORT void *reallocf(void *p, size_t size);
MPROF_EXPORT void cfree(void *p);
MPROF_EXPORT void vfree(void *p);
MPROF_EXPORT size_t malloc_size(const void *p);
MPROF_EXPORT size_t malloc_good_size(size_t size);
MPROF_EXPORT void *_aligned_malloc(size_t size, size_t alignment);

/* Alignment every malloc block has: mimalloc's 8-byte blocks are only 8-aligned (16 from 16 bytes). */
#define MPROF_MIN_ALIGN sizeof(void *)

bool mprof_fail(int err)
{
  errno = err;
  return false;
}

void *mprof_fail_null(int err)
{
  mprof_fail(err);
  return NULL;
}

size_t mprof_page_size(void)
{
  static size_t cached;                    /* benign race: every thread computes the same value */
  if (mprof_unlikely(cached == 0)) cached = (size_t)sysconf(_SC_PAGESIZE);
  return cached;
}

/* The one aligned allocation path; alignment is a power of two.  libmimalloc's mi_malloc_aligned_at
 * calls mi_heap_malloc_aligned_at through the PLT, which is this library's (mi_api.c): the countdown is
 * charged there, once, and the sample taken there.  (tests/test_mi_api.c fails if a libmimalloc ever
 * stops calling it so.)  mimalloc does not set errno when an aligned request fails, so we do. */
static void *alloc_aligned(size_t alignment, size_t size)
{
  void *p = mprof_mi.mi_malloc_aligned_at(size, alignment, 0);
  if (mprof_unlikely(p == NULL)) errno = ENOMEM;
  return p;
}

/* ---------------------------------------------------------------------------------------------------
   malloc, free, calloc, realloc: the hot ones
--------------------------------------------------------------------------------------------------- */

MPROF_EXPORT void *malloc(size_t size)
{
  if (mprof_likely(mprof_skip(size))) return mprof_mi.mi_malloc(size);
  return mprof_alloc_slow(size, 0, false);
}

MPROF_EXPORT void free(void *p)
{
  if (mprof_unlikely(mprof_maybe_sampled(p))) {
    mprof_free_slow(p);
    return;
  }
  mprof_mi.mi_free(p);
}

MPROF_EXPORT void *calloc(size_t count, size_t size)
{
  size_t total;
  if (mprof_unlikely(__builtin_mul_overflow(count, size, &total))) return mprof_fail_null(ENOMEM);
  if (mprof_likely(mprof_skip(total))) return mprof_mi.mi_zalloc(total);
  return mprof_alloc_slow(total, 0, true);
}

/* realloc is the allocation of its new size and the free of the old block (slow.c).  libmimalloc's
 * mi_realloc calls mi_heap_realloc through the PLT, and that is this library's (mi_api.c), which charges
 * the countdown like malloc's, once, and takes any block that may be sampled to the slow path: so
 * realloc itself only refuses the impossible size (POSIX wants ENOMEM, mimalloc leaves errno alone). */
MPROF_EXPORT void *realloc(void *p, size_t size)
{
  if (mprof_unlikely(size > MPROF_MAX_REQUEST)) return mprof_fail_null(ENOMEM);
  void *q = mprof_mi.mi_realloc(p, size);
  MPROF_KEEP_FRAME(q);             /* a call, not a jump, on i386 (mireal.h) */
  return q;
}

MPROF_EXPORT size_t malloc_usable_size(void *p)
{
  if (mprof_unlikely(mprof_maybe_sampled(p))) return mprof_usable_size_slow(p);
  return mprof_mi.mi_usable_size(p);
}

/* ---------------------------------------------------------------------------------------------------
   Aligned allocation
--------------------------------------------------------------------------------------------------- */

/* posix_memalign reports failure by its return value and leaves errno alone. */
MPROF_EXPORT int posix_memalign(void **out, size_t alignment, size_t size)
{
  if (mprof_unlikely(!mprof_is_pow2(alignment) || alignment % sizeof(void *) != 0)) return EINVAL;
  int saved = errno;
  void *p = alloc_aligned(alignment, size);
  if (mprof_unlikely(p == NULL)) {
    errno = saved;
    return ENOMEM;
  }
  *out = p;
  return 0;
}

/* C11/C17 aligned_alloc: the alignment must be a power of two (as glibc checks); any size is accepted
 * (C17 DR 460 dropped the multiple-of-alignment rule). */
MPROF_EXPORT void *aligned_alloc(size_t alignment, size_t size)
{
  if (mprof_unlikely(!mprof_is_pow2(alignment))) return mprof_fail_null(EINVAL);
  return alloc_aligned(alignment, size);
}

/* glibc's memalign: an alignment malloc always gives means plain malloc, a non-power of two is rounded
 * up. */
MPROF_EXPORT void *memalign(size_t alignment, size_t size)
{
  if (alignment <= MPROF_MIN_ALIGN) return malloc(size);
  if (mprof_unlikely(!mprof_is_pow2(alignment))) {
    if (alignment > SIZE_MAX / 2 + 1) return mprof_fail_null(EINVAL);
    alignment = (size_t)1 << (64 - __builtin_clzll((unsigned long long)alignment));
  }
  return alloc_aligned(alignment, size);
}

MPROF_EXPORT void *valloc(size_t size)
{
  return alloc_aligned(mprof_page_size(), size);
}

/* pvalloc rounds the size up to whole pages (at least one). */
MPROF_EXPORT void *pvalloc(size_t size)
{
  size_t ps = mprof_page_size();
  size_t rounded;
  if (mprof_unlikely(__builtin_add_overflow(size, ps - 1, &rounded))) return mprof_fail_null(ENOMEM);
  rounded &= ~(ps - 1);
  return alloc_aligned(ps, rounded ? rounded : ps);
}

/* ---------------------------------------------------------------------------------------------------
   The other malloc-family names that libmimalloc.so.2 exports for overriding
--------------------------------------------------------------------------------------------------- */

MPROF_EXPORT void *reallocarray(void *p, size_t count, size_t size)
{
  size_t total;
  if (mprof_unlikely(__builtin_mul_overflow(count, size, &total))) return mprof_fail_null(ENOMEM);
  return realloc(p, total);
}

/* NetBSD reallocarr: resizes *p in place of the caller; returns 0 or an errno value, errno unchanged. */
MPROF_EXPORT int reallocarr(void *p, size_t count, size_t size)
{
  void **pp = (void **)p;
  size_t total;
  int saved = errno;
  if (mprof_unlikely(__builtin_mul_overflow(count, size, &total))) return EOVERFLOW;
  if (total == 0) {                  /* NetBSD: a zero size frees the block */
    free(*pp);
    *pp = NULL;
    return 0;
  }
  void *q = realloc(*pp, total);
  if (mprof_unlikely(q == NULL)) {
    errno = saved;
    return ENOMEM;
  }
  *pp = q;
  return 0;
}

/* BSD reallocf: like realloc, but frees the block when growing it fails. */
MPROF_EXPORT void *reallocf(void *p, size_t size)
{
  void *q = realloc(p, size);
  if (mprof_unlikely(q == NULL && p != NULL)) free(p);
  return q;
}

MPROF_EXPORT void cfree(void *p) { free(p); }
MPROF_EXPORT void vfree(void *p) { free(p); }
MPROF_EXPORT size_t malloc_size(const void *p) { return malloc_usable_size((void *)(uintptr_t)p); }
MPROF_EXPORT size_t malloc_good_size(size_t size) { return mprof_mi.mi_good_size(size); }

/* The Windows name mimalloc also exports: (size, alignment). */
MPROF_EXPORT void *_aligned_malloc(size_t size, size_t alignment)
{
  return aligned_alloc(alignment, size);
}

/* glibc's internal names, which some programs and libraries call directly: same functions (aliases,
 * with the target's attributes copied so the declarations agree). */
#if defined(__has_attribute) && __has_attribute(copy)
#define MPROF_ALIAS(target) __attribute__((alias(#target), copy(target)))
#else
#define MPROF_ALIAS(target) __attribute__((alias(#target)))
#endif
MPROF_EXPORT void *__libc_malloc(size_t size) MPROF_ALIAS(malloc);
MPROF_EXPORT void __libc_free(void *p) MPROF_ALIAS(free);
MPROF_EXPORT void __libc_cfree(void *p) MPROF_ALIAS(free);
MPROF_EXPORT void *__libc_calloc(size_t count, size_t size) MPROF_ALIAS(calloc);
MPROF_EXPORT void *__libc_realloc(void *p, size_t size) MPROF_ALIAS(realloc);
MPROF_EXPORT void *__libc_memalign(size_t alignment, size_t size) MPROF_ALIAS(memalign);
MPROF_EXPORT void *__libc_valloc(size_t size) MPROF_ALIAS(valloc);
MPROF_EXPORT void *__libc_pvalloc(size_t size) MPROF_ALIAS(pvalloc);
MPROF_EXPORT int __posix_memalign(void **out, size_t alignment, size_t size)
    MPROF_ALIAS(posix_memalign);
