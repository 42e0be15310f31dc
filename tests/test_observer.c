/* test_observer.c - the observer contract (on_free gets exactly what on_sample got, once, after it), the
 * stats struct against the observer's sums, callbacks that re-enter the library, and start/stop races
 * (catalogue B8, B9, B13, B14, B15, C20, C21 adapted to the observer, C23).
 *
 * The observer under test keeps a table of the blocks it was told about, so each test can ask whether a
 * pointer is sampled and live, and count every contract breach.  Check allocates on every passing assertion
 * and those allocations may be sampled too; the table takes them like any other. */
#include "suites.h"

#if MPROF_PPROF == 1

#include <errno.h>
#include <malloc.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mimalloc-prof.h"

#define SEED 0x13198a2e03707344ull

/* ---------------------------------------------------------------------------------------------------
   The observed-block table: open addressing, linear probing, deletion by backward shift
--------------------------------------------------------------------------------------------------- */

#define TABLE_BITS 17
#define TABLE_CAP  ((size_t)1 << TABLE_BITS)
#define TABLE_FULL (TABLE_CAP / 4 * 3)

typedef struct entry_s {
  uintptr_t ptr;           /* 0 = empty */
  size_t size;
  size_t weight;
} entry_t;

static struct observed_s {
  pthread_mutex_t lock;    /* a callback may run on any thread */
  entry_t slot[TABLE_CAP];
  uint64_t live;           /* entries */
  uint64_t live_weight;    /* sum of their weights, bytes */
  double live_objects;     /* sum of their weight / size */
  uint64_t all_weight;     /* sum of every sample's weight */
  uint64_t dup_samples;    /* on_sample for a pointer still live in the table */
  uint64_t unknown_frees;  /* on_free for a pointer not in the table (never sampled, or freed twice) */
  uint64_t size_mismatch;  /* on_free with a size other than on_sample's */
  uint64_t light_samples;  /* weight below the size: a sample stands for at least its own bytes */
  uint64_t overflow;       /* table full (a test bug) */
} obs = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* Counted outside the lock, so on_free can compare them without any ordering help from the table. */
static atomic_uint_fast64_t obs_samples, obs_frees, obs_early_frees;
static __thread volatile uint64_t obs_frees_here;   /* on_free calls here (volatile: see re_samples) */

static size_t home(uintptr_t p) { return (size_t)(((p >> 4) * 0x9e3779b97f4a7c15ull) >> (64 - TABLE_BITS)); }

/* The slot holding p, or the empty slot ending its probe run.  Under obs.lock. */
static size_t find(uintptr_t p)
{
  size_t i = home(p);
  while (obs.slot[i].ptr != 0 && obs.slot[i].ptr != p) i = (i + 1) & (TABLE_CAP - 1);
  return i;
}

/* Empties slot i, moving later members of the run back so that no probe crosses a hole.  Under obs.lock. */
static void erase(size_t i)
{
  size_t hole = i;
  for (size_t j = (i + 1) & (TABLE_CAP - 1); obs.slot[j].ptr != 0; j = (j + 1) & (TABLE_CAP - 1)) {
    size_t h = home(obs.slot[j].ptr);
    /* slot j may fill the hole unless its home lies cyclically in (hole, j] */
    bool home_after_hole = hole <= j ? (hole < h && h <= j) : (hole < h || h <= j);
    if (!home_after_hole) {
      obs.slot[hole] = obs.slot[j];
      hole = j;
    }
  }
  obs.slot[hole].ptr = 0;
}

static void drop_entry(size_t i)
{
  obs.live--;
  obs.live_weight -= obs.slot[i].weight;
  obs.live_objects -= (double)obs.slot[i].weight / (double)obs.slot[i].size;
  erase(i);
}

static void table_on_sample(void *p, size_t size, size_t weight, size_t rate, uint64_t tid, void *arg)
{
  (void)rate, (void)tid, (void)arg;
  pthread_mutex_lock(&obs.lock);
  size_t i = find((uintptr_t)p);
  if (obs.slot[i].ptr != 0) {              /* see observer_stop_start_race: legal only across a stop */
    obs.dup_samples++;
    drop_entry(i);
    i = find((uintptr_t)p);
  }
  if (obs.live >= TABLE_FULL) {
    obs.overflow++;
  } else {
    obs.slot[i] = (entry_t){(uintptr_t)p, size, weight};
    obs.live++;
    obs.live_weight += weight;
    obs.live_objects += (double)weight / (double)size;
  }
  obs.all_weight += weight;
  obs.light_samples += weight < size;
  pthread_mutex_unlock(&obs.lock);
  atomic_fetch_add(&obs_samples, 1);       /* after the block is in the table */
}

static void table_on_free(void *p, size_t size, void *arg)
{
  (void)arg;
  obs_frees_here++;
  /* Frees may never overtake samples: this free's own sample completed before the block reached us. */
  if (atomic_fetch_add(&obs_frees, 1) + 1 > atomic_load(&obs_samples)) atomic_fetch_add(&obs_early_frees, 1);
  pthread_mutex_lock(&obs.lock);
  size_t i = find((uintptr_t)p);
  if (obs.slot[i].ptr == 0) {
    obs.unknown_frees++;
  } else {
    obs.size_mismatch += obs.slot[i].size != size;
    drop_entry(i);
  }
  pthread_mutex_unlock(&obs.lock);
}

static void observe(void) { ck_assert(mi_prof_set_observer(table_on_sample, table_on_free, NULL)); }

/* Whether p is a live observed block; its size and weight if so. */
static bool observed(const void *p, size_t *size, size_t *weight)
{
  pthread_mutex_lock(&obs.lock);
  const entry_t *e = &obs.slot[find((uintptr_t)p)];
  bool found = e->ptr != 0;
  if (found && size != NULL) *size = e->size;
  if (found && weight != NULL) *weight = e->weight;
  pthread_mutex_unlock(&obs.lock);
  return found;
}

static bool is_observed(const void *p) { return observed(p, NULL, NULL); }

static uint64_t table_live(void)
{
  pthread_mutex_lock(&obs.lock);
  uint64_t n = obs.live;
  pthread_mutex_unlock(&obs.lock);
  return n;
}

/* No breach of the contract so far. */
static void ck_assert_contract_kept(void)
{
  ck_assert_uint_eq(obs.overflow, 0);
  ck_assert_uint_eq(obs.dup_samples, 0);
  ck_assert_uint_eq(obs.unknown_frees, 0);
  ck_assert_uint_eq(obs.size_mismatch, 0);
  ck_assert_uint_eq(obs.light_samples, 0);
  ck_assert_uint_eq(atomic_load(&obs_early_frees), 0);
}

/* Everything sampled was reported freed. */
static void ck_assert_all_freed(void)
{
  ck_assert_uint_eq(table_live(), 0);
  ck_assert_uint_eq(atomic_load(&obs_frees), atomic_load(&obs_samples));
}

static int aligned_to(const void *p, size_t a) { return ((uintptr_t)p & (a - 1)) == 0; }

static uint64_t xorshift(uint64_t *x)
{
  *x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
  return *x;
}

/* Samples among `count` allocations of each of `n` sizes at `rate`: each allocation of s bytes is sampled
 * independently with p = 1 - e^(-s/R), whatever came before (memoryless intervals), so the count is a sum
 * of Bernoulli(p): E = count * sum p, sigma^2 = count * sum p (1 - p).  Allowed: 4 sigma. */
static void ck_assert_samples_near(unsigned sampled, const size_t *sizes, int n, double count, double rate)
{
  double e = 0, var = 0;
  for (int k = 0; k < n; k++) {
    double p = -expm1(-(double)sizes[k] / rate);
    e += count * p;
    var += count * p * (1 - p);
  }
  ck_assert_double_le(fabs((double)sampled - e), 4 * sqrt(var));
}

/* Worker threads are created before the session starts and wait at a barrier: pthread_create allocates
 * (the new thread's TLS vector), and a sample of that would stay live in glibc's stack cache after the
 * join, so the tests that expect everything freed would see one block too many. */
#define CREW_MAX 8

static struct {
  pthread_barrier_t go;
  void *(*fn)(void *);
  int n;
  pthread_t th[CREW_MAX];
} crew;

static void *crew_member(void *arg)
{
  pthread_barrier_wait(&crew.go);
  return crew.fn(arg);
}

/* Creates n threads that will run fn((void *)index) once crew_go() lets them. */
static void crew_hire(int n, void *(*fn)(void *))
{
  crew.fn = fn;
  crew.n = n;
  ck_assert_int_eq(pthread_barrier_init(&crew.go, NULL, (unsigned)n + 1), 0);
  for (int i = 0; i < n; i++)
    ck_assert_int_eq(pthread_create(&crew.th[i], NULL, crew_member, (void *)(uintptr_t)i), 0);
}

static void crew_go(void) { pthread_barrier_wait(&crew.go); }

/* Joins the crew; the sum of what the threads returned (as integers). */
static uintptr_t crew_join(void)
{
  uintptr_t sum = 0;
  for (int i = 0; i < crew.n; i++) {
    void *ret = NULL;
    ck_assert_int_eq(pthread_join(crew.th[i], &ret), 0);
    sum += (uintptr_t)ret;
  }
  return sum;
}

/* ---------------------------------------------------------------------------------------------------
   B8: on_free gets exactly the pointer and size on_sample got
--------------------------------------------------------------------------------------------------- */

typedef struct block_s {
  void *ptr;
  size_t size;
  size_t align;            /* 0 = malloc's own */
} block_t;

START_TEST(observer_pointer_roundtrip)
{
  block_t b[10];
  observe();
  ck_assert(mi_prof_start_seeded(1, SEED));   /* every request of >= 37 bytes is sampled at rate 1 */
  b[0] = (block_t){malloc(100), 100, 0};
  b[1] = (block_t){calloc(25, 12), 300, 0};
  b[2] = (block_t){aligned_alloc(64, 200), 200, 64};
  b[3] = (block_t){aligned_alloc(1024, 3000), 3000, 1024};
  b[4] = (block_t){aligned_alloc(16384, 20000), 20000, 16384};
  b[5].size = 700, b[5].align = 1024;
  ck_assert_int_eq(posix_memalign(&b[5].ptr, 1024, 700), 0);
  b[6] = (block_t){memalign(16384, 5000), 5000, 16384};
  b[7] = (block_t){realloc(malloc(50), 6000), 6000, 0};          /* moved */
  void *grown = malloc(300);
  size_t usable = malloc_usable_size(grown);
  b[8] = (block_t){realloc(grown, usable), usable, 0};           /* in place: free(300) + sample(usable) */
  b[9] = (block_t){realloc(NULL, 400), 400, 0};
  ck_assert_ptr_eq(b[8].ptr, grown);

  for (int i = 0; i < 10; i++) {
    size_t size = 0, weight = 0;
    ck_assert_ptr_nonnull(b[i].ptr);
    ck_assert(b[i].align == 0 || aligned_to(b[i].ptr, b[i].align));
    ck_assert(observed(b[i].ptr, &size, &weight));
    ck_assert_uint_eq(size, b[i].size);
    ck_assert_uint_eq(weight, b[i].size);    /* p = 1 - e^-s is 1 to within e^-100 */
  }
  for (int i = 0; i < 10; i++) {
    free(b[i].ptr);
    bool still = is_observed(b[i].ptr);      /* before any assertion can reuse the address */
    ck_assert(!still);
  }
  ck_assert_contract_kept();
  ck_assert_all_freed();
  ck_assert(mi_prof_stop());
}
END_TEST

/* ---------------------------------------------------------------------------------------------------
   B9: frees never overtake samples, with many threads freeing each other's blocks
--------------------------------------------------------------------------------------------------- */

#define B9_THREADS 4
#define B9_OPS     50000
#define B9_SLOTS   1024
#define B9_RATE    16384

static struct {
  pthread_mutex_t lock;
  void *slot[B9_SLOTS];
} b9_box = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* Each thread puts its new block in a random shared slot and frees what was there, often another thread's. */
static void *b9_worker(void *arg)
{
  uint64_t x = 0x9e3779b97f4a7c15ull * ((uintptr_t)arg + 1);
  for (int i = 0; i < B9_OPS; i++) {
    size_t size = 16 + (size_t)(xorshift(&x) % 4096);
    void *p = malloc(size);
    unsigned k = (unsigned)(xorshift(&x) % B9_SLOTS);
    pthread_mutex_lock(&b9_box.lock);
    void *old = b9_box.slot[k];
    b9_box.slot[k] = p;
    pthread_mutex_unlock(&b9_box.lock);
    free(old);
  }
  return NULL;
}

START_TEST(observer_frees_le_samples)
{
  crew_hire(B9_THREADS, b9_worker);
  observe();
  ck_assert(mi_prof_start_seeded(B9_RATE, SEED));
  crew_go();
  crew_join();
  for (int k = 0; k < B9_SLOTS; k++) free(b9_box.slot[k]);
  /* 2e5 requests uniform in 16..4111 bytes at 16 KiB: E[samples] = 2e5 * 0.117 = 2.3e4. */
  ck_assert_uint_gt(atomic_load(&obs_samples), 0);
  ck_assert_contract_kept();
  ck_assert_all_freed();
  ck_assert(mi_prof_stop());
}
END_TEST

/* ---------------------------------------------------------------------------------------------------
   B13: blocks of mixed sizes, alignments and lifetimes are each reported freed once, with their pointer
--------------------------------------------------------------------------------------------------- */

#define B13_BLOCKS 6000
#define B13_RATE   4096
#define B13_MOVE   200000                       /* realloc growth: beyond any usable size, so it moves */

static const size_t b13_sizes[5] = {40, 200, 1500, 9000, 70000};
static const size_t b13_aligns[3] = {64, 1024, 16384};

static block_t b13[B13_BLOCKS];
static bool b13_sampled[B13_BLOCKS];

/* Block i: size i % 5; aligned when (i / 5) % 3 == 0, at alignment (i / 15) % 3; fate (i / 45) % 4, so every
 * fate gets every shape. */
static int b13_fate(int i) { return (i / 45) % 4; }

enum { FREE_LOCAL, FREE_REMOTE, MOVE, FREE_LAST };

/* Frees the FREE_REMOTE quarter on its own thread; returns the number still observed after their free. */
static void *b13_remote(void *arg)
{
  (void)arg;
  uintptr_t missed = 0;
  for (int i = 0; i < B13_BLOCKS; i++) {
    if (b13_fate(i) != FREE_REMOTE) continue;
    free(b13[i].ptr);
    missed += b13_sampled[i] && is_observed(b13[i].ptr);
  }
  return (void *)missed;
}

START_TEST(observer_mixed_lifetimes)
{
  crew_hire(1, b13_remote);
  observe();
  ck_assert(mi_prof_start_seeded(B13_RATE, SEED));
  unsigned misaligned = 0, sampled = 0, missed = 0;
  for (int i = 0; i < B13_BLOCKS; i++) {
    size_t size = b13_sizes[i % 5], align = (i / 5) % 3 == 0 ? b13_aligns[(i / 15) % 3] : 0;
    void *p = align ? aligned_alloc(align, size) : malloc(size);
    b13[i] = (block_t){p, size, align};
    b13_sampled[i] = is_observed(p);
    sampled += b13_sampled[i];
    misaligned += p == NULL || (align != 0 && !aligned_to(p, align));
  }
  for (int i = 0; i < B13_BLOCKS; i++) {
    if (b13_fate(i) == FREE_LOCAL) {
      free(b13[i].ptr);
      missed += b13_sampled[i] && is_observed(b13[i].ptr);
    } else if (b13_fate(i) == MOVE) {
      void *q = realloc(b13[i].ptr, b13[i].size + B13_MOVE);
      missed += q == NULL || q == b13[i].ptr || (b13_sampled[i] && is_observed(b13[i].ptr));
      b13[i].ptr = q;
    }
  }
  crew_go();
  missed += (unsigned)crew_join();
  for (int i = 0; i < B13_BLOCKS; i++) {
    if (b13_fate(i) == MOVE || b13_fate(i) == FREE_LAST) free(b13[i].ptr);
  }
  ck_assert_uint_eq(misaligned, 0);
  ck_assert_uint_eq(missed, 0);
  /* 1200 of each size (alignment does not count): E = 1200 * (0.0097 + 0.0477 + 0.3066 + 0.8889 + 1.0000)
   * = 2704, sigma = 21. */
  ck_assert_samples_near(sampled, b13_sizes, 5, B13_BLOCKS / 5, B13_RATE);
  ck_assert_contract_kept();
  ck_assert_all_freed();
  ck_assert(mi_prof_stop());
}
END_TEST

/* ---------------------------------------------------------------------------------------------------
   B14: many aligned allocations: aligned, each freed sample reported, sampled at the expected rate
--------------------------------------------------------------------------------------------------- */

#define B14_ALLOCS 120000
#define B14_RATE   4096

static const size_t b14_sizes[6] = {64, 256, 120, 1016, 48, 12288};
static const size_t b14_aligns[6] = {64, 256, 64, 512, 16, 4096};

START_TEST(observer_aligned_many)
{
  observe();
  ck_assert(mi_prof_start_seeded(B14_RATE, SEED));
  unsigned misaligned = 0, sampled = 0;
  for (int i = 0; i < B14_ALLOCS; i++) {
    size_t size = b14_sizes[i % 6], align = b14_aligns[i % 6];
    void *p = NULL;
    if (i % 12 < 6) p = aligned_alloc(align, size);
    else if (posix_memalign(&p, align, size) != 0) p = NULL;
    misaligned += p == NULL || !aligned_to(p, align);
    sampled += is_observed(p);
    free(malloc(24));                         /* small traffic between: moves the countdown only */
    free(p);
  }
  mi_prof_stats_t st;
  ck_assert(mi_prof_stats(&st, sizeof st));
  ck_assert_uint_eq(misaligned, 0);
  for (int r = 0; r < MI_PROF_DROP_REASONS; r++) ck_assert_uint_eq(st.dropped[r], 0);
  /* 20000 of each shape; the requested size counts, not the alignment:
   * E = 20000 * (0.0155 + 0.0606 + 0.0289 + 0.2197 + 0.0116 + 0.9502) = 25730, sigma = 81. */
  ck_assert_samples_near(sampled, b14_sizes, 6, B14_ALLOCS / 6, B14_RATE);
  ck_assert_contract_kept();
  ck_assert_all_freed();
  ck_assert(mi_prof_stop());
}
END_TEST

/* ---------------------------------------------------------------------------------------------------
   B15: stop/start toggled while another thread allocates
--------------------------------------------------------------------------------------------------- */

#define B15_ALLOCS 300000
#define B15_SIZE   2048
#define B15_RATE   1024
#define B15_RING   16
#define B15_GAP    256                        /* most allocations between two toggles */

static atomic_bool b15_done;
static atomic_uint_fast64_t b15_toggles, b15_api_failures, b15_progress;

/* Toggles after a random number (1..B15_GAP) of the allocator's allocations, so sessions range from one
 * allocation to many.  (Back-to-back toggles starve sampling altogether: a sample started in one session
 * is refused by the next, and the samples' side of the race would never run.) */
static void *b15_toggler(void)
{
  uint64_t x = SEED | 1, next = 0;
  while (!atomic_load(&b15_done)) {
    if (atomic_load(&b15_progress) < next) continue;
    if (!mi_prof_stop()) atomic_fetch_add(&b15_api_failures, 1);
    if (!mi_prof_start_seeded(B15_RATE, SEED)) atomic_fetch_add(&b15_api_failures, 1);
    atomic_fetch_add(&b15_toggles, 1);
    next = atomic_load(&b15_progress) + 1 + xorshift(&x) % B15_GAP;
  }
  return NULL;
}

static void *b15_allocator(void)
{
  void *ring[B15_RING] = {0};
  uintptr_t failed = 0;
  while (atomic_load(&b15_toggles) == 0) sched_yield();   /* the race starts with the first toggle */
  for (int i = 0; i < B15_ALLOCS; i++) {
    atomic_store(&b15_progress, (uint64_t)i);
    free(ring[i % B15_RING]);
    char *p = malloc(B15_SIZE);
    failed += p == NULL;
    if (p != NULL) p[0] = p[B15_SIZE - 1] = 1;
    ring[i % B15_RING] = p;
  }
  for (int i = 0; i < B15_RING; i++) free(ring[i]);
  atomic_store(&b15_done, true);
  return (void *)failed;
}

static void *b15_member(void *arg) { return arg == NULL ? b15_toggler() : b15_allocator(); }

START_TEST(observer_stop_start_race)
{
  crew_hire(2, b15_member);                   /* 0: toggler, 1: allocator */
  observe();
  ck_assert(mi_prof_start_seeded(B15_RATE, SEED));
  crew_go();
  ck_assert_uint_eq(crew_join(), 0);          /* no failed allocation */
  ck_assert_uint_eq(atomic_load(&b15_api_failures), 0);
  ck_assert_uint_gt(atomic_load(&b15_toggles), 0);
  /* At rate 1024 a 2048-byte block is sampled with p = 0.86: over 300000 allocations, samples that complete
   * inside their session are certain, whatever the interleaving. */
  ck_assert_uint_gt(atomic_load(&obs_samples), 0);

  /* Still running (the toggler ends with a start) and every block is freed: nothing is live, and the two
   * views of the record table agree. */
  size_t records = 1, bytes = 1;
  mi_prof_stats_t st;
  ck_assert(mi_prof_debug_stats(&records, &bytes));
  ck_assert(mi_prof_stats(&st, sizeof st));
  ck_assert(mi_prof_is_enabled());
  ck_assert_uint_eq(st.sample_rate, B15_RATE);
  ck_assert_uint_eq(records, 0);
  ck_assert_uint_eq(bytes, 0);
  ck_assert_uint_eq(st.live_samples, 0);
  ck_assert_uint_eq(st.inuse_objects, 0);
  ck_assert_uint_eq(st.inuse_bytes, 0);

  /* A block observed in a session whose data a later start discarded is freed without on_free, so its
   * address may be sampled again while the table still holds it (dup_samples is legal here); everything
   * else holds. */
  ck_assert_uint_eq(obs.overflow, 0);
  ck_assert_uint_eq(obs.unknown_frees, 0);
  ck_assert_uint_eq(obs.size_mismatch, 0);
  ck_assert_uint_eq(atomic_load(&obs_early_frees), 0);
  ck_assert_uint_le(atomic_load(&obs_frees), atomic_load(&obs_samples));

  ck_assert(mi_prof_stop());
  ck_assert(mi_prof_debug_stats(&records, &bytes));
  ck_assert_uint_eq(records, 0);
  ck_assert_uint_eq(bytes, 0);
}
END_TEST

/* ---------------------------------------------------------------------------------------------------
   C20: the stats struct: versioned, and consistent with the observer's sums
--------------------------------------------------------------------------------------------------- */

#define C20_BLOCKS 5000
#define C20_RATE   4096
#define C20_MIN    16

static void *c20_blocks[C20_BLOCKS];

START_TEST(observer_stats_struct)
{
  mi_prof_stats_t st, saw;
  errno = 0;
  ck_assert(!mi_prof_stats(NULL, sizeof st));
  ck_assert_int_eq(errno, EINVAL);
  /* sizeof st and MI_PROF_STATS_SIZE_V1 are the known versions. */
  static const size_t bad_sizes[] = {0, MI_PROF_STATS_SIZE_V1 - 8, sizeof st - 8, sizeof st + 8, sizeof st * 2};
  for (size_t i = 0; i < sizeof bad_sizes / sizeof bad_sizes[0]; i++) {
    errno = 0;
    ck_assert(!mi_prof_stats(&st, bad_sizes[i]));
    ck_assert_int_eq(errno, EINVAL);
  }

  /* A 0.1 caller's smaller struct is filled up to its size, and not one byte beyond. */
  unsigned char v1[sizeof st + 8];
  memset(v1, 0xa5, sizeof v1);
  ck_assert(mi_prof_stats((mi_prof_stats_t *)(void *)v1, MI_PROF_STATS_SIZE_V1));
  for (size_t i = MI_PROF_STATS_SIZE_V1; i < sizeof v1; i++) ck_assert_uint_eq(v1[i], 0xa5);

  observe();
  ck_assert(mi_prof_start_seeded(C20_RATE, SEED));
  uint64_t x = 0x853c49e6748fea9bull;
  for (int i = 0; i < C20_BLOCKS; i++) c20_blocks[i] = malloc(C20_MIN + (size_t)(xorshift(&x) % 8192));
  for (int i = 0; i < C20_BLOCKS; i += 2) free(c20_blocks[i]);   /* half stay live */

  /* One consistent moment: no allocation between these reads (an assertion would allocate). */
  size_t records = 0, bytes = 0;
  pthread_mutex_lock(&obs.lock);
  bool ok = mi_prof_stats(&st, sizeof st) && mi_prof_debug_stats(&records, &bytes);
  uint64_t live = obs.live, live_weight = obs.live_weight, all_weight = obs.all_weight;
  double live_objects = obs.live_objects;
  pthread_mutex_unlock(&obs.lock);
  uint64_t samples = atomic_load(&obs_samples);
  ck_assert(ok);

  ck_assert_uint_eq(st.sample_rate, C20_RATE);
  ck_assert_uint_gt(st.samples, 0);           /* E = 5000 * 0.568 = 2840 */
  ck_assert_uint_eq(st.samples, samples);
  ck_assert_uint_eq(st.live_samples, live);
  ck_assert_uint_eq(st.live_samples, records);
  /* The observer is given each sample's weight in whole bytes and the stats sum the same weights: they may
   * differ by less than one byte of rounding per sample. */
  ck_assert_uint_le(st.inuse_bytes, live_weight + live);
  ck_assert_uint_ge(st.inuse_bytes + live, live_weight);
  ck_assert_uint_le(st.alloc_bytes, all_weight + samples);
  ck_assert_uint_ge(st.alloc_bytes + samples, all_weight);
  /* Objects: each sample stands for 1/p objects.  The stats keep 1/p rounded to 1/1024ths (off by <= 0.5/1024
   * each) and round the sum once (<= 0.5); the observer's weight/size = round(s/p)/s is off by <= 0.5/s, and
   * s >= 16. */
  double tol = 0.5 + (double)live * (0.5 / 1024 + 0.5 / C20_MIN);
  ck_assert_double_eq_tol((double)st.inuse_objects, live_objects, tol);
  ck_assert_uint_ge(st.alloc_objects, st.inuse_objects);
  ck_assert_uint_gt(st.profiler_bytes, 0);
  ck_assert_uint_le(st.profiler_bytes, st.profiler_bytes_max);
  ck_assert_uint_gt(st.arena_bytes, 0);
  ck_assert_uint_eq(st.untracked_frees, 0);
  for (int r = 0; r < MI_PROF_DROP_REASONS; r++) ck_assert_uint_eq(st.dropped[r], 0);

  /* Stopped: the rate goes to 0, everything the session recorded stays (nothing was allocated since the
   * reads above); frees of its samples still leave in use, and reach the observer; a reset while stopped
   * discards the rest. */
  saw = st;
  ck_assert(mi_prof_stop());
  ck_assert(mi_prof_stats(&st, sizeof st));
  ck_assert_uint_eq(st.sample_rate, 0);
  ck_assert_uint_eq(st.live_samples, saw.live_samples);
  ck_assert_uint_eq(st.inuse_objects, saw.inuse_objects);
  ck_assert_uint_eq(st.inuse_bytes, saw.inuse_bytes);
  ck_assert_uint_eq(st.samples, saw.samples);
  ck_assert_uint_eq(st.alloc_bytes, saw.alloc_bytes);
  for (int i = 1; i < C20_BLOCKS; i += 2) free(c20_blocks[i]);
  ck_assert(mi_prof_stats(&st, sizeof st));
  ck_assert(mi_prof_debug_stats(&records, &bytes));
  ck_assert_uint_eq(records, 0);
  ck_assert_uint_eq(bytes, 0);
  ck_assert_uint_eq(st.live_samples, 0);
  ck_assert_uint_eq(st.inuse_bytes, 0);
  ck_assert_uint_eq(st.samples, saw.samples);
  pthread_mutex_lock(&obs.lock);
  live = obs.live;
  pthread_mutex_unlock(&obs.lock);
  ck_assert_uint_eq(live, 0);                 /* every kept sample's free was observed */
  ck_assert(mi_prof_reset());
  ck_assert(mi_prof_stats(&st, sizeof st));
  ck_assert_uint_eq(st.samples, 0);
  ck_assert_uint_eq(st.alloc_bytes, 0);
  ck_assert_uint_eq(st.peak_inuse_bytes, 0);
  ck_assert(!mi_prof_reset());
  ck_assert_int_eq(errno, EALREADY);
}
END_TEST

/* ---------------------------------------------------------------------------------------------------
   C21: callbacks that allocate and call the API
--------------------------------------------------------------------------------------------------- */

/* volatile: glibc declares malloc and free __leaf__ ("never calls back into this file"), so GCC may keep
 * these in registers across the calls, yet the callbacks run inside them.  (The atomics elsewhere are
 * reloaded anyway.) */
static __thread int re_depth;
static volatile uint64_t re_samples, re_frees, re_nested, re_refused, re_wrong, re_stats_bad, re_alloc_failed;

/* A session-changing call from inside a callback must fail with EDEADLK. */
static void expect_edeadlk(bool ok)
{
  if (!ok && errno == EDEADLK) re_refused++;
  else re_wrong++;
}

/* What every callback does: allocate, free, read the stats, and try the calls it must not make. */
static void re_body(void)
{
  void *a = malloc(1000), *b = calloc(3, 100), *c = aligned_alloc(64, 640);
  a = realloc(a, 5000);
  re_alloc_failed += a == NULL || b == NULL || c == NULL;
  free(a), free(b), free(c);
  int saved = errno;
  errno = 0;
  expect_edeadlk(mi_prof_stop());
  errno = 0;
  expect_edeadlk(mi_prof_start(1));
  errno = 0;
  expect_edeadlk(mi_prof_start_seeded(1, 1));
  errno = 0;
  expect_edeadlk(mi_prof_reset());
  errno = 0;
  expect_edeadlk(mi_prof_set_observer(NULL, NULL, NULL));
  errno = saved;
  mi_prof_stats_t st;
  size_t records;
  /* Single thread, every sample observed: the stats count exactly the samples seen so far. */
  if (!mi_prof_stats(&st, sizeof st) || st.samples != re_samples || st.sample_rate != 1) re_stats_bad++;
  if (!mi_prof_debug_stats(&records, NULL) || records != st.live_samples) re_stats_bad++;
}

static void re_on_sample(void *p, size_t size, size_t weight, size_t rate, uint64_t tid, void *arg)
{
  (void)p, (void)size, (void)weight, (void)rate, (void)tid, (void)arg;
  re_nested += re_depth++ != 0;               /* an allocation inside a callback was sampled */
  re_samples++;
  re_body();
  re_depth--;
}

static void re_on_free(void *p, size_t size, void *arg)
{
  (void)p, (void)size, (void)arg;
  re_nested += re_depth++ != 0;
  re_frees++;
  re_body();
  re_depth--;
}

#define C21_BLOCKS 50

START_TEST(observer_callback_reentrancy)
{
  void *blocks[C21_BLOCKS];
  mi_prof_stats_t before, after;
  size_t records = 1;
  ck_assert(mi_prof_set_observer(re_on_sample, re_on_free, NULL));
  ck_assert(mi_prof_start_seeded(1, SEED));   /* rate 1: every request of >= 37 bytes is sampled */
  /* No assertion between the snapshots: only these 50 allocations may be sampled. */
  bool ok = mi_prof_stats(&before, sizeof before);
  for (int i = 0; i < C21_BLOCKS; i++) blocks[i] = malloc(64 + (size_t)i * 8);
  for (int i = 0; i < C21_BLOCKS; i++) free(blocks[i]);
  ok = ok && mi_prof_stats(&after, sizeof after) && mi_prof_debug_stats(&records, NULL);
  ck_assert(ok);
  /* Each allocation is one sample: the four inside each of the 100 callbacks are none. */
  ck_assert_uint_eq(after.samples - before.samples, C21_BLOCKS);
  ck_assert_uint_eq(records, 0);
  ck_assert_uint_eq(re_nested, 0);
  ck_assert_uint_eq(re_alloc_failed, 0);
  ck_assert_uint_eq(re_wrong, 0);
  ck_assert_uint_eq(re_refused, 5 * (re_samples + re_frees));
  ck_assert_uint_eq(re_stats_bad, 0);
  ck_assert_uint_ge(re_frees, C21_BLOCKS);
  /* The refused calls changed nothing: still running at rate 1, no reset, observer still installed. */
  uint64_t seen = re_samples;                 /* with the stats, before an assertion allocates */
  ok = mi_prof_stats(&after, sizeof after);
  ck_assert(ok);
  ck_assert(mi_prof_is_enabled());
  ck_assert_uint_eq(after.sample_rate, 1);
  ck_assert_uint_eq(after.samples, seen);
  seen = re_samples;
  free(malloc(100));
  ck_assert_uint_eq(re_samples, seen + 1);
  ck_assert(mi_prof_stop());
}
END_TEST

/* ---------------------------------------------------------------------------------------------------
   C23: blocks sampled on one thread and freed on another are gone at once
--------------------------------------------------------------------------------------------------- */

#define C23_BLOCKS 300
#define C23_SIZE   256

static void *c23_blocks[C23_BLOCKS];
static size_t c23_records_after = 1;
static uint64_t c23_frees_seen;

static void *c23_freer(void *arg)
{
  (void)arg;
  for (int i = 0; i < C23_BLOCKS; i++) free(c23_blocks[i]);
  mi_prof_debug_stats(&c23_records_after, NULL);   /* at once: no collect, no thread exit yet */
  c23_frees_seen = obs_frees_here;
  return NULL;
}

START_TEST(observer_cross_thread_free)
{
  crew_hire(1, c23_freer);
  observe();
  ck_assert(mi_prof_start_seeded(1, SEED));   /* rate 1: each 256-byte block is sampled */
  size_t records = 0, bytes = 0;
  for (int i = 0; i < C23_BLOCKS; i++) c23_blocks[i] = malloc(C23_SIZE);
  ck_assert(mi_prof_debug_stats(&records, &bytes));
  ck_assert_uint_eq(records, C23_BLOCKS);
  ck_assert_uint_eq(bytes, C23_BLOCKS * C23_SIZE);
  unsigned seen = 0;
  for (int i = 0; i < C23_BLOCKS; i++) seen += is_observed(c23_blocks[i]);
  ck_assert_uint_eq(seen, C23_BLOCKS);
  crew_go();
  crew_join();
  ck_assert_uint_eq(c23_records_after, 0);
  ck_assert_uint_eq(c23_frees_seen, C23_BLOCKS);   /* reported on the freeing thread */
  mi_prof_stats_t st;
  ck_assert(mi_prof_stats(&st, sizeof st));
  ck_assert_uint_eq(st.live_samples, 0);
  ck_assert_uint_eq(st.inuse_objects, 0);
  ck_assert_uint_eq(st.inuse_bytes, 0);
  ck_assert_contract_kept();
  ck_assert_all_freed();
  ck_assert(mi_prof_stop());
}
END_TEST

Suite *observer_suite(void)
{
  Suite *s = suite_create("observer");
  TCase *tc = tcase_create("observer");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, observer_pointer_roundtrip);
  tcase_add_test(tc, observer_frees_le_samples);
  tcase_add_test(tc, observer_mixed_lifetimes);
  tcase_add_test(tc, observer_aligned_many);
  tcase_add_test(tc, observer_stop_start_race);
  tcase_add_test(tc, observer_stats_struct);
  tcase_add_test(tc, observer_callback_reentrancy);
  tcase_add_test(tc, observer_cross_thread_free);
  suite_add_tcase(s, tc);
  return s;
}

#endif
