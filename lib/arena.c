/* arena.c - the window of address space that holds the sampled blocks of up to two slices (sheap.c's
 * slots), claimed a chunk at a time.
 *
 * The window is low in the process (64-bit: from 4 GiB; 32-bit: from 16 MiB, below a non-PIE program's
 * image), below mimalloc's memory, which it maps from its 2 TiB hint upwards or wherever the kernel's
 * top-down allocator puts it.  Whether an address is in a chunk of ours is one byte of the chunk map,
 * read lock-free: the slow paths ask it of every block that starts a slice.
 *
 * Nothing is reserved up front.  A chunk (1 MiB, aligned) is mapped when the heap needs it, at the lowest
 * free chunk address, with MAP_FIXED_NOREPLACE, so the program never pays address space (RLIMIT_AS,
 * RLIMIT_DATA) for sampled blocks it does not have, and a chunk the kernel gave to someone else is noted
 * as foreign and never touched.  A mapping of anyone else that lands inside the window is harmless: its
 * blocks are not ours by the chunk map.
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
  CHUNK_SLOTS,      /* sheap.c's slots, with a header */
  CHUNK_FOREIGN     /* mapped by someone else when we tried: never ours */
};

static uintptr_t lo, hi;             /* the window */
static size_t    chunks;             /* chunks in the window */
static uint8_t  *state;              /* chunks entries, CHUNK_* */
static size_t    first_none;         /* no CHUNK_NONE entry below this index */
static size_t    mapped_bytes;       /* chunks mapped by us now */
static bool      no_noreplace;       /* the kernel (or valgrind) refused MAP_FIXED_NOREPLACE */
static size_t    page_bytes;

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
  return get(index_of(a)) == CHUNK_SLOTS;
}

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

/* Maps the lowest free chunk; its index, or chunks (errno) if the window or the address space has no
 * room.  Chunks found taken are marked foreign and skipped. */
static size_t claim(void)
{
  for (;;) {
    while (first_none < chunks && get(first_none) != CHUNK_NONE) first_none++;
    if (first_none == chunks) {
      errno = ENOSPC;
      return chunks;
    }
    size_t i = first_none;
    if (map_at((uintptr_t)chunk_addr(i), MPROF_CHUNK) != NULL) {
      mapped_bytes += MPROF_CHUNK;
      return i;
    }
    if (errno != EEXIST) return chunks;        /* ENOMEM: RLIMIT_AS, RLIMIT_DATA or the kernel */
    set(i, CHUNK_FOREIGN);                      /* someone else's mapping is there */
  }
}

/* ---------------------------------------------------------------------------------------------------
   Chunks for sheap.c's slots
--------------------------------------------------------------------------------------------------- */

/* A fresh, zeroed chunk; NULL with errno ENOSPC (the window is full) or ENOMEM (the address space). */
void *mprof_arena_chunk_alloc(void)
{
  size_t i = claim();
  if (i == chunks) return NULL;
  set(i, CHUNK_SLOTS);
  return chunk_addr(i);
}

void mprof_arena_chunk_free(void *c)
{
  size_t i = index_of((uintptr_t)c);
  set(i, CHUNK_NONE);
  munmap(c, MPROF_CHUNK);
  mapped_bytes -= MPROF_CHUNK;
  if (i < first_none) first_none = i;
}

/* For sheap.c's slot references and the tests: the window's bounds. */
void mprof_arena_window(uintptr_t *out_lo, uintptr_t *out_hi)
{
  *out_lo = lo;
  *out_hi = hi;
}
