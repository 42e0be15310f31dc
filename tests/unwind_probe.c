/* unwind_probe.c - a program linked with the library and run by tests/test_unwind.c in a subprocess (the
 * unwinder and MIMALLOC_PROF_BT_MAX are read once, at load; some modes change the process for good: a
 * seccomp filter, `ulimit -s unlimited`).  fork_probe.c has the fork cases.  Built with frame pointers and -export-dynamic, like
 * stack_probe.  Prints "key value" lines on stdout; something the test cannot see going wrong prints
 * "unwind_probe: ..." on stderr and exits with status 1.
 *
 * Modes (argv[1]):
 *   stackuse            bytes of stack below the caller that malloc uses: profiling stopped (a thread's
 *                       first allocation, a later one), then sampling at rate 1 (a thread's first sample,
 *                       the most over its next 15, the free of a sampled block)
 *   altstack [SIZE]     a signal handler on a SIZE-byte alternate stack (default 8192; a guard page below
 *                       it) does 64 malloc/free pairs at rate 1 ("stopped" as argv[3]: profiling stopped);
 *                       the bytes at its bottom left untouched
 *   tinystack LEFT...   a thread with a PTHREAD_STACK_MIN stack nests calls until about LEFT bytes of its
 *                       stack remain, then does 64 malloc/free pairs at rate 1; once per LEFT
 *   guardgap            fp walk, run under `ulimit -s unlimited`: a malloc on a makecontext() stack whose
 *                       caller's frame pointer points into the unmapped gap below the main stack
 *   novmreadv ERRNO     process_vm_readv refused by a seccomp filter (ENOSYS or EPERM): the fp walk of a
 *                       malloc on the main stack, on a makecontext() stack, and with a junk frame pointer
 *   hybrid              rate 1: a thread samples three sites 8 times each (the first 8 samples of a
 *                       thread go to libgcc where libunwind is the unwinder); stacks per site
 */
#define _GNU_SOURCE 1

#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <ucontext.h>
#include <unistd.h>

#include "mimalloc-prof.h"

#define PROBE_NAME "unwind_probe"
#include "probe_util.h"

#define PROBE_SEED 0x7e57ull
#define NOINLINE   __attribute__((noinline, noclone))

volatile unsigned probe_salt;       /* written after calls: no tail calls, no identical code folding */
void *volatile probe_keep;

static void start_rate(size_t rate)
{
  if (!mi_prof_start_seeded(rate, PROBE_SEED)) die("mi_prof_start_seeded failed");
}

/* ---------------------------------------------------------------------------------------------------
   stackuse: how deep below its caller malloc reaches
--------------------------------------------------------------------------------------------------- */

#define PAINT      0xa5
#define PAINT_SKIP 256              /* left unpainted below paint_below's own frame */

/* A thread on a stack of our own, so that we know its extent and can paint it. */
static unsigned char *use_stack;
static size_t use_stack_size = (size_t)1 << 20;

/* Paints the stack from its bottom to a little below this function's frame (the red zone and the loop
 * itself live above that). */
static NOINLINE void paint_below(void)
{
  uintptr_t here = (uintptr_t)__builtin_frame_address(0);
  volatile unsigned char *p = use_stack;
  size_t n = here - PAINT_SKIP - (uintptr_t)use_stack;
  for (size_t i = 0; i < n; i++) p[i] = PAINT;
}

static size_t lowest_touched(void)
{
  size_t i = 0;
  while (i < use_stack_size && use_stack[i] == PAINT) i++;
  return i;
}

/* Bytes below this function's frame that op(arg) used. */
static NOINLINE size_t stack_used(void (*op)(void *), void *arg)
{
  uintptr_t top = (uintptr_t)__builtin_frame_address(0);
  paint_below();
  op(arg);
  probe_salt++;
  return top - ((uintptr_t)use_stack + lowest_touched());
}

static void op_malloc(void *arg)
{
  void **slot = arg;
  *slot = malloc(100);
}

static void op_free(void *arg) { free(*(void **)arg); }

typedef struct use_s {
  size_t first, later, free_sampled;
  void *blocks[16];
} use_t;

static void *use_thread(void *arg)
{
  use_t *u = arg;
  u->first = stack_used(op_malloc, &u->blocks[0]);
  for (int i = 1; i < 16; i++) {
    size_t used = stack_used(op_malloc, &u->blocks[i]);
    if (used > u->later) u->later = used;
  }
  u->free_sampled = stack_used(op_free, &u->blocks[1]);
  for (int i = 0; i < 16; i++) if (i != 1) free(u->blocks[i]);
  return NULL;
}

static use_t use_on_thread(void)
{
  use_t u = {0};
  pthread_attr_t attr;
  pthread_t th;
  if (pthread_attr_init(&attr) != 0 || pthread_attr_setstack(&attr, use_stack, use_stack_size) != 0 ||
      pthread_create(&th, &attr, use_thread, &u) != 0 || pthread_join(th, NULL) != 0)
    die("cannot run the stack-use thread");
  pthread_attr_destroy(&attr);
  return u;
}

static int mode_stackuse(void)
{
  use_stack = malloc(use_stack_size);
  if (use_stack == NULL) die("malloc of the thread stack failed");
  use_t plain = use_on_thread();
  start_rate(1);                   /* every 100-byte request is sampled */
  use_t sampled = use_on_thread();
  mi_prof_stats_t st = stats_now();
  if (!mi_prof_stop()) die("mi_prof_stop failed");
  printf("plain_first %zu\nplain %zu\nsample_first %zu\nsample %zu\nfree_sampled %zu\n", plain.first,
         plain.later, sampled.first, sampled.later, sampled.free_sampled);
  printf("samples %" PRIu64 "\ndropped_unwind %" PRIu64 "\n", st.samples, st.dropped[MI_PROF_DROP_UNWIND]);
  return 0;
}

/* ---------------------------------------------------------------------------------------------------
   altstack: a signal handler that allocates, on a small alternate signal stack
--------------------------------------------------------------------------------------------------- */

#define HANDLER_PAIRS 64

static volatile sig_atomic_t handler_pairs;

static void alloc_pairs(void)
{
  for (int i = 0; i < HANDLER_PAIRS; i++) {
    volatile char *p = malloc(100 + (size_t)i);
    if (p == NULL) continue;
    p[0] = 1;
    free((void *)p);
    handler_pairs++;
  }
}

static uintptr_t handler_frame;    /* the handler's frame address (its first run) */

static void pairs_handler(int sig)
{
  (void)sig;
  if (handler_frame == 0) handler_frame = (uintptr_t)__builtin_frame_address(0);
  alloc_pairs();
}

/* The alternate stack is painted first, so the bytes the handler left untouched at its bottom tell how
 * close to the end it came. */
static int mode_altstack(int argc, char **argv)
{
  size_t size = argc > 2 ? arg_size(argv[2]) : 8192;
  bool sampling = !(argc > 3 && strcmp(argv[3], "stopped") == 0);
  size_t page = (size_t)sysconf(_SC_PAGESIZE), span = (size + page - 1) / page * page;
  unsigned char *map = mmap(NULL, page + span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED || mprotect(map, page, PROT_NONE) != 0) die("cannot map the alternate stack");
  unsigned char *alt = map + page + span - size;   /* ends at its mapping's end, a guard page below */
  memset(alt, PAINT, size);
  stack_t ss = {.ss_sp = alt, .ss_size = size, .ss_flags = 0};
  struct sigaction sa = {.sa_handler = pairs_handler, .sa_flags = SA_ONSTACK};
  sigemptyset(&sa.sa_mask);
  if (sigaltstack(&ss, NULL) != 0 || sigaction(SIGUSR1, &sa, NULL) != 0) die("cannot set up the handler");
  free(malloc(100));               /* the handler's calls are bound already (lazy binding saves the
                                      vector registers on the stack: 2.5 KiB with AVX-512) */
  if (sampling) start_rate(1);
  for (int i = 0; i < 4; i++) raise(SIGUSR1);
  mi_prof_stats_t st = stats_now();
  if (sampling && !mi_prof_stop()) die("mi_prof_stop failed");
  size_t untouched = 0;
  while (untouched < size && alt[untouched] == PAINT) untouched++;
  printf("pairs %d\nsamples %" PRIu64 "\ndropped_unwind %" PRIu64 "\nalt_untouched %zu\n", (int)handler_pairs,
         st.samples, st.dropped[MI_PROF_DROP_UNWIND], untouched);
  printf("alt_handler_left %zu\nminsigstksz %ld\n", (size_t)(handler_frame - (uintptr_t)alt),
         sysconf(_SC_MINSIGSTKSZ));
  return 0;
}

/* ---------------------------------------------------------------------------------------------------
   tinystack: a thread with the smallest stack pthread allows, allocating near its end
--------------------------------------------------------------------------------------------------- */

typedef struct tiny_s {
  size_t want_left;                /* nest until about this many bytes of stack remain */
  uintptr_t lo;                    /* the thread's stack */
  size_t left;                     /* what remained at the allocations */
} tiny_t;

static NOINLINE void nest(tiny_t *t)
{
  volatile char pad[192];
  pad[0] = 1;
  uintptr_t here = (uintptr_t)__builtin_frame_address(0);
  if (here - t->lo > t->want_left + 256) {
    nest(t);
  } else {
    t->left = here - t->lo;
    alloc_pairs();
  }
  probe_salt += (unsigned)pad[0];
}

static void *tiny_thread(void *arg)
{
  tiny_t *t = arg;
  pthread_attr_t attr;
  void *addr;
  size_t size;
  if (pthread_getattr_np(pthread_self(), &attr) != 0 || pthread_attr_getstack(&attr, &addr, &size) != 0)
    die("cannot find the thread's stack");
  pthread_attr_destroy(&attr);
  t->lo = (uintptr_t)addr;
  free(malloc(100));               /* the thread's first allocation and sample, near its top */
  nest(t);
  return NULL;
}

static int mode_tinystack(int argc, char **argv)
{
  size_t min = (size_t)sysconf(_SC_THREAD_STACK_MIN);
  pthread_attr_t attr;
  if (pthread_attr_init(&attr) != 0 || pthread_attr_setstacksize(&attr, min) != 0) die("bad stack size");
  if (strcmp(getenv("TINY_SAMPLING") ? getenv("TINY_SAMPLING") : "1", "0") != 0) start_rate(1);
  printf("stack_min %zu\n", min);
  fflush(stdout);                  /* a crash below must not lose what was said */
  for (int i = 2; i < argc; i++) {
    tiny_t t = {.want_left = arg_size(argv[i])};
    pthread_t th;
    if (pthread_create(&th, &attr, tiny_thread, &t) != 0 || pthread_join(th, NULL) != 0)
      die("cannot run the tiny-stack thread");
    printf("left_%s %zu\n", argv[i], t.left);
    fflush(stdout);
  }
  mi_prof_stats_t st = stats_now();
  printf("pairs %d\nsamples %" PRIu64 "\ndropped_unwind %" PRIu64 "\n", (int)handler_pairs, st.samples,
         st.dropped[MI_PROF_DROP_UNWIND]);
  return 0;
}

/* ---------------------------------------------------------------------------------------------------
   The stack a sample got, by the name of its first frame
--------------------------------------------------------------------------------------------------- */

typedef struct leaf_s {
  const char *name;                /* function wanted as the first frame */
  size_t matches, depth;           /* stacks starting there; the depth of the last one */
} leaf_t;

static bool leaf_visitor(void *const *frames, size_t depth, const mi_prof_stack_counts_t *c, void *arg)
{
  (void)c;
  leaf_t *l = arg;
  Dl_info info;
  if (depth > 0 && dladdr((const char *)frames[0] - 1, &info) != 0 && info.dli_sname != NULL &&
      strcmp(info.dli_sname, l->name) == 0) {
    l->matches++;
    l->depth = depth;
  }
  return true;
}

static leaf_t find_leaf(const char *name)
{
  leaf_t l = {.name = name};
  if (!mi_prof_visit(leaf_visitor, &l)) die("mi_prof_visit failed");
  return l;
}

/* ---------------------------------------------------------------------------------------------------
   Frame pointers that point somewhere else: malloc called with a chosen frame pointer, on a stack of its
   own (makecontext), so that the walk leaves it upwards
--------------------------------------------------------------------------------------------------- */

#if defined(__x86_64__)
#define HAVE_FP_ASM 1
/* malloc(size) with rbp = fp, as code without frame pointers may call it. */
NOINLINE void *malloc_with_fp(uintptr_t fp, size_t size)
{
  void *p;
  __asm__ volatile("mov %%rsp, %%r12\n\t"
                   "sub $128, %%rsp\n\t"         /* past the red zone, which may hold our locals */
                   "and $-16, %%rsp\n\t"         /* the ABI's alignment at the call */
                   "push %%rbp\n\t"
                   "push %%rbp\n\t"
                   "mov %[fp], %%rbp\n\t"
                   "call malloc@PLT\n\t"
                   "pop %%rbp\n\t"
                   "pop %%rbp\n\t"
                   "mov %%r12, %%rsp"
                   : "=a"(p), "+D"(size)
                   : [fp] "r"(fp)
                   : "rcx", "rdx", "rsi", "r8", "r9", "r10", "r11", "r12", "memory", "cc", "xmm0", "xmm1", "xmm2",
                     "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12",
                     "xmm13", "xmm14", "xmm15");
  probe_salt++;
  return p;
}
#else
#define HAVE_FP_ASM 0
#endif

static ucontext_t co_main, co_ctx;
static uintptr_t co_fp;            /* the frame pointer probe_co_body gives malloc; 0: its own */

NOINLINE void probe_co_body(void)
{
#if HAVE_FP_ASM
  if (co_fp != 0) probe_keep = malloc_with_fp(co_fp, 100);
  else
#endif
    probe_keep = malloc(100);
  probe_salt += 7;
}

/* Runs probe_co_body on a stack of its own, mapped with mmap (so it lies apart from the thread's). */
static void run_coroutine(uintptr_t fp)
{
  size_t size = 256 << 10;
  void *stack = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (stack == MAP_FAILED || getcontext(&co_ctx) != 0) die("cannot set up the coroutine");
  co_ctx.uc_stack.ss_sp = stack;
  co_ctx.uc_stack.ss_size = size;
  co_ctx.uc_link = &co_main;
  co_fp = fp;
  makecontext(&co_ctx, probe_co_body, 0);
  if (swapcontext(&co_main, &co_ctx) != 0) die("swapcontext failed");
  munmap(stack, size);
}

/* The [stack] mapping (the one holding `addr`) and the end of the mapping before it, from /proc. */
typedef struct stack_map_s {
  uintptr_t lo, hi, prev_hi;
} stack_map_t;

static stack_map_t stack_map(uintptr_t addr)
{
  stack_map_t m = {0};
  FILE *f = fopen("/proc/self/maps", "r");
  if (f == NULL) die("cannot read /proc/self/maps");
  char line[512];
  uintptr_t prev = 0;
  while (fgets(line, sizeof line, f) != NULL) {
    uintptr_t lo, hi;
    if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR, &lo, &hi) != 2) continue;
    if (addr - lo < hi - lo) {
      m = (stack_map_t){lo, hi, prev};
      break;
    }
    prev = hi;
  }
  fclose(f);
  return m;
}

/* guardgap (run with RLIMIT_STACK unlimited): pthread_getattr_np() reports the main thread's stack as
 * reaching down to the previous mapping; the kernel keeps a guard gap above that mapping which the stack
 * may never grow into.  A frame pointer into that gap (and one into the range the stack could still grow
 * into) is neither read directly (SIGSEGV, or a stack grown for nothing) nor followed. */
static int mode_guardgap(void)
{
  uintptr_t here = (uintptr_t)__builtin_frame_address(0);
  pthread_attr_t attr;
  void *addr;
  size_t size;
  if (pthread_getattr_np(pthread_self(), &attr) != 0 || pthread_attr_getstack(&attr, &addr, &size) != 0)
    die("pthread_getattr_np failed");
  pthread_attr_destroy(&attr);
  stack_map_t before = stack_map(here);
  uintptr_t attr_lo = (uintptr_t)addr;
  uintptr_t in_gap = (attr_lo + 4096) & ~(uintptr_t)15;          /* just above the previous mapping */
  uintptr_t growable = (before.lo - (256u << 10)) & ~(uintptr_t)15; /* where the stack could grow to */
  printf("attr_lo %" PRIuPTR "\nstack_lo %" PRIuPTR "\nprev_hi %" PRIuPTR "\n", attr_lo, before.lo,
         before.prev_hi);
  printf("unmapped_in_attr %d\n", attr_lo < before.lo);
  fflush(stdout);
#if HAVE_FP_ASM
  start_rate(1);
  run_coroutine(in_gap);
  leaf_t gap = find_leaf("malloc_with_fp");
  run_coroutine(growable);
  leaf_t grow = find_leaf("malloc_with_fp");
  mi_prof_stats_t st = stats_now();
  if (!mi_prof_stop()) die("mi_prof_stop failed");
  stack_map_t after = stack_map(here);
  printf("gap_depth %zu\ngrow_depth %zu\nstack_grew %d\nsamples %" PRIu64 "\n", gap.depth, grow.depth,
         after.lo != before.lo, st.samples);
#else
  printf("skipped 1\n");
#endif
  return 0;
}

/* ---------------------------------------------------------------------------------------------------
   novmreadv: process_vm_readv refused, as by a container's seccomp policy (EPERM) or qemu-user (ENOSYS)
--------------------------------------------------------------------------------------------------- */

NOINLINE void *probe_main_leaf(void)
{
  void *p = malloc(100);
  probe_salt += 9;
  return p;
}

/* With the filter in place (the probe checks that the call now fails with ERRNO): a sample on the main
 * stack keeps its whole chain (read directly), one on a makecontext() stack keeps its first frame (the
 * library's own frames lead there; the walk stops where the call would be needed), and a frame pointer
 * into unmapped memory ends the walk as before. */
static int mode_novmreadv(int argc, char **argv)
{
  if (argc < 3) die("usage: novmreadv ENOSYS|EPERM");
  if (!probe_refuse_vm_readv_said(argv[2])) return 0;
  start_rate(1);
  probe_keep = probe_main_leaf();
  leaf_t main_leaf = find_leaf("probe_main_leaf");
  free(probe_keep);
  run_coroutine(0);
  leaf_t co = find_leaf("probe_co_body");
  free(probe_keep);
  size_t junk_depth = 0;
#if HAVE_FP_ASM
  size_t size = 64 << 10;         /* an address that was mapped a moment ago, above the coroutine's stack */
  void *gone = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (gone == MAP_FAILED || munmap(gone, size) != 0) die("cannot make an unmapped address");
  run_coroutine((uintptr_t)gone + 4096);
  junk_depth = find_leaf("malloc_with_fp").depth;
  free(probe_keep);
#endif
  mi_prof_stats_t st = stats_now();
  if (!mi_prof_stop()) die("mi_prof_stop failed");
  printf("main_found %zu\nmain_depth %zu\nco_found %zu\nco_depth %zu\njunk_depth %zu\n", main_leaf.matches,
         main_leaf.depth, co.matches, co.depth, junk_depth);
  printf("samples %" PRIu64 "\ndropped_unwind %" PRIu64 "\n", st.samples, st.dropped[MI_PROF_DROP_UNWIND]);
  return 0;
}

/* ---------------------------------------------------------------------------------------------------
   hybrid: with libunwind, a thread's first samples are unwound by libgcc; both must give the same stack
--------------------------------------------------------------------------------------------------- */

#define HYBRID_ROUNDS 24           /* three times the samples a thread leaves to libgcc */

NOINLINE void *probe_hyb_shallow(void)
{
  void *p = malloc(100);
  probe_salt += 31;
  return p;
}

NOINLINE void *probe_hyb_deep(unsigned n)
{
  void *p = n == 0 ? malloc(100) : probe_hyb_deep(n - 1);
  probe_salt += n;
  return p;
}

static void *handler_block;

NOINLINE void probe_hyb_handler(int sig)
{
  (void)sig;
  handler_block = malloc(100);
  probe_salt += 33;
}

static void *hybrid_thread(void *arg)
{
  (void)arg;
  for (int i = 0; i < HYBRID_ROUNDS; i++) {
    switch (i % 3) {
    case 0: free(probe_hyb_shallow()); break;
    case 1: free(probe_hyb_deep(40)); break;
    default: raise(SIGUSR1), free(handler_block); break;
    }
  }
  return NULL;
}

/* Allocated blocks are freed at once: the visit needs MIMALLOC_PROF_ACCUM=1 (the default). */
static int mode_hybrid(void)
{
  struct sigaction sa = {.sa_handler = probe_hyb_handler};
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGUSR1, &sa, NULL) != 0) die("sigaction failed");
  start_rate(1);
  pthread_t th;
  if (pthread_create(&th, NULL, hybrid_thread, NULL) != 0 || pthread_join(th, NULL) != 0)
    die("cannot run the thread");
  static const char *const sites[] = {"probe_hyb_shallow", "probe_hyb_deep", "probe_hyb_handler"};
  for (int i = 0; i < 3; i++) printf("stacks_%s %zu\n", sites[i], find_leaf(sites[i]).matches);
  mi_prof_stats_t st = stats_now();
  mi_prof_stop();
  printf("dropped_unwind %" PRIu64 "\n", st.dropped[MI_PROF_DROP_UNWIND]);
  return 0;
}

int main(int argc, char **argv)
{
  if (argc < 2) die("usage: unwind_probe MODE ...");
  const char *mode = argv[1];
  if (strcmp(mode, "stackuse") == 0) return mode_stackuse();
  if (strcmp(mode, "altstack") == 0) return mode_altstack(argc, argv);
  if (strcmp(mode, "tinystack") == 0) return mode_tinystack(argc, argv);
  if (strcmp(mode, "guardgap") == 0) return mode_guardgap();
  if (strcmp(mode, "novmreadv") == 0) return mode_novmreadv(argc, argv);
  if (strcmp(mode, "hybrid") == 0) return mode_hybrid();
  die("unknown mode");
  return 1;
}
