/* sheap.c - where sampled blocks live: each at the start of a slice, so free() knows them by address.
 *
 * Every sampled block starts on a slice boundary (MPROF_SLICE in inline.h: 64 KiB on 64-bit platforms,
 * 32 KiB on 32-bit ones, mimalloc 2.0's slice), so free() tells a block that may be sampled by one test
 * of its address's low bits: mimalloc never starts a block of 1 KiB or less there, and the larger ones
 * that do start there (2-25% of 1-16 KiB blocks, most larger ones) reach the slow path, which finds them
 * ordinary (below).  Two homes:
 *   - a request of up to two slices gets a slot of its own: one or two slices of address space in the
 *     arena (arena.c), of which only the pages the program writes become resident;
 *   - a larger one is allocated by mimalloc itself, from the heap the request names (the thread's
 *     default heap for the malloc family), as it would be unsampled: mimalloc gives such a block a page
 *     of its own, which starts on a slice.  It costs exactly what mimalloc spends on it unsampled, and
 *     mimalloc's own heap functions (destroy, visits, ownership) see it as theirs (mi_heap.c).
 * Large blocks are the ones that cost memory: samples of 128 KiB and more are 22-100% of such requests
 * at the default rate, and kept apart from mimalloc they leave holes in its pages that it does not give
 * back (bench/mixed_live.c: a separate heap holds 27 MB while mimalloc shrinks by 15 MB).  A small block in a
 * slot costs a page, as in jemalloc's and tcmalloc's profilers (a sampled small request takes a page of its
 * own there too).
 *
 * Slots.  An arena chunk (1 MiB) holds slots of one size, one slice or two (a request gets the smaller
 * that holds it); the first is the chunk's header, whose first page describes the others.  A slot
 * remembers the usable size of its block (mi_good_size() of the request, what an unsampled block would
 * report; read lock-free) and its extent: how many pages from its start its occupants may have written,
 * which are resident until given back.  Free slots wait on lists by extent; a request takes the free slot
 * whose extent best matches its own pages (a smaller request in a larger slot would keep the difference
 * resident, a larger one in a smaller slot faults pages in), so slots stay sorted by size as a size
 * class's blocks do.  A freed slot keeps its whole extent: no system call on free.  Giving back the
 * pages an earlier, larger occupant left, at each free of a smaller block, cost a madvise per sample
 * where sizes vary (bench/mstress_like, 8 threads: 560 calls, 4% of its CPU time, 9% of its wall time);
 * the purge below gives back what stays idle, in batches.
 *
 * Giving memory back, by time and by state.  A slot remembers when it became free.  Once a free slot has
 * been free for a purge period (MPROF_PURGE_NS) and more than PURGE_FLOOR is idle, the next operation on
 * the heap gives back every slot free that long: madvise(MADV_DONTNEED) of its extent, its chunk unmapped
 * when all of its slots are free and given back (the last chunk stays mapped, its header page resident).
 * The profiler thread, where there is one, runs the same purge when it is due (mprof_sheap_purge_due),
 * and gives back what stays idle below the floor after LINGER_NS: frees that span purge periods leave
 * such a remainder once the first purge has run, and no later heap operation may come.
 * No more than IDLE_MAX is kept: a slot freed beyond it is given back at once.  While no session runs
 * nothing can reuse a slot, so a freed slot is given back at once, and mi_prof_stop() and mi_prof_reset()
 * give back every free slot (mprof_sheap_purge_all).
 *
 * Blocks in mimalloc have no slot: a filter tells free() whether one may be sampled.  Per slice number
 * modulo MPROF_FILTER_SLOTS it counts the live records of such blocks (a byte per 64 KiB slice of 4 GiB
 * of address space, mapped at the first start, its pages touched only where such blocks lie, which
 * mimalloc keeps together); 0 means certainly no record, and the block goes straight to mimalloc;
 * otherwise the record table decides.  A count that reaches STICKY stays there: a false "maybe" for that
 * slice from then on, never a false "no".  Counts change beside the records (mprof_sheap_track/_untrack),
 * before the block is handed to the program and before it is given back to mimalloc; the program's own
 * synchronisation, which hands the pointer to the thread that frees it, orders the two.
 *
 * Lock: sheap_lock (rank 2 in internal.h) protects the slots and arena.c, around every slot operation,
 * never held while taking another lock.  The filter and the slots' sizes are read without it.  No system
 * call is made under it on a sample's path: a chunk is mapped (and its header page faulted in) or
 * unmapped, and slots' pages given back, with it released (queue_t, slot_get), and a zeroing request
 * is cleared after it.  A holder in the kernel's address-space lock, or in a page fault, outlasts the
 * waiters' spin (lock.c), and each waiter that then sleeps lets another thread of the program run.
 */
#include "sheap.h"
#include "arena.h"
#include "internal.h"
#include "mireal.h"
#include "profiler.h"
#include "record.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define CLASSES        2                                  /* slots of one slice, and of two */
#define SLOT_MAX       (2 * MPROF_SLICE)
#define SLOTS_MAX      (MPROF_CHUNK / MPROF_SLICE)       /* per chunk, the header's included */
#define MAX_EXTENT     63                                 /* pages of a slot, at most */
#define STICKY         UINT8_MAX
/* Free slots keep their pages this long for reuse: 25 ms, as mimalloc 2.0.9 keeps its own before it
 * decommits them (its decommit_delay).  bench/mstress_like (8 threads, 5,300 samples in slots) faulted in
 * 1,020 to 1,160 pages of slots per run at 10 ms and gave back 780 to 990 (means of 6 runs); at 25 ms,
 * 700 to 830 and 480 to 570, the rest is IDLE_MAX's.  A fault costs 18 us on the VM measured.  python3
 * (bench/py_workload.py) peaks the same at 10, 50 or 100 ms.  IDLE_MAX bounds what the wait keeps. */
#define MPROF_PURGE_NS ((uint64_t)25 * 1000000)
#define PURGE_FLOOR    ((size_t)256 * 1024)    /* idle resident memory not worth a heap operation's purge */
#define LINGER_NS      ((uint64_t)100 * 1000000)   /* idle below the floor: the profiler thread's purge */
#define IDLE_MAX       ((size_t)512 * 1024)    /* idle resident memory kept at most: a slot freed beyond
                                                * it is given back at once */

typedef struct slot_s {
  uint32_t usable;      /* usable bytes of the block in it: mi_good_size of its request (read lock-free
                         * while it lives) */
  uint32_t prev, next;  /* free: its class's and extent's list, as slot references (0 = none) */
  uint8_t  used;
  uint8_t  extent;      /* pages from its start that may be written (resident until given back) */
  uint64_t freed;       /* free: when (CLOCK_MONOTONIC_COARSE, ns) */
} slot_t;

typedef struct schunk_s {
  struct schunk_s *prev, *next;     /* every chunk */
  uint8_t          cls;             /* its slots are MPROF_SLICE << cls bytes (read lock-free) */
  uint32_t         used;            /* slots in use */
  slot_t           slot[SLOTS_MAX]; /* [0] is the header's own */
} schunk_t;

_Static_assert(sizeof(schunk_t) <= 2048, "a chunk's header fits its first page");

typedef struct class_s {
  uint32_t head[MAX_EXTENT + 1];    /* free slots by extent */
  uint64_t lists;                   /* bit e: head[e] is not empty */
} class_t;

static pthread_mutex_t sheap_lock = PTHREAD_MUTEX_INITIALIZER;
static size_t    page_bytes;
static class_t   classes[CLASSES];
static schunk_t *schunks;                /* every chunk */
static size_t    nchunks;
static size_t    idle_pages;             /* the free slots' extents */
static size_t    dirty_pages;            /* every slot's extent, and the headers' pages */
static uint64_t  purge_due;              /* a free slot becomes old enough then; 0 = none is waiting */

uintptr_t        mprof_sheap_window_lo, mprof_sheap_window_size;   /* the slots' window (inline test) */
static uintptr_t ref_lo;                 /* the lowest chunk address (slot references) */
uint8_t         *mprof_sheap_filter;     /* MPROF_FILTER_SLOTS counts; NULL before the first start */
static size_t    live_blocks, live_bytes, mi_bytes;   /* relaxed atomics, for mi_prof_stats */

/* ---------------------------------------------------------------------------------------------------
   Slots
--------------------------------------------------------------------------------------------------- */

static inline schunk_t *chunk_of(const void *p) { return (schunk_t *)((uintptr_t)p & ~(MPROF_CHUNK - 1)); }
static inline size_t slot_bytes(const schunk_t *c) { return MPROF_SLICE << c->cls; }
static inline size_t slot_count(const schunk_t *c) { return MPROF_CHUNK / slot_bytes(c); }
static inline size_t slot_index(const schunk_t *c, const void *p)
{
  return ((uintptr_t)p & (MPROF_CHUNK - 1)) / slot_bytes(c);
}
static inline char *slot_addr(schunk_t *c, size_t i) { return (char *)c + i * slot_bytes(c); }
static inline slot_t *slot_of(const void *p) { schunk_t *c = chunk_of(p); return &c->slot[slot_index(c, p)]; }
static inline size_t pages_of(size_t bytes) { return (bytes + page_bytes - 1) / page_bytes; }

/* A slot as 32 bits for the lists: chunk number in the arena * SLOTS_MAX + slot, + 1. */
static uint32_t ref_of(const schunk_t *c, size_t i)
{
  return (uint32_t)((((uintptr_t)c - ref_lo) >> MPROF_CHUNK_SHIFT) * SLOTS_MAX + i + 1);
}

static slot_t *deref(uint32_t ref, schunk_t **c, size_t *i)
{
  ref--;
  *c = (schunk_t *)(ref_lo + ((uintptr_t)(ref / SLOTS_MAX) << MPROF_CHUNK_SHIFT));
  *i = ref % SLOTS_MAX;
  return &(*c)->slot[*i];
}

static void list_push(schunk_t *c, size_t i)
{
  class_t *k = &classes[c->cls];
  slot_t *s = &c->slot[i];
  uint32_t ref = ref_of(c, i);
  schunk_t *hc;
  size_t hi;
  s->prev = 0;
  s->next = k->head[s->extent];
  if (s->next != 0) deref(s->next, &hc, &hi)->prev = ref;
  k->head[s->extent] = ref;
  k->lists |= (uint64_t)1 << s->extent;
  idle_pages += s->extent;
}

static void list_remove(schunk_t *c, slot_t *s)
{
  class_t *k = &classes[c->cls];
  schunk_t *oc;
  size_t oi;
  if (s->prev != 0) deref(s->prev, &oc, &oi)->next = s->next;
  else k->head[s->extent] = s->next;
  if (s->next != 0) deref(s->next, &oc, &oi)->prev = s->prev;
  if (k->head[s->extent] == 0) k->lists &= ~((uint64_t)1 << s->extent);
  idle_pages -= s->extent;
  s->prev = s->next = 0;
}

/* Chunk c, fresh (its slots' class set), joins the heap: every slot on its lists. */
static void chunk_add(schunk_t *c)
{
  dirty_pages += pages_of(sizeof *c);
  c->next = schunks;
  if (schunks != NULL) schunks->prev = c;
  schunks = c;
  nchunks++;
  for (size_t i = slot_count(c) - 1; i >= 1; i--) list_push(c, i);   /* the lowest address first */
}

/* A chunk mapped under the lock: where the window has no room for one mapped without it (slot_get). */
static bool chunk_new(uint8_t cls)
{
  schunk_t *c = mprof_arena_chunk_alloc();
  if (c == NULL) return false;
  c->cls = cls;
  chunk_add(c);
  return true;
}

typedef struct queue_s queue_t;
static bool queued_chunk(queue_t *q, schunk_t *c);

/* Chunk c, whose slots are all free, goes back to the arena: their pages with it, in one munmap, made by
 * q after the lock when it has room. */
static void chunk_delete(schunk_t *c, queue_t *q)
{
  for (size_t i = 1; i < slot_count(c); i++) {
    list_remove(c, &c->slot[i]);
    dirty_pages -= c->slot[i].extent;
  }
  dirty_pages -= pages_of(sizeof *c);
  if (c->prev != NULL) c->prev->next = c->next;
  else schunks = c->next;
  if (c->next != NULL) c->next->prev = c->prev;
  nchunks--;
  if (!queued_chunk(q, c)) mprof_arena_chunk_free(c);
}

/* Whether chunk c has no slot in use and none with pages resident. */
static bool chunk_clean(const schunk_t *c)
{
  if (c->used != 0) return false;
  for (size_t i = 1; i < slot_count(c); i++) {
    if (c->slot[i].extent != 0) return false;
  }
  return true;
}

/* Pages to give back once sheap_lock is released: madvise() takes the kernel's lock of the address space
 * and interrupts the other CPUs that run the process's threads, and made under our lock it made every
 * sampling thread wait (bench/mstress_like, 8 threads on 2 cores: 1,570 futex waits against 92).  A slot
 * queued is pinned meanwhile: counted in use, out of its lists, so nobody takes it and its chunk stays;
 * queue_run() makes the calls and then puts the pinned slots back on their lists.  (A fork child whose
 * parent had slots pinned by another thread keeps them pinned: a few slots never reused.) */
typedef struct qentry_s {
  schunk_t *c;
  uint32_t  i;
  uint8_t   from, keep;    /* pages [keep, from) of the slot go */
  bool      back;          /* a free slot, pinned: back to its lists after */
  bool      chunk;         /* no slot: the whole chunk, retired, is unmapped and its address freed */
} qentry_t;
struct queue_s {
  size_t    n, max;
  qentry_t *e;
};
/* A queue on the allocating thread's stack holds a few entries (a sample may run with 1 KiB of stack
 * left: tests/unwind_probe's tinystack); the purges of mi_prof_stop and of the profiler thread hold more
 * per round of sheap_lock. */
#define QUEUE(name, cap) \
  qentry_t name##_e[cap]; \
  queue_t name = {.n = 0, .max = cap, .e = name##_e}
enum { QUEUE_SAMPLE = 8, QUEUE_PURGE = 32 };

/* Slot i of chunk c keeps `keep` of its pages, the others go back to the system: by q when it has room
 * (true), else now (false, nothing done).  `back`: the slot is free and out of its lists. */
static bool queued(queue_t *q, schunk_t *c, size_t i, size_t keep, bool back)
{
  if (q == NULL || q->n == q->max) return false;
  slot_t *s = &c->slot[i];
  q->e[q->n].c = c;
  q->e[q->n].i = (uint32_t)i;
  q->e[q->n].from = s->extent;
  q->e[q->n].keep = (uint8_t)keep;
  q->e[q->n].back = back;
  q->e[q->n].chunk = false;
  q->n++;
  dirty_pages -= s->extent - keep;
  s->extent = (uint8_t)keep;
  if (back) {
    s->used = 1;
    c->used++;
  }
  return true;
}

/* Chunk c, out of the heap, is unmapped by q (true) when it has room. */
static bool queued_chunk(queue_t *q, schunk_t *c)
{
  if (q == NULL || q->n == q->max) return false;
  mprof_arena_chunk_retire(c);
  q->e[q->n] = (qentry_t){.c = c, .chunk = true};
  q->n++;
  return true;
}

/* Slot i of chunk c, in use, keeps `keep` of its pages; those beyond go back to the system. */
static void slot_trim(schunk_t *c, size_t i, size_t keep, queue_t *q)
{
  if (queued(q, c, i, keep, false)) return;
  slot_t *s = &c->slot[i];
  madvise(slot_addr(c, i) + keep * page_bytes, (s->extent - keep) * page_bytes, MADV_DONTNEED);
  dirty_pages -= s->extent - keep;
  s->extent = (uint8_t)keep;
}

/* Slot i of chunk c, free and out of its lists, keeps `keep` of its pages and goes back to its lists. */
static void slot_keep(schunk_t *c, size_t i, size_t keep, queue_t *q)
{
  if (keep < c->slot[i].extent) {
    if (queued(q, c, i, keep, true)) return;
    slot_trim(c, i, keep, NULL);
  }
  list_push(c, i);
}

/* Gives back free slot i's pages. */
static void slot_release(schunk_t *c, size_t i, queue_t *q)
{
  slot_t *s = &c->slot[i];
  if (s->extent == 0) return;
  list_remove(c, s);
  slot_keep(c, i, 0, q);
}

/* Without sheap_lock: q's system calls, then its pinned slots back on their lists. */
static void __attribute__((noinline)) queue_drain(queue_t *q)
{
  bool back = false;
  for (size_t k = 0; k < q->n; k++) {
    back |= q->e[k].back || q->e[k].chunk;
    if (q->e[k].chunk) {
      munmap(q->e[k].c, MPROF_CHUNK);
      continue;
    }
    char *a = slot_addr(q->e[k].c, q->e[k].i);
    madvise(a + q->e[k].keep * page_bytes, (size_t)(q->e[k].from - q->e[k].keep) * page_bytes, MADV_DONTNEED);
  }
  if (back) {
    mprof_lock(&sheap_lock);
    for (size_t k = 0; k < q->n; k++) {
      if (q->e[k].chunk) mprof_arena_chunk_settle(q->e[k].c, ENOENT);   /* its address free again */
      if (!q->e[k].back) continue;
      schunk_t *c = q->e[k].c;
      c->slot[q->e[k].i].used = 0;
      c->used--;
      list_push(c, q->e[k].i);
    }
    mprof_unlock(&sheap_lock);
  }
  q->n = 0;
}

static inline void queue_run(queue_t *q)
{
  if (q->n != 0) queue_drain(q);
}

/* A free slot of class `cls` for a block of n pages: the smallest extent from n to 2n (or n + 2) pages,
 * else the largest below n (its missing pages fault in as they are written), else the smallest above
 * (its pages beyond n given back first).  NULL when none is free. */
static char *slot_take(uint8_t cls, size_t n, queue_t *q)
{
  class_t *k = &classes[cls];
  uint64_t at_least = k->lists >> n << n, below = k->lists & (((uint64_t)1 << n) - 1);
  size_t e, near = 2 * n > n + 2 ? 2 * n : n + 2;
  if (at_least != 0 && (size_t)__builtin_ctzll(at_least) <= near) e = (size_t)__builtin_ctzll(at_least);
  else if (below != 0) e = 63 - (size_t)__builtin_clzll(below);
  else if (at_least != 0) e = (size_t)__builtin_ctzll(at_least);
  else return NULL;
  schunk_t *c;
  size_t i;
  slot_t *s = deref(k->head[e], &c, &i);
  list_remove(c, s);
  s->used = 1;
  c->used++;
  if (e > near) slot_trim(c, i, n, q);
  return slot_addr(c, i);
}

static uint64_t coarse_now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Gives back every free slot freed at or before `before` (all of them: UINT64_MAX), and unmaps each
 * chunk left clean, all but one (`all`: that one too).  purge_due becomes the time the oldest free slot
 * kept becomes old enough.  False when q filled up before the end: the rest is still due (the caller
 * runs q and purges again, or leaves it to the next purge). */
static bool purge(uint64_t before, bool all, queue_t *q)
{
  uint64_t oldest = UINT64_MAX;
  for (schunk_t *c = schunks, *next; c != NULL; c = next) {
    next = c->next;
    bool whole = c->used == 0 && (all || nchunks > 1);   /* every slot free and due: one munmap */
    for (size_t i = 1; whole && i < slot_count(c); i++) whole = c->slot[i].freed <= before;
    if (whole) {
      chunk_delete(c, q);
      continue;
    }
    for (size_t i = 1; i < slot_count(c); i++) {
      slot_t *s = &c->slot[i];
      if (s->used || s->extent == 0) continue;
      if (s->freed > before) {
        if (s->freed < oldest) oldest = s->freed;
      } else if (q != NULL && q->n == q->max) {
        return false;
      } else {
        slot_release(c, i, q);
      }
    }
    if ((all || nchunks > 1) && chunk_clean(c)) chunk_delete(c, q);
  }
  __atomic_store_n(&purge_due, oldest == UINT64_MAX ? 0 : oldest + MPROF_PURGE_NS, __ATOMIC_RELAXED);
  return true;
}

static inline bool below_floor(void) { return idle_pages * page_bytes < PURGE_FLOOR; }

/* How long a free slot stays idle before a purge gives it back: a period, or below the floor the linger
 * (the profiler thread's purges only). */
static inline uint64_t idle_wait(void) { return below_floor() ? LINGER_NS : MPROF_PURGE_NS; }

/* The purge that is due, if worth it; false as purge().  Below the floor a heap operation leaves the idle
 * slots to a later one, while the profiler thread (`thread`) gives back those idle for LINGER_NS. */
static bool purge_tick(uint64_t now, bool thread, queue_t *q)
{
  if (purge_due == 0 || (!thread && below_floor())) return true;
  uint64_t wait = idle_wait();
  if (now < purge_due - MPROF_PURGE_NS + wait) return true;
  return purge(now - wait, false, q);
}

/* ---------------------------------------------------------------------------------------------------
   The filter for blocks in mimalloc
--------------------------------------------------------------------------------------------------- */

static inline uint8_t *count_of(uint8_t *f, const void *p)
{
  return &f[((uintptr_t)p >> MPROF_SLICE_SHIFT) & (MPROF_FILTER_SLOTS - 1)];
}

static void count_step(const void *p, bool up)
{
  uint8_t *c = count_of(mprof_sheap_filter, p), v = __atomic_load_n(c, __ATOMIC_RELAXED);
  do {
    if (v == STICKY || (!up && v == 0)) return;
  } while (!__atomic_compare_exchange_n(c, &v, (uint8_t)(up ? v + 1 : v - 1), true, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED));
}

/* ---------------------------------------------------------------------------------------------------
   The heap's interface
--------------------------------------------------------------------------------------------------- */

/* Called under api_lock by mi_prof_start(): the window and the filter (once).  False: no memory for them
 * (said by the caller, MI_PROF_DROP_NO_ARENA). */
bool mprof_sheap_init(void)
{
  if (mprof_sheap_init_done()) return true;
  if (!mprof_arena_init()) return false;
  size_t pg = mprof_arena_page();
  if (SLOT_MAX / pg > MAX_EXTENT || MPROF_SLICE % pg != 0) return false;   /* pages of 2 KiB .. a slice */
  void *f = mmap(NULL, MPROF_FILTER_SLOTS, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (f == MAP_FAILED) return false;
  page_bytes = pg;
  uintptr_t lo, hi;
  mprof_arena_window(&lo, &hi);
  mprof_sheap_window_lo = lo;
  mprof_sheap_window_size = hi - lo;
  ref_lo = mprof_arena_base();
  __atomic_store_n(&mprof_sheap_filter, (uint8_t *)f, __ATOMIC_RELEASE);
  return true;
}

bool mprof_sheap_init_done(void) { return __atomic_load_n(&mprof_sheap_filter, __ATOMIC_ACQUIRE) != NULL; }

/* Whether p is in a slot (lock-free, exact: the arena's chunk map). */
bool mprof_sheap_in_slot(const void *p) { return mprof_arena_contains(p); }

/* What the program may use of sampled block p: what mimalloc gives an unsampled request of its size
 * (lock-free: a live block's slot does not change). */
size_t mprof_sheap_usable(const void *p)
{
  if (!mprof_arena_contains(p)) return mprof_mi.mi_usable_size(p);
  return __atomic_load_n(&slot_of(p)->usable, __ATOMIC_RELAXED);
}

/* The slot class for a request, CLASSES when a slot cannot hold it. */
static inline uint8_t class_for(size_t size, size_t alignment)
{
  if (size <= MPROF_SLICE && alignment <= MPROF_SLICE) return 0;
  return size <= SLOT_MAX && alignment <= SLOT_MAX ? 1 : CLASSES;
}

/* A free slot for the sampled request r (lock held), *zero set to the bytes of it to clear for a zeroing
 * request (where earlier occupants wrote: beyond, its pages are zeros); NULL when none is free. */
static char *slot_alloc(const mprof_req_t *r, uint8_t cls, queue_t *q, size_t *zero)
{
  size_t usable = mprof_mi.mi_good_size(r->size), n = pages_of(usable);
  char *p = slot_take(cls, n, q);
  if (p == NULL) return NULL;
  slot_t *s = slot_of(p);
  size_t written = s->extent * page_bytes;
  *zero = r->zero ? (usable < written ? usable : written) : 0;
  if (s->extent < n) dirty_pages += n - s->extent, s->extent = (uint8_t)n;
  __atomic_store_n(&s->usable, (uint32_t)usable, __ATOMIC_RELAXED);
  return p;
}

/* No slot free and no chunk mappable without the lock (lock held): one mapped under it, else what is
 * idle given back (the address space may have run out) and a last try. */
static char *slot_last_resort(const mprof_req_t *r, uint8_t cls, queue_t *q, size_t *zero)
{
  if (chunk_new(cls)) return slot_alloc(r, cls, q, zero);
  if (idle_pages == 0) return NULL;
  purge(UINT64_MAX, true, NULL);
  char *p = slot_alloc(r, cls, q, zero);
  if (p == NULL && chunk_new(cls)) p = slot_alloc(r, cls, q, zero);
  return p;
}

/* A slot for the sampled request r, *zero as slot_alloc's; NULL when none can be had.  A new chunk is
 * mapped, and its header page faulted in, with sheap_lock released: made under the lock, the mapping
 * waited for the kernel's address-space lock while every other sampler waited for ours (bench/mstress_like:
 * six chunks mapped and five unmapped a run), and a sampler that sleeps lets another thread run. */
static char *slot_get(const mprof_req_t *r, uint8_t cls, size_t *zero)
{
  QUEUE(q, QUEUE_SAMPLE);
  schunk_t *fresh = NULL;                         /* mapped for us, not yet in the heap */
  void *failed = NULL;                            /* reserved, but its mapping failed with err */
  int err = 0;
  char *p;
  for (;;) {
    void *at = NULL;
    mprof_lock(&sheap_lock);
    purge_tick(coarse_now(), false, &q);
    if (fresh != NULL) {
      mprof_arena_chunk_settle(fresh, 0);
      chunk_add(fresh);
    } else if (failed != NULL) {
      mprof_arena_chunk_settle(failed, err);
    }
    p = slot_alloc(r, cls, &q, zero);
    if (p == NULL && fresh == NULL && failed == NULL) at = mprof_arena_chunk_reserve();
    if (p == NULL && at == NULL) p = slot_last_resort(r, cls, &q, zero);
    mprof_unlock(&sheap_lock);
    queue_run(&q);
    if (at == NULL) return p;
    if (mprof_arena_chunk_map(at)) {
      fresh = at;
      fresh->cls = cls;                           /* its header's page faults in here */
    } else {
      failed = at;
      err = errno;
    }
  }
}

/* A block of mimalloc's (above two slices: it starts a slice).  An aligned request goes through
 * mimalloc's aligned entry point whatever its alignment, so that it fails where mimalloc's would (size +
 * alignment - 1 above PTRDIFF_MAX: 2 GiB on 32-bit platforms). */
static void *heap_alloc(mi_heap_t *heap, size_t size, size_t alignment, bool zero)
{
  if (alignment != 0)
    return zero ? mprof_mi.mi_heap_zalloc_aligned_at(heap, size, alignment, 0)
                : mprof_mi.mi_heap_malloc_aligned_at(heap, size, alignment, 0);
  return zero ? mprof_mi.mi_heap_zalloc(heap, size) : mprof_mi.mi_heap_malloc(heap, size);
}

/* A block for the sampled request r, at the start of a slice; NULL with *why when none can be had (the
 * caller serves the request unsampled): MI_PROF_DROP_ALIGNMENT for an offset that keeps the block off
 * every slice (mi_malloc_aligned_at with an offset that is not a multiple of the alignment),
 * MI_PROF_DROP_ARENA_FULL when the arena (or the address space) has no room for its slot, or mimalloc
 * none for its block. */
void *mprof_sheap_alloc(const mprof_req_t *r, mi_prof_drop_reason_t *why)
{
  if (r->alignment != 0 && r->offset % r->alignment != 0) {
    *why = MI_PROF_DROP_ALIGNMENT;
    return NULL;
  }
  *why = MI_PROF_DROP_ARENA_FULL;
  uint8_t cls = class_for(r->size, r->alignment);
  if (cls < CLASSES) {
    size_t zero = 0;
    char *p = slot_get(r, cls, &zero);
    if (zero != 0) memset(p, 0, zero);            /* the slot is the caller's: no lock */
    return p;
  }
  mi_heap_t *heap = r->heap != NULL ? r->heap : mprof_mi.mi_heap_get_default();
  void *p = heap_alloc(heap, r->size, r->alignment, r->zero);
  if (mprof_unlikely(p != NULL && !mprof_maybe_sampled(p))) {   /* a mimalloc with another layout */
    mprof_mi.mi_free(p);
    p = heap_alloc(heap, r->size, r->alignment > MPROF_SLICE ? r->alignment : MPROF_SLICE, r->zero);
  }
  return p;
}

/* Gives sampled block p back (its record is gone, or it never had one). */
void mprof_sheap_free(void *p)
{
  if (!mprof_arena_contains(p)) {
    mprof_mi.mi_free(p);
    return;
  }
  schunk_t *c = chunk_of(p);
  size_t i = slot_index(c, p);
  slot_t *s = &c->slot[i];
  bool stopped = !(__atomic_load_n(&mprof_session.word, __ATOMIC_RELAXED) & 1);   /* nothing reuses it */
  QUEUE(q, QUEUE_SAMPLE);
  mprof_lock(&sheap_lock);
  s->used = 0;
  c->used--;
  s->freed = coarse_now();
  if (c->used == 0 && (stopped || (nchunks > 1 && (idle_pages + s->extent) * page_bytes > IDLE_MAX))) {
    list_push(c, i);
    chunk_delete(c, &q);                          /* the chunk's last block: every page in one munmap */
    mprof_unlock(&sheap_lock);
    queue_run(&q);
    return;
  }
  size_t keep = s->extent;                        /* all of them: the purge gives back what stays idle */
  if (stopped || (idle_pages + keep) * page_bytes > IDLE_MAX) keep = 0;
  bool below = below_floor();
  slot_keep(c, i, keep, &q);
  if (keep != 0 && purge_due == 0) {              /* the first slot idle: a purge is due after it */
    __atomic_store_n(&purge_due, s->freed + MPROF_PURGE_NS, __ATOMIC_RELAXED);
    mprof_profiler_purge_wake();
  } else if (keep != 0) {
    if (below && !below_floor())
      mprof_profiler_purge_wake();                /* the thread waits for the linger: now a period */
    purge_tick(s->freed, false, &q);
  }
  mprof_unlock(&sheap_lock);
  queue_run(&q);
}

/* Whether sampled block p can hold `size` bytes where it is: a slot, a request that a slot of its class
 * would get; a block of mimalloc's, one its realloc would keep (the size fits and wastes at most half of
 * it).  A block that stays gets the new size with mprof_sheap_resize. */
bool mprof_sheap_fits(const void *p, size_t size)
{
  if (mprof_arena_contains(p)) return class_for(size, 0) == chunk_of(p)->cls;
  size_t have = mprof_mi.mi_usable_size(p);
  return class_for(size, 0) == CLASSES && size <= have && size >= have - have / 2;
}

void mprof_sheap_resize(void *p, size_t size)
{
  if (!mprof_arena_contains(p)) return;
  size_t usable = mprof_mi.mi_good_size(size), n = pages_of(usable);
  mprof_lock(&sheap_lock);
  slot_t *s = slot_of(p);
  if (s->extent < n) dirty_pages += n - s->extent, s->extent = (uint8_t)n;
  __atomic_store_n(&s->usable, (uint32_t)usable, __ATOMIC_RELAXED);
  mprof_unlock(&sheap_lock);
}

static inline void add(size_t *counter, size_t n, bool up)
{
  if (up) __atomic_add_fetch(counter, n, __ATOMIC_RELAXED);
  else __atomic_sub_fetch(counter, n, __ATOMIC_RELAXED);
}

static void track_step(const void *p, bool up)
{
  size_t usable = mprof_sheap_usable(p);
  add(&live_blocks, 1, up);
  add(&live_bytes, usable, up);
  if (mprof_arena_contains(p)) return;
  count_step(p, up);
  add(&mi_bytes, usable, up);
}

/* p got a record (a sample, or an orphan). */
void mprof_sheap_track(const void *p) { track_step(p, true); }

/* p's record went (p is about to be freed, or recorded again). */
void mprof_sheap_untrack(const void *p) { track_step(p, false); }

/* An orphan record for p (no longer a sample, still found by its free). */
void mprof_sheap_orphan(void *p, size_t size, mi_heap_t *heap)
{
  if (mprof_record_orphan((uintptr_t)p, size, heap)) mprof_sheap_track(p);
}

/* Every free slot, now: mi_prof_stop() and mi_prof_reset(). */
void mprof_sheap_purge_all(void)
{
  if (!mprof_sheap_init_done()) return;
  QUEUE(q, QUEUE_PURGE);
  bool done;
  do {
    q.n = 0;
    mprof_lock(&sheap_lock);
    done = purge(UINT64_MAX, true, &q);
    mprof_unlock(&sheap_lock);
    queue_run(&q);
  } while (!done);
  mprof_lock(&sheap_lock);                        /* the chunks the pinned slots kept */
  purge(UINT64_MAX, true, NULL);
  mprof_unlock(&sheap_lock);
}

/* When the profiler thread's next purge is due (CLOCK_MONOTONIC_COARSE ns; 0: none): a period after the
 * oldest free slot, or the linger while less than the floor is idle. */
uint64_t mprof_sheap_purge_due(void)
{
  mprof_lock(&sheap_lock);
  uint64_t due = purge_due != 0 ? purge_due - MPROF_PURGE_NS + idle_wait() : 0;
  mprof_unlock(&sheap_lock);
  return due;
}

void mprof_sheap_purge_tick(void)
{
  QUEUE(q, QUEUE_PURGE);
  bool done;
  do {
    q.n = 0;
    mprof_lock(&sheap_lock);
    done = purge_tick(coarse_now(), true, &q);
    mprof_unlock(&sheap_lock);
    queue_run(&q);
  } while (!done);
}

void mprof_sheap_usage(mprof_sheap_usage_t *out)
{
  mprof_lock(&sheap_lock);
  out->limit_bytes = mprof_arena_limit();
  out->mapped_bytes = mprof_arena_mapped() + __atomic_load_n(&mi_bytes, __ATOMIC_RELAXED);
  out->resident_bytes = dirty_pages * page_bytes + __atomic_load_n(&mi_bytes, __ATOMIC_RELAXED);
  mprof_unlock(&sheap_lock);
  out->live_blocks = __atomic_load_n(&live_blocks, __ATOMIC_RELAXED);
  out->live_bytes = __atomic_load_n(&live_bytes, __ATOMIC_RELAXED);
}

void mprof_sheap_prefork(void) { mprof_lock(&sheap_lock); }
void mprof_sheap_postfork(void) { mprof_unlock(&sheap_lock); }
void mprof_sheap_postfork_reinit(void) { pthread_mutex_init(&sheap_lock, NULL); }
