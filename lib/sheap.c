/* sheap.c - the sampled-block heap: one mimalloc heap bound to one exclusive arena.
 *
 * Every sampled block lives in an arena reserved (not committed) when profiling first starts, so free()
 * recognises a sampled block by its address alone (mprof_in_sheap) and unsampled allocations never land
 * there.  The arena is kept for the life of the process: sampled blocks may outlive any session.
 *
 * The heap is created by a profiler-owned thread that then parks forever with every signal blocked and
 * never allocates.  mimalloc deletes a thread's heaps when the thread exits, so a heap owned by an
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
#include <sys/prctl.h>
#include <unistd.h>

mprof_range_t mprof_sheap_range;

static pthread_mutex_t sheap_lock = PTHREAD_MUTEX_INITIALIZER;
static mi_heap_t *sheap;
static mi_arena_id_t sheap_arena;
static size_t sheap_arena_bytes;
static int sheap_failed;             /* the reservation failed; reported once */
static sem_t owner_ready;

static void *owner_main(void *arg)
{
  (void)arg;
  mprof_tls.guard = 1;               /* nothing this thread does is ever sampled */
  prctl(PR_SET_NAME, "mprof-sheap", 0, 0, 0);
  sheap = mi_heap_new_in_arena(sheap_arena);
  sem_post(&owner_ready);
  for (;;) pause();                  /* all signals blocked: parked for good */
  return NULL;
}

/* Reserves the arena: the configured size first, then a quarter of it at a time down to 64 MiB
 * (a 64 GiB reservation fails under `ulimit -v` and under valgrind). */
static bool reserve_arena(void)
{
  for (size_t size = (size_t)mprof_option(MPROF_OPT_ARENA_SIZE); size >= ((size_t)64 << 20); size /= 4) {
    if (mi_reserve_os_memory_ex(size, false /* commit */, false /* large */, true /* exclusive */,
                                &sheap_arena) == 0) {
      size_t area = 0;
      void *start = mi_arena_area(sheap_arena, &area);
      if (start == NULL || area == 0) return false;
      sheap_arena_bytes = area;
      /* Published before any block can be sampled (the caller releases api_lock afterwards). */
      __atomic_store_n(&mprof_sheap_range.size, area, __ATOMIC_RELAXED);
      __atomic_store_n(&mprof_sheap_range.start, (uintptr_t)start, __ATOMIC_RELEASE);
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
bool mprof_sheap_init(void)
{
  if (sheap != NULL) return true;
  if (sheap_failed) return false;
  if (!reserve_arena() || !start_owner()) {
    sheap_failed = 1;
    mprof_warn("could not reserve address space for sampled blocks (MIMALLOC_PROF_ARENA_SIZE=%llu); "
               "profiling is off", (unsigned long long)mprof_option(MPROF_OPT_ARENA_SIZE));
    return false;
  }
  return true;
}

void *mprof_sheap_alloc(size_t size, size_t alignment, bool zero, mi_prof_drop_reason_t *why)
{
  if (mprof_unlikely(alignment > MPROF_SHEAP_MAX_ALIGN)) {
    *why = MI_PROF_DROP_ALIGNMENT;
    return NULL;
  }
  void *p;
  pthread_mutex_lock(&sheap_lock);
  if (alignment <= sizeof(void *) * 2) p = zero ? mi_heap_zalloc(sheap, size) : mi_heap_malloc(sheap, size);
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

size_t mprof_sheap_arena_bytes(void) { return sheap_arena_bytes; }

void mprof_sheap_prefork(void) { pthread_mutex_lock(&sheap_lock); }
void mprof_sheap_postfork(void) { pthread_mutex_unlock(&sheap_lock); }
