/* pmem.c - profiler memory: raw anonymous mmap, never malloc, under one byte budget.
 *
 * Every table of the profiler (records, stacks) and every temporary copy a dump or a visit makes maps its
 * memory here, so the profiler can never recurse into the allocator it hooks, and MIMALLOC_PROF_MAX_BYTES
 * bounds all of it: `mapped` never exceeds the budget.  Pages are touched only when used (mmap gives
 * demand-zero pages).
 *
 * Dumps are always possible: the tables may not grow into the memory one dump of what they hold
 * needs.  That reserve is MPROF_DUMP_FIXED_BYTES plus, for every stack in the stack table, what a dump
 * needs per stack and per frame (MPROF_DUMP_STACK_BYTES, MPROF_DUMP_FRAME_BYTES, derived in pmem.h);
 * stacktab.c reserves it with each stack it adds.  `committed` = tables mapped + stack reserves, and
 * must stay within the budget less the fixed part; a temporary mapping (a dump, a visit) only has to fit
 * under the budget.  So one dump (or visit) at a time always finds the memory it needs, whatever the
 * tables took; two at once may not (the second fails with ENOMEM).
 *
 * The stack table (its entries, frames, index and the dump reserve of its stacks) and the table
 * unwinder's tables (unwtab.c) may commit at most half of the budget less the fixed part; the other half is
 * the record table's (records may also take what the stacks leave).  A program with more distinct stacks than
 * the budget holds then still has room to track its sampled blocks: their samples go to the "[dropped
 * (memory)]" stack, but their in-use weight is kept and leaves with their free.  With
 * MIMALLOC_PROF_MAX_BYTES=1m and lifetimes on, records keep 345 KiB: 16 shards of 256 records at most 70%
 * full, about 2,800 live samples.
 *
 * One temporary, the table unwinder's compile scratch, stays mapped between uses (`kept`): a mapping and
 * an unmapping per compile took the kernel's address-space lock for writing twice, on the sampling thread,
 * and a thread that sleeps there lets another thread of the program run (doc/design.md, "A sample does not
 * sleep").  Kept, it counts in `mapped` only, outside the tables' commitment, so it never narrows what
 * the tables hold; a mapping that would go over the budget first unmaps it, so a dump still finds its
 * reserve; mi_prof_stop unmaps it.
 *
 * The region.  A mapping of up to 64 pages comes from one range of address space reserved when the first
 * session starts (8 MiB, nothing resident until used), a bit per page marking what is taken; a larger
 * one, or one the region cannot hold, is an mmap of its own.  Why: an mmap takes the address space's lock
 * for writing, and so does the first write to a fresh anonymous mapping (the kernel makes its reverse map
 * under that lock; a fault in a mapping that has one takes only the mapping's own lock).  mimalloc's mmap
 * and mprotect hold that lock while a program's threads start, and a sampling thread that waits for it
 * sleeps, handing its CPU to a thread that fills its heap meanwhile (bench/mstress_like,
 * doc/performance.md).  The region is written once when it is reserved, by the thread that starts the
 * session, so no later fault in it waits for the address space: taking pages is a compare-and-swap on a
 * word of the bitmap, giving them back an madvise(MADV_DONTNEED) (which leaves them demand-zero, as a
 * fresh mapping's) before their bits are cleared.  Only where pages are 4 KiB, and not under an
 * address-space limit (RLIMIT_AS), which counts the region's unused pages too: they are the program's.
 *
 * No lock: atomic counters and bitmap words, each changed with compare-and-swap, so any lock may be held
 * while mapping.  `committed` is reserved before `mapped`, and released after it; `stacks` before both.
 */
#include "pmem.h"
#include "internal.h"
#include "options.h"

#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/resource.h>

static size_t pmem_mapped;          /* bytes mapped now, tables and temporaries (atomic) */
static size_t pmem_committed;       /* tables mapped + the dump reserve of the stacks they hold (atomic) */
static size_t pmem_stacks;          /* of pmem_committed: the stack table's (atomic) */
static size_t pmem_temp;            /* of pmem_mapped: temporaries (dumps, visits) now (atomic) */
static size_t pmem_temp_peak;       /* the most pmem_temp has been (atomic; tests check the reserve) */
static __thread size_t temp_mine __attribute__((tls_model("initial-exec")));   /* this thread's temporaries */
static void    *pmem_kept;          /* a temporary of MPROF_PMEM_KEPT_BYTES not in use, or NULL (atomic) */

#define REGION_PAGES 2048           /* 8 MiB of address space */
#define REGION_WORDS (REGION_PAGES / 64)
static char    *region;             /* atomic: the region, NULL until a session starts (or none) */
static uint64_t region_used[REGION_WORDS];   /* atomic: a bit per page, set while it is mapped */
static unsigned region_hint;        /* atomic: the word a run was last taken from */

static size_t page_round(size_t bytes) { return (bytes + 4095) & ~(size_t)4095; }

/* The bits of a run of n pages (1 <= n <= 64) at bit 0. */
static uint64_t run_bits(size_t n) { return n == 64 ? ~(uint64_t)0 : ((uint64_t)1 << n) - 1; }

/* The lowest page of a run of n free pages (1 <= n <= 64) in bitmap word v, or -1: z's bit i says that
 * the run of `have` pages from page i is free, and each step doubles `have` (at most n). */
static int free_run(uint64_t v, size_t n)
{
  uint64_t z = ~v;
  for (size_t have = 1; have < n && z != 0;) {
    size_t step = have < n - have ? have : n - have;
    z &= z >> step;
    have += step;
  }
  return z != 0 ? __builtin_ctzll(z) : -1;
}

/* `bytes` (page-rounded) from the region; NULL when it has no free run that long within one word. */
static void *region_take(size_t bytes)
{
  char *base = __atomic_load_n(&region, __ATOMIC_ACQUIRE);
  size_t n = bytes / 4096;
  if (base == NULL || n > 64) return NULL;
  unsigned first = __atomic_load_n(&region_hint, __ATOMIC_RELAXED);
  for (unsigned k = 0; k < REGION_WORDS; k++) {
    unsigned w = (first + k) % REGION_WORDS;
    uint64_t v = __atomic_load_n(&region_used[w], __ATOMIC_RELAXED);
    for (int at; (at = free_run(v, n)) >= 0;) {      /* a failed compare-and-swap reloads v */
      if (__atomic_compare_exchange_n(&region_used[w], &v, v | run_bits(n) << at, false, __ATOMIC_ACQUIRE,
                                      __ATOMIC_RELAXED)) {
        __atomic_store_n(&region_hint, w, __ATOMIC_RELAXED);
        return base + ((size_t)w * 64 + (size_t)at) * 4096;
      }
    }
  }
  return NULL;
}

/* Gives p back to the region if it lies there; false when it does not. */
static bool region_give(void *p, size_t bytes)
{
  char *base = __atomic_load_n(&region, __ATOMIC_ACQUIRE);
  size_t off = (size_t)((char *)p - base);
  if (base == NULL || off >= (size_t)REGION_PAGES * 4096) return false;
  size_t page = off / 4096;
  /* Its pages zero again, as a fresh mapping's; if that fails they stay taken (never handed out dirty). */
  if (madvise(p, bytes, MADV_DONTNEED) == 0)
    __atomic_fetch_and(&region_used[page / 64], ~(run_bits(bytes / 4096) << (page % 64)), __ATOMIC_RELEASE);
  return true;
}

void mprof_pmem_begin(void)
{
  struct rlimit as;
  if (__atomic_load_n(&region, __ATOMIC_ACQUIRE) != NULL || getauxval(AT_PAGESZ) != 4096 ||
      getrlimit(RLIMIT_AS, &as) != 0 || as.rlim_cur != RLIM_INFINITY)
    return;
  size_t bytes = (size_t)REGION_PAGES * 4096;
  char *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return;
  __atomic_store_n(p, 0, __ATOMIC_RELAXED);         /* its reverse map made now: see above */
  char *none = NULL;
  if (!__atomic_compare_exchange_n(&region, &none, p, false, __ATOMIC_RELEASE, __ATOMIC_RELAXED))
    munmap(p, bytes);
}

static size_t budget(void) { return (size_t)mprof_option(MPROF_OPT_MAX_BYTES); }

/* Adds `bytes` to *counter if the result stays within `limit`. */
static bool charge(size_t *counter, size_t bytes, size_t limit)
{
  size_t cur = __atomic_load_n(counter, __ATOMIC_RELAXED);
  do {
    if (cur + bytes > limit || cur + bytes < cur) return false;
  } while (
      !__atomic_compare_exchange_n(counter, &cur, cur + bytes, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
  return true;
}

static void unmap_charged(void *p, size_t bytes)
{
  if (!region_give(p, bytes)) munmap(p, bytes);
  __atomic_fetch_sub(&pmem_mapped, bytes, __ATOMIC_RELAXED);
}

/* Unmaps the kept temporary, if there is one; whether there was. */
static bool drop_kept(void)
{
  void *p = __atomic_exchange_n(&pmem_kept, NULL, __ATOMIC_ACQUIRE);
  if (p == NULL) return false;
  unmap_charged(p, MPROF_PMEM_KEPT_BYTES);
  return true;
}

static void *map_charged(size_t bytes)
{
  if (!charge(&pmem_mapped, bytes, budget()) && !(drop_kept() && charge(&pmem_mapped, bytes, budget())))
    return NULL;
  void *p = region_take(bytes);
  if (p == NULL) p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mprof_unlikely(p == MAP_FAILED)) {
    __atomic_fetch_sub(&pmem_mapped, bytes, __ATOMIC_RELAXED);
    return NULL;
  }
  return p;
}

void *mprof_pmem_map(size_t bytes)
{
  bytes = page_round(bytes);
  if (!mprof_pmem_reserve(bytes)) return NULL;
  void *p = map_charged(bytes);
  if (p == NULL) mprof_pmem_unreserve(bytes);
  return p;
}

void mprof_pmem_unmap(void *p, size_t bytes)
{
  if (p == NULL) return;
  bytes = page_round(bytes);
  unmap_charged(p, bytes);
  mprof_pmem_unreserve(bytes);
}

void mprof_pmem_discard(void *p, size_t bytes)
{
  if (p != NULL) madvise(p, page_round(bytes), MADV_DONTNEED);
}

/* The budget less what one dump needs whatever the tables hold: what the tables may commit. */
static size_t tables_limit(void)
{
  size_t limit = budget(), fixed = MPROF_DUMP_FIXED_BYTES;
  if (mprof_lifetimes) fixed += MPROF_DUMP_LIFETIMES_BYTES;
  return limit >= fixed ? limit - fixed : 0;
}

bool mprof_pmem_reserve(size_t bytes) { return charge(&pmem_committed, bytes, tables_limit()); }

void mprof_pmem_unreserve(size_t bytes) { __atomic_fetch_sub(&pmem_committed, bytes, __ATOMIC_RELAXED); }

bool mprof_pmem_reserve_stacks(size_t bytes)
{
  if (!charge(&pmem_stacks, bytes, tables_limit() / 2)) return false;
  if (mprof_pmem_reserve(bytes)) return true;
  __atomic_fetch_sub(&pmem_stacks, bytes, __ATOMIC_RELAXED);
  return false;
}

void mprof_pmem_unreserve_stacks(size_t bytes)
{
  mprof_pmem_unreserve(bytes);
  __atomic_fetch_sub(&pmem_stacks, bytes, __ATOMIC_RELAXED);
}

void *mprof_pmem_map_stacks(size_t bytes)
{
  bytes = page_round(bytes);
  if (!charge(&pmem_stacks, bytes, tables_limit() / 2)) return NULL;
  void *p = mprof_pmem_map(bytes);
  if (p == NULL) __atomic_fetch_sub(&pmem_stacks, bytes, __ATOMIC_RELAXED);
  return p;
}

void mprof_pmem_unmap_stacks(void *p, size_t bytes)
{
  if (p == NULL) return;
  mprof_pmem_unmap(p, bytes);
  __atomic_fetch_sub(&pmem_stacks, page_round(bytes), __ATOMIC_RELAXED);
}

static void temp_count(size_t bytes)
{
  size_t now = __atomic_add_fetch(&pmem_temp, bytes, __ATOMIC_RELAXED);
  size_t peak = __atomic_load_n(&pmem_temp_peak, __ATOMIC_RELAXED);
  while (now > peak && !__atomic_compare_exchange_n(&pmem_temp_peak, &peak, now, true, __ATOMIC_RELAXED,
                                                    __ATOMIC_RELAXED)) {
  }
  temp_mine += bytes;
}

static void temp_uncount(size_t bytes)
{
  temp_mine -= bytes;
  __atomic_fetch_sub(&pmem_temp, bytes, __ATOMIC_RELAXED);
}

void *mprof_pmem_map_temp(size_t bytes)
{
  bytes = page_round(bytes);
  void *p = map_charged(bytes);
  if (p != NULL) temp_count(bytes);
  return p;
}

void mprof_pmem_unmap_temp(void *p, size_t bytes)
{
  if (p == NULL) return;
  bytes = page_round(bytes);
  temp_uncount(bytes);
  unmap_charged(p, bytes);
}

void *mprof_pmem_take_kept(void)
{
  void *p = __atomic_exchange_n(&pmem_kept, NULL, __ATOMIC_ACQUIRE);
  if (p == NULL) return mprof_pmem_map_temp(MPROF_PMEM_KEPT_BYTES);
  temp_count(MPROF_PMEM_KEPT_BYTES);
  return p;
}

void mprof_pmem_give_kept(void *p)
{
  temp_uncount(MPROF_PMEM_KEPT_BYTES);
  void *none = NULL;
  bool running = __atomic_load_n(&mprof_session.word, __ATOMIC_RELAXED) & 1;   /* else stopped meanwhile */
  if (running && __atomic_compare_exchange_n(&pmem_kept, &none, p, false, __ATOMIC_RELEASE, __ATOMIC_RELAXED))
    return;
  unmap_charged(p, MPROF_PMEM_KEPT_BYTES);        /* another one is kept already, or no session runs */
}

void mprof_pmem_drop_kept(void) { drop_kept(); }

size_t mprof_pmem_mapped(void) { return __atomic_load_n(&pmem_mapped, __ATOMIC_RELAXED); }

size_t mprof_pmem_temp_peak(void) { return __atomic_load_n(&pmem_temp_peak, __ATOMIC_RELAXED); }

/* In a fork child only the forking thread exists: the temporaries of the other threads' dumps and visits
 * will never be unmapped.  They stay mapped (copy-on-write pages the child never touches) but no longer
 * count against the child's budget.  Async-signal-safe (atomics only). */
void mprof_pmem_postfork_child(void)
{
  size_t orphaned = __atomic_load_n(&pmem_temp, __ATOMIC_RELAXED) - temp_mine;
  __atomic_fetch_sub(&pmem_temp, orphaned, __ATOMIC_RELAXED);
  __atomic_fetch_sub(&pmem_mapped, orphaned, __ATOMIC_RELAXED);
}
