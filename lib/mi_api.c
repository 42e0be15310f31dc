/* mi_api.c - mimalloc's own allocation API, exported under its names and sampled like malloc.
 *
 * Programs that choose mimalloc call mi_malloc, mi_heap_malloc, mi_realloc_aligned, ... directly.  With
 * this library first in the lookup order (LD_PRELOAD, or -lmimalloc-prof before -lmimalloc: the rule
 * malloc already has), those calls come here.  Every entry point keeps the shape of malloc's fast path
 * (one countdown check, then mimalloc through mprof_mi: mireal.c) and shares its slow paths (slow.c),
 * so a program mixing malloc and mi_malloc is sampled once per sample_rate bytes overall, and stack
 * traces skip these frames as they skip malloc's.
 *
 * Semantics are mimalloc 2.0.9's, entry point by entry point: results, alignment, zeroing, errno, NULL
 * for impossible requests, new_handler and std::bad_alloc for the mi_new family.  Two rules shape the
 * code:
 *   - After a fast path charged the countdown, only "leaf" functions of libmimalloc are called (see
 *     mireal.h): its composite functions call its exported ones through the PLT, which would bring
 *     them back here to be charged again.  So the composites (aligned, n-ary, string, POSIX, aligned
 *     realloc) are written here, on the leaves, as mimalloc writes them.
 *   - A request is served unsampled (`plain`) by the same leaf the fast path uses, so its failure looks
 *     as mimalloc's does.  The throwing mi_new family tries without throwing first, and only then calls
 *     libmimalloc's own function, outside any profiler state, for the new_handler loop and the throw.
 *
 * Heaps (new, delete, destroy, visits, ownership) are in mi_heap.c.
 */
#include "alloc.h"
#include "internal.h"
#include "mireal.h"
#include "sheap.h"
#include "slow.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define API MPROF_EXPORT

static inline mi_heap_t *default_heap(void) { return mprof_mi.mi_heap_get_default(); }

/* mimalloc refuses an offset with an alignment above half its segment (MI_ALIGNMENT_MAX). */
#define MI_ALIGNMENT_MAX ((size_t)(sizeof(void *) == 8 ? 16 : 2) << 20)

/* A request the sampled path may take: mimalloc would serve it (else it goes to `plain`, to fail there). */
static inline bool sampleable(size_t alignment, size_t offset)
{
  return alignment == 0 || (mprof_is_pow2(alignment) && (offset == 0 || alignment <= MI_ALIGNMENT_MAX));
}

/* ---------------------------------------------------------------------------------------------------
   The unsampled paths, on leaves only
--------------------------------------------------------------------------------------------------- */

static void *plain(const mprof_req_t *r)
{
  mi_heap_t *h = r->heap != NULL ? r->heap : default_heap();
  if (r->alignment == 0)
    return r->zero ? mprof_mi.mi_heap_zalloc(h, r->size) : mprof_mi.mi_heap_malloc(h, r->size);
  return r->zero ? mprof_mi.mi_heap_zalloc_aligned_at(h, r->size, r->alignment, r->offset)
                 : mprof_mi.mi_heap_malloc_aligned_at(h, r->size, r->alignment, r->offset);
}

/* mimalloc's realloc of an ordinary block: mi_heap_realloc and mi_heap_rezalloc are leaves; its aligned
 * realloc moves through the PLT, so that one is written here as mimalloc writes it: keep p when the new
 * size fits, wastes at most half and p stays aligned; else a new aligned block, the tail zeroed from the
 * old size's last word when zeroing, the contents copied, p freed. */
static void *plain_realloc(void *p, const mprof_req_t *r)
{
  mi_heap_t *h = r->heap != NULL ? r->heap : default_heap();
  if (r->alignment <= sizeof(uintptr_t))
    return r->zero ? mprof_mi.mi_heap_rezalloc(h, p, r->size) : mprof_mi.mi_heap_realloc(h, p, r->size);
  if (p == NULL) return plain(r);
  size_t size = mprof_mi.mi_usable_size(p);
  if (r->size <= size && r->size >= size - size / 2 && ((uintptr_t)p + r->offset) % r->alignment == 0)
    return p;
  void *q = mprof_mi.mi_heap_malloc_aligned_at(h, r->size, r->alignment, r->offset);
  if (q == NULL) return NULL;
  if (r->zero && r->size > size) {
    size_t start = size >= sizeof(intptr_t) ? size - sizeof(intptr_t) : 0;
    memset((char *)q + start, 0, r->size - start);
  }
  memcpy(q, p, r->size > size ? size : r->size);
  mprof_mi.mi_free(p);
  return q;
}

/* ---------------------------------------------------------------------------------------------------
   Allocation
--------------------------------------------------------------------------------------------------- */

/* The general allocation: heap (NULL = default), size, alignment (0 = none), offset, zero. */
static MPROF_NOINLINE void *alloc_req(mi_heap_t *heap, size_t size, size_t alignment, size_t offset,
                                      bool zero)
{
  mprof_req_t r = {.heap = heap, .size = size, .alignment = alignment, .offset = offset, .zero = zero,
                   .plain = plain};
  if (mprof_unlikely(!sampleable(alignment, offset))) return plain(&r);   /* mimalloc refuses it */
  if (mprof_likely(mprof_skip(size))) return plain(&r);
  return mprof_alloc_slow_req(&r);
}

static MPROF_NOINLINE MPROF_COLD void *slow(mi_heap_t *heap, size_t size, bool zero)
{
  mprof_req_t r = {.heap = heap, .size = size, .zero = zero, .plain = plain};
  return mprof_alloc_slow_req(&r);
}

/* count * size, or SIZE_MAX (which nothing serves) on overflow, as mimalloc does. */
static inline size_t total(size_t count, size_t size)
{
  size_t t;
  return __builtin_mul_overflow(count, size, &t) ? SIZE_MAX : t;
}

API void *mi_malloc(size_t size)
{
  if (mprof_likely(mprof_skip(size))) return mprof_mi.mi_malloc(size);
  return slow(NULL, size, false);
}

API void *mi_zalloc(size_t size)
{
  if (mprof_likely(mprof_skip(size))) return mprof_mi.mi_zalloc(size);
  return slow(NULL, size, true);
}

API void *mi_malloc_small(size_t size)
{
  if (mprof_likely(mprof_skip(size))) return mprof_mi.mi_malloc_small(size);
  return slow(NULL, size, false);
}

API void *mi_zalloc_small(size_t size)
{
  if (mprof_likely(mprof_skip(size))) return mprof_mi.mi_zalloc_small(size);
  return slow(NULL, size, true);
}

API void *mi_calloc(size_t count, size_t size) { return alloc_req(NULL, total(count, size), 0, 0, true); }
API void *mi_mallocn(size_t count, size_t size) { return alloc_req(NULL, total(count, size), 0, 0, false); }

API void *mi_heap_malloc(mi_heap_t *heap, size_t size)
{
  if (mprof_likely(mprof_skip(size))) return mprof_mi.mi_heap_malloc(heap, size);
  return slow(heap, size, false);
}

API void *mi_heap_zalloc(mi_heap_t *heap, size_t size)
{
  if (mprof_likely(mprof_skip(size))) return mprof_mi.mi_heap_zalloc(heap, size);
  return slow(heap, size, true);
}

API void *mi_heap_malloc_small(mi_heap_t *heap, size_t size)
{
  if (mprof_likely(mprof_skip(size))) return mprof_mi.mi_heap_malloc_small(heap, size);
  return slow(heap, size, false);
}

API void *mi_heap_calloc(mi_heap_t *heap, size_t count, size_t size)
{
  return alloc_req(heap, total(count, size), 0, 0, true);
}

API void *mi_heap_mallocn(mi_heap_t *heap, size_t count, size_t size)
{
  return alloc_req(heap, total(count, size), 0, 0, false);
}

/* Aligned: the _at leaves with offset 0 (mimalloc's plain aligned entry points are not leaves; they
 * also have the 2.0.9 misalignment bug, which the _at path does not). */
API void *mi_malloc_aligned(size_t size, size_t alignment)
{
  return alloc_req(NULL, size, alignment, 0, false);
}
API void *mi_malloc_aligned_at(size_t size, size_t alignment, size_t offset)
{
  return alloc_req(NULL, size, alignment, offset, false);
}
API void *mi_zalloc_aligned(size_t size, size_t alignment)
{
  return alloc_req(NULL, size, alignment, 0, true);
}
API void *mi_zalloc_aligned_at(size_t size, size_t alignment, size_t offset)
{
  return alloc_req(NULL, size, alignment, offset, true);
}
API void *mi_calloc_aligned(size_t count, size_t size, size_t alignment)
{
  return alloc_req(NULL, total(count, size), alignment, 0, true);
}
API void *mi_calloc_aligned_at(size_t count, size_t size, size_t alignment, size_t offset)
{
  return alloc_req(NULL, total(count, size), alignment, offset, true);
}
API void *mi_heap_malloc_aligned(mi_heap_t *heap, size_t size, size_t alignment)
{
  return alloc_req(heap, size, alignment, 0, false);
}
/* libmimalloc's mi_malloc_aligned_at calls this one through the PLT, and so reaches aligned_alloc() and
 * the other aligned functions of alloc.c: a fast path of its own. */
API void *mi_heap_malloc_aligned_at(mi_heap_t *heap, size_t size, size_t alignment, size_t offset)
{
  if (mprof_unlikely(!sampleable(alignment, offset)) || mprof_likely(mprof_skip(size)))
    return mprof_mi.mi_heap_malloc_aligned_at(heap, size, alignment, offset);
  mprof_req_t r = {.heap = heap, .size = size, .alignment = alignment, .offset = offset, .plain = plain};
  return mprof_alloc_slow_req(&r);
}
API void *mi_heap_zalloc_aligned(mi_heap_t *heap, size_t size, size_t alignment)
{
  return alloc_req(heap, size, alignment, 0, true);
}
API void *mi_heap_zalloc_aligned_at(mi_heap_t *heap, size_t size, size_t alignment, size_t offset)
{
  return alloc_req(heap, size, alignment, offset, true);
}
API void *mi_heap_calloc_aligned(mi_heap_t *heap, size_t count, size_t size, size_t alignment)
{
  return alloc_req(heap, total(count, size), alignment, 0, true);
}
API void *mi_heap_calloc_aligned_at(mi_heap_t *heap, size_t count, size_t size, size_t alignment,
                                    size_t offset)
{
  return alloc_req(heap, total(count, size), alignment, offset, true);
}

/* POSIX and C11 names, as mimalloc defines them. */
API int mi_posix_memalign(void **out, size_t alignment, size_t size)
{
  if (out == NULL || alignment % sizeof(void *) != 0 || !mprof_is_pow2(alignment)) return EINVAL;
  void *q = mi_malloc_aligned(size, alignment);
  if (q == NULL && size != 0) return ENOMEM;
  *out = q;
  return 0;
}

API void *mi_memalign(size_t alignment, size_t size) { return mi_malloc_aligned(size, alignment); }
API void *mi_aligned_alloc(size_t alignment, size_t size) { return mi_malloc_aligned(size, alignment); }
API void *mi_valloc(size_t size) { return mi_malloc_aligned(size, mprof_page_size()); }

API void *mi_pvalloc(size_t size)
{
  size_t ps = mprof_page_size();
  if (size >= SIZE_MAX - ps) return NULL;
  return mi_malloc_aligned((size + ps - 1) & ~(ps - 1), ps);
}

/* ---------------------------------------------------------------------------------------------------
   C++: the mi_new family (std::bad_alloc and the new_handler from libmimalloc, outside the profiler)
--------------------------------------------------------------------------------------------------- */

API void *mi_new(size_t size)
{
  if (mprof_likely(mprof_skip(size))) return mprof_mi.mi_new(size);
  void *p = slow(NULL, size, false);
  return p != NULL ? p : mprof_mi.mi_new(size);
}

API void *mi_new_nothrow(size_t size)
{
  if (mprof_likely(mprof_skip(size))) return mprof_mi.mi_new_nothrow(size);
  void *p = slow(NULL, size, false);
  return p != NULL ? p : mprof_mi.mi_new_nothrow(size);
}

API void *mi_new_aligned(size_t size, size_t alignment)
{
  void *p = alloc_req(NULL, size, alignment, 0, false);
  return p != NULL ? p : mprof_mi.mi_new_aligned(size, alignment);
}

API void *mi_new_aligned_nothrow(size_t size, size_t alignment)
{
  void *p = alloc_req(NULL, size, alignment, 0, false);
  return p != NULL ? p : mprof_mi.mi_new_aligned_nothrow(size, alignment);
}

API void *mi_new_n(size_t count, size_t size)
{
  size_t t;
  if (mprof_unlikely(__builtin_mul_overflow(count, size, &t))) return mprof_mi.mi_new_n(count, size);
  return mi_new(t);
}

API void *mi_heap_alloc_new(mi_heap_t *heap, size_t size)
{
  if (mprof_likely(mprof_skip(size))) return mprof_mi.mi_heap_alloc_new(heap, size);
  void *p = slow(heap, size, false);
  return p != NULL ? p : mprof_mi.mi_heap_alloc_new(heap, size);
}

API void *mi_heap_alloc_new_n(mi_heap_t *heap, size_t count, size_t size)
{
  size_t t;
  if (mprof_unlikely(__builtin_mul_overflow(count, size, &t)))
    return mprof_mi.mi_heap_alloc_new_n(heap, count, size);
  return mi_heap_alloc_new(heap, t);
}

/* ---------------------------------------------------------------------------------------------------
   realloc
--------------------------------------------------------------------------------------------------- */

/* The general realloc: realloc is the allocation of its new size (slow.c).  An alignment up to a
 * pointer's size asks for nothing (mimalloc's rule), whatever the block. */
static MPROF_NOINLINE void *realloc_req(mi_heap_t *heap, void *p, size_t size, size_t alignment,
                                        size_t offset, bool zero)
{
  if (alignment <= sizeof(uintptr_t)) alignment = offset = 0;
  mprof_req_t r = {.heap = heap, .size = size, .alignment = alignment, .offset = offset, .zero = zero,
                   .plain = plain, .plain_realloc = plain_realloc};
  if (mprof_unlikely(!sampleable(alignment, offset))) return mprof_realloc_keep_req(p, &r);   /* in place */
  if (mprof_likely(!mprof_maybe_sampled_block(p) && mprof_skip(size))) return plain_realloc(p, &r);
  return mprof_realloc_slow_req(p, &r, !mprof_maybe_sampled_block(p));
}

/* libmimalloc's mi_realloc calls mi_heap_realloc (below) through the PLT: the countdown is charged
 * there.  realloc() in alloc.c reaches it the same way. */
API void *mi_realloc(void *p, size_t size)
{
  void *q = mprof_mi.mi_realloc(p, size);
  MPROF_KEEP_FRAME(q);             /* a call, not a jump, on i386 (mireal.h) */
  return q;
}

/* mi_heap_realloc's countdown ran out, or p starts a slice (then the countdown is not charged yet): an
 * ordinary block there, which the filter rules out, takes the fast path's way. */
static MPROF_NOINLINE MPROF_COLD void *heap_realloc_slow(mi_heap_t *heap, void *p, size_t size)
{
  bool wrapped = !mprof_maybe_sampled_block(p);
  if (!wrapped && !mprof_sheap_maybe(p)) {
    if (mprof_likely(mprof_skip(size))) return mprof_mi.mi_heap_realloc(heap, p, size);
    wrapped = true;
  }
  mprof_req_t r = {.heap = heap, .size = size, .plain = plain, .plain_realloc = plain_realloc};
  return mprof_realloc_slow_req(p, &r, wrapped);
}

API void *mi_heap_realloc(mi_heap_t *heap, void *p, size_t size)
{
  if (mprof_likely(!mprof_maybe_sampled_block(p) && mprof_skip(size)))
    return mprof_mi.mi_heap_realloc(heap, p, size);
  return heap_realloc_slow(heap, p, size);
}
API void *mi_rezalloc(void *p, size_t size) { return realloc_req(NULL, p, size, 0, 0, true); }
API void *mi_heap_rezalloc(mi_heap_t *heap, void *p, size_t size)
{
  return realloc_req(heap, p, size, 0, 0, true);
}

API void *mi_reallocn(void *p, size_t count, size_t size)
{
  return realloc_req(NULL, p, total(count, size), 0, 0, false);
}
API void *mi_heap_reallocn(mi_heap_t *heap, void *p, size_t count, size_t size)
{
  return realloc_req(heap, p, total(count, size), 0, 0, false);
}
API void *mi_recalloc(void *p, size_t count, size_t size)
{
  return realloc_req(NULL, p, total(count, size), 0, 0, true);
}
API void *mi_heap_recalloc(mi_heap_t *heap, void *p, size_t count, size_t size)
{
  return realloc_req(heap, p, total(count, size), 0, 0, true);
}

API void *mi_reallocf(void *p, size_t size)
{
  void *q = mi_realloc(p, size);
  if (q == NULL && p != NULL) mi_free(p);
  return q;
}

API void *mi_heap_reallocf(mi_heap_t *heap, void *p, size_t size)
{
  void *q = mi_heap_realloc(heap, p, size);
  if (q == NULL && p != NULL) mi_free(p);
  return q;
}

API void *mi_realloc_aligned(void *p, size_t size, size_t alignment)
{
  return realloc_req(NULL, p, size, alignment, 0, false);
}
API void *mi_realloc_aligned_at(void *p, size_t size, size_t alignment, size_t offset)
{
  return realloc_req(NULL, p, size, alignment, offset, false);
}
API void *mi_rezalloc_aligned(void *p, size_t size, size_t alignment)
{
  return realloc_req(NULL, p, size, alignment, 0, true);
}
API void *mi_rezalloc_aligned_at(void *p, size_t size, size_t alignment, size_t offset)
{
  return realloc_req(NULL, p, size, alignment, offset, true);
}
API void *mi_recalloc_aligned(void *p, size_t count, size_t size, size_t alignment)
{
  return realloc_req(NULL, p, total(count, size), alignment, 0, true);
}
API void *mi_recalloc_aligned_at(void *p, size_t count, size_t size, size_t alignment, size_t offset)
{
  return realloc_req(NULL, p, total(count, size), alignment, offset, true);
}
API void *mi_heap_realloc_aligned(mi_heap_t *heap, void *p, size_t size, size_t alignment)
{
  return realloc_req(heap, p, size, alignment, 0, false);
}
API void *mi_heap_realloc_aligned_at(mi_heap_t *heap, void *p, size_t size, size_t alignment, size_t offset)
{
  return realloc_req(heap, p, size, alignment, offset, false);
}
API void *mi_heap_rezalloc_aligned(mi_heap_t *heap, void *p, size_t size, size_t alignment)
{
  return realloc_req(heap, p, size, alignment, 0, true);
}
API void *mi_heap_rezalloc_aligned_at(mi_heap_t *heap, void *p, size_t size, size_t alignment, size_t offset)
{
  return realloc_req(heap, p, size, alignment, offset, true);
}
API void *mi_heap_recalloc_aligned(mi_heap_t *heap, void *p, size_t count, size_t size, size_t alignment)
{
  return realloc_req(heap, p, total(count, size), alignment, 0, true);
}
API void *mi_heap_recalloc_aligned_at(mi_heap_t *heap, void *p, size_t count, size_t size, size_t alignment,
                                      size_t offset)
{
  return realloc_req(heap, p, total(count, size), alignment, offset, true);
}
API void *mi_aligned_recalloc(void *p, size_t count, size_t size, size_t alignment)
{
  return mi_recalloc_aligned(p, count, size, alignment);
}
API void *mi_aligned_offset_recalloc(void *p, size_t count, size_t size, size_t alignment, size_t offset)
{
  return mi_recalloc_aligned_at(p, count, size, alignment, offset);
}

API void *mi_new_realloc(void *p, size_t size)
{
  void *q = mi_realloc(p, size);
  return q != NULL ? q : mprof_mi.mi_new_realloc(p, size);
}

API void *mi_new_reallocn(void *p, size_t count, size_t size)
{
  size_t t;
  if (mprof_unlikely(__builtin_mul_overflow(count, size, &t)))
    return mprof_mi.mi_new_reallocn(p, count, size);
  return mi_new_realloc(p, t);
}

/* BSD and NetBSD names, as mimalloc defines them. */
API void *mi_reallocarray(void *p, size_t count, size_t size)
{
  void *q = mi_reallocn(p, count, size);
  if (q == NULL) errno = ENOMEM;
  return q;
}

API int mi_reallocarr(void *p, size_t count, size_t size)
{
  if (p == NULL) {
    errno = EINVAL;
    return EINVAL;
  }
  void **op = p, *q = mi_reallocarray(*op, count, size);
  if (mprof_unlikely(q == NULL)) return errno;
  *op = q;
  return 0;
}

/* In place or not at all: it allocates nothing, so it changes no estimate. */
API void *mi_expand(void *p, size_t size)
{
  if (mprof_unlikely(mprof_maybe_sampled_block(p) && mprof_sheap_in_slot(p)))
    return size <= mprof_sheap_usable(p) ? p : NULL;
  return mprof_mi.mi_expand(p, size);
}

API void *mi__expand(void *p, size_t size)
{
  void *q = mi_expand(p, size);
  if (q == NULL) errno = ENOMEM;
  return q;
}

/* ---------------------------------------------------------------------------------------------------
   free and sizes
--------------------------------------------------------------------------------------------------- */

API void mi_free(void *p)
{
  if (mprof_unlikely(mprof_maybe_sampled(p))) {
    mprof_free_slow(p);
    return;
  }
  mprof_mi.mi_free(p);
}

API void mi_free_size(void *p, size_t size)
{
  if (mprof_unlikely(mprof_maybe_sampled(p))) mprof_free_slow(p);
  else mprof_mi.mi_free_size(p, size);
}

API void mi_free_aligned(void *p, size_t alignment)
{
  if (mprof_unlikely(mprof_maybe_sampled(p))) mprof_free_slow(p);
  else mprof_mi.mi_free_aligned(p, alignment);
}

API void mi_free_size_aligned(void *p, size_t size, size_t alignment)
{
  if (mprof_unlikely(mprof_maybe_sampled(p))) mprof_free_slow(p);
  else mprof_mi.mi_free_size_aligned(p, size, alignment);
}

/* mimalloc frees only what lies in its heap region (a sampled block does, as far as a caller knows). */
API void mi_cfree(void *p)
{
  if (mprof_unlikely(mprof_maybe_sampled(p))) {
    if (mi_is_in_heap_region(p)) mprof_free_slow(p);
    return;
  }
  mprof_mi.mi_cfree(p);
}

API size_t mi_usable_size(const void *p)
{
  if (mprof_unlikely(mprof_maybe_sampled(p))) return mprof_usable_size_slow(p);
  return mprof_mi.mi_usable_size(p);
}

API size_t mi_malloc_size(const void *p) { return mi_usable_size(p); }
API size_t mi_malloc_usable_size(const void *p) { return mi_usable_size(p); }
API size_t mi_good_size(size_t size) { return mprof_mi.mi_good_size(size); }
API size_t mi_malloc_good_size(size_t size) { return mprof_mi.mi_good_size(size); }

/* ---------------------------------------------------------------------------------------------------
   Strings, as mimalloc defines them, on the sampled allocation
--------------------------------------------------------------------------------------------------- */

API char *mi_heap_strdup(mi_heap_t *heap, const char *s)
{
  if (s == NULL) return NULL;
  size_t n = strlen(s);
  char *t = mi_heap_malloc(heap, n + 1);
  if (t != NULL) memcpy(t, s, n + 1);
  return t;
}

API char *mi_heap_strndup(mi_heap_t *heap, const char *s, size_t n)
{
  if (s == NULL) return NULL;
  const char *end = memchr(s, 0, n);
  size_t m = end != NULL ? (size_t)(end - s) : n;
  char *t = mi_heap_malloc(heap, m + 1);
  if (t == NULL) return NULL;
  memcpy(t, s, m);
  t[m] = 0;
  return t;
}

API char *mi_strdup(const char *s) { return mi_heap_strdup(default_heap(), s); }
API char *mi_strndup(const char *s, size_t n) { return mi_heap_strndup(default_heap(), s, n); }
API unsigned char *mi_mbsdup(const unsigned char *s) { return (unsigned char *)mi_strdup((const char *)s); }

API char *mi_heap_realpath(mi_heap_t *heap, const char *fname, char *resolved_name)
{
  if (resolved_name != NULL) return realpath(fname, resolved_name);
  char *rname = realpath(fname, NULL);       /* from malloc: this library's */
  if (rname == NULL) return NULL;
  char *result = mi_heap_strdup(heap, rname);
  free(rname);
  return result;
}

API char *mi_realpath(const char *fname, char *resolved_name)
{
  return mi_heap_realpath(default_heap(), fname, resolved_name);
}

API unsigned short *mi_wcsdup(const unsigned short *s)
{
  if (s == NULL) return NULL;
  size_t len = 0;
  while (s[len] != 0) len++;
  size_t size = (len + 1) * sizeof(unsigned short);
  unsigned short *p = mi_malloc(size);
  if (p != NULL) memcpy(p, s, size);
  return p;
}

API int mi_dupenv_s(char **buf, size_t *size, const char *name)
{
  if (buf == NULL || name == NULL) return EINVAL;
  if (size != NULL) *size = 0;
  char *p = getenv(name);
  if (p == NULL) {
    *buf = NULL;
    return 0;
  }
  *buf = mi_strdup(p);
  if (*buf == NULL) return ENOMEM;
  if (size != NULL) *size = strlen(p);
  return 0;
}

/* Windows only in mimalloc: elsewhere it fails with EINVAL. */
API int mi_wdupenv_s(unsigned short **buf, size_t *size, const unsigned short *name)
{
  if (buf == NULL || name == NULL) return EINVAL;
  if (size != NULL) *size = 0;
  *buf = NULL;
  return EINVAL;
}
