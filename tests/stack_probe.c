/* stack_probe.c - a program linked with the library and run by tests/test_stacks.c in a subprocess, so
 * that MIMALLOC_PROF_UNWIND, _BT_MAX, _MAX_BYTES and _ACCUM (read once, at load) can be chosen.  Built
 * with frame pointers, -g and -export-dynamic, so that dladdr() can name the functions below (they are
 * global for that reason).  It allocates through known call chains, looks at what mi_prof_visit()
 * reports and prints "key value" lines on stdout; stderr belongs to the library's warnings.  Something
 * the test cannot see going wrong prints "stack_probe: ..." on stderr and exits with status 1.
 *
 * Modes (argv[1]):
 *   chain [thread]      rate 1; a -> b -> c -> malloc (on a new thread with "thread"); the stack whose
 *                       first frame is in c, by name
 *   coroutine           rate 1; malloc in a function running on a makecontext() stack of its own
 *   own N               rate 1; N allocations through every malloc-family entry point (and operator new)
 *                       from one function; where the frames of every visited stack lie
 *   deep LEVELS [LEAF]  rate 1; malloc (or LEAF: realloc moving a block, or new_aligned) at the bottom
 *                       of LEVELS nested calls; that stack's depth (run with MIMALLOC_PROF_ACCUM=0:
 *                       realloc's first block leaves an idle stack that starts there too)
 *   distinct N LEVELS [THREADS]
 *                       rate 1; N mallocs of 64 bytes, each through its own path of LEVELS+1 nested
 *                       calls chosen among 16 functions (so up to 16^(LEVELS+1) distinct stacks), each
 *                       freed at once, by each of THREADS threads at once (default: the main thread
 *                       alone); the samples and drops
 *   sums                rate 4096; allocations from three sites, then frees and reallocs; stats against
 *                       the visitor's sums, before and after freeing everything
 *   dlloop MODULE N R   rate R; one thread allocates (and every 64 allocations dlopens, runs and
 *                       dlcloses MODULE) while the main thread dlopens MODULE, runs it and dlcloses it
 *                       N times
 */
#define _GNU_SOURCE 1   /* dladdr, Dl_info, RTLD_DEFAULT */

#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>
#include <unistd.h>

#include "mimalloc-prof.h"

#define PROBE_NAME "stack_probe"   /* die()'s prefix (probe_util.h) */
#include "probe_util.h"

#define PROBE_SEED 0x5eed5eedull
#define NOINLINE __attribute__((noinline, noclone))

#include "cxx_names.h"        /* operator_new...: the library's C++ operators, callable from C */
void _ZdlPv(void *p);
void _ZdaPv(void *p);
void _ZdlPvSt11align_val_t(void *p, size_t alignment);

/* Written after each call below, so no call is a tail call (its caller's frame stays on the stack)
 * and no two functions have the same body (identical code folding would merge them). */
volatile unsigned probe_salt;
void *volatile probe_keep;

static void start_rate(size_t rate)
{
  if (!mi_prof_start_seeded(rate, PROBE_SEED)) die("mi_prof_start_seeded failed");
}

/* ---------------------------------------------------------------------------------------------------
   Where a return address lies
--------------------------------------------------------------------------------------------------- */

typedef enum { IN_PROBE, IN_LIB, IN_OTHER } where_t;

static Dl_info lib_info, probe_info;   /* the library's object and this program's */

static void where_init(void)
{
  void *lib_fn = dlsym(RTLD_DEFAULT, "mi_prof_version");   /* the definition, never a PLT stub */
  if (lib_fn == NULL || dladdr(lib_fn, &lib_info) == 0 || lib_info.dli_fname == NULL)
    die("cannot locate the library with dladdr");
  if (dladdr((void *)where_init, &probe_info) == 0) die("cannot locate the program with dladdr");
}

/* A return address is looked up one byte back: inside the call instruction, so a call that ends its
 * function is not taken for the start of the next one. */
static where_t where(void *const pc, const char **name)
{
  Dl_info info;
  if (name != NULL) *name = "?";
  if (dladdr((const char *)pc - 1, &info) == 0) return IN_OTHER;
  if (name != NULL && info.dli_sname != NULL) *name = info.dli_sname;
  if (info.dli_fbase == lib_info.dli_fbase || strcmp(info.dli_fname, lib_info.dli_fname) == 0) return IN_LIB;
  if (info.dli_fbase == probe_info.dli_fbase) return IN_PROBE;
  return IN_OTHER;
}

static size_t lib_frames(void *const *frames, size_t depth)
{
  size_t n = 0;
  for (size_t i = 0; i < depth; i++) n += where(frames[i], NULL) == IN_LIB;
  return n;
}

/* ---------------------------------------------------------------------------------------------------
   chain: a -> b -> c -> malloc
--------------------------------------------------------------------------------------------------- */

NOINLINE void *probe_chain_c(size_t size)
{
  void *p = malloc(size);
  probe_salt += 3;
  return p;
}

NOINLINE void *probe_chain_b(size_t size)
{
  void *p = probe_chain_c(size);
  probe_salt += 2;
  return p;
}

NOINLINE void *probe_chain_a(size_t size)
{
  void *p = probe_chain_b(size);
  probe_salt += 1;
  return p;
}

#define MAX_FRAMES 256

typedef struct found_s {
  size_t stacks, lib_frames, matches;
  size_t depth;                    /* of the (last) stack whose first frame is in `leaf` */
  void *frames[MAX_FRAMES];
  const char *leaf;                /* function name to look for */
} found_t;

static bool find_leaf(void *const *frames, size_t depth, const mi_prof_stack_counts_t *counts, void *arg)
{
  found_t *f = arg;
  const char *name;
  f->stacks++;
  f->lib_frames += lib_frames(frames, depth);
  if (depth > 0 && counts->inuse_bytes != 0 && where(frames[0], &name) == IN_PROBE &&
      strcmp(name, f->leaf) == 0) {
    f->matches++;
    f->depth = depth;
    memcpy(f->frames, frames, (depth < MAX_FRAMES ? depth : MAX_FRAMES) * sizeof(void *));
  }
  return true;
}

static void visit_for(found_t *f, const char *leaf)
{
  memset(f, 0, sizeof *f);
  f->leaf = leaf;
  if (!mi_prof_visit(find_leaf, f)) die("mi_prof_visit failed");
}

static void *chain_thread(void *arg)
{
  (void)arg;
  probe_keep = probe_chain_a(100);
  return NULL;
}

static int mode_chain(int argc, char **argv)
{
  bool threaded = argc > 2 && strcmp(argv[2], "thread") == 0;
  pthread_t th;
  start_rate(1);                   /* rate 1: every allocation of 38 bytes or more is sampled */
  if (!threaded) probe_keep = probe_chain_a(100);
  else if (pthread_create(&th, NULL, chain_thread, NULL) != 0 || pthread_join(th, NULL) != 0)
    die("cannot run the chain on a thread");
  found_t f;
  visit_for(&f, "probe_chain_c");
  if (!mi_prof_stop()) die("mi_prof_stop failed");
  size_t program = 0;              /* leading frames in this program */
  while (program < f.depth && where(f.frames[program], NULL) == IN_PROBE) program++;
  printf("stacks %zu\nlib_frames %zu\nchain_found %zu\nchain_depth %zu\nchain_program_frames %zu\n",
         f.stacks, f.lib_frames, f.matches, f.depth, program);
  printf("chain_names ");
  for (size_t i = 0; i < f.depth && i < MAX_FRAMES; i++) {
    const char *name;
    where(f.frames[i], &name);
    printf("%s%s", i ? "," : "", name);
  }
  printf("\n");
  free(probe_keep);
  return 0;
}

/* ---------------------------------------------------------------------------------------------------
   coroutine: a stack that is not the thread's
--------------------------------------------------------------------------------------------------- */

static ucontext_t co_main, co_ctx;

NOINLINE void probe_co_body(void)
{
  probe_keep = malloc(100);
  probe_salt += 7;
}

static int mode_coroutine(void)
{
  size_t size = 256 << 10;
  void *stack = malloc(size);
  if (stack == NULL || getcontext(&co_ctx) != 0) die("cannot set up the coroutine");
  co_ctx.uc_stack.ss_sp = stack;
  co_ctx.uc_stack.ss_size = size;
  co_ctx.uc_link = &co_main;
  makecontext(&co_ctx, probe_co_body, 0);
  start_rate(1);
  if (swapcontext(&co_main, &co_ctx) != 0) die("swapcontext failed");
  mi_prof_stats_t st = stats_now();
  found_t f;
  visit_for(&f, "probe_co_body");
  if (!mi_prof_stop()) die("mi_prof_stop failed");
  printf("co_found %zu\nco_depth %zu\nlib_frames %zu\ndropped_unwind %" PRIu64 "\n", f.matches, f.depth,
         f.lib_frames, st.dropped[MI_PROF_DROP_UNWIND]);
  free(probe_keep);
  free(stack);
  return 0;
}

/* ---------------------------------------------------------------------------------------------------
   own: every entry point
--------------------------------------------------------------------------------------------------- */

enum { OWN_KINDS = 14 };

typedef struct own_block_s {
  void *p;
  int kind;
} own_block_t;

/* The allocation of kind `kind`, always from this function (so the first frame of its stack is here). */
NOINLINE void *probe_own_alloc(int kind)
{
  void *p = NULL, *q;
  switch (kind) {
  case 0: p = malloc(100); break;
  case 1: p = calloc(3, 40); break;
  case 2: p = realloc(NULL, 200); break;
  case 3:                          /* a sampled block moved by realloc: sampled again */
    q = malloc(64);
    p = realloc(q, 4096);
    if (p == NULL) free(q);
    break;
  case 4:                          /* a sampled block shrunk in place (a call site of its own: gcc merges
                                    * identical realloc calls, and kind 3's would then be this one's) */
    q = malloc(1000);
    p = reallocarray(q, 900, 1);
    if (p == NULL) free(q);
    break;
  case 5: p = aligned_alloc(64, 256); break;
  case 6: if (posix_memalign(&p, 128, 300) != 0) p = NULL; break;
  case 7: p = memalign(256, 512); break;
  case 8: p = valloc(100); break;
  case 9: p = reallocarray(NULL, 10, 30); break;
  case 10: p = operator_new(48); break;
  case 11: p = operator_new_array(480); break;
  case 12: p = operator_new_aligned(96, 64); break;
  case 13: p = pvalloc(100); break;
  }
  probe_salt += (unsigned)kind + 10;
  return p;
}

static void own_free(own_block_t *b)
{
  switch (b->kind) {
  case 10: _ZdlPv(b->p); break;
  case 11: _ZdaPv(b->p); break;
  case 12: _ZdlPvSt11align_val_t(b->p, 64); break;
  default: free(b->p); break;
  }
}

typedef struct own_scan_s {
  size_t stacks, frames, lib_frames, first_not_probe, min_depth;
} own_scan_t;

static bool own_visitor(void *const *frames, size_t depth, const mi_prof_stack_counts_t *counts, void *arg)
{
  (void)counts;
  own_scan_t *s = arg;
  s->stacks++;
  s->frames += depth;
  s->lib_frames += lib_frames(frames, depth);
  const char *name;
  if (depth == 0 || where(frames[0], &name) != IN_PROBE || strcmp(name, "probe_own_alloc") != 0)
    s->first_not_probe++;
  if (depth < s->min_depth) s->min_depth = depth;
  return true;
}

static int mode_own(int argc, char **argv)
{
  if (argc < 3) die("usage: own N");
  size_t n = arg_size(argv[2]);
  own_block_t *b = calloc(n, sizeof *b);
  if (b == NULL) die("calloc failed");
  start_rate(1);
  for (size_t i = 0; i < n; i++) {
    b[i].kind = (int)(i % OWN_KINDS);
    b[i].p = probe_own_alloc(b[i].kind);
    if (b[i].p == NULL) die("allocation failed");
  }
  own_scan_t s = {.min_depth = SIZE_MAX};
  if (!mi_prof_visit(own_visitor, &s)) die("mi_prof_visit failed");
  mi_prof_stats_t st = stats_now();
  for (size_t i = 0; i < n; i++) own_free(&b[i]);
  free(b);
  if (!mi_prof_stop()) die("mi_prof_stop failed");
  printf("stacks %zu\nframes %zu\nlib_frames %zu\nfirst_not_probe %zu\nmin_depth %zu\n", s.stacks, s.frames,
         s.lib_frames, s.first_not_probe, s.min_depth);
  printf("samples %" PRIu64 "\nlive_samples %" PRIu64 "\ndropped_unwind %" PRIu64 "\n", st.samples,
         st.live_samples, st.dropped[MI_PROF_DROP_UNWIND]);
  return 0;
}

/* ---------------------------------------------------------------------------------------------------
   deep: truncation at MIMALLOC_PROF_BT_MAX
--------------------------------------------------------------------------------------------------- */

static int deep_leaf;              /* what probe_recurse allocates at the bottom: see leaf_names */
static const char *const leaf_names[] = {"malloc", "realloc", "new_aligned"};

/* The bottom allocation; inlined into probe_recurse (static, -fno-inline spares always_inline). */
static inline __attribute__((always_inline)) void *deep_alloc(void)
{
  if (deep_leaf == 1) {            /* a sampled block moved by realloc: sampled again, in the library */
    void *q = malloc(64);
    void *p = realloc(q, 8192);
    if (p == NULL) free(q);
    return p;
  }
  if (deep_leaf == 2) return operator_new_aligned(100, 64);
  return malloc(100);
}

NOINLINE void *probe_recurse(unsigned n)
{
  void *p = n == 0 ? deep_alloc() : probe_recurse(n - 1);
  probe_salt += n;
  return p;
}

static int mode_deep(int argc, char **argv)
{
  if (argc < 3) die("usage: deep LEVELS");
  unsigned levels = (unsigned)arg_size(argv[2]);
  for (int k = 0; argc > 3 && k < 3; k++) {
    if (strcmp(argv[3], leaf_names[k]) == 0) deep_leaf = k;
  }
  start_rate(1);
  probe_keep = probe_recurse(levels);
  found_t f;
  visit_for(&f, "probe_recurse");
  if (!mi_prof_stop()) die("mi_prof_stop failed");
  size_t recursive = 0;            /* frames inside probe_recurse */
  for (size_t i = 0; i < f.depth && i < MAX_FRAMES; i++) {
    const char *name;
    recursive += where(f.frames[i], &name) == IN_PROBE && strcmp(name, "probe_recurse") == 0;
  }
  printf("stacks %zu\nlib_frames %zu\ndeep_found %zu\ndeep_depth %zu\ndeep_recurse_frames %zu\n", f.stacks,
         f.lib_frames, f.matches, f.depth, recursive);
  if (deep_leaf == 2) _ZdlPvSt11align_val_t(probe_keep, 64);
  else free(probe_keep);
  return 0;
}

/* Sums over a visit (distinct, sums and dlloop use them). */
typedef struct sums_s {
  size_t stacks, idle_stacks;      /* idle: nothing in use, nor at the peak */
  uint64_t inuse_objects, inuse_bytes, alloc_objects, alloc_bytes, peak_objects, peak_bytes;
} sums_t;

static bool sum_visitor(void *const *frames, size_t depth, const mi_prof_stack_counts_t *c, void *arg)
{
  (void)frames, (void)depth;
  sums_t *s = arg;
  s->stacks++;
  s->idle_stacks += c->inuse_objects == 0 && c->inuse_bytes == 0 && c->peak_bytes == 0;
  s->peak_objects += c->peak_objects;
  s->peak_bytes += c->peak_bytes;
  s->inuse_objects += c->inuse_objects;
  s->inuse_bytes += c->inuse_bytes;
  s->alloc_objects += c->alloc_objects;
  s->alloc_bytes += c->alloc_bytes;
  return true;
}

/* ---------------------------------------------------------------------------------------------------
   distinct: many different stacks
--------------------------------------------------------------------------------------------------- */

typedef void *walker_fn(uint64_t path, unsigned n);
extern walker_fn *const probe_walkers[16];

/* Walker k calls walker (path % 16) until n reaches 0, then mallocs: the path's base-16 digits choose
 * the functions on the stack, so distinct paths give distinct return addresses. */
#define WALKER(k)                                                                         \
  NOINLINE void *probe_walk##k(uint64_t path, unsigned n)                                  \
  {                                                                                       \
    void *p = n == 0 ? malloc(64) : probe_walkers[path % 16](path / 16, n - 1);           \
    probe_salt += k + 100;                                                                \
    return p;                                                                             \
  }
WALKER(0) WALKER(1) WALKER(2) WALKER(3) WALKER(4) WALKER(5) WALKER(6) WALKER(7)
WALKER(8) WALKER(9) WALKER(10) WALKER(11) WALKER(12) WALKER(13) WALKER(14) WALKER(15)
#undef WALKER

walker_fn *const probe_walkers[16] = {
  probe_walk0, probe_walk1, probe_walk2, probe_walk3, probe_walk4, probe_walk5, probe_walk6, probe_walk7,
  probe_walk8, probe_walk9, probe_walk10, probe_walk11, probe_walk12, probe_walk13, probe_walk14,
  probe_walk15};

typedef struct distinct_s {
  size_t n, failed, bad;
  unsigned levels;
  uint64_t peak;                   /* the most profiler memory seen */
} distinct_t;

static void *distinct_run(void *arg)
{
  distinct_t *d = arg;
  for (size_t i = 0; i < d->n; i++) {
    unsigned char *p = probe_walkers[i % 16](i / 16, d->levels);
    if (p == NULL) {
      d->failed++;
      continue;
    }
    memset(p, (int)(i & 0xff), 64);
    d->bad += p[0] != (unsigned char)(i & 0xff) || p[63] != (unsigned char)(i & 0xff);
    free(p);
    if ((i & 4095) == 0) {
      mi_prof_stats_t st = stats_now();
      if (st.profiler_bytes > d->peak) d->peak = st.profiler_bytes;
    }
  }
  return NULL;
}

static int mode_distinct(int argc, char **argv)
{
  if (argc < 4) die("usage: distinct N LEVELS [THREADS]");
  size_t threads = argc > 4 ? arg_size(argv[4]) : 0, runs = threads ? threads : 1, failed = 0, bad = 0;
  distinct_t d[16];
  pthread_t t[16];
  if (threads > 16) die("distinct: at most 16 threads");
  for (size_t k = 0; k < runs; k++)
    d[k] = (distinct_t){.n = arg_size(argv[2]), .levels = (unsigned)arg_size(argv[3])};
  uint64_t peak = 0;
  start_rate(1);                   /* 64-byte requests: every one is sampled (intervals are <= 38) */
  if (threads == 0) distinct_run(&d[0]);
  for (size_t k = 0; k < threads; k++)
    if (pthread_create(&t[k], NULL, distinct_run, &d[k]) != 0) die("pthread_create failed");
  for (size_t k = 0; k < runs; k++) {
    if (threads != 0 && pthread_join(t[k], NULL) != 0) die("pthread_join failed");
    failed += d[k].failed, bad += d[k].bad;
    if (d[k].peak > peak) peak = d[k].peak;
  }
  mi_prof_stats_t st = stats_now();
  if (st.profiler_bytes > peak) peak = st.profiler_bytes;
  uint64_t dropped = 0;
  for (int r = 0; r < MI_PROF_DROP_REASONS; r++) dropped += st.dropped[r];
  printf("failed %zu\nbad_blocks %zu\nsamples %" PRIu64 "\ndropped_total %" PRIu64 "\n", failed, bad,
         st.samples, dropped);
  printf("dropped_memory %" PRIu64 "\ndropped_stacks %" PRIu64 "\ndropped_unwind %" PRIu64 "\n",
         st.dropped[MI_PROF_DROP_MEMORY], st.dropped[MI_PROF_DROP_STACKS], st.dropped[MI_PROF_DROP_UNWIND]);
  printf("profiler_bytes_peak %" PRIu64 "\nprofiler_bytes_max %" PRIu64 "\n", peak, st.profiler_bytes_max);
  sums_t s = {0};                  /* the budget keeps room for it (lib/pmem.c) */
  errno = 0;
  bool visited = mi_prof_visit(sum_visitor, &s);
  printf("visit_ok %d\nvisit_errno %d\nvisit_stacks %zu\n", visited ? 1 : 0, visited ? 0 : errno, s.stacks);
  if (!mi_prof_stop()) die("mi_prof_stop failed");
  return 0;
}

/* ---------------------------------------------------------------------------------------------------
   sums: stats against the visitor
--------------------------------------------------------------------------------------------------- */

/* Stats first, then the visit: nothing allocates in between, so both see the same samples. */
static void print_sums(const char *prefix)
{
  mi_prof_stats_t st = stats_now();
  sums_t s = {0};
  if (!mi_prof_visit(sum_visitor, &s)) die("mi_prof_visit failed");
  printf("%sstacks %zu\n%sidle_stacks %zu\n", prefix, s.stacks, prefix, s.idle_stacks);
  printf("%ssum_inuse_bytes %" PRIu64 "\n%sstat_inuse_bytes %" PRIu64 "\n", prefix, s.inuse_bytes, prefix,
         st.inuse_bytes);
  printf("%ssum_alloc_bytes %" PRIu64 "\n%sstat_alloc_bytes %" PRIu64 "\n", prefix, s.alloc_bytes, prefix,
         st.alloc_bytes);
  printf("%ssum_inuse_objects %" PRIu64 "\n%sstat_inuse_objects %" PRIu64 "\n", prefix, s.inuse_objects,
         prefix, st.inuse_objects);
  printf("%ssum_alloc_objects %" PRIu64 "\n%sstat_alloc_objects %" PRIu64 "\n", prefix, s.alloc_objects,
         prefix, st.alloc_objects);
  printf("%ssum_peak_bytes %" PRIu64 "\n%sstat_peak_bytes %" PRIu64 "\n", prefix, s.peak_bytes, prefix,
         st.peak_inuse_bytes);
  printf("%ssum_peak_objects %" PRIu64 "\n%sstat_peak_objects %" PRIu64 "\n", prefix, s.peak_objects, prefix,
         st.peak_inuse_objects);
  printf("%ssamples %" PRIu64 "\n", prefix, st.samples);
}

#define SUMS_A 3000
#define SUMS_B 2000
#define SUMS_C 2000

NOINLINE void *probe_site_a(void) { void *p = malloc(256); probe_salt += 21; return p; }
NOINLINE void *probe_site_b(void) { void *p = calloc(1, 1000); probe_salt += 22; return p; }
NOINLINE void *probe_site_c(void) { void *p = malloc(256); probe_salt += 23; return p; }

static int mode_sums(void)
{
  static void *a[SUMS_A], *b[SUMS_B], *c[SUMS_C];
  printf("sums\n");                /* stdout's buffer exists before sampling starts */
  start_rate(4096);
  for (size_t i = 0; i < SUMS_A; i++) a[i] = probe_site_a();
  for (size_t i = 0; i < SUMS_B; i++) b[i] = probe_site_b();
  for (size_t i = 0; i < SUMS_C; i++) c[i] = probe_site_c();
  for (size_t i = 0; i < SUMS_A; i += 2) {
    free(a[i]);
    a[i] = NULL;
  }
  for (size_t i = 0; i < SUMS_C; i++) free(c[i]);   /* site c: nothing left in use, nor at the peak */
  for (size_t i = 0; i < SUMS_B; i++) {   /* a half moves (grows: the peak), a quarter shrinks in place */
    size_t size = i % 2 == 0 ? 4000 : i % 4 == 1 ? 600 : 1000;
    void *q = realloc(b[i], size);
    if (q == NULL) die("realloc failed");
    b[i] = q;
  }
  fflush(stdout);
  print_sums("");
  for (size_t i = 0; i < SUMS_A; i++) free(a[i]);
  for (size_t i = 0; i < SUMS_B; i++) free(b[i]);
  print_sums("final_");
  if (!mi_prof_reset()) die("mi_prof_reset failed");
  print_sums("reset_");
  if (!mi_prof_stop()) die("mi_prof_stop failed");
  return 0;
}

/* ---------------------------------------------------------------------------------------------------
   dlloop: sampling while another thread loads and unloads a module
--------------------------------------------------------------------------------------------------- */

static int dl_done;                /* atomic: the main thread finished its loop */
static const char *dl_path;

/* Opens the module, runs it (its allocations may be sampled: stacks through the module's code) and
 * closes it; both threads do this, so the module is unloaded whenever neither holds it. */
static long dl_cycle(unsigned count)
{
  void *h = dlopen(dl_path, RTLD_NOW | RTLD_LOCAL);
  if (h == NULL) {
    fprintf(stderr, "stack_probe: dlopen: %s\n", dlerror());
    exit(1);
  }
  long (*run)(unsigned) = (long (*)(unsigned))dlsym(h, "dl_module_run");
  if (run == NULL) die("dlsym(dl_module_run) failed");
  long sum = run(count);
  if (dlclose(h) != 0) die("dlclose failed");
  return sum;
}

static void *dl_allocator(void *arg)
{
  size_t *allocations = arg;
  uint64_t x = 0x9e3779b97f4a7c15ull;
  for (size_t i = 0; !__atomic_load_n(&dl_done, __ATOMIC_ACQUIRE); i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    unsigned char *p = malloc(64 + (size_t)(x % 1024));
    if (p == NULL) die("malloc failed in the allocating thread");
    p[0] = 1;
    free(p);
    if (i % 4096 == 0) {           /* visits too, between the loads */
      sums_t s = {0};
      if (!mi_prof_visit(sum_visitor, &s) && errno != ENOMEM) die("mi_prof_visit failed");
    }
    if (i % 64 == 0 && dl_cycle(2) != 1) die("dl_module_run gave a wrong sum in the allocating thread");
    ++*allocations;
  }
  return NULL;
}

static int mode_dlloop(int argc, char **argv)
{
  if (argc < 5) die("usage: dlloop MODULE N RATE");
  dl_path = argv[2];
  size_t n = arg_size(argv[3]), rate = arg_size(argv[4]), allocations = 0;
  long sum = 0;
  start_rate(rate);
  pthread_t th;
  if (pthread_create(&th, NULL, dl_allocator, &allocations) != 0) die("pthread_create failed");
  for (size_t i = 0; i < n; i++) sum += dl_cycle(8);
  __atomic_store_n(&dl_done, 1, __ATOMIC_RELEASE);
  if (pthread_join(th, NULL) != 0) die("pthread_join failed");
  mi_prof_stats_t st = stats_now();
  if (!mi_prof_stop()) die("mi_prof_stop failed");
  printf("iterations %zu\nmodule_sum %ld\nallocations %zu\nsamples %" PRIu64 "\ndropped_unwind %" PRIu64 "\n",
         n, sum, allocations, st.samples, st.dropped[MI_PROF_DROP_UNWIND]);
  return 0;
}

/* junkfp: malloc called with a frame pointer that holds junk near 2^64 (code built without frame
 * pointers uses rbp as an ordinary register).  The fp walk must stop, not fault: `at + 16` once wrapped
 * to 0 and let the read through. */
static int mode_junkfp(void)
{
#if defined(__x86_64__)
  if (!mi_prof_start_seeded(1, 1)) die("mi_prof_start failed");
  size_t got = 0;
  for (int i = 0; i < 100; i++) {
    void *p;
    __asm__ volatile("push %%rbp\n\t"
                     "sub $8, %%rsp\n\t"           /* keep the call 16-byte aligned */
                     "mov $-16, %%rbp\n\t"
                     "call malloc@PLT\n\t"
                     "add $8, %%rsp\n\t"
                     "pop %%rbp"
                     : "=a"(p)
                     : "D"((size_t)100)
                     : "rcx", "rdx", "rsi", "r8", "r9", "r10", "r11", "memory", "cc");
    got += p != NULL;
    free(p);
  }
  mi_prof_stop();
  printf("allocations %zu\n", got);
#else
  printf("allocations 100\n");
#endif
  return 0;
}

int main(int argc, char **argv)
{
  if (argc < 2) die("usage: stack_probe MODE ...");
  where_init();
  const char *mode = argv[1];
  if (strcmp(mode, "chain") == 0) return mode_chain(argc, argv);
  if (strcmp(mode, "coroutine") == 0) return mode_coroutine();
  if (strcmp(mode, "junkfp") == 0) return mode_junkfp();
  if (strcmp(mode, "own") == 0) return mode_own(argc, argv);
  if (strcmp(mode, "deep") == 0) return mode_deep(argc, argv);
  if (strcmp(mode, "distinct") == 0) return mode_distinct(argc, argv);
  if (strcmp(mode, "sums") == 0) return mode_sums();
  if (strcmp(mode, "dlloop") == 0) return mode_dlloop(argc, argv);
  die("unknown mode");
  return 1;
}
