/* observer.c - the sample/free callbacks (mi_prof_set_observer) and the dropped-sample counters.
 *
 * The observer is read on every sample and every free of a sampled block, by any thread, without a
 * lock: it is kept in a sequence-counted slot (a seqlock).  Writers are serialised by api_lock; a reader
 * retries if a write overlapped its copy, so it never sees the on_sample of one observer with the arg
 * of another.
 *
 * Dropped samples are counted per reason with relaxed atomics; the first drop of each reason in the
 * process is said once on stderr.
 */
#include "observer.h"
#include "internal.h"
#include "warn.h"

static struct {
  unsigned         seq;      /* odd while a write is in progress */
  mprof_observer_t obs;
} observer;

void mprof_observer_get(mprof_observer_t *out)
{
  unsigned s1, s2;
  do {
    s1 = __atomic_load_n(&observer.seq, __ATOMIC_ACQUIRE);
    out->on_sample = __atomic_load_n(&observer.obs.on_sample, __ATOMIC_RELAXED);
    out->on_free = __atomic_load_n(&observer.obs.on_free, __ATOMIC_RELAXED);
    out->arg = __atomic_load_n(&observer.obs.arg, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    s2 = __atomic_load_n(&observer.seq, __ATOMIC_RELAXED);
  } while (mprof_unlikely((s1 & 1) != 0 || s1 != s2));
}

void mprof_observer_set(const mprof_observer_t *obs)
{
  __atomic_store_n(&observer.seq, observer.seq + 1, __ATOMIC_RELAXED);
  __atomic_thread_fence(__ATOMIC_RELEASE);
  __atomic_store_n(&observer.obs.on_sample, obs->on_sample, __ATOMIC_RELAXED);
  __atomic_store_n(&observer.obs.on_free, obs->on_free, __ATOMIC_RELAXED);
  __atomic_store_n(&observer.obs.arg, obs->arg, __ATOMIC_RELAXED);
  __atomic_store_n(&observer.seq, observer.seq + 1, __ATOMIC_RELEASE);
}

static uint64_t dropped[MI_PROF_DROP_REASONS];
static int drop_said[MI_PROF_DROP_REASONS];

static const char *const drop_text[MI_PROF_DROP_REASONS] = {
  [MI_PROF_DROP_MEMORY] = "profiler memory budget (MIMALLOC_PROF_MAX_BYTES) used up",
  [MI_PROF_DROP_TOO_LARGE] = "allocation too large for the sampled-block arena",
  [MI_PROF_DROP_ALIGNMENT] =
     "an aligned allocation whose offset keeps it off every slice "
     "(mi_malloc_aligned_at with an offset that is not a multiple of the alignment)",
  [MI_PROF_DROP_NO_ARENA] = "the sampled-block arena could not be set up (address space: "
                           "MIMALLOC_PROF_ARENA_SIZE, ulimit -v); profiling cannot start",
  [MI_PROF_DROP_UNWIND] = "stack could not be captured",
  [MI_PROF_DROP_STACKS] = "stack table full",
  [MI_PROF_DROP_FORK] = "in a fork child where no unwinder is safe to call (another thread was unwinding "
                       "at the fork, or libgcc_s was not loaded in a multi-threaded C program)",
  [MI_PROF_DROP_ARENA_FULL] = "no room for the sampled block (MIMALLOC_PROF_ARENA_SIZE of address space "
                             "is used up, or the address space: ulimit -v)",
};

void mprof_drop(mi_prof_drop_reason_t why)
{
  __atomic_fetch_add(&dropped[why], 1, __ATOMIC_RELAXED);
  if (mprof_unlikely(mprof_warn_once_claim(&drop_said[why])))   /* on the sampling path: no vsnprintf */
    mprof_warn_strs("dropping samples: ", drop_text[why],
                    " (the program's allocations are unaffected; counts in mi_prof_stats)", (char *)NULL);
}

void mprof_drops_read(uint64_t out[MI_PROF_DROP_REASONS])
{
  for (int i = 0; i < MI_PROF_DROP_REASONS; i++) out[i] = __atomic_load_n(&dropped[i], __ATOMIC_RELAXED);
}

void mprof_drops_reset(void)
{
  for (int i = 0; i < MI_PROF_DROP_REASONS; i++) __atomic_store_n(&dropped[i], 0, __ATOMIC_RELAXED);
}
