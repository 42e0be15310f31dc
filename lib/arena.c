/* arena.c - the sampled-block arena: a window of address space low in the process, claimed a chunk at a
 * time, and the whole-chunk runs that hold large sampled blocks.
 *
 * Every sampled block lies in the window [lo, hi).  Ordinary heap blocks lie above it: mimalloc maps its
 * memory from its 2 TiB hint upwards or wherever the kernel's top-down allocator puts it, and the window
 * is placed below both (64-bit: from 4 GiB; 32-bit: from 16 MiB, below a non-PIE program's image).  So
 * free() tells a block that may be sampled from an ordinary one with one comparison, p < hi (inline.h),
 * and the slow path checks exactly with the chunk map: one state byte per chunk of the window.
 *
 * Nothing is reserved up front.  A chunk (1 MiB, aligned) is mapped when the heap needs it, at the lowest
 * free chunk address, with MAP_FIXED_NOREPLACE, so the program never pays address space (RLIMIT_AS,
 * RLIMIT_DATA) for sampled blocks it does not have, and a chunk the kernel gave to someone else is noted
 * as foreign and never touched.  A mapping of anyone else that lands inside the window is harmless: its
 * blocks take free()'s slow path, which finds that the chunk is not ours.
 *
 * Large blocks get runs of whole chunks (their own mapping, head chunk first).  A freed run is kept
 * mapped as a cache for the next large sample, since programs tend to allocate the same large sizes
 * again (unmapping it would cost a page fault per page of the next one); a cached run that stays unused
 * for a whole purge period is unmapped (mprof_arena_purge, called by sheap.c), and all of them are when
 * the address space runs out.
 *
 * Lock: sheap.c's sheap_lock protects everything here but the chunk map's reads by
 * mprof_arena_contains(), which are lock-free (a state is published with release order before any block
 * of the chunk is handed out, and only a chunk without live blocks changes state again).
 */
#include "internal.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

enum {
  CHUNK_NONE = 0,   /* not mapped by us (this must stay 0: the map starts zeroed) */
  CHUNK_PAGES,      /* sheap.c's pages: slabs and page runs, with a header */
  CHUNK_RUN,        /* the head of a run holding one large block */
  CHUNK_RUN_TAIL,   /* a later chunk of such a run */
  CHUNK_CACHED,     /* the head of a freed run, kept mapped for reuse */
  CHUNK_CACHED_TAIL,
  CHUNK_FOREIGN     /* mapped by someone else when we tried: never ours */
};

#define CACHE_SLOTS 32    /* freed runs kept at most */

typedef struct cached_s {
  uint32_t head, len;     /* chunk index and chunks; len 0 = empty slot */
  bool     stale;         /* unused since the last purge */
} cached_t;

static uintptr_t lo, hi;             /* the window */
static size_t    chunks;             /* chunks in the window */
static uint8_t  *state;              /* chunks entries, CHUNK_* */
static size_t    first_none;         /* no CHUNK_NONE entry below this index */
static size_t    mapped_bytes;       /* chunks mapped by us now */
static cached_t  cached[CACHE_SLOTS];
static size_t    cached_chunks;       /* the sum of their lengths */
static bool      no_noreplace;       /* the kernel (or valgrind) refused MAP_FIXED_NOREPLACE */
static size_t    page_bytes;

uintptr_t mprof_sheap_end;

/* ---------------------------------------------------------------------------------------------------
   The window
--------------------------------------------------------------------------------------------------- */

#if UINTPTR_MAX > 0xffffffffu
#define WINDOW_LO     ((uintptr_t)4 << 30)                   /* 4 GiB */
#define WINDOW_MAX    (((uintptr_t)1 << 40) - WINDOW_LO)     /* ends below 1 TiB, far below 2 TiB */
#else
#define WINDOW_LO     ((uintptr_t)16 << 20)                  /* 16 MiB */
#define WINDOW_MAX    ((uintptr_t)112 << 20)                 /* ends below 128 MiB: a non-PIE image */
#endif

size_t mprof_arena_page(void) { return page_bytes; }

/* Sets the window up (once, under api_lock): its size from MIMALLOC_PROF_ARENA_SIZE, clipped to what the
 * platform's address space has below its heap.  Maps only the chunk map, a byte per chunk. */
bool mprof_arena_init(void)
{
  if (state != NULL) return true;
  page_bytes = (size_t)sysconf(_SC_PAGESIZE);
  uint64_t want = mprof_option(MPROF_OPT_ARENA_SIZE);
  uintptr_t size = want < (uint64_t)WINDOW_MAX ? (uintptr_t)want : WINDOW_MAX;
  size &= ~(uintptr_t)(MPROF_CHUNK - 1);
  if (size < MPROF_CHUNK) return false;
  size_t n = (size_t)(size >> MPROF_CHUNK_SHIFT);
  void *map = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED) return false;
  state = map;
  chunks = n;
  lo = WINDOW_LO;
  hi = lo + size;
  /* Published before any block can be sampled (the caller releases api_lock afterwards). */
  __atomic_store_n(&mprof_sheap_end, hi, __ATOMIC_RELEASE);
  return true;
}

static inline size_t index_of(uintptr_t p) { return (size_t)((p - lo) >> MPROF_CHUNK_SHIFT); }
static inline void *chunk_addr(size_t i) { return (void *)(lo + ((uintptr_t)i << MPROF_CHUNK_SHIFT)); }
static inline uint8_t get(size_t i) { return __atomic_load_n(&state[i], __ATOMIC_ACQUIRE); }
static inline void set(size_t i, uint8_t s) { __atomic_store_n(&state[i], s, __ATOMIC_RELEASE); }

bool mprof_arena_contains(const void *p)
{
  uintptr_t a = (uintptr_t)p;
  if (a - lo >= hi - lo) return false;          /* also when the window does not exist (lo == hi == 0) */
  uint8_t s = get(index_of(a));
  return s != CHUNK_NONE && s != CHUNK_FOREIGN;
}

bool mprof_arena_is_pages(const void *p) { return get(index_of((uintptr_t)p)) == CHUNK_PAGES; }

size_t mprof_arena_mapped(void) { return mapped_bytes; }

/* Maps `bytes` at exactly `at`; NULL (errno) when anything is there or the kernel refuses. */
static void *map_at(uintptr_t at, size_t bytes)
{
  int flags = MAP_PRIVATE | MAP_ANONYMOUS | (no_noreplace ? 0 : MAP_FIXED_NOREPLACE);
  void *p = mmap((void *)at, bytes, PROT_READ | PROT_WRITE, flags, -1, 0);
  if (p == MAP_FAILED && errno == EINVAL && !no_noreplace) {
    no_noreplace = true;                        /* very old kernels, some emulators: a plain hint */
    return map_at(at, bytes);
  }
  if (p == MAP_FAILED) return NULL;
  if (p != (void *)at) {                        /* a kernel that took NOREPLACE as a hint */
    munmap(p, bytes);
    errno = EEXIST;
    return NULL;
  }
  return p;
}

static void unmap_chunks(size_t i, size_t n)
{
  for (size_t k = 0; k < n; k++) set(i + k, CHUNK_NONE);
  munmap(chunk_addr(i), n << MPROF_CHUNK_SHIFT);
  mapped_bytes -= n << MPROF_CHUNK_SHIFT;
  if (i < first_none) first_none = i;
}

/* The lowest run of n free chunk indices whose head is aligned to `align` bytes, from index `from`;
 * chunks (none) if there is none. */
static size_t find_free(size_t n, uintptr_t align, size_t from)
{
  size_t step = align > MPROF_CHUNK ? (size_t)(align >> MPROF_CHUNK_SHIFT) : 1;
  size_t i = from;
  if (step > 1) {                               /* first aligned index at or after `from` */
    uintptr_t a = (uintptr_t)chunk_addr(i);
    i += (size_t)((((a + align - 1) & ~(align - 1)) - a) >> MPROF_CHUNK_SHIFT);
  }
  while (i + n <= chunks) {
    size_t k = 0;
    while (k < n && get(i + k) == CHUNK_NONE) k++;
    if (k == n) return i;
    i += step > 1 ? step : k + 1;
  }
  return chunks;
}

/* Maps n fresh chunks with the head aligned as asked; their index, or chunks (errno) if the window or
 * the address space has no room.  Chunks found taken are marked foreign and skipped. */
static size_t claim(size_t n, uintptr_t align)
{
  size_t from = first_none;
  for (;;) {
    size_t i = find_free(n, align, from);
    if (i == chunks) {
      errno = ENOSPC;
      return chunks;
    }
    if (map_at((uintptr_t)chunk_addr(i), n << MPROF_CHUNK_SHIFT) != NULL) {
      mapped_bytes += n << MPROF_CHUNK_SHIFT;
      return i;
    }
    if (errno != EEXIST) return chunks;        /* ENOMEM: RLIMIT_AS, RLIMIT_DATA or the kernel */
    /* Someone else's mapping is in the way: find which chunks, one at a time. */
    for (size_t k = 0; k < n; k++) {
      if (map_at((uintptr_t)chunk_addr(i + k), MPROF_CHUNK) != NULL) munmap(chunk_addr(i + k), MPROF_CHUNK);
      else if (errno == EEXIST) set(i + k, CHUNK_FOREIGN);
      else return chunks;
    }
    from = i;
    if (from == first_none) {
      while (first_none < chunks && get(first_none) != CHUNK_NONE) first_none++;
    }
  }
}

/* ---------------------------------------------------------------------------------------------------
   Chunks for sheap.c's pages
--------------------------------------------------------------------------------------------------- */

/* A fresh, zeroed chunk; NULL with errno ENOSPC (the window is full) or ENOMEM (the address space). */
void *mprof_arena_chunk_alloc(void)
{
  size_t i = claim(1, 0);
  if (i == chunks) return NULL;
  set(i, CHUNK_PAGES);
  if (i == first_none) first_none++;
  return chunk_addr(i);
}

void mprof_arena_chunk_free(void *c) { unmap_chunks(index_of((uintptr_t)c), 1); }

/* ---------------------------------------------------------------------------------------------------
   Runs of whole chunks for large blocks
--------------------------------------------------------------------------------------------------- */

static void cache_drop(cached_t *c)
{
  unmap_chunks(c->head, c->len);
  cached_chunks -= c->len;
  c->len = 0;
}

/* Puts chunks [head, head+len) into the cache (unmapping them when the cache is full). */
static void cache_put(size_t head, size_t len)
{
  for (size_t k = 0; k < CACHE_SLOTS; k++) {
    if (cached[k].len != 0) continue;
    set(head, CHUNK_CACHED);
    for (size_t j = 1; j < len; j++) set(head + j, CHUNK_CACHED_TAIL);
    cached[k] = (cached_t){(uint32_t)head, (uint32_t)len, false};
    cached_chunks += len;
    return;
  }
  unmap_chunks(head, len);
}

/* The smallest cached run of at least n chunks whose head is aligned; NULL when none. */
static cached_t *cache_best(size_t n, uintptr_t align)
{
  cached_t *best = NULL;
  for (size_t k = 0; k < CACHE_SLOTS; k++) {
    cached_t *c = &cached[k];
    if (c->len < n || ((uintptr_t)chunk_addr(c->head) & (align - 1)) != 0) continue;
    if (best == NULL || c->len < best->len) best = c;
  }
  return best;
}

/* A run of whole chunks for `bytes`, its head aligned to `align` (a power of two, 0 = none).  *fresh
 * says whether its memory is known to be zero (freshly mapped).  NULL with errno EFBIG (it can never
 * fit the window), ENOSPC (the window has no such free range now) or ENOMEM (the address space is
 * exhausted). */
void *mprof_arena_run_alloc(size_t bytes, size_t align, bool *fresh)
{
  size_t n = (bytes >> MPROF_CHUNK_SHIFT) + ((bytes & (MPROF_CHUNK - 1)) != 0);
  if (align == 0) align = 1;
  if (n == 0 || n > chunks || align > hi - lo) {
    errno = EFBIG;                              /* never fits the window */
    return NULL;
  }
  size_t i;
  cached_t *c = cache_best(n, align);
  if (c != NULL) {
    i = c->head;
    size_t len = c->len;
    c->len = 0;
    cached_chunks -= len;
    if (len > n) cache_put(i + n, len - n);    /* the rest stays cached */
    *fresh = false;
  } else {
    i = claim(n, align);
    if (i == chunks) return NULL;
    if (i == first_none) first_none += n;
    *fresh = true;
  }
  for (size_t j = 1; j < n; j++) set(i + j, CHUNK_RUN_TAIL);
  set(i, CHUNK_RUN);
  return chunk_addr(i);
}

static size_t run_len(size_t head)
{
  size_t n = 1;
  while (head + n < chunks && get(head + n) == CHUNK_RUN_TAIL) n++;
  return n;
}

/* The head of the chunk run p lies in, or NULL when p is not in one (lock-free: a live run's chunks do
 * not change state). */
void *mprof_arena_run_head(const void *p)
{
  size_t i = index_of((uintptr_t)p);
  while (get(i) == CHUNK_RUN_TAIL) i--;
  return get(i) == CHUNK_RUN ? chunk_addr(i) : NULL;
}

size_t mprof_arena_run_bytes(const void *p) { return run_len(index_of((uintptr_t)p)) << MPROF_CHUNK_SHIFT; }

void mprof_arena_run_free(void *p)
{
  size_t i = index_of((uintptr_t)p);
  cache_put(i, run_len(i));
}

/* Shrinks a run in place to the chunks `bytes` needs (realloc); the rest goes to the cache. */
void mprof_arena_run_shrink(void *p, size_t bytes)
{
  size_t i = index_of((uintptr_t)p), n = run_len(i), keep = (bytes + MPROF_CHUNK - 1) >> MPROF_CHUNK_SHIFT;
  if (keep != 0 && keep < n) cache_put(i + keep, n - keep);
}

/* ---------------------------------------------------------------------------------------------------
   Giving memory back
--------------------------------------------------------------------------------------------------- */

/* One purge period has passed (sheap.c's clock): cached runs unused for a whole period are unmapped,
 * the rest become stale. */
void mprof_arena_purge(void)
{
  for (size_t k = 0; k < CACHE_SLOTS; k++) {
    cached_t *c = &cached[k];
    if (c->len == 0) continue;
    if (c->stale) cache_drop(c);
    else c->stale = true;
  }
}

size_t mprof_arena_cached_bytes(void) { return cached_chunks << MPROF_CHUNK_SHIFT; }

/* Every cached run, now: the address space ran out. */
void mprof_arena_release_cache(void)
{
  for (size_t k = 0; k < CACHE_SLOTS; k++) {
    if (cached[k].len != 0) cache_drop(&cached[k]);
  }
}

/* For the fast path and the tests: the window's bounds. */
void mprof_arena_window(uintptr_t *out_lo, uintptr_t *out_hi)
{
  *out_lo = lo;
  *out_hi = hi;
}
