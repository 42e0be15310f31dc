/* sheap.c - the sampled-block heap: where sampled blocks live, packed tightly.
 *
 * Sampled blocks are served by this small allocator of our own, in the arena's window (arena.c), never by
 * mimalloc: so free() recognises them by address, their pages are ours to pack and give back, and no
 * thread has to own them (a mimalloc heap dies with the thread that created it, which made the previous
 * design park a helper thread in every profiled process; doc/design.md has the evidence).
 *
 * Three kinds of block, by size:
 *   - small (<= 4 KiB, alignment <= a page): slabs of 1..4 pages, one size class each (28 classes,
 *     16-byte steps to 128 B, then four per power of two).  Blocks are carved from a slab in address
 *     order as needed, so an untouched part of a slab costs no memory; freed blocks go on the slab's own
 *     list.  A class keeps a list of its slabs with free blocks; a slab whose last block is freed gives
 *     its pages back to the chunk at once, unless it is the class's only slab with room (kept, so a
 *     program that samples and frees one block at a time does not build a slab each time, until it has
 *     stayed empty for a whole purge period).
 *   - medium (<= MEDIUM_MAX): a run of whole pages.
 *   - large: a run of whole chunks (arena.c), freed runs cached there for reuse.
 * Slabs and page runs live in "page chunks": 1 MiB chunks whose first pages hold a header with a
 * descriptor per page (read at a slab's or run's first page only) and four page bitmaps (free; first
 * page of a slab or run; touched since mapped or purged; stale).  A run is taken and given back a
 * bitmap word at a time, and a chunk remembers a bound on its longest free run, so a request for many
 * pages costs tens of instructions and skips the chunks too fragmented to hold it.
 *
 * Giving memory back: freed pages stay resident for reuse until they have been free for a whole purge
 * period (MPROF_PURGE_NS, checked at the next operation on the heap, when more than PURGE_FLOOR is idle
 * or chunk runs are cached); then madvise(MADV_DONTNEED) returns them, and a page chunk that stays empty that long is unmapped, as are cached chunk runs (arena.c).  A
 * busy program reuses warm pages without system calls, and memory it stops using goes back to the
 * kernel within two periods of its next sample (a program that stops sampling altogether keeps what is
 * cached then).  When the address space runs out (RLIMIT_AS), everything cached is given back at once and
 * the request retried.
 *
 * Lock: sheap_lock (rank 2 in internal.h) protects all of this and arena.c; it is taken around every
 * operation and never held while taking another lock.
 */
#include "internal.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define MAX_PAGES      (MPROF_CHUNK / 4096)       /* descriptors per chunk header: the smallest page */
#define BITMAP_WORDS   (MAX_PAGES / 64)
#define SMALL_MAX      4096                       /* largest slab block */
#define MEDIUM_MAX     (MPROF_CHUNK / 4)          /* largest page run */
/* Free memory is kept this long for reuse: 10 ms.  At 100 ms, python3 (bench/py_workload.py) peaked
 * 2.6 MiB above stopped with its large sampled blocks freed and refilled faster than that; at 10 ms,
 * +0.6 MiB, for 1.7% more page faults and no measurable wall time (doc/design.md, "Giving memory back"). */
#define MPROF_PURGE_NS ((uint64_t)10 * 1000000)
#define PURGE_FLOOR    ((size_t)256 * 1024)        /* idle resident memory never worth a purge */

enum { PG_FREE, PG_HEADER, PG_SLAB, PG_RUN };

typedef struct pdesc_s {
  uint8_t  kind;       /* PG_* (at a slab's or run's first page; other pages' descriptors are unused) */
  uint8_t  cls;        /* PG_SLAB: size class */
  uint16_t npages;     /* PG_SLAB, PG_RUN: pages it spans */
  uint16_t used;       /* PG_SLAB: blocks handed out */
  uint16_t extent;     /* PG_SLAB: blocks carved so far (the rest of the slab is untouched) */
  uint16_t free;       /* PG_SLAB: first freed block + 1, 0 = none */
  uint32_t prev, next; /* PG_SLAB with free blocks: its class's list, as page references (0 = none) */
} pdesc_t;             /* 20 bytes */

typedef struct pchunk_s {
  struct pchunk_s *prev, *next;        /* every page chunk */
  uint32_t free_pages;
  uint32_t first_page;                 /* the pages before it hold this header */
  uint32_t run_bound;                  /* no free run here is longer (an upper bound) */
  bool     stale_empty;                /* empty at the last purge */
  uint64_t free_bits[BITMAP_WORDS];    /* page is free */
  uint64_t head_bits[BITMAP_WORDS];    /* page is the first of a slab or run (read lock-free) */
  uint64_t touched_bits[BITMAP_WORDS]; /* page may be resident and nonzero */
  uint64_t stale_bits[BITMAP_WORDS];   /* page was free and touched at the last purge */
  pdesc_t  page[MAX_PAGES];
} pchunk_t;

static const uint16_t class_size[] = {16,   32,   48,   64,   80,   96,   112,  128,  160,  192,
                                      224,  256,  320,  384,  448,  512,  640,  768,  896,  1024,
                                      1280, 1536, 1792, 2048, 2560, 3072, 3584, 4096};
#define CLASSES ((uint8_t)(sizeof class_size / sizeof class_size[0]))

static pthread_mutex_t sheap_lock = PTHREAD_MUTEX_INITIALIZER;
static size_t   page;                 /* bytes */
static size_t   chunk_pages;          /* pages per chunk */
static uint8_t  slab_pages[CLASSES];  /* pages per slab of each class */
static uint32_t partial[CLASSES];     /* slabs with free blocks: page reference, 0 = none */
static uint32_t kept_empty[CLASSES];  /* partial[k] was this empty slab at the last purge */
static pchunk_t *pchunks;             /* every page chunk */
static uint64_t last_purge;           /* CLOCK_MONOTONIC_COARSE, ns */
static size_t   live_blocks;
static size_t   live_bytes;           /* usable bytes of the live blocks */
static size_t   large_bytes;          /* usable bytes of the live large blocks */
static size_t   touched_pages;        /* pages set in the page chunks' touched bitmaps */

/* ---------------------------------------------------------------------------------------------------
   Page chunks, descriptors and page references
--------------------------------------------------------------------------------------------------- */

static inline bool bit(const uint64_t *b, size_t i) { return (b[i / 64] >> (i % 64)) & 1; }
static inline void bit_set(uint64_t *b, size_t i) { b[i / 64] |= (uint64_t)1 << (i % 64); }
static inline void bit_clear(uint64_t *b, size_t i) { b[i / 64] &= ~((uint64_t)1 << (i % 64)); }

/* Bits [lo, lo + cnt) of a word, 0 < cnt <= 64 - lo. */
static inline uint64_t word_mask(size_t lo, size_t cnt) { return (~(uint64_t)0 >> (64 - cnt)) << lo; }

/* How many of the bits [i, end) lie in i's word. */
static inline size_t span_in_word(size_t i, size_t end) { return end - i < 64 - i % 64 ? end - i : 64 - i % 64; }

/* Sets (`on`) or clears bits [i, i + n) of b, a word at a time. */
static inline void bits_assign(uint64_t *b, size_t i, size_t n, bool on)
{
  for (size_t end = i + n, cnt; i < end; i += cnt) {
    cnt = span_in_word(i, end);
    uint64_t m = word_mask(i % 64, cnt);
    b[i / 64] = on ? b[i / 64] | m : b[i / 64] & ~m;
  }
}

/* The head bitmap is read by block_of() without the lock: whole-word atomic accesses. */
static inline void head_assign(pchunk_t *c, size_t i, bool on)
{
  uint64_t *w = &c->head_bits[i / 64], m = (uint64_t)1 << (i % 64);
  __atomic_store_n(w, on ? *w | m : *w & ~m, __ATOMIC_RELAXED);
}

static inline pchunk_t *chunk_of(const void *p) { return (pchunk_t *)((uintptr_t)p & ~(uintptr_t)(MPROF_CHUNK - 1)); }
static inline size_t page_index(const pchunk_t *c, const void *p) { return ((uintptr_t)p - (uintptr_t)c) / page; }
static inline char *page_addr(pchunk_t *c, size_t i) { return (char *)c + i * page; }

/* A page as 32 bits for the slab lists: chunk number in the window << 8 | page index, + 1. */
static uint32_t ref_of(const pchunk_t *c, size_t i)
{
  uintptr_t lo, hi;
  mprof_arena_window(&lo, &hi);
  return (uint32_t)(((((uintptr_t)c - lo) >> MPROF_CHUNK_SHIFT) << 8) | i) + 1;
}

static pdesc_t *deref(uint32_t ref, pchunk_t **c, size_t *i)
{
  uintptr_t lo, hi;
  mprof_arena_window(&lo, &hi);
  ref--;
  *c = (pchunk_t *)(lo + ((uintptr_t)(ref >> 8) << MPROF_CHUNK_SHIFT));
  *i = ref & 0xff;
  return &(*c)->page[*i];
}

static pchunk_t *chunk_new(void)
{
  pchunk_t *c = mprof_arena_chunk_alloc();
  if (c == NULL) return NULL;
  size_t header = (sizeof *c + page - 1) / page;
  c->first_page = (uint32_t)header;
  for (size_t i = 0; i < header; i++) {
    c->page[i].kind = PG_HEADER;
    bit_set(c->touched_bits, i);
  }
  touched_pages += header;
  bits_assign(c->free_bits, header, chunk_pages - header, true);
  c->free_pages = (uint32_t)(chunk_pages - header);
  c->run_bound = c->free_pages;
  c->next = pchunks;
  if (pchunks != NULL) pchunks->prev = c;
  pchunks = c;
  return c;
}

static void chunk_delete(pchunk_t *c)
{
  for (size_t w = 0; w < BITMAP_WORDS; w++) touched_pages -= (size_t)__builtin_popcountll(c->touched_bits[w]);
  if (c->prev != NULL) c->prev->next = c->next;
  else pchunks = c->next;
  if (c->next != NULL) c->next->prev = c->prev;
  mprof_arena_chunk_free(c);
}

static bool chunk_empty(const pchunk_t *c) { return c->free_pages == chunk_pages - c->first_page; }

/* ---------------------------------------------------------------------------------------------------
   Page runs
--------------------------------------------------------------------------------------------------- */

/* The first page at or after i whose bit in b is `on` (chunk_pages if none), a word at a time. */
static inline size_t next_bit(const uint64_t *b, size_t i, bool on)
{
  while (i < chunk_pages) {
    uint64_t w = (on ? b[i / 64] : ~b[i / 64]) >> (i % 64);
    if (w != 0) return i + (size_t)__builtin_ctzll(w);
    i = (i / 64 + 1) * 64;
  }
  return chunk_pages;
}

static inline size_t next_free(const pchunk_t *c, size_t i) { return next_bit(c->free_bits, i, true); }
static inline size_t next_used(const pchunk_t *c, size_t i) { return next_bit(c->free_bits, i, false); }

/* One past the last page before i that is not free (0 if none: the header pages are never free). */
static inline size_t prev_used(const pchunk_t *c, size_t i)
{
  if (i % 64 != 0) {
    uint64_t used = ~c->free_bits[i / 64] << (64 - i % 64);   /* bits < i, on top */
    if (used != 0) return i - (size_t)__builtin_clzll(used);
  }
  for (size_t w = i / 64; w > 0;) {
    uint64_t used = ~c->free_bits[--w];
    if (used != 0) return w * 64 + 64 - (size_t)__builtin_clzll(used);
  }
  return 0;
}

/* The first free run of n pages in c that starts at a multiple of `step` pages; 0 if there is none.
 * A search for any start (step 1) that finds none has seen every free run: c->run_bound becomes the
 * longest, so requests that cannot fit skip this chunk until a free makes a longer run. */
static size_t run_find(pchunk_t *c, size_t n, size_t step)
{
  if (n > c->run_bound) return 0;
  size_t i = c->first_page, longest = 0;
  for (;;) {
    i = next_free(c, i);
    size_t start = step == 1 ? i : (i + step - 1) / step * step;   /* the run's first page, aligned */
    if (start + n > chunk_pages) break;
    size_t end = next_used(c, start);
    if (end >= start + n) return start;
    if (end - i > longest) longest = end - i;
    i = end;
  }
  if (step == 1) c->run_bound = (uint32_t)(chunk_pages - i > longest ? chunk_pages - i : longest);
  return 0;
}

/* Takes n pages starting at a multiple of `step` pages, from any page chunk or a new one: sets *c and
 * returns the first page's index, or 0 (errno) when no chunk can be had.  Zeroes pages that may not be
 * zero when asked; the descriptors say "run" (the caller may retag the head). */
static size_t run_alloc(size_t n, size_t step, bool zero, pchunk_t **out)
{
  pchunk_t *c;
  size_t i = 0;
  for (c = pchunks; c != NULL; c = c->next) {
    if (c->free_pages >= n && (i = run_find(c, n, step)) != 0) break;
  }
  if (c == NULL) {
    if ((c = chunk_new()) == NULL) return 0;
    if ((i = run_find(c, n, step)) == 0) return 0;   /* cannot happen: n, step fit a fresh chunk */
  }
  c->free_pages -= (uint32_t)n;
  c->stale_empty = false;
  bits_assign(c->free_bits, i, n, false);
  bits_assign(c->stale_bits, i, n, false);
  /* Count the pages touched now; zero the others when asked. */
  for (size_t k = i, end = i + n, cnt; k < end; k += cnt) {
    cnt = span_in_word(k, end);
    uint64_t m = word_mask(k % 64, cnt), warm = c->touched_bits[k / 64] & m;
    if (warm != m) touched_pages += (size_t)__builtin_popcountll(m & ~warm);
    c->touched_bits[k / 64] |= m;
    for (; zero && warm != 0; warm &= warm - 1)
      memset(page_addr(c, k / 64 * 64 + (size_t)__builtin_ctzll(warm)), 0, page);
  }
  c->page[i] = (pdesc_t){.kind = PG_RUN, .npages = (uint16_t)n};
  head_assign(c, i, true);
  *out = c;
  return i;
}

static void run_free(pchunk_t *c, size_t i)
{
  size_t n = c->page[i].npages;
  c->page[i].kind = PG_FREE;
  head_assign(c, i, false);
  bits_assign(c->free_bits, i, n, true);
  c->free_pages += (uint32_t)n;
  size_t merged = next_used(c, i + n) - prev_used(c, i);   /* the free run it is now part of */
  if (merged > c->run_bound) c->run_bound = (uint32_t)merged;
}

/* The first page of the slab or run that page i (in use) belongs to: the nearest head at or before it.
 * Lock-free (block_of): no head can appear between a live block's first page and its other pages. */
static inline size_t head_of(const pchunk_t *c, size_t i)
{
  size_t w = i / 64;
  uint64_t h = __atomic_load_n(&c->head_bits[w], __ATOMIC_RELAXED) << (63 - i % 64);   /* bits <= i, on top */
  if (mprof_likely(h != 0)) return i - (size_t)__builtin_clzll(h);
  while (w > 0) {
    h = __atomic_load_n(&c->head_bits[--w], __ATOMIC_RELAXED);
    if (h != 0) return w * 64 + 63 - (size_t)__builtin_clzll(h);
  }
  return 0;   /* cannot happen: p is in a live block */
}

/* ---------------------------------------------------------------------------------------------------
   Slabs
--------------------------------------------------------------------------------------------------- */

static void partial_push(uint8_t cls, pchunk_t *c, size_t i)
{
  pdesc_t *d = &c->page[i];
  pchunk_t *hc;
  size_t hi;
  d->prev = 0;
  d->next = partial[cls];
  if (partial[cls] != 0) deref(partial[cls], &hc, &hi)->prev = ref_of(c, i);
  partial[cls] = ref_of(c, i);
}

static void partial_remove(uint8_t cls, pdesc_t *d)
{
  pchunk_t *oc;
  size_t oi;
  if (d->prev != 0) deref(d->prev, &oc, &oi)->next = d->next;
  else partial[cls] = d->next;
  if (d->next != 0) deref(d->next, &oc, &oi)->prev = d->prev;
  d->prev = d->next = 0;
}

static inline size_t slab_capacity(uint8_t cls) { return slab_pages[cls] * page / class_size[cls]; }

/* Free blocks of a slab are linked by index: a freed block's first two bytes hold the next one + 1. */
static void *slab_alloc(uint8_t cls, bool zero)
{
  pchunk_t *c;
  size_t i;
  pdesc_t *d;
  if (partial[cls] != 0) {
    d = deref(partial[cls], &c, &i);
  } else {
    if ((i = run_alloc(slab_pages[cls], 1, false, &c)) == 0) return NULL;
    d = &c->page[i];
    *d = (pdesc_t){.kind = PG_SLAB, .cls = cls, .npages = slab_pages[cls]};
    partial_push(cls, c, i);
  }
  char *block;
  if (d->free != 0) {
    block = page_addr(c, i) + (size_t)(d->free - 1u) * class_size[cls];
    memcpy(&d->free, block, sizeof d->free);
  } else {
    block = page_addr(c, i) + (size_t)d->extent++ * class_size[cls];
  }
  if (++d->used == slab_capacity(cls)) partial_remove(cls, d);
  if (zero) memset(block, 0, class_size[cls]);
  return block;
}

static void slab_free(pchunk_t *c, size_t i, void *p)
{
  pdesc_t *d = &c->page[i];
  uint8_t cls = d->cls;
  if (d->used-- == slab_capacity(cls)) partial_push(cls, c, i);
  if (d->used == 0 && (d->prev != 0 || d->next != 0)) {   /* empty, and not its class's only slab with */
    partial_remove(cls, d);                              /* room: its pages go back to the chunk */
    run_free(c, i);
    return;
  }
  memcpy(p, &d->free, sizeof d->free);
  d->free = (uint16_t)(((char *)p - page_addr(c, i)) / class_size[cls] + 1);
}

/* The smallest class that holds `size` bytes aligned to `alignment` (a power of two, at most a page), or
 * CLASSES when none does. */
static uint8_t class_of(size_t size, size_t alignment)
{
  size_t k;
  if (size <= 128) {
    k = size == 0 ? 0 : (size - 1) / 16;             /* 16-byte steps */
  } else {                                            /* four per power of two: (2^e, 2^(e+1)] */
    unsigned e = (unsigned)(8 * sizeof(unsigned long) - 1) - (unsigned)__builtin_clzl((unsigned long)(size - 1));
    k = 8 + (e - 7) * 4 + ((size - ((size_t)1 << e) - 1) >> (e - 2));
  }
  while (k < CLASSES && (class_size[k] & (alignment - 1)) != 0) k++;
  return k < CLASSES ? (uint8_t)k : CLASSES;
}

/* ---------------------------------------------------------------------------------------------------
   Giving memory back
--------------------------------------------------------------------------------------------------- */

static uint64_t coarse_now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* madvise(MADV_DONTNEED) for the pages of c set in `mask`, a run at a time; they are then zero. */
static void release_pages(pchunk_t *c, const uint64_t *mask)
{
  for (size_t i = next_bit(mask, c->first_page, true); i < chunk_pages;) {
    size_t k = next_bit(mask, i, false);
    bits_assign(c->touched_bits, i, k - i, false);
    touched_pages -= k - i;        /* mask holds touched pages only */
    madvise(page_addr(c, i), (k - i) * page, MADV_DONTNEED);
    i = next_bit(mask, k, true);
  }
}

/* Frees each class's kept empty slab that was already kept at the last purge (all of them: `all`). */
static void purge_slabs(bool all)
{
  for (uint8_t k = 0; k < CLASSES; k++) {
    pchunk_t *c;
    size_t i;
    uint32_t ref = partial[k];
    pdesc_t *d = ref != 0 ? deref(ref, &c, &i) : NULL;
    if (d == NULL || d->used != 0) {
      kept_empty[k] = 0;
    } else if (all || kept_empty[k] == ref) {
      partial_remove(k, d);
      run_free(c, i);
      kept_empty[k] = 0;
    } else {
      kept_empty[k] = ref;
    }
  }
}

/* Gives back what has been free since the last purge (or everything free, when `all`). */
static void purge(bool all)
{
  purge_slabs(all);
  for (pchunk_t *c = pchunks, *next; c != NULL; c = next) {
    next = c->next;
    if (chunk_empty(c) && (all || c->stale_empty)) {
      chunk_delete(c);
      continue;
    }
    uint64_t release[BITMAP_WORDS];
    for (size_t w = 0; w < BITMAP_WORDS; w++) {
      uint64_t free_touched = c->free_bits[w] & c->touched_bits[w];
      release[w] = all ? free_touched : free_touched & c->stale_bits[w];
    }
    release_pages(c, release);
    for (size_t w = 0; w < BITMAP_WORDS; w++) c->stale_bits[w] = c->free_bits[w] & c->touched_bits[w];
    c->stale_empty = chunk_empty(c);
  }
  if (all) mprof_arena_release_cache();
  else mprof_arena_purge();
}

/* A purge once per period, when there is something worth giving back: cached chunk runs, or more than
 * PURGE_FLOOR of idle resident pages (touched, minus what small and medium blocks use).  Below that, the
 * madvise calls and the page faults that follow cost more than the memory is worth: a program sampling a
 * few short-lived blocks at a time would empty, give back and fault in the same slab every period. */
static void purge_tick(void)
{
  size_t resident = touched_pages * page, used = live_bytes - large_bytes;
  if (mprof_arena_cached_bytes() == 0 && resident < used + PURGE_FLOOR) return;   /* before the clock */
  uint64_t now = coarse_now();
  if (now - last_purge < MPROF_PURGE_NS) return;
  last_purge = now;
  purge(false);
}

/* ---------------------------------------------------------------------------------------------------
   The heap's interface
--------------------------------------------------------------------------------------------------- */

/* Called under api_lock by mi_prof_start(): sets up the window (once).  False: no window (said by the
 * caller, MI_PROF_DROP_NO_ARENA). */
bool mprof_sheap_init(void)
{
  if (page != 0) return true;
  if (!mprof_arena_init()) return false;
  size_t pg = mprof_arena_page();
  if (pg > MPROF_CHUNK / 16 || MPROF_CHUNK / pg > MAX_PAGES) return false;   /* 4 KiB .. 64 KiB pages */
  for (uint8_t k = 0; k < CLASSES; k++) {
    /* The fewest pages (1, 2 or 4) that waste at most an eighth of the slab. */
    size_t n = 1;
    while (n < 4 && (n * pg) % class_size[k] > n * pg / 8) n *= 2;
    slab_pages[k] = (uint8_t)n;
  }
  chunk_pages = MPROF_CHUNK / pg;
  __atomic_store_n(&page, pg, __ATOMIC_RELEASE);
  return true;
}

typedef enum { BLOCK_SMALL, BLOCK_MEDIUM, BLOCK_LARGE } block_kind_t;

/* How a request is served: a slab class (small), a page run (medium) or a chunk run (large). */
static block_kind_t kind_for(size_t size, size_t alignment, uint8_t *cls)
{
  if (size <= SMALL_MAX && alignment <= page && (*cls = class_of(size, alignment)) < CLASSES) return BLOCK_SMALL;
  if (size <= MEDIUM_MAX && alignment <= MEDIUM_MAX) return BLOCK_MEDIUM;
  return BLOCK_LARGE;
}

/* The block that holds p (its start, which p may be past: an _aligned_at request with an offset gets a
 * pointer inside its block) and its kind and usable bytes.  Lock-free: what describes a live block (its
 * chunk's state, its slab's class, its run's length) does not change while the block lives. */
typedef struct block_s {
  block_kind_t kind;
  char        *start;
  size_t       usable;         /* bytes from start */
} block_t;

static block_t block_of(const void *p)
{
  block_t b;
  char *run = mprof_arena_run_head(p);
  if (run != NULL) {
    b = (block_t){BLOCK_LARGE, run, mprof_arena_run_bytes(run)};
    return b;
  }
  pchunk_t *c = chunk_of(p);
  size_t h = head_of(c, page_index(c, p));
  const pdesc_t *d = &c->page[h];
  char *first = page_addr(c, h);
  if (d->kind == PG_SLAB) {
    size_t cs = class_size[d->cls];
    b = (block_t){BLOCK_SMALL, first + ((size_t)((const char *)p - first) / cs) * cs, cs};
  } else {
    b = (block_t){BLOCK_MEDIUM, first, (size_t)d->npages * page};
  }
  return b;
}

static void *alloc_locked(size_t size, size_t alignment, bool zero, mi_prof_drop_reason_t *why)
{
  uint8_t cls = CLASSES;
  void *p = NULL;
  size_t usable = 0;
  switch (kind_for(size, alignment, &cls)) {
  case BLOCK_SMALL:
    p = slab_alloc(cls, zero);
    usable = class_size[cls];
    break;
  case BLOCK_MEDIUM: {
    size_t n = (size + page - 1) / page, step = alignment > page ? alignment / page : 1;
    pchunk_t *c;
    size_t i = run_alloc(n, step, zero, &c);
    if (i != 0) p = page_addr(c, i);
    usable = n * page;
    break;
  }
  case BLOCK_LARGE: {
    bool fresh;
    p = mprof_arena_run_alloc(size, alignment, &fresh);
    if (p == NULL && errno == EFBIG) {        /* can never fit the window: only this request is refused */
      *why = alignment > MPROF_CHUNK ? MI_PROF_DROP_ALIGNMENT : MI_PROF_DROP_TOO_LARGE;
      return NULL;
    }
    if (p == NULL) break;
    usable = mprof_arena_run_bytes(p);
    if (zero && !fresh) {
      if (usable > MEDIUM_MAX) madvise(p, usable, MADV_DONTNEED);   /* zero pages, cheaper than writing */
      else memset(p, 0, size);
    }
    large_bytes += usable;
    break;
  }
  }
  if (p == NULL) {
    *why = MI_PROF_DROP_ARENA_FULL;
    return NULL;
  }
  live_blocks++;
  live_bytes += usable;
  return p;
}

/* A block of at least `size` bytes such that p + offset is aligned to `alignment` (a power of two; 0 and
 * anything below 16 mean 16), zeroed when asked; NULL with *why when the arena cannot hold it (the
 * caller serves the request unsampled).  With an offset that is not a multiple of the alignment, the
 * block is `alignment` bytes larger and p points into it. */
void *mprof_sheap_alloc(size_t size, size_t alignment, size_t offset, bool zero, mi_prof_drop_reason_t *why)
{
  if (alignment < 16) alignment = 16;
  size_t shift = offset & (alignment - 1), need = size;
  if (shift != 0 && __builtin_add_overflow(size, alignment, &need)) {
    *why = MI_PROF_DROP_TOO_LARGE;
    return NULL;
  }
  size_t base_align = shift != 0 ? 16 : alignment;
  mprof_lock(&sheap_lock);
  purge_tick();
  char *p = alloc_locked(need, base_align, zero, why);
  if (p == NULL && *why == MI_PROF_DROP_ARENA_FULL) {   /* no room: give back what is cached, retry */
    purge(true);
    p = alloc_locked(need, base_align, zero, why);
  }
  mprof_unlock(&sheap_lock);
  if (p != NULL && shift != 0) {
    uintptr_t at = ((uintptr_t)p + shift + alignment - 1) & ~(uintptr_t)(alignment - 1);
    p = (char *)(at - shift);
  }
  return p;
}

void mprof_sheap_free(void *p)
{
  mprof_lock(&sheap_lock);
  block_t b = block_of(p);
  switch (b.kind) {
  case BLOCK_LARGE:
    large_bytes -= b.usable;
    mprof_arena_run_free(b.start);
    break;
  case BLOCK_SMALL: {
    pchunk_t *c = chunk_of(b.start);
    slab_free(c, head_of(c, page_index(c, b.start)), b.start);
    break;
  }
  case BLOCK_MEDIUM: {
    pchunk_t *c = chunk_of(b.start);
    run_free(c, page_index(c, b.start));
    break;
  }
  }
  live_blocks--;
  live_bytes -= b.usable;
  purge_tick();
  mprof_unlock(&sheap_lock);
}

/* Bytes usable from p on (lock-free, see block_of): malloc_usable_size(), and a realloc from a signal
 * handler, may ask. */
size_t mprof_sheap_usable_size(const void *p)
{
  block_t b = block_of(p);
  return b.usable - (size_t)((const char *)p - b.start);
}

void *mprof_sheap_block_start(const void *p) { return block_of(p).start; }

/* Whether a sampled block can take `size` bytes where it is: when a fresh request of that size would be
 * served the same way (the same class, the same number of pages), or it is a large block that the size
 * still needs a chunk run for (which then shrinks to the chunks needed).  realloc keeps such a block.
 * A pointer inside its block (an offset request) never stays. */
bool mprof_sheap_resize(void *p, size_t size)
{
  uint8_t cls = CLASSES;
  bool ok = false;
  mprof_lock(&sheap_lock);
  block_t b = block_of(p);
  if (size != 0 && b.start == (char *)p && b.kind == kind_for(size, 16, &cls)) {
    switch (b.kind) {
    case BLOCK_SMALL: ok = class_size[cls] == b.usable; break;
    case BLOCK_MEDIUM: ok = (size + page - 1) / page * page == b.usable; break;
    case BLOCK_LARGE:
      ok = size <= b.usable;
      if (ok) {
        mprof_arena_run_shrink(p, size);
        size_t after = mprof_arena_run_bytes(p);
        large_bytes -= b.usable - after;
        live_bytes -= b.usable - after;
      }
      break;
    }
  }
  mprof_unlock(&sheap_lock);
  return ok;
}

bool mprof_sheap_contains(const void *p) { return mprof_arena_contains(p); }

bool mprof_sheap_init_done(void) { return __atomic_load_n(&page, __ATOMIC_ACQUIRE) != 0; }

void mprof_sheap_usage(mprof_sheap_usage_t *out)
{
  mprof_lock(&sheap_lock);
  uintptr_t lo, hi;
  mprof_arena_window(&lo, &hi);
  out->limit_bytes = hi - lo;
  out->mapped_bytes = mprof_arena_mapped();
  out->live_blocks = live_blocks;
  out->live_bytes = live_bytes;
  /* At most resident: the touched pages of page chunks, live large runs and cached ones. */
  out->resident_bytes = touched_pages * page + large_bytes + mprof_arena_cached_bytes();
  mprof_unlock(&sheap_lock);
}

void mprof_sheap_prefork(void) { mprof_lock(&sheap_lock); }
void mprof_sheap_postfork(void) { mprof_unlock(&sheap_lock); }
void mprof_sheap_postfork_reinit(void) { pthread_mutex_init(&sheap_lock, NULL); }
