/* test_mi_api.c - mimalloc's own API through the profiler (lib/mi_api.c, lib/mi_heap.c): every entry
 * point sampled like malloc, once, with mimalloc's results; first-class heaps and mi_heap_destroy; the
 * cases of the Bun profiler's heap tests, adapted (tags in blocks do not exist here: a sampled block is
 * known by its address and its record, so a block's content can never make it look sampled).
 *
 * This program is linked with -lmimalloc-prof before -lmimalloc: its mi_* calls reach the profiler, as
 * the documented link order makes them.  libmimalloc's own functions, for comparison, are looked up in
 * its handle.  Nothing is asserted while a session samples (see sampling_util.h). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <malloc.h>
#include <mimalloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <pthread.h>
#include <string.h>

#include "cxx_names.h"
#include "sampling_util.h"
#include "suites.h"

#if MPROF_PPROF == 1

#define SEED 0x3a71b0ull

/* ---------------------------------------------------------------------------------------------------
   An observer: every sample and free, with its pointer
--------------------------------------------------------------------------------------------------- */

static char text[2048];                          /* strings to duplicate: 2047 'x' (observe() fills it) */

#define SEEN_MAX 65536
static void *seen_ptr[SEEN_MAX];
static unsigned seen_n, freed_n, freed_unknown, freed_256;
static size_t seen_size[SEEN_MAX];

static void obs_sample(void *p, size_t size, size_t weight, size_t rate, uint64_t tid, void *arg)
{
  (void)weight, (void)rate, (void)tid, (void)arg;
  unsigned i = __atomic_fetch_add(&seen_n, 1, __ATOMIC_RELAXED);
  if (i < SEEN_MAX) seen_ptr[i] = p, seen_size[i] = size;
}

static void obs_free(void *p, size_t size, void *arg)
{
  (void)arg;
  __atomic_fetch_add(&freed_n, 1, __ATOMIC_RELAXED);
  if (size == 256) __atomic_fetch_add(&freed_256, 1, __ATOMIC_RELAXED);
  bool known = false;
  for (unsigned i = 0; i < seen_n && i < SEEN_MAX; i++) known |= seen_ptr[i] == p;
  if (!known) __atomic_fetch_add(&freed_unknown, 1, __ATOMIC_RELAXED);
}

static void observe(void)
{
  seen_n = freed_n = freed_unknown = freed_256 = 0;
  memset(text, 'x', sizeof text - 1);
  ck_assert(mi_prof_set_observer(obs_sample, obs_free, NULL));
}

static void unobserve(void) { ck_assert(mi_prof_set_observer(NULL, NULL, NULL)); }

/* ---------------------------------------------------------------------------------------------------
   Every allocating entry point
--------------------------------------------------------------------------------------------------- */

typedef struct entry_s {
  const char *name;
  void *(*alloc)(mi_heap_t *h, size_t n);
  size_t alignment;              /* what the result must be aligned to */
  bool zero;
  size_t charged;                /* bytes an allocation of 1024 asks for (pvalloc rounds to a page) */
} entry_t;

/* The *_small entry points take at most MI_SMALL_SIZE_MAX bytes: 1024 on 64-bit platforms, 512 on 32-bit. */
#define SMALL (MI_SMALL_SIZE_MAX < 1024 ? MI_SMALL_SIZE_MAX : 1024)

#define A(name, expr) static void *a_##name(mi_heap_t *h, size_t n) { (void)h; return expr; }
A(mi_malloc, mi_malloc(n))
A(mi_zalloc, mi_zalloc(n))
A(mi_calloc, mi_calloc(n / 4, 4))
A(mi_mallocn, mi_mallocn(4, n / 4))
A(mi_malloc_small, mi_malloc_small(n < SMALL ? n : SMALL))
A(mi_zalloc_small, mi_zalloc_small(n < SMALL ? n : SMALL))
A(mi_malloc_aligned, mi_malloc_aligned(n, 64))
A(mi_malloc_aligned_at, mi_malloc_aligned_at(n + 64, 64, 64))
A(mi_zalloc_aligned, mi_zalloc_aligned(n, 128))
A(mi_zalloc_aligned_at, mi_zalloc_aligned_at(n, 256, 0))
A(mi_calloc_aligned, mi_calloc_aligned(n / 8, 8, 64))
A(mi_calloc_aligned_at, mi_calloc_aligned_at(n / 8, 8, 64, 0))
A(mi_heap_malloc, mi_heap_malloc(h, n))
A(mi_heap_zalloc, mi_heap_zalloc(h, n))
A(mi_heap_calloc, mi_heap_calloc(h, n / 2, 2))
A(mi_heap_mallocn, mi_heap_mallocn(h, 2, n / 2))
A(mi_heap_malloc_small, mi_heap_malloc_small(h, n < SMALL ? n : SMALL))
A(mi_heap_malloc_aligned, mi_heap_malloc_aligned(h, n, 32))
A(mi_heap_malloc_aligned_at, mi_heap_malloc_aligned_at(h, n, 32, 0))
A(mi_heap_zalloc_aligned, mi_heap_zalloc_aligned(h, n, 64))
A(mi_heap_zalloc_aligned_at, mi_heap_zalloc_aligned_at(h, n, 64, 0))
A(mi_heap_calloc_aligned, mi_heap_calloc_aligned(h, n / 4, 4, 64))
A(mi_heap_calloc_aligned_at, mi_heap_calloc_aligned_at(h, n / 4, 4, 64, 0))
A(mi_memalign, mi_memalign(512, n))
A(mi_aligned_alloc, mi_aligned_alloc(256, n))
A(mi_valloc, mi_valloc(n))
A(mi_pvalloc, mi_pvalloc(n))
A(mi_new, mi_new(n))
A(mi_new_nothrow, mi_new_nothrow(n))
A(mi_new_aligned, mi_new_aligned(n, 64))
A(mi_new_aligned_nothrow, mi_new_aligned_nothrow(n, 64))
A(mi_new_n, mi_new_n(n / 4, 4))
A(mi_heap_alloc_new, mi_heap_alloc_new(h, n))
A(mi_heap_alloc_new_n, mi_heap_alloc_new_n(h, n / 4, 4))
A(mi_realloc, mi_realloc(NULL, n))
A(mi_rezalloc, mi_rezalloc(NULL, n))
A(mi_recalloc, mi_recalloc(NULL, n / 4, 4))
A(mi_reallocn, mi_reallocn(NULL, n / 4, 4))
A(mi_reallocarray, mi_reallocarray(NULL, n / 4, 4))
A(mi_realloc_aligned, mi_realloc_aligned(NULL, n, 64))
A(mi_rezalloc_aligned, mi_rezalloc_aligned(NULL, n, 64))
A(mi_heap_realloc, mi_heap_realloc(h, NULL, n))
A(mi_heap_rezalloc, mi_heap_rezalloc(h, NULL, n))
A(mi_heap_realloc_aligned, mi_heap_realloc_aligned(h, NULL, n, 128))
A(mi_heap_recalloc_aligned, mi_heap_recalloc_aligned(h, NULL, n / 4, 4, 128))
A(mi_strdup, mi_strdup(text + sizeof text - 1 - (n < sizeof text ? n : sizeof text - 1)))
A(mi_strndup, mi_strndup(text, n - 1))
A(mi_heap_strdup, mi_heap_strdup(h, text + sizeof text - 1 - (n < sizeof text ? n : sizeof text - 1)))
A(mi_heap_strndup, mi_heap_strndup(h, text, n - 1))
/* The C family and C++ new too: they reach libmimalloc through the same leaves. */
A(malloc, malloc(n))
A(calloc, calloc(n / 4, 4))
A(realloc, realloc(NULL, n))
A(reallocarray, reallocarray(NULL, n / 4, 4))
A(aligned_alloc, aligned_alloc(64, n))
A(memalign, memalign(128, n))
A(valloc, valloc(n))
A(operator_new, operator_new(n))
A(operator_new_aligned, operator_new_aligned(n, 64))
static void *a_posix_memalign(mi_heap_t *h, size_t n)
{
  (void)h;
  void *p = NULL;
  return posix_memalign(&p, 256, n) == 0 ? p : NULL;
}
static void *a_mi_posix_memalign(mi_heap_t *h, size_t n)
{
  (void)h;
  void *p = NULL;
  return mi_posix_memalign(&p, 128, n) == 0 ? p : NULL;
}
#undef A

#define E(name, alignment, zero) {#name, a_##name, alignment, zero, 1024}
static const entry_t entries[] = {
  E(mi_malloc, 16, false), E(mi_zalloc, 16, true), E(mi_calloc, 16, true), E(mi_mallocn, 16, false),
  {"mi_malloc_small", a_mi_malloc_small, 16, false, SMALL}, {"mi_zalloc_small", a_mi_zalloc_small, 16, true, SMALL},
  E(mi_malloc_aligned, 64, false),
  {"mi_malloc_aligned_at", a_mi_malloc_aligned_at, 64, false, 1088}, E(mi_zalloc_aligned, 128, true),
  E(mi_zalloc_aligned_at, 256, true),
  E(mi_calloc_aligned, 64, true), E(mi_calloc_aligned_at, 64, true), E(mi_heap_malloc, 16, false),
  E(mi_heap_zalloc, 16, true), E(mi_heap_calloc, 16, true), E(mi_heap_mallocn, 16, false),
  {"mi_heap_malloc_small", a_mi_heap_malloc_small, 16, false, SMALL}, E(mi_heap_malloc_aligned, 32, false),
  E(mi_heap_malloc_aligned_at, 32, false), E(mi_heap_zalloc_aligned, 64, true),
  E(mi_heap_zalloc_aligned_at, 64, true), E(mi_heap_calloc_aligned, 64, true),
  E(mi_heap_calloc_aligned_at, 64, true), E(mi_memalign, 512, false), E(mi_aligned_alloc, 256, false),
  E(mi_valloc, 4096, false), {"mi_pvalloc", a_mi_pvalloc, 4096, false, 4096}, E(mi_new, 16, false), E(mi_new_nothrow, 16, false),
  E(mi_new_aligned, 64, false), E(mi_new_aligned_nothrow, 64, false), E(mi_new_n, 16, false),
  E(mi_heap_alloc_new, 16, false), E(mi_heap_alloc_new_n, 16, false), E(mi_realloc, 16, false),
  E(mi_rezalloc, 16, true), E(mi_recalloc, 16, true), E(mi_reallocn, 16, false), E(mi_reallocarray, 16, false),
  E(mi_realloc_aligned, 64, false), E(mi_rezalloc_aligned, 64, true), E(mi_heap_realloc, 16, false),
  E(mi_heap_rezalloc, 16, true), E(mi_heap_realloc_aligned, 128, false), E(mi_heap_recalloc_aligned, 128, true),
  E(mi_strdup, 8, false), E(mi_strndup, 8, false), E(mi_heap_strdup, 8, false), E(mi_heap_strndup, 8, false),
  E(mi_posix_memalign, 128, false), E(malloc, 16, false), E(calloc, 16, true), E(realloc, 16, false),
  E(reallocarray, 16, false), E(aligned_alloc, 64, false), E(memalign, 128, false), E(valloc, 4096, false),
  E(operator_new, 16, false), E(operator_new_aligned, 64, false), E(posix_memalign, 256, false),
};
#undef E
#define ENTRIES (sizeof entries / sizeof entries[0])

/* Rate 1 samples every request of 37 bytes or more: each entry point, asked for 1000 bytes, returns a
 * block the observer saw, once, aligned and zeroed as asked, with at least the bytes asked for; its
 * free is reported once; nothing stays in use. */
START_TEST(mi_api_every_entry_point_sampled)
{
  mi_heap_t *h = mi_heap_new();
  ck_assert_ptr_nonnull(h);
  static struct { void *p; unsigned samples, bad_align, not_zero; size_t usable; } got[ENTRIES];
  observe();
  start_seeded(1, SEED);
  for (size_t i = 0; i < ENTRIES; i++) {
    unsigned before = seen_n;
    void *p = entries[i].alloc(h, 1000);
    got[i].p = p;
    got[i].samples = seen_n - before;
    if (p == NULL) continue;
    got[i].bad_align = (uintptr_t)p % entries[i].alignment != 0;
    got[i].usable = mi_usable_size(p);
    size_t fill = entries[i].charged < 992 ? entries[i].charged : 992;   /* the *_small ones: SMALL */
    if (entries[i].zero)
      for (size_t k = 0; k < fill; k++) got[i].not_zero += ((unsigned char *)p)[k] != 0;
    memset(p, 0xab, fill);
  }
  unsigned samples = seen_n;
  for (size_t i = 0; i < ENTRIES; i++) mi_free(got[i].p);
  mi_prof_stats_t st = stats_or_abort();
  mi_prof_stop();
  unobserve();
  mi_heap_delete(h);
  for (size_t i = 0; i < ENTRIES; i++) {
    ck_assert_msg(got[i].p != NULL, "%s returned NULL", entries[i].name);
    ck_assert_msg(got[i].samples == 1, "%s: %u samples", entries[i].name, got[i].samples);
    ck_assert_msg(got[i].bad_align == 0, "%s: %p not aligned to %zu", entries[i].name, got[i].p, entries[i].alignment);
    ck_assert_msg(got[i].not_zero == 0, "%s: not zeroed", entries[i].name);
    size_t fill = entries[i].charged < 992 ? entries[i].charged : 992;
    ck_assert_msg(got[i].usable >= fill, "%s: usable %zu", entries[i].name, got[i].usable);
  }
  ck_assert_uint_eq(samples, ENTRIES);
  ck_assert_uint_eq(freed_n, ENTRIES);
  ck_assert_uint_eq(freed_unknown, 0);
  ck_assert_uint_eq(st.inuse_bytes, 0);
  ck_assert_uint_eq(st.live_samples, 0);
}
END_TEST

/* Charged once: N = 20000 requests of 1024 bytes per entry point at rate 4096 are sampled
 * Binomial(N, p(1024) = 0.2212) times: E = 4424, sd = 58.7 (pvalloc asks for a page: p(4096) = 0.632).
 * An entry point whose libmimalloc leaf calls another exported function through the PLT would be
 * charged twice and sampled with about p(2048) = 0.393: 59 sd away. */
#define CHARGE_N 20000
START_TEST(mi_api_charged_once)
{
  mi_heap_t *h = mi_heap_new();
  ck_assert_ptr_nonnull(h);
  static unsigned samples[ENTRIES];
  observe();
  for (size_t i = 0; i < ENTRIES; i++) {
    start_seeded(4096, SEED + i);
    unsigned before = seen_n;
    for (unsigned k = 0; k < CHARGE_N; k++) mi_free(entries[i].alloc(h, 1024));
    samples[i] = seen_n - before;
    mi_prof_stop();
  }
  unobserve();
  mi_heap_delete(h);
  for (size_t i = 0; i < ENTRIES; i++) {
    double p = prob_of(entries[i].charged, 4096);
    ck_assert_within_4sd(entries[i].name, samples[i], CHARGE_N * p, CHARGE_N * p * (1 - p));
  }
}
END_TEST

/* The same for reallocs of ordinary blocks (made while stopped: not charged): growing 8-byte blocks to
 * 1024 bytes moves them inside libmimalloc, where mi_realloc and the aligned reallocs call other exported
 * functions through the PLT. */
static void *r_realloc(void *p) { return realloc(p, 1024); }
static void *r_mi_realloc(void *p) { return mi_realloc(p, 1024); }
static void *r_mi_rezalloc(void *p) { return mi_rezalloc(p, 1024); }
static void *r_mi_heap_realloc(void *p) { return mi_heap_realloc(mi_heap_get_default(), p, 1024); }
static void *r_mi_realloc_aligned(void *p) { return mi_realloc_aligned(p, 1024, 64); }
static void *r_mi_reallocn(void *p) { return mi_reallocn(p, 256, 4); }

START_TEST(mi_api_realloc_charged_once)
{
  static void *(*const fn[])(void *) = {r_realloc, r_mi_realloc, r_mi_rezalloc, r_mi_heap_realloc,
                                        r_mi_realloc_aligned, r_mi_reallocn};
  static const char *const name[] = {"realloc", "mi_realloc", "mi_rezalloc", "mi_heap_realloc",
                                     "mi_realloc_aligned", "mi_reallocn"};
  static void *small[CHARGE_N];
  static unsigned samples[6];
  observe();
  for (size_t f = 0; f < 6; f++) {
    for (unsigned k = 0; k < CHARGE_N; k++) small[k] = mi_malloc(8);
    start_seeded(4096, SEED + f);
    unsigned before = seen_n;
    /* Each freed at once: a 32-bit platform's window holds about 3,500 small sampled blocks. */
    for (unsigned k = 0; k < CHARGE_N; k++) mi_free(fn[f](small[k]));
    samples[f] = seen_n - before;
    mi_prof_stop();
  }
  unobserve();
  double p = prob_of(1024, 4096);
  for (size_t f = 0; f < 6; f++) ck_assert_within_4sd(name[f], samples[f], CHARGE_N * p, CHARGE_N * p * (1 - p));
}
END_TEST

/* Failures look as libmimalloc's own: NULL for the same impossible requests, errno unchanged where it
 * leaves errno alone. */
START_TEST(mi_api_failures_as_mimalloc)
{
  void *lib = dlopen("libmimalloc.so.2", RTLD_LAZY | RTLD_NOLOAD);
  ck_assert_ptr_nonnull(lib);
  void *(*real_malloc)(size_t) = (void *(*)(size_t))dlsym(lib, "mi_malloc");
  void *(*real_aligned)(size_t, size_t) = (void *(*)(size_t, size_t))dlsym(lib, "mi_malloc_aligned");
  void *(*real_calloc)(size_t, size_t) = (void *(*)(size_t, size_t))dlsym(lib, "mi_calloc");
  ck_assert_ptr_nonnull(real_malloc);
  start_seeded(1, SEED);
  static const struct { size_t size, alignment; } cases[] = {
    {SIZE_MAX - 64, 0}, {(size_t)PTRDIFF_MAX + 1, 0}, {100, 3}, {100, 0}, {SIZE_MAX / 2, 64}};
  int errs[5][2];
  bool nulls[5][2];
  for (size_t c = 0; c < 5; c++) {
    errno = 1234;
    void *a = cases[c].alignment ? mi_malloc_aligned(cases[c].size, cases[c].alignment) : mi_malloc(cases[c].size);
    errs[c][0] = errno;
    nulls[c][0] = a == NULL;
    errno = 1234;
    void *b = cases[c].alignment ? real_aligned(cases[c].size, cases[c].alignment) : real_malloc(cases[c].size);
    errs[c][1] = errno;
    nulls[c][1] = b == NULL;
    mi_free(a);
    mi_free(b);
  }
  volatile size_t half = SIZE_MAX / 2;              /* volatile: gcc warns at a constant overflow */
  errno = 1234;
  void *ov = mi_calloc(half, 4);
  int ov_err = errno;
  errno = 1234;
  void *rov = real_calloc(half, 4);
  int rov_err = errno;
  mi_prof_stop();
  dlclose(lib);
  for (size_t c = 0; c < 5; c++) {
    ck_assert_msg(nulls[c][0] == nulls[c][1], "case %zu: NULL %d, mimalloc's %d", c, nulls[c][0], nulls[c][1]);
    ck_assert_msg(errs[c][0] == errs[c][1], "case %zu: errno %d, mimalloc's %d", c, errs[c][0], errs[c][1]);
  }
  ck_assert_ptr_null(ov);
  ck_assert_ptr_null(rov);
  ck_assert_int_eq(ov_err, rov_err);
}
END_TEST

/* An offset that is not a multiple of the alignment keeps a block off every slice, where sampled
 * blocks are (lib/sheap.c): at rate 1 such a request is served by mimalloc, aligned as asked, and
 * counted as a dropped sample (alignment) with its allocated weight; nothing stays in use. */
START_TEST(mi_api_offset_off_slice_dropped)
{
  observe();
  start_seeded(1, SEED);
  mi_prof_stats_t st0 = stats_or_abort();
  char *p = mi_malloc_aligned_at(1000, 64, 8);
  unsigned samples = seen_n;
  mi_prof_stats_t st1 = stats_or_abort();
  if (p != NULL) memset(p, 1, 1000);
  mi_free(p);
  mi_prof_stats_t st2 = stats_or_abort();
  mi_prof_stop();
  unobserve();
  ck_assert_ptr_nonnull(p);
  ck_assert_uint_eq(((uintptr_t)p + 8) % 64, 0);
  ck_assert_uint_eq(samples, 0);
  ck_assert_uint_eq(st1.dropped[MI_PROF_DROP_ALIGNMENT] - st0.dropped[MI_PROF_DROP_ALIGNMENT], 1);
  ck_assert_uint_ge(st1.alloc_bytes - st0.alloc_bytes, 1000);     /* weight 1000 at rate 1, plus the */
  ck_assert_uint_eq(st2.inuse_bytes, 0);                          /* stats' own samples, freed */
}
END_TEST

/* An alignment up to a pointer's size asks for nothing in mimalloc's reallocs: a sampled block is
 * reallocated with alignments 3, 5, 6 and 7 as an ordinary one is (rate 1: every block sampled).  Above
 * a pointer's size (5, 6, 7 on 32-bit platforms) an alignment that is not a power of two fails in
 * mimalloc: NULL for both kinds of block. */
START_TEST(mi_api_realloc_small_alignment)
{
  static const size_t align[] = {3, 5, 6, 7};
  void *q[4][3];
  start_seeded(1, SEED);
  for (size_t i = 0; i < 4; i++) {
    char *p = mi_malloc(100);
    if (p != NULL) memset(p, 7, 100);
    q[i][0] = mi_realloc_aligned(p, 5000, align[i]);
    q[i][1] = mi_rezalloc_aligned(mi_zalloc(100), 300, align[i]);
    q[i][2] = mi_heap_realloc_aligned(mi_heap_get_default(), mi_malloc(200), 100, align[i]);
  }
  mi_prof_stop();
  for (size_t i = 0; i < 4; i++) {
    if (align[i] > sizeof(uintptr_t)) {
      for (size_t k = 0; k < 3; k++) ck_assert_msg(q[i][k] == NULL, "alignment %zu, case %zu", align[i], k);
      continue;
    }
    for (size_t k = 0; k < 3; k++) ck_assert_msg(q[i][k] != NULL, "alignment %zu, case %zu", align[i], k);
    for (size_t b = 0; b < 100; b++) ck_assert_uint_eq(((unsigned char *)q[i][0])[b], 7);
    for (size_t b = 0; b < 300; b++) ck_assert_uint_eq(((unsigned char *)q[i][1])[b], 0);
    for (size_t k = 0; k < 3; k++) mi_free(q[i][k]);
  }
}
END_TEST

/* ---------------------------------------------------------------------------------------------------
   Heaps
--------------------------------------------------------------------------------------------------- */

#define HEAP_BLOCKS 20000
static void *hblocks[HEAP_BLOCKS];

/* Bun's test_profiler_heap_destroy, adapted: 20000 blocks (sizes 8..2055) in a new heap, every one filled
 * with {1, ...}, rate 4096 (thousands sampled); a third freed with mi_free first.  The destroy reports
 * exactly the sampled blocks still in the heap, each once: frees == samples, every freed pointer one a
 * sample had, in-use back to exactly zero. */
START_TEST(mi_api_heap_destroy_reports_sampled)
{
  mi_heap_t *h = mi_heap_new();
  ck_assert_ptr_nonnull(h);
  observe();
  start_seeded(4096, SEED);
  uint64_t x = 0x9e3779b97f4a7c15ull;
  for (int i = 0; i < HEAP_BLOCKS; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    size_t n = 8 + (size_t)(x % 2048);
    uint64_t *b = mi_heap_malloc(h, n);
    for (size_t k = 0; k < n / 8; k++) b[k] = 1;
    hblocks[i] = b;
  }
  for (int i = 0; i < HEAP_BLOCKS; i += 3) mi_free(hblocks[i]);
  unsigned frees_before = freed_n;
  mi_heap_destroy(h);
  unsigned frees_at_destroy = freed_n - frees_before;
  mi_prof_stats_t st = stats_or_abort();
  mi_prof_stop();
  unobserve();
  ck_assert_uint_gt(seen_n, 1000);
  ck_assert_uint_lt(seen_n, SEEN_MAX);
  ck_assert_uint_gt(frees_at_destroy, 0);
  ck_assert_uint_eq(freed_n, seen_n);
  ck_assert_uint_eq(freed_unknown, 0);
  ck_assert_uint_eq(st.inuse_bytes, 0);
  ck_assert_uint_eq(st.live_samples, 0);
}
END_TEST

/* Bun's test_profiler_heap_destroy_recycled, adapted: 400 sampled blocks of a heap freed, then the heap
 * fills with unsampled blocks whose first word is 1 (sampling stopped: rate 2^40); the destroy reports
 * nothing for them. */
START_TEST(mi_api_heap_destroy_recycled)
{
  mi_heap_t *h = mi_heap_new();
  ck_assert_ptr_nonnull(h);
  observe();
  start_seeded(1, SEED);
  for (int i = 0; i < 400; i++) hblocks[i] = mi_heap_malloc(h, 64);
  for (int i = 0; i < 400; i++) mi_free(hblocks[i]);
  mi_prof_stop();
  unsigned seen = seen_n, freed = freed_n;
  start_seeded((size_t)1 << 40, SEED);
  for (int i = 0; i < 4000; i++) *(uint64_t *)(hblocks[i] = mi_heap_malloc(h, 64)) = 1;
  mi_heap_destroy(h);
  unsigned freed_after = freed_n;
  mi_prof_stop();
  unobserve();
  ck_assert_uint_eq(seen, 400);
  ck_assert_uint_eq(freed, 400);
  ck_assert_uint_eq(freed_after, 400);
}
END_TEST

/* mi_heap_delete moves the heap's blocks to the backing heap: they stay valid, mi_free frees them (the
 * sampled ones reported once), and a sampled one belongs to the backing heap now. */
START_TEST(mi_api_heap_delete_then_free)
{
  mi_heap_t *h = mi_heap_new();
  ck_assert_ptr_nonnull(h);
  observe();
  start_seeded(1, SEED);
  for (int i = 0; i < 100; i++) hblocks[i] = mi_heap_malloc(h, 100);
  bool in_h = mi_heap_contains_block(h, hblocks[0]);
  mi_heap_delete(h);
  bool in_backing = mi_heap_contains_block(mi_heap_get_backing(), hblocks[0]);
  for (int i = 0; i < 100; i++) mi_free(hblocks[i]);
  mi_prof_stats_t st = stats_or_abort();
  mi_prof_stop();
  unobserve();
  ck_assert(in_h);
  ck_assert(in_backing);
  ck_assert_uint_eq(seen_n, 100);
  ck_assert_uint_eq(freed_n, 100);
  ck_assert_uint_eq(st.inuse_bytes, 0);
}
END_TEST

static void *free_all(void *arg)
{
  for (int i = 0; i < (int)(uintptr_t)arg; i++) mi_free(hblocks[i]);
  return NULL;
}

/* Sampled blocks of a heap freed on another thread: reported at once, in-use zero. */
START_TEST(mi_api_heap_cross_thread_free)
{
  mi_heap_t *h = mi_heap_new();
  ck_assert_ptr_nonnull(h);
  observe();
  start_seeded(1, SEED);
  for (int i = 0; i < 300; i++) hblocks[i] = mi_heap_malloc(h, 256);
  pthread_t t;
  pthread_create(&t, NULL, free_all, (void *)(uintptr_t)300);
  pthread_join(t, NULL);
  mi_prof_stats_t st = stats_or_abort();
  mi_prof_stop();
  unobserve();
  mi_heap_destroy(h);
  /* pthread_create allocates too (sampled at rate 1): count the heap's blocks by their size. */
  unsigned heap_samples = 0;
  for (unsigned i = 0; i < seen_n && i < SEEN_MAX; i++) heap_samples += seen_size[i] == 256;
  ck_assert_uint_eq(heap_samples, 300);
  ck_assert_uint_eq(freed_256, 300);
  ck_assert_uint_le(st.live_samples, seen_n - 300);   /* only the thread's own allocations may stay */
}
END_TEST

/* Visits and ownership: the sampled blocks of a heap are visited once each, as areas of one block of
 * their usable size; contains_block and check_owned say yes for their heap and no for another. */
typedef struct visit_count_s {
  void *want[64];
  unsigned found[64], areas, blocks;
} visit_count_t;

static bool count_visit(const mi_heap_t *heap, const mi_heap_area_t *area, void *block, size_t size, void *arg)
{
  (void)heap, (void)size;
  visit_count_t *v = arg;
  if (block == NULL) {
    v->areas++;
    return true;
  }
  v->blocks++;
  for (int i = 0; i < 64; i++) v->found[i] += block == v->want[i] && area->block_size >= 500;
  return true;
}

START_TEST(mi_api_heap_visit_and_owned)
{
  mi_heap_t *h = mi_heap_new(), *other = mi_heap_new();
  visit_count_t v = {0};
  start_seeded(1, SEED);
  for (int i = 0; i < 64; i++) v.want[i] = mi_heap_malloc(h, 500);
  mi_prof_stop();
  bool ok = mi_heap_visit_blocks(h, true, count_visit, &v);
  bool contains = mi_heap_contains_block(h, v.want[7]), contains_other = mi_heap_contains_block(other, v.want[7]);
  bool owned = mi_heap_check_owned(h, v.want[9]), owned_other = mi_heap_check_owned(other, v.want[9]);
  bool region = mi_is_in_heap_region(v.want[3]);
  mi_heap_destroy(h);
  mi_heap_destroy(other);
  ck_assert(ok);
  for (int i = 0; i < 64; i++) ck_assert_uint_eq(v.found[i], 1);
  ck_assert(contains && !contains_other && owned && !owned_other && region);
}
END_TEST

/* mimalloc's count of the threads it has set up: the "total" column of the "threads" line of
 * mi_stats_print_out (-1 when it cannot be read). */
static void threads_line(const char *msg, void *arg)
{
  long long peak, total;
  const char *t = strstr(msg, "threads:");
  if (t != NULL && sscanf(t, "threads: %lld %lld", &peak, &total) == 2 && strchr(t, 'K') == NULL)
    *(long long *)arg = total;
}

static long long threads_set_up(void)
{
  long long total = -1;
  mi_stats_print_out(threads_line, &total);
  return total;
}

static void *heap_left_behind(void *arg)
{
  mi_heap_t *h = mi_heap_new();
  void *p = h != NULL ? mi_heap_malloc(h, 1000) : NULL;
  __asm__ volatile("" ::"r"(p));
  return arg;
}

/* 100 threads that each make a heap, allocate from it and exit without deleting it: mimalloc deletes
 * the heap in its own teardown of the thread, through mi_heap_delete, which is ours.  mimalloc sets each
 * thread up once, as without the profiler (plain libmimalloc counts 100 here), stopped and sampling at
 * rate 1 (every block sampled, each heap's records moved to the backing heap). */
START_TEST(mi_api_heap_thread_exit_sets_up_once)
{
  long long counts[2];
  for (int sampling = 0; sampling < 2; sampling++) {
    if (sampling) start_seeded(1, SEED);
    long long before = threads_set_up();
    for (int i = 0; i < 100; i++) {
      pthread_t t;
      if (pthread_create(&t, NULL, heap_left_behind, NULL) != 0 || pthread_join(t, NULL) != 0) abort();
    }
    long long after = threads_set_up();
    if (sampling) mi_prof_stop();
    counts[sampling] = before < 0 || after < 0 ? -1 : after - before;
  }
  ck_assert_int_eq(counts[0], 100);
  ck_assert_int_eq(counts[1], 100);
}
END_TEST

/* The estimates through mi_heap_malloc are malloc's: 40000 live blocks of 1000 bytes in a heap at rate
 * 65536 (p = 0.01514): Var = N 1000^2 (1-p)/p, 4 sd = 6.4% of 40 MB; and in-use exactly 0 after the
 * destroy. */
START_TEST(mi_api_heap_unbiased)
{
  mi_heap_t *h = mi_heap_new();
  start_seeded(65536, SEED);
  for (int i = 0; i < HEAP_BLOCKS; i++) hblocks[i] = mi_heap_malloc(h, 1000);
  for (int i = 0; i < HEAP_BLOCKS; i++) hblocks[i] = mi_malloc(1000);
  mi_prof_stats_t live = stats_or_abort();
  mi_heap_destroy(h);
  for (int i = 0; i < HEAP_BLOCKS; i++) mi_free(hblocks[i]);
  mi_prof_stats_t after = stats_or_abort();
  mi_prof_stop();
  ck_assert_within_4sd("in-use bytes", live.inuse_bytes, 2.0 * HEAP_BLOCKS * 1000, var_bytes(2 * HEAP_BLOCKS, 1000, 65536));
  ck_assert_uint_eq(after.inuse_bytes, 0);
  ck_assert_uint_eq(after.inuse_objects, 0);
}
END_TEST

Suite *mi_api_suite(void)
{
  Suite *s = suite_create("mi_api");
  TCase *tc = tcase_create("mi_api");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, mi_api_every_entry_point_sampled);
  tcase_add_test(tc, mi_api_charged_once);
  tcase_add_test(tc, mi_api_realloc_charged_once);
  tcase_add_test(tc, mi_api_failures_as_mimalloc);
  tcase_add_test(tc, mi_api_offset_off_slice_dropped);
  tcase_add_test(tc, mi_api_realloc_small_alignment);
  tcase_add_test(tc, mi_api_heap_destroy_reports_sampled);
  tcase_add_test(tc, mi_api_heap_destroy_recycled);
  tcase_add_test(tc, mi_api_heap_delete_then_free);
  tcase_add_test(tc, mi_api_heap_cross_thread_free);
  tcase_add_test(tc, mi_api_heap_visit_and_owned);
  tcase_add_test(tc, mi_api_heap_thread_exit_sets_up_once);
  tcase_add_test(tc, mi_api_heap_unbiased);
  suite_add_tcase(s, tc);
  return s;
}

#endif
