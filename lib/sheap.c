/* sheap.c - the sampled-block heap: one mimalloc heap bound to one exclusive arena.
 *
 * Every sampled block lives in an arena reserved (not committed) when profiling first starts, so free()
 * recognises a sampled block by its address alone and unsampled allocations never land there.  The arena
 * is kept for the life of the process: sampled blocks may outlive any session.
 *
 * Placement: we map the reservation ourselves, low in the address space (from 4 GiB up, below the 2 TiB
 * where mimalloc starts its own hinted mappings; the kernel puts other mappings near the top), and hand
 * it to mimalloc with mi_manage_os_memory_ex.  With every heap block above the arena, free()'s test is a
 * single comparison with the arena's end (inline.h): one instruction less on every free, which is what
 * brings python3's cost under 1.1%.  If no low address is free, the arena goes anywhere: still correct
 * (the slow path checks the exact range), but frees below it take the slow path; said once on stderr.
 *
 * The heap is created by a profiler-owned thread that then parks forever with every signal blocked and
 * never allocates; it also writes the interval, peak and signal dumps (dump.c), which allocate only
 * profiler memory.  mimalloc deletes a thread's heaps when the thread exits, so a heap owned by an
 * application thread would die with it (with sampled blocks still live); the owner thread never exits.
 * Any thread allocates from and frees into the heap, always under sheap_lock: mimalloc takes its
 * unsynchronised thread-local paths for blocks of segments stamped with the calling thread, so every
 * access to the heap's pages must be serialised by us.  Sampling is rare, so the lock is cold.
 *
 * Lock: sheap_lock (rank 2, after api_lock) protects the heap; it is never held while taking another.
 */
#include "internal.h"

#include <errno.h>
#include <semaphore.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

uintptr_t mprof_sheap_end;

static uintptr_t sheap_start;
static pthread_mutex_t sheap_lock = PTHREAD_MUTEX_INITIALIZER;
static mi_heap_t *sheap;
static mi_arena_id_t sheap_arena;
static size_t sheap_arena_bytes;
static int sheap_failed;             /* no arena could be reserved: never try again */
static sem_t owner_ready;

static void *owner_main(void *arg)
{
  (void)arg;
  mprof_tls.guard = 1;               /* nothing this thread does is ever sampled */
  prctl(PR_SET_NAME, "mprof-sheap", 0, 0, 0);
  sheap = mi_heap_new_in_arena(sheap_arena);
  sem_post(&owner_ready);
  mprof_dump_serve();                /* writes requested dumps, or parks for good; never returns */
}

#define LOW_FIRST  ((uintptr_t)4 << 30)       /* lowest address tried */
#define LOW_LIMIT  ((uintptr_t)1 << 40)       /* the arena ends below 1 TiB */

/* Maps `size` bytes of address space (no access, no swap reservation) at the lowest free candidate
 * address, or returns NULL.  A hint, not MAP_FIXED: the kernel (and valgrind) keep anything already there
 * and return another address, which we give back. */
static void *map_low(size_t size)
{
  for (uintptr_t at = LOW_FIRST; at + size <= LOW_LIMIT; at += size) {
    void *p = mmap((void *)at, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == (void *)at) return p;
    if (p != MAP_FAILED) munmap(p, size);
  }
  return NULL;
}

static void publish_range(void *start, size_t size)
{
  sheap_start = (uintptr_t)start;
  sheap_arena_bytes = size;
  /* Published before any block can be sampled (the caller releases api_lock afterwards). */
  __atomic_store_n(&mprof_sheap_end, (uintptr_t)start + size, __ATOMIC_RELEASE);
}

/* Reserves the arena: the configured size first, then a quarter of it at a time down to 64 MiB (a
 * 64 GiB reservation fails under `ulimit -v` and under valgrind); low placement first at every size. */
static bool reserve_arena(void)
{
  size_t first = (size_t)mprof_option(MPROF_OPT_ARENA_SIZE), min = (size_t)64 << 20;
  for (size_t size = first; size >= min; size /= 4) {
    void *p = map_low(size);
    if (p == NULL) continue;
    if (mi_manage_os_memory_ex(p, size, false /* committed */, false /* large */, true /* zero */,
                               -1 /* numa */, true /* exclusive */, &sheap_arena)) {
      publish_range(p, size);
      return true;
    }
    munmap(p, size);
  }
  for (size_t size = first; size >= min; size /= 4) {
    if (mi_reserve_os_memory_ex(size, false /* commit */, false /* large */, true /* exclusive */,
                                &sheap_arena) == 0) {
      size_t area = 0;
      void *start = mi_arena_area(sheap_arena, &area);
      if (start == NULL || area == 0) return false;
      mprof_warn("no low address range for sampled blocks; frees of ordinary blocks below %p take the "
                 "slow path", start);
      publish_range(start, area);
      return true;
    }
  }
  return false;
}

static bool start_owner(void)
{
  sigset_t all, old;
  pthread_attr_t attr;
  pthread_t thread;
  if (sem_init(&owner_ready, 0, 0) != 0) return false;
  sigfillset(&all);
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attr, (size_t)256 << 10);
  pthread_sigmask(SIG_SETMASK, &all, &old);       /* the owner inherits a fully blocked mask */
  int rc = pthread_create(&thread, &attr, owner_main, NULL);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  pthread_attr_destroy(&attr);
  if (rc != 0) return false;
  while (sem_wait(&owner_ready) != 0 && errno == EINTR) {
  }
  return sheap != NULL;
}

/* Called under api_lock by mi_prof_start(). */
/* Called under api_lock by mi_prof_start().  Failure is said by the caller (MI_PROF_DROP_NO_ARENA).  A
 * reserved arena is kept even if the owner thread could not start; a later start tries the thread again. */
bool mprof_sheap_init(void)
{
  if (sheap != NULL) return true;
  if (sheap_failed) return false;
  if (sheap_arena_bytes == 0 && !reserve_arena()) {
    sheap_failed = 1;
    return false;
  }
  return start_owner();
}

void *mprof_sheap_alloc(size_t size, size_t alignment, bool zero, mi_prof_drop_reason_t *why)
{
  if (mprof_unlikely(alignment > MPROF_SHEAP_MAX_ALIGN)) {
    *why = MI_PROF_DROP_ALIGNMENT;
    return NULL;
  }
  void *p;
  pthread_mutex_lock(&sheap_lock);
  /* Plain blocks only when no alignment beyond 8 is asked: mimalloc's 8-byte class is only 8-aligned. */
  if (alignment <= sizeof(void *)) p = zero ? mi_heap_zalloc(sheap, size) : mi_heap_malloc(sheap, size);
  else if (zero) p = mi_heap_zalloc_aligned_at(sheap, size, alignment, 0);   /* _at: see internal.h */
  else p = mi_heap_malloc_aligned_at(sheap, size, alignment, 0);
  pthread_mutex_unlock(&sheap_lock);
  if (mprof_unlikely(p == NULL)) *why = MI_PROF_DROP_TOO_LARGE;
  return p;
}

void mprof_sheap_free(void *p)
{
  pthread_mutex_lock(&sheap_lock);
  mi_free(p);
  pthread_mutex_unlock(&sheap_lock);
}

bool mprof_sheap_contains(const void *p)
{
  return (uintptr_t)p >= sheap_start && (uintptr_t)p < mprof_sheap_end;
}

size_t mprof_sheap_arena_bytes(void) { return sheap_arena_bytes; }

void mprof_sheap_prefork(void) { pthread_mutex_lock(&sheap_lock); }
void mprof_sheap_postfork(void) { pthread_mutex_unlock(&sheap_lock); }
