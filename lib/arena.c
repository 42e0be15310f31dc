/* arena.c - the address space that holds the sampled blocks of up to two slices (sheap.c's slots),
 * claimed a chunk (1 MiB, aligned) at a time.
 *
 * Chunks are mapped first in a window low in the process (64-bit: from 4 GiB; 32-bit: from 16 MiB, below
 * a non-PIE program's image), below mimalloc's memory, which it maps from its 2 TiB hint upwards or
 * wherever the kernel's top-down allocator puts it.  A 64-bit window (up to 1020 GiB) is all the arena
 * has.  A 32-bit one is at most 112 MiB, about 3,500 slots of one 32 KiB slice, where a program sampled
 * at a low rate keeps tens of thousands of small samples live: there, once the window is full, a chunk
 * goes wherever the kernel has room, up to MIMALLOC_PROF_ARENA_SIZE in all (default 1 GiB, about 31,000
 * slots).  Whether an address is in a chunk of ours is one byte of the chunk map, read lock-free: on
 * 64-bit platforms the map covers the window, on 32-bit ones the whole address space (4 KiB), so that
 * free() knows a slot anywhere by that byte (mprof_sheap_maybe).
 *
 * Nothing is reserved up front.  A window chunk is mapped when the heap needs it, at the lowest free
 * chunk address, with MAP_FIXED_NOREPLACE, so the program never pays address space (RLIMIT_AS,
 * RLIMIT_DATA) for sampled blocks it does not have, and a chunk the kernel gave to someone else is noted
 * as foreign and never touched.  A mapping of anyone else that lands inside the window is harmless: its
 * blocks are not ours by the chunk map.
 *
 * Lock: sheap.c's sheap_lock protects everything here but the chunk map's reads by
 * mprof_arena_contains() and mprof_sheap_maybe(), which are lock-free (a state is published with release
 * order before any block of the chunk is handed out, and only a chunk without live blocks changes state
 * again).
 */
#include "arena.h"
#include "options.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

enum {
  CHUNK_NONE = 0,                   /* not mapped by us (this must stay 0: the map starts zeroed) */
  CHUNK_SLOTS = MPROF_CHUNK_SLOTS,  /* sheap.c's slots, with a header */
  CHUNK_FOREIGN,                    /* mapped by someone else when we tried: never ours */
  CHUNK_PENDING                     /* ours, being mapped or unmapped with sheap_lock released */
};

static uintptr_t lo, hi;             /* the window */
static uintptr_t map_lo;             /* the chunk map covers `chunks` chunks from here */
static size_t    chunks;
static uint8_t  *state;              /* chunks entries, CHUNK_* */
static size_t    win_first, win_end; /* the window's entries */
static size_t    first_none;         /* no CHUNK_NONE entry in the window below this index */
static size_t    limit_bytes;        /* chunks mapped at most */
static size_t    mapped_bytes;       /* chunks mapped by us now */
#if MPROF_ARENA_WHOLE
uint8_t         *mprof_arena_map;    /* state, published once it is set up (mprof_sheap_maybe) */
#endif
static bool      no_noreplace;       /* the kernel (or valgrind) refused MAP_FIXED_NOREPLACE (atomic) */
static size_t    page_bytes;

/* ---------------------------------------------------------------------------------------------------
   The window
--------------------------------------------------------------------------------------------------- */

#if !MPROF_ARENA_WHOLE
#define WINDOW_LO     ((uintptr_t)4 << 30)                   /* 4 GiB */
#define WINDOW_MAX    (((uintptr_t)1 << 40) - WINDOW_LO)     /* ends below 1 TiB, far below 2 TiB */
#else
#define WINDOW_LO     ((uintptr_t)16 << 20)                  /* 16 MiB */
#define WINDOW_MAX    ((uintptr_t)112 << 20)                 /* ends below 128 MiB: a non-PIE image */
#define MAP_CHUNKS    ((size_t)1 << (32 - MPROF_CHUNK_SHIFT)) /* the whole address space */
#endif

size_t mprof_arena_page(void) { return page_bytes; }

/* Sets the arena up (once, under api_lock): its size from MIMALLOC_PROF_ARENA_SIZE, the window's clipped
 * to what the platform's address space has below its heap.  Maps only the chunk map, a byte per chunk. */
bool mprof_arena_init(void)
{
  if (state != NULL) return true;
  page_bytes = (size_t)sysconf(_SC_PAGESIZE);
  uint64_t want = mprof_option(MPROF_OPT_ARENA_SIZE);
  uintptr_t size = want < (uint64_t)WINDOW_MAX ? (uintptr_t)want : WINDOW_MAX;
  size &= ~(uintptr_t)(MPROF_CHUNK - 1);
  if (size < MPROF_CHUNK) return false;
  size_t n = (size_t)(size >> MPROF_CHUNK_SHIFT);
#if MPROF_ARENA_WHOLE
  size_t map_n = MAP_CHUNKS;
  map_lo = 0;
  win_first = (size_t)(WINDOW_LO >> MPROF_CHUNK_SHIFT);
  limit_bytes = (size_t)(want & ~(uint64_t)(MPROF_CHUNK - 1));   /* at most MPROF_ARENA_MAX: a size_t */
#else
  size_t map_n = n;
  map_lo = WINDOW_LO;
  win_first = 0;
  limit_bytes = size;
#endif
  void *map = mmap(NULL, map_n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED) return false;
  state = map;
  chunks = map_n;
  win_end = win_first + n;
  first_none = win_first;
  lo = WINDOW_LO;
  hi = lo + size;
#if MPROF_ARENA_WHOLE
  __atomic_store_n(&mprof_arena_map, state, __ATOMIC_RELEASE);
#endif
  return true;
}

static inline size_t index_of(uintptr_t p) { return (size_t)((p - map_lo) >> MPROF_CHUNK_SHIFT); }
static inline void *chunk_addr(size_t i) { return (void *)(map_lo + ((uintptr_t)i << MPROF_CHUNK_SHIFT)); }
static inline uint8_t get(size_t i) { return __atomic_load_n(&state[i], __ATOMIC_ACQUIRE); }
static inline void set(size_t i, uint8_t s) { __atomic_store_n(&state[i], s, __ATOMIC_RELEASE); }

bool mprof_arena_contains(const void *p)
{
  size_t i = index_of((uintptr_t)p);
  if (i >= chunks) return false;                /* also when the arena does not exist (chunks == 0) */
  return get(i) == CHUNK_SLOTS;
}

size_t mprof_arena_mapped(void) { return mapped_bytes; }

/* Maps `bytes` at exactly `at`; NULL (errno) when anything is there or the kernel refuses. */
static void *map_at(uintptr_t at, size_t bytes)
{
  bool hint = __atomic_load_n(&no_noreplace, __ATOMIC_RELAXED);
  int flags = MAP_PRIVATE | MAP_ANONYMOUS | (hint ? 0 : MAP_FIXED_NOREPLACE);
  void *p = mmap((void *)at, bytes, PROT_READ | PROT_WRITE, flags, -1, 0);
  if (p == MAP_FAILED && errno == EINVAL && !hint) {
    __atomic_store_n(&no_noreplace, true, __ATOMIC_RELAXED);   /* old kernels, some emulators: a hint */
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

#if MPROF_ARENA_WHOLE
/* A chunk wherever the kernel has room (the window is full): 2 MiB less a page mapped, the aligned MiB in
 * it kept.  Its index, or chunks (errno) if the address space has no room. */
static size_t claim_anywhere(void)
{
  size_t span = 2 * MPROF_CHUNK - page_bytes;
  char *p = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return chunks;           /* ENOMEM: RLIMIT_AS, RLIMIT_DATA or the kernel */
  char *at = (char *)(((uintptr_t)p + MPROF_CHUNK - 1) & ~(uintptr_t)(MPROF_CHUNK - 1));
  if (at != p) munmap(p, (size_t)(at - p));
  if (at + MPROF_CHUNK != p + span) munmap(at + MPROF_CHUNK, (size_t)(p + span - (at + MPROF_CHUNK)));
  mapped_bytes += MPROF_CHUNK;
  return index_of((uintptr_t)at);
}
#endif

/* Maps the lowest free chunk of the window (on 32-bit platforms, once it is full, one anywhere); its
 * index, or chunks (errno) if the arena or the address space has no room.  Chunks found taken are marked
 * foreign and skipped. */
static size_t claim(void)
{
  if (limit_bytes - mapped_bytes < MPROF_CHUNK) {
    errno = ENOSPC;
    return chunks;
  }
  for (;;) {
    while (first_none < win_end && get(first_none) != CHUNK_NONE) first_none++;
    if (first_none == win_end) {
#if MPROF_ARENA_WHOLE
      return claim_anywhere();
#else
      errno = ENOSPC;
      return chunks;
#endif
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

/* The address of chunk i is free again. */
static void release(size_t i)
{
  set(i, CHUNK_NONE);
  mapped_bytes -= MPROF_CHUNK;
  if (i >= win_first && i < first_none) first_none = i;
}

void mprof_arena_chunk_free(void *c)
{
  munmap(c, MPROF_CHUNK);
  release(index_of((uintptr_t)c));
}

/* A chunk mapped or unmapped with sheap_lock released, so that the lock's other waiters do not sleep
 * behind the kernel's address-space lock: reserve (lock held) takes the window's lowest free chunk and
 * marks it pending (NULL when the window has none: mprof_arena_chunk_alloc then, under the lock); map
 * (no lock) maps it, false with errno; settle (lock held) makes it the slots' (err 0), foreign (EEXIST) or
 * free again (any other err: the map failed, or the chunk was retired and is unmapped).  retire (lock
 * held) marks a chunk without live blocks pending, for its caller to unmap it without the lock. */
void *mprof_arena_chunk_reserve(void)
{
  if (limit_bytes - mapped_bytes < MPROF_CHUNK) return NULL;
  while (first_none < win_end && get(first_none) != CHUNK_NONE) first_none++;
  if (first_none == win_end) return NULL;
  set(first_none, CHUNK_PENDING);
  mapped_bytes += MPROF_CHUNK;
  return chunk_addr(first_none);
}

bool mprof_arena_chunk_map(void *at) { return map_at((uintptr_t)at, MPROF_CHUNK) != NULL; }

void mprof_arena_chunk_settle(void *at, int err)
{
  size_t i = index_of((uintptr_t)at);
  if (err == 0) {
    set(i, CHUNK_SLOTS);
  } else if (err == EEXIST) {
    set(i, CHUNK_FOREIGN);
    mapped_bytes -= MPROF_CHUNK;
  } else {
    release(i);
  }
}

void mprof_arena_chunk_retire(void *c) { set(index_of((uintptr_t)c), CHUNK_PENDING); }

/* For sheap.c's inline test: the window's bounds. */
void mprof_arena_window(uintptr_t *out_lo, uintptr_t *out_hi)
{
  *out_lo = lo;
  *out_hi = hi;
}

/* For sheap.c's slot references: the lowest address a chunk can have. */
uintptr_t mprof_arena_base(void) { return map_lo; }

/* The address space the chunks may take at once (mi_prof_stats' arena_limit_bytes). */
size_t mprof_arena_limit(void) { return limit_bytes; }
