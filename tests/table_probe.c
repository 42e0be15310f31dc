/* table_probe.c - a program without frame pointers (-fomit-frame-pointer: only call-frame information
 * describes its frames), run by tests/test_unwind.c under the table unwinder.  Samples at rate 1 and
 * names the frames of the stacks it wants by dladdr (-export-dynamic).  Prints "key value" lines (names as
 * "key a,b,c,"); something the test cannot see going wrong prints "table_probe: ..." on stderr, status 1.
 *
 * Modes (argv[1]):
 *   chain              main -> probe_tbl_a -> probe_tbl_b (a frame of 2 KiB) -> probe_tbl_c -> malloc
 *   signal [alt]       another thread signals the main thread while it spins in a leaf (probe_tbl_spin, no
 *                      call, no frame of its own on aarch64: its return address stays in the link register);
 *                      the handler mallocs, on an alternate signal stack with "alt"
 *   threads N          N threads, each mallocs from its function: the stacks, and those that end after two
 *                      frames in the C library (start_thread, clone3)
 *   dlmix A B N        N rounds of: dlopen module A, sample inside it, name the stack, dlclose it; the same
 *                      with B (built from the same source with another frame layout, often loaded where A
 *                      was): every stack must go from the module's function to probe_tbl_dlmix and main
 *   odd                malloc from a callback of probe_odd_cfa, whose CFA is computed from another register
 *                      (x86-64 rbx, aarch64 x19): a rule no row holds.  TABLE_PROBE_LIBGCC=1 loads libgcc_s
 *                      first, so the table unwinder can hand that stack over
 * TABLE_PROBE_NO_FILES=1: no file descriptor can be opened (RLIMIT_NOFILE at 3) once the session has
 * started (libunwind loaded for MIMALLOC_PROF_UNWIND_CHECK), so the table unwinder cannot read call-frame
 * information from files and reads it in place.
 */
#define _GNU_SOURCE 1

#include <dlfcn.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "mimalloc-prof.h"

#define PROBE_NAME "table_probe"
#include "probe_util.h"

#define NOINLINE __attribute__((noinline, noclone))

volatile unsigned probe_salt;       /* written after calls: no tail calls, no identical code folding */
void *volatile probe_keep;

static void start(void)
{
  if (!mi_prof_start_seeded(1, 0x7ab1eull)) die("mi_prof_start_seeded failed");
  const char *no_files = getenv("TABLE_PROBE_NO_FILES");
  struct rlimit three = {3, 3};
  if (no_files != NULL && strcmp(no_files, "1") == 0 && setrlimit(RLIMIT_NOFILE, &three) != 0)
    die("cannot limit file descriptors");
}

/* ---------------------------------------------------------------------------------------------------
   The names of a stack
--------------------------------------------------------------------------------------------------- */

typedef struct want_s {
  const char *leaf;                /* the function the stack must start with (its first frame) */
  char names[1024];                /* the names of the first stack found starting there */
  size_t found;
  bool live_only;                  /* only stacks with a block in use (a reset keeps earlier stacks) */
} want_t;

static const char *name_of(void *pc)
{
  Dl_info info;
  if (dladdr((char *)pc - 1, &info) == 0 || info.dli_sname == NULL) return "?";
  return info.dli_sname;
}

static bool name_visitor(void *const *frames, size_t depth, const mi_prof_stack_counts_t *c, void *arg)
{
  want_t *w = arg;
  if (depth == 0 || (w->live_only && c->inuse_objects == 0) || strcmp(name_of(frames[0]), w->leaf) != 0)
    return true;
  if (w->found++ == 0) {
    size_t len = 0;
    for (size_t i = 0; i < depth && len < sizeof w->names - 64; i++)
      len += (size_t)snprintf(w->names + len, sizeof w->names - len, "%s,", name_of(frames[i]));
  }
  return true;
}

static want_t stack_of_in(const char *leaf, bool live_only)
{
  want_t w = {.leaf = leaf, .live_only = live_only};
  if (!mi_prof_visit(name_visitor, &w)) die("mi_prof_visit failed");
  return w;
}

static want_t stack_of(const char *leaf) { return stack_of_in(leaf, false); }

static void print_stack(const char *key, const char *leaf)
{
  want_t w = stack_of(leaf);
  printf("%s_found %zu\n%s %s\n", key, w.found, key, w.names);
}

/* ---------------------------------------------------------------------------------------------------
   chain
--------------------------------------------------------------------------------------------------- */

NOINLINE void *probe_tbl_c(size_t n)
{
  void *p = malloc(n);
  probe_salt += 3;
  return p;
}

NOINLINE void *probe_tbl_b(size_t n)
{
  volatile char pad[2048];         /* a large frame: aarch64 saves x29 and x30 at its bottom, CFA - 2064 */
  pad[0] = (char)n;
  void *p = probe_tbl_c(n + (size_t)pad[0] % 2);
  probe_salt += 2;
  return p;
}

NOINLINE void *probe_tbl_a(size_t n)
{
  void *p = probe_tbl_b(n);
  probe_salt += 1;
  return p;
}

static int mode_chain(void)
{
  start();
  probe_keep = probe_tbl_a(100);
  print_stack("chain", "probe_tbl_c");
  return 0;
}

/* ---------------------------------------------------------------------------------------------------
   signal: a leaf interrupted
--------------------------------------------------------------------------------------------------- */

static volatile sig_atomic_t handled, spinning;
static pthread_t main_thread;

/* Allocates on its first run only: the signaller may have sent another SIGUSR1 before it saw `handled`,
 * and that one, delivered after this returns, interrupts another instruction (a second stack). */
NOINLINE void probe_tbl_handler(int sig)
{
  (void)sig;
  if (handled) return;
  probe_keep = malloc(200);
  probe_salt += 5;
  handled = 1;
}

/* A leaf: no call until the handler has run. */
NOINLINE void probe_tbl_spin(void)
{
  spinning = 1;
  while (!handled) __asm__ volatile("" ::: "memory");
}

NOINLINE void probe_tbl_spin_caller(void)
{
  probe_tbl_spin();
  probe_salt += 7;
}

static void *signaller(void *arg)
{
  (void)arg;
  while (!spinning) sched_yield();
  while (!handled) {
    pthread_kill(main_thread, SIGUSR1);
    sched_yield();
  }
  return NULL;
}

static int mode_signal(int argc, char **argv)
{
  bool alt = argc > 2 && strcmp(argv[2], "alt") == 0;
  if (alt) {
    size_t size = 64 << 10;
    void *mem = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    stack_t ss = {.ss_sp = mem, .ss_size = size};
    if (mem == MAP_FAILED || sigaltstack(&ss, NULL) != 0) die("cannot set up the alternate stack");
  }
  struct sigaction sa = {.sa_handler = probe_tbl_handler, .sa_flags = alt ? SA_ONSTACK : 0};
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGUSR1, &sa, NULL) != 0) die("sigaction failed");
  free(malloc(200));               /* the handler's calls bound before it runs */
  start();
  main_thread = pthread_self();
  pthread_t th;
  if (pthread_create(&th, NULL, signaller, NULL) != 0) die("pthread_create failed");
  probe_tbl_spin_caller();
  pthread_join(th, NULL);
  print_stack("signal", "probe_tbl_handler");
  return 0;
}

/* ---------------------------------------------------------------------------------------------------
   threads: every thread's stack ends at its start
--------------------------------------------------------------------------------------------------- */

NOINLINE void *probe_tbl_thread_leaf(void)
{
  void *p = malloc(300);
  probe_salt += 11;
  return p;
}

static void *thread_body(void *arg)
{
  free(probe_tbl_thread_leaf());
  return arg;
}

static size_t thread_stacks, thread_started;

static bool thread_visitor(void *const *frames, size_t depth, const mi_prof_stack_counts_t *c, void *arg)
{
  (void)c, (void)arg;
  if (depth < 3 || strcmp(name_of(frames[0]), "probe_tbl_thread_leaf") != 0) return true;
  thread_stacks++;
  /* glibc's thread entry: start_thread, called from clone3's child frame, which ends the stack (both local
   * symbols of the C library: dladdr names their object only), after the thread's function. */
  Dl_info last, before;
  thread_started += depth == 4 && dladdr((char *)frames[3] - 1, &last) != 0 &&
                    dladdr((char *)frames[2] - 1, &before) != 0 &&
                    strstr(last.dli_fname, "libc.so") != NULL && strstr(before.dli_fname, "libc.so") != NULL;
  return true;
}

static int mode_threads(int argc, char **argv)
{
  size_t n = argc > 2 ? arg_size(argv[2]) : 4;
  start();
  for (size_t i = 0; i < n; i++) {
    pthread_t th;
    if (pthread_create(&th, NULL, thread_body, NULL) != 0 || pthread_join(th, NULL) != 0)
      die("thread failed");
  }
  if (!mi_prof_visit(thread_visitor, NULL)) die("mi_prof_visit failed");
  printf("thread_stacks %zu\nthread_started %zu\n", thread_stacks, thread_started);
  return 0;
}

/* ---------------------------------------------------------------------------------------------------
   dlmix: modules replacing each other at one address
--------------------------------------------------------------------------------------------------- */

typedef void *mix_fn(size_t n);

NOINLINE void *probe_tbl_dlmix(mix_fn *fn, size_t n)
{
  void *p = fn(n);
  probe_salt += 13;
  return p;
}

static int mode_dlmix(int argc, char **argv)
{
  if (argc < 5) die("usage: dlmix A B N");
  size_t rounds = arg_size(argv[4]);
  size_t good = 0, bad = 0, same_place = 0;
  uintptr_t last_base = 0;
  start();
  for (size_t r = 0; r < 2 * rounds; r++) {
    const char *path = argv[2 + r % 2];
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) die("dlopen failed");
    mix_fn *fn = (mix_fn *)dlsym(h, "dl_mix_alloc");
    if (fn == NULL) die("dlsym failed");
    Dl_info info;
    if (dladdr((void *)fn, &info) == 0) die("dladdr failed");
    same_place += (uintptr_t)info.dli_fbase == last_base;
    last_base = (uintptr_t)info.dli_fbase;
    void *p = probe_tbl_dlmix(fn, 100 + r);
    want_t w = stack_of_in("dl_mix_helper", true);    /* the other module's stacks read as this one's */
    /* The module's two functions, then the probe's caller and main, whatever the variant. */
    bool ok = w.found == 1 && strncmp(w.names, "dl_mix_helper,dl_mix_alloc,probe_tbl_dlmix,", 43) == 0 &&
              strstr(w.names, "main,") != NULL;
    if (!ok && bad < 3) fprintf(stdout, "bad_stack (%zu found) %s\n", w.found, w.names);
    good += ok, bad += !ok;
    free(p);
    mi_prof_reset();               /* the next round's stack is the only one */
    if (dlclose(h) != 0) die("dlclose failed");
  }
  printf("dlmix_good %zu\ndlmix_bad %zu\ndlmix_same_place %zu\n", good, bad, same_place);
  return 0;
}

/* ---------------------------------------------------------------------------------------------------
   odd: a CFA no row holds
--------------------------------------------------------------------------------------------------- */

/* probe_odd_cfa(fn): calls fn() with its CFA defined from a callee-saved register (where the table
 * unwinder exists; elsewhere the mode is not run). */
#if defined(__x86_64__) || defined(__aarch64__)
#define HAVE_ODD_CFA 1
void *probe_odd_cfa(void *(*fn)(void));
#else
#define HAVE_ODD_CFA 0
#endif
#if defined(__x86_64__)
__asm__(".text\n"
        ".globl probe_odd_cfa\n"
        ".type probe_odd_cfa, @function\n"
        "probe_odd_cfa:\n"
        ".cfi_startproc\n"
        "  push %rbx\n"
        ".cfi_adjust_cfa_offset 8\n"
        ".cfi_rel_offset %rbx, 0\n"
        "  mov %rsp, %rbx\n"
        ".cfi_def_cfa_register %rbx\n"
        "  and $-16, %rsp\n"
        "  call *%rdi\n"
        "  mov %rbx, %rsp\n"
        ".cfi_def_cfa_register %rsp\n"
        "  pop %rbx\n"
        ".cfi_adjust_cfa_offset -8\n"
        ".cfi_restore %rbx\n"
        "  ret\n"
        ".cfi_endproc\n"
        ".size probe_odd_cfa, .-probe_odd_cfa\n");
#elif defined(__aarch64__)
__asm__(".text\n"
        ".globl probe_odd_cfa\n"
        ".type probe_odd_cfa, %function\n"
        "probe_odd_cfa:\n"
        ".cfi_startproc\n"
        "  stp x19, x30, [sp, #-16]!\n"
        ".cfi_def_cfa_offset 16\n"
        ".cfi_offset 19, -16\n"
        ".cfi_offset 30, -8\n"
        "  mov x19, sp\n"
        ".cfi_def_cfa_register 19\n"
        "  blr x0\n"
        "  mov sp, x19\n"
        ".cfi_def_cfa_register 31\n"
        "  ldp x19, x30, [sp], #16\n"
        ".cfi_def_cfa_offset 0\n"
        ".cfi_restore 19\n"
        ".cfi_restore 30\n"
        "  ret\n"
        ".cfi_endproc\n"
        ".size probe_odd_cfa, .-probe_odd_cfa\n");
#endif

NOINLINE void *probe_tbl_odd_cb(void)
{
  void *p = malloc(400);
  probe_salt += 17;
  return p;
}

NOINLINE void *probe_tbl_odd_caller(void)
{
#if HAVE_ODD_CFA
  void *p = probe_odd_cfa(probe_tbl_odd_cb);
#else
  void *p = probe_tbl_odd_cb();
#endif
  probe_salt += 19;
  return p;
}

static int mode_odd(void)
{
  const char *g = getenv("TABLE_PROBE_LIBGCC");
  if (g != NULL && strcmp(g, "1") == 0 && dlopen("libgcc_s.so.1", RTLD_NOW) == NULL)
    die("cannot load libgcc_s");
  start();
  probe_keep = probe_tbl_odd_caller();
  print_stack("odd", "probe_tbl_odd_cb");
  return 0;
}

int main(int argc, char **argv)
{
  if (argc < 2) die("usage: table_probe MODE ...");
  const char *mode = argv[1];
  int rc = 1;
  if (strcmp(mode, "chain") == 0) rc = mode_chain();
  else if (strcmp(mode, "signal") == 0) rc = mode_signal(argc, argv);
  else if (strcmp(mode, "threads") == 0) rc = mode_threads(argc, argv);
  else if (strcmp(mode, "dlmix") == 0) rc = mode_dlmix(argc, argv);
  else if (strcmp(mode, "odd") == 0) rc = mode_odd();
  else die("unknown mode");
  probe_salt += (unsigned)rc;
  return rc;
}
