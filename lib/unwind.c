/* unwind.c - stack traces for samples: the table unwinder (unwind_table.c, unwtab.c, ehframe.c), a
 * frame-pointer walk, libunwind, or glibc's backtrace() (libgcc).
 *
 * Called on the sampling thread before any profiler lock is taken, with the reentrancy guard up (so what
 * an unwinder allocates is served unsampled).  Every unwinder returns return addresses, innermost first,
 * with the library's own frames (the malloc entry point, the slow path, this file) skipped by address:
 * leading frames inside the library's executable segments are dropped, and so are leading frames in
 * libmimalloc's (a composite such as mi_realloc between our entry point and our leaf, which it calls
 * through its PLT: a call, not a tail call, on i386; see MPROF_KEEP_FRAME in mireal.h).
 *
 * MIMALLOC_PROF_UNWIND selects the unwinder; "auto" takes the table unwinder where the platform has it
 * (x86-64 and aarch64 with glibc 2.35 or later: MPROF_HAVE_TABLE), else libunwind when the library was
 * built with it, else libgcc (doc/design/unwinding.md has the measurements behind that choice).  The table
 * unwinder loads nothing and takes no lock: a stack it cannot finish (a rule its rows cannot hold) goes to
 * libgcc where priming could load it without loading anything new (libgcc_s already in the process), else
 * keeps the frames found so far.  With libunwind, a thread's first LIBGCC_FIRST samples are unwound by
 * libgcc: libunwind's first unwind on a thread maps and fills a 256 KiB cache, which a thread that samples a
 * few times never pays back (doc/design/unwinding.md).  Not the main thread's: it usually lives long and
 * takes most samples (python3's start-up, with all its samples on the main thread, cost 0.8% more
 * instructions with libgcc first).  So libgcc is primed with libunwind too, in every process, threads or
 * not: 94 k instructions once, against 72 k instructions and 64 page faults per sampling thread without
 * it (bench/thread_churn, which starts a thread per task, takes 1.0 k minor faults).
 *
 * Loading (the loader locks are rank -1 in internal.h: outermost).  libunwind is dlopen'ed, and glibc's
 * backtrace() dlopens libgcc_s on its first call.  mprof_unwind_prime() does both, once per process (with
 * the table unwinder only the second, and only where libgcc_s is loaded already: dl_iterate_phdr tells),
 * from mi_prof_start() before the API lock is taken; no thread ever waits for another's priming (the
 * one that primes may be waiting for a loader lock held by a thread that is in a constructor and
 * allocating).  A libunwind or libgcc sample taken before priming is done is dropped
 * (MI_PROF_DROP_UNWIND): calling backtrace() then would wait, under glibc's once-lock, for the loader
 * lock.
 *
 * Stack budget.  A sample runs on whatever stack the allocation runs on: a thread's, an alternate signal
 * stack (8 KiB is common), a small thread stack.  mprof_unwind_room() lets it unwind only when the stack
 * left below it covers the unwinder's measured need plus the frame buffer; on an alternate signal stack
 * it asks sigaltstack(2) (one system call, only when the stack pointer is outside the thread's stack).
 *
 * The frame-pointer walk (and the table unwinder's) reads only memory proven mapped: the thread's stack
 * from the lowest point it has been seen to reach up to its base, the alternate signal stack the sample
 * runs on, and the library's own frames; anything else goes through process_vm_readv(2), which fails on
 * an unmapped address instead of faulting.  Where that call is refused (ENOSYS under qemu-user, EPERM
 * under a seccomp policy), the walk stops at the first frame outside those ranges.
 *
 * fork.  libunwind takes locks of its own (caches, memory pools; its thread-exit destructor too) and
 * calls dl_iterate_phdr, whose loader lock glibc does not reset in a fork child; libgcc's unwinder takes
 * none on glibc 2.35 and later (it finds unwind tables with _dl_find_object), except its object list lock
 * when frames were registered at run time (JIT compilers).  Nothing waits at fork: the child of a
 * multi-threaded parent unwinds with libgcc, never libunwind, and a child whose fork found another
 * thread inside libgcc's unwinder (or priming) records its samples without a stack (MI_PROF_DROP_FORK).
 * fork() copies the memory at one instant, so the count of such threads that the child inherits says
 * exactly that.  The fp walk and the table unwinder take no lock and work everywhere (the tables' reader
 * counts of threads that are gone are reset in the child: unwtab.c).
 *
 * Async-signal safety: a sample may be taken in a signal handler that allocates.  mprof_unwind_room()
 * and mprof_unwind() use this thread's TLS, atomics and system calls (sigaltstack, process_vm_readv)
 * besides the unwinders, which are primed beforehand (libunwind masks signals around its locks; libgcc
 * takes none).  The exception is a thread's first sample, which looks up its stack bounds with
 * pthread_getattr_np (it allocates, and reads /proc on the main thread); on an alternate signal stack
 * that lookup waits for a later sample.
 */
#include "unwind.h"
#include "internal.h"
#include "options.h"
#include "unwtab.h"
#include "warn.h"

#include <errno.h>
#include <execinfo.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/single_threaded.h>
#include <sys/uio.h>
#include <unistd.h>

#include <dlfcn.h>
#include <gnu/lib-names.h>
#include <sys/resource.h>

extern void *__libc_stack_end;     /* ld.so's: the main thread's stack pointer at process entry */

#ifndef MPROF_FRAME_POINTERS
#define MPROF_FRAME_POINTERS 0
#endif

/* A thread's first samples that libgcc unwinds where libunwind is the unwinder.  libunwind's first unwind
 * on a thread costs ~72 k instructions and 64 page faults (it maps a 256 KiB cache and writes all of it)
 * plus an munmap at thread exit; libgcc costs 15-60 k instructions more than a warm libunwind per sample
 * (depths 5 to 32; callgrind on bench/thread_churn.c and bench/sample_cost.c), so the cache pays for
 * itself after roughly eight samples. */
#define LIBGCC_FIRST 8

/* Stack a sample may use below mprof_unwind_room()'s frame with each unwinder, besides the frame buffer:
 * the unwinder and what runs after it (interning, the sampled-block heap, the record).  Measured with
 * tests/unwind_probe ("stackuse", x86-64: about 1.0 for fp, 1.9 for table (a sample that compiles a
 * chunk), 2.1 and 5.4 KiB below malloc's caller, the first sample on a thread included) and rounded up
 * by a third or more: doc/design/unwinding.md, "Stack budget".  Elsewhere frames and register sets are larger
 * (aarch64: 97 DWARF registers, a 4.5 KiB ucontext_t), hence twice that for libgcc, table and fp, and
 * libunwind's context and cursor (two copies of each live at once) counted by their sizes: 7040 bytes on
 * x86-64. */
#if defined(__x86_64__) || defined(__i386__)
#define NEED_FP        1536
#define NEED_TABLE     2560
#define NEED_LIBGCC    3072
#else
#define NEED_FP        3072
#define NEED_TABLE     5120
#define NEED_LIBGCC    6144
#endif
#define NEED_LIBUNWIND (2 * (sizeof(unw_context_t) + sizeof(unw_cursor_t)) + 3072)

#define PAGE_FLOOR(x) ((x) & ~(uintptr_t)4095)   /* a page of at least 4 KiB holds x */

#if HAVE_LIBUNWIND
#define UNW_LOCAL_ONLY
#include <libunwind.h>

/* libunwind is loaded with dlopen when profiling first starts, not linked: a program that links or
 * preloads the profiler but never samples does not map libunwind and liblzma at all (and pays none of
 * their start-up relocations).  unw_backtrace is a macro for the architecture's real name. */
#define MPROF_STR2(x) #x
#define MPROF_STR(x)  MPROF_STR2(x)
typedef int unw_backtrace_fn(void **frames, int max);
static unw_backtrace_fn *libunwind_backtrace;

static bool load_libunwind(void)
{
  void *h = dlopen(MPROF_LIBUNWIND_SONAME, RTLD_NOW | RTLD_LOCAL);
  if (h != NULL) libunwind_backtrace = (unw_backtrace_fn *)dlsym(h, MPROF_STR(unw_backtrace));
  return libunwind_backtrace != NULL;
}
#endif

static mprof_unwinder_t unwinder = MPROF_UNWIND_LIBGCC;   /* atomic: priming may change it to libgcc */
static bool check_table MPROF_LOAD_DATA;                  /* MIMALLOC_PROF_UNWIND_CHECK: table vs libunwind */
static uintptr_t self_lo MPROF_LOAD_DATA, self_hi MPROF_LOAD_DATA;   /* our executable segments (DSO build) */
static uintptr_t libc_lo MPROF_LOAD_DATA, libc_hi MPROF_LOAD_DATA;   /* libc's (pthread_getattr_np's) */
static uintptr_t mi_lo MPROF_LOAD_DATA, mi_hi MPROF_LOAD_DATA;       /* libmimalloc's */

enum { PRIME_NOT, PRIME_BUSY, PRIME_DONE };
static int prime_state;            /* atomic; DONE (release) after the unwinders are loaded */
static bool libgcc_primed;         /* backtrace() has been called once (read after prime_state is DONE) */
static unsigned libgcc_inside;     /* threads inside libgcc's unwinder or priming now (atomic) */
static bool fork_multithreaded;    /* the parent had other threads at the last fork (prepare handler) */
static bool child_libgcc_only;     /* a fork child where libunwind's locks may be held: never call it */
static bool child_no_dwarf;        /* a fork child where libgcc's lock may be held: no dwarf unwinding */
static int vm_readv_refused;       /* process_vm_readv gave ENOSYS or EPERM (atomic) */

typedef struct thread_stack_s {
  uintptr_t lo, hi;                /* [lo, hi): this thread's stack; hi == 0: not looked up yet */
  uintptr_t mapped_lo;             /* [mapped_lo, hi) is proven mapped (see stack_lookup) */
  uintptr_t alt_lo, alt_hi;        /* the alternate signal stack the current sample runs on; else 0, 0 */
  size_t    left;                  /* stack below mprof_unwind_room() in this sample (SIZE_MAX: unknown) */
  uint32_t  dwarf_samples;         /* samples unwound with libgcc or libunwind, counted up to LIBGCC_FIRST */
  uint32_t  inside;                /* INSIDE_*: in an unwinder now (a signal handler may fork there) */
  unsigned  table_slot;            /* in a table walk: its reader slot + 1 (unwtab.c), else 0 */
} thread_stack_t;                  /* 64 bytes of static TLS */

#define INSIDE_LIBGCC    1u        /* libgcc's unwinder or priming (counted in libgcc_inside) */
#define INSIDE_LIBUNWIND 2u

static __thread thread_stack_t tstack __attribute__((tls_model("initial-exec")));

static inline bool in_self(uintptr_t pc) { return pc - self_lo < self_hi - self_lo; }
/* A leading frame that is not the program's: ours, or a libmimalloc composite we called. */
static inline bool not_program(uintptr_t pc) { return in_self(pc) || pc - mi_lo < mi_hi - mi_lo; }
static inline bool in_span(uintptr_t at, uintptr_t lo, uintptr_t hi) { return at - lo < hi - lo; }

/* ---------------------------------------------------------------------------------------------------
   Where the library's code is; the unwinder
--------------------------------------------------------------------------------------------------- */

typedef struct code_range_s {
  uintptr_t probe;                 /* an address in the object wanted */
  uintptr_t lo, hi;                /* its executable segments, 0 and 0 when not a shared object */
} code_range_t;

#define CODE_RANGES 3

/* dl_iterate_phdr callback filling an array of CODE_RANGES code ranges. */
MPROF_COLD MPROF_LOAD_TEXT static int find_code(struct dl_phdr_info *info, size_t size, void *arg)
{
  (void)size;
  code_range_t *want = arg;
  uintptr_t lo = UINTPTR_MAX, hi = 0;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X)) continue;
    uintptr_t start = info->dlpi_addr + ph->p_vaddr, end = start + ph->p_memsz;
    if (start < lo) lo = start;
    if (end > hi) hi = end;
  }
  /* In a static link the library's code is the program's (the object without a name): then nothing can
   * be told apart by address, and no frame is skipped (drop_frames in the profile still hides the entry
   * points). */
  bool named = info->dlpi_name != NULL && info->dlpi_name[0] != '\0';
#if MPROF_HAVE_TABLE
  uintptr_t map = UINTPTR_MAX;     /* every object here now stays for good (unwtab.c) */
  for (int i = 0; i < info->dlpi_phnum; i++)
    if (info->dlpi_phdr[i].p_type == PT_LOAD && info->dlpi_addr + info->dlpi_phdr[i].p_vaddr < map)
      map = info->dlpi_addr + info->dlpi_phdr[i].p_vaddr;
  mprof_unwtab_note_initial(map);
#endif
  bool all = true;
  for (int k = 0; k < CODE_RANGES; k++) {
    if (named && lo <= hi && want[k].probe - lo < hi - lo) {
      want[k].lo = lo;
      want[k].hi = hi;
    }
    all = all && want[k].hi != 0;
  }
  return all && !MPROF_HAVE_TABLE;   /* all found (and no table to tell of every object): stop */
}

static const char *const unwinder_name[] = {
  [MPROF_UNWIND_FP] = "fp", [MPROF_UNWIND_LIBUNWIND] = "libunwind", [MPROF_UNWIND_LIBGCC] = "libgcc",
  [MPROF_UNWIND_TABLE] = "table"};

const char *mprof_unwind_name(mprof_unwinder_t u) { return unwinder_name[u]; }

mprof_unwinder_t mprof_unwind_current(void) { return __atomic_load_n(&unwinder, __ATOMIC_RELAXED); }

static void stack_lookup(thread_stack_t *s);

/* dl_iterate_phdr callback: stops at an object named libgcc_s.so.* */
static int find_libgcc_s(struct dl_phdr_info *info, size_t size, void *arg)
{
  (void)size, (void)arg;
  const char *slash = info->dlpi_name != NULL ? strrchr(info->dlpi_name, '/') : NULL;
  return slash != NULL && strncmp(slash + 1, LIBGCC_S_SO, sizeof LIBGCC_S_SO - 1) == 0;
}

/* libgcc_s is in the process already (every C++ program, and C programs linked with it): priming
 * libgcc then loads nothing new, and the table unwinder hands it the stacks it cannot walk.  Asked of
 * dl_iterate_phdr, whose lock dlopen holds only while it changes the list (not while constructors run,
 * as dlopen's own lock is). */
static bool libgcc_s_loaded(void) { return dl_iterate_phdr(find_libgcc_s, NULL) != 0; }

/* At load (from the constructor, before any session): where our code is (and the C library's), and which
 * unwinder MIMALLOC_PROF_UNWIND asks for.  Nothing more: a process that never samples pays for nothing
 * else. */
MPROF_COLD MPROF_LOAD_TEXT void mprof_unwind_init(void)
{
  /* mi_version: libmimalloc's, never exported by us (mireal.c finds the object by it too). */
  code_range_t code[CODE_RANGES] = {{(uintptr_t)&mprof_unwind_init, 0, 0},
                                    {(uintptr_t)&pthread_getattr_np, 0, 0}, {(uintptr_t)&mi_version, 0, 0}};
  dl_iterate_phdr(find_code, code);
  self_lo = code[0].lo, self_hi = code[0].hi;
  libc_lo = code[1].lo, libc_hi = code[1].hi;
  mi_lo = code[2].lo, mi_hi = code[2].hi;
  uint64_t want = mprof_option(MPROF_OPT_UNWIND);
#if !HAVE_LIBUNWIND
  if (want == MPROF_UNWIND_LIBUNWIND) {
    mprof_warn("MIMALLOC_PROF_UNWIND=libunwind, but this build has no libunwind; using libgcc");
    want = MPROF_UNWIND_LIBGCC;
  }
#endif
#if !MPROF_HAVE_TABLE
  if (want == MPROF_UNWIND_TABLE) {
    mprof_warn("MIMALLOC_PROF_UNWIND=table needs x86-64 or aarch64 and glibc 2.35; using auto's choice");
    want = MPROF_UNWIND_AUTO;
  }
#endif
  if (want == MPROF_UNWIND_AUTO)
    want = MPROF_HAVE_TABLE ? MPROF_UNWIND_TABLE
           : HAVE_LIBUNWIND ? MPROF_UNWIND_LIBUNWIND
                            : MPROF_UNWIND_LIBGCC;
  __atomic_store_n(&unwinder, (mprof_unwinder_t)want, __ATOMIC_RELAXED);
  check_table = want == MPROF_UNWIND_TABLE && mprof_option(MPROF_OPT_UNWIND_CHECK) != 0;
#if !HAVE_LIBUNWIND
  if (check_table) {
    mprof_warn("MIMALLOC_PROF_UNWIND_CHECK=1 compares with libunwind, which this build does not have");
    check_table = false;
  }
#endif
}

/* From mi_prof_start, before it takes any lock (its caller raised the guard: what the loader allocates is
 * not sampled).  Looks up the calling thread's stack (the main thread's, usually: that lookup reads /proc,
 * better done here than in a sample).  The first caller loads libunwind and primes libgcc (glibc's
 * backtrace() dlopens it and allocates on its first call; libgcc also serves a thread's first samples
 * and fork children); every other caller returns at once, whether or not that is finished (see the top
 * of this file).  Priming counts as being inside libgcc for a fork child (its dlopen may hold the
 * loader's write lock). */
void mprof_unwind_prime(void)
{
  if (tstack.hi == 0) stack_lookup(&tstack);
  mprof_unwinder_t u = __atomic_load_n(&unwinder, __ATOMIC_RELAXED);
  if (u == MPROF_UNWIND_FP) return;
  bool prime_libgcc = true;
  if (u == MPROF_UNWIND_TABLE) {   /* it loads nothing; its fallback only where that loads nothing new */
    if (__atomic_load_n(&prime_state, __ATOMIC_RELAXED) != PRIME_NOT) return;
    prime_libgcc = libgcc_s_loaded();
    if (!prime_libgcc && !check_table) return;
  }
  int expected = PRIME_NOT;
  if (!__atomic_compare_exchange_n(&prime_state, &expected, PRIME_BUSY, false, __ATOMIC_ACQUIRE,
                                   __ATOMIC_RELAXED))
    return;
  thread_stack_t *s = &tstack;
  void *frames[4];
  s->inside |= INSIDE_LIBGCC;
  __atomic_add_fetch(&libgcc_inside, 1, __ATOMIC_SEQ_CST);
#if HAVE_LIBUNWIND
  if (u == MPROF_UNWIND_LIBUNWIND || check_table) {
    if (load_libunwind()) {
      (void)libunwind_backtrace(frames, 4);   /* its one-time set-up, here rather than in a sample */
    } else if (check_table) {
      mprof_warn("cannot load %s (%s); MIMALLOC_PROF_UNWIND_CHECK is off", MPROF_LIBUNWIND_SONAME, dlerror());
      check_table = false;
    } else {
      mprof_warn("cannot load %s (%s); unwinding with libgcc", MPROF_LIBUNWIND_SONAME, dlerror());
      __atomic_store_n(&unwinder, MPROF_UNWIND_LIBGCC, __ATOMIC_RELAXED);
    }
  }
#endif
  if (prime_libgcc) {
    (void)backtrace(frames, 4);      /* loads libgcc_s: it serves threads' first samples and fork children */
    libgcc_primed = true;
  }
  __atomic_sub_fetch(&libgcc_inside, 1, __ATOMIC_SEQ_CST);
  s->inside &= ~INSIDE_LIBGCC;
  __atomic_store_n(&prime_state, PRIME_DONE, __ATOMIC_RELEASE);
}

/* ---------------------------------------------------------------------------------------------------
   The thread's stack and the stack budget
--------------------------------------------------------------------------------------------------- */

/* Another thread's lookup (pthread_getattr_np) calls realloc, calloc and free through the C library's
 * lazily bound PLT; the first such call in the process runs the loader's resolver, which saves the whole
 * register file on the stack (1.9 KiB more below a thread's first sample, measured with unwind_probe
 * "stackuse").  Where the main thread's lookup does not call pthread_getattr_np, this binds them here,
 * on the starting thread's stack: pthread_attr_setaffinity_np copies the set with the same calls. */
static void warm_thread_lookup(void)
{
  pthread_attr_t attr;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (pthread_attr_init(&attr) != 0) return;
  (void)pthread_attr_setaffinity_np(&attr, sizeof set, &set);
  pthread_attr_destroy(&attr);
}

/* The main thread's stack without reading /proc (pthread_getattr_np() parses /proc/self/maps for it:
 * 179 k instructions in python3, half a percent of its start-up): its top is above the stack pointer the
 * process started with, and its limit RLIMIT_STACK below the top.  Both taken inside what the kernel
 * would report: the page above __libc_stack_end rather than the mapping's end (a few environment pages
 * higher), a limit counted from there.  With `ulimit -s unlimited` the limit is the previous mapping:
 * false, and the caller asks pthread_getattr_np(). */
static bool main_stack(thread_stack_t *s, uintptr_t here)
{
  warm_thread_lookup();
  struct rlimit rl;
  uintptr_t top = ((uintptr_t)__libc_stack_end + 4095) & ~(uintptr_t)4095;
  if (getrlimit(RLIMIT_STACK, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= top) return false;
  uintptr_t lo = (top - (uintptr_t)rl.rlim_cur + 4095) & ~(uintptr_t)4095;
  if (!in_span(here, lo, top)) return false;
  s->lo = lo;
  s->hi = top;
  s->mapped_lo = PAGE_FLOOR(here);
  return true;
}

/* Looks up this thread's stack, once per thread.  A thread created by pthread has all of [lo, hi)
 * mapped (the guard page lies below lo).  The main thread's stack is mapped only as far down as it has
 * grown, and pthread_getattr_np() reports its limit instead (with `ulimit -s unlimited`, all the way down
 * to the previous mapping, across the kernel's guard gap): proven mapped there is the page of the stack
 * pointer and everything above it (the kernel never shrinks a stack), extended as samples see it deeper.
 * The lookup allocates (the guard is up: unsampled); on the main thread it reads /proc only with an
 * unlimited stack (main_stack above). */
static void stack_lookup(thread_stack_t *s)
{
  uintptr_t here = (uintptr_t)__builtin_frame_address(0);
  bool main = getpid() == gettid();
  if (main && main_stack(s, here)) return;
  pthread_attr_t attr;
  void *addr;
  size_t size;
  if (pthread_getattr_np(pthread_self(), &attr) == 0) {
    if (pthread_attr_getstack(&attr, &addr, &size) == 0) {
      s->lo = (uintptr_t)addr;
      s->hi = (uintptr_t)addr + size;
    }
    pthread_attr_destroy(&attr);
  }
  if (s->hi == 0) {                /* unknown: an empty range, looked up all the same */
    s->lo = s->hi = s->mapped_lo = 1;
    return;
  }
  if (!main) s->mapped_lo = s->lo;
  else s->mapped_lo = in_span(here, s->lo, s->hi) ? PAGE_FLOOR(here) : s->hi;
}

/* True when the C library itself made the allocation being sampled.  pthread_getattr_np() allocates
 * while it holds the thread's descriptor lock (a CPU set, an attribute extension; /proc's FILE on the
 * main thread), so a lookup of ours from inside it would wait for that lock forever (found by
 * tests/unwind_probe "tinystack"; Rust's std calls it whenever a thread starts): the lookup waits for an
 * allocation of the program's own.  The caller is the first return address past the library's frames,
 * which keep frame pointers; without them we cannot tell, and say yes (then only mi_prof_start's thread
 * is looked up, from mprof_unwind_prime).  Nor can we past a libmimalloc composite (i386's realloc goes
 * through mi_realloc, which keeps no frame pointer): yes there too, and the lookup waits for another
 * allocation (it was made from inside pthread_getattr_np's realloc, and hung unwind_tiny_thread_stacks). */
static bool libc_allocating(void)
{
#if MPROF_FRAME_POINTERS
  const uintptr_t *fp = (const uintptr_t *)__builtin_frame_address(0);
  for (int i = 0; i < 16; i++) {
    uintptr_t ret = fp[1];
    if (!in_self(ret)) return in_span(ret, libc_lo, libc_hi) || not_program(ret);
    fp = (const uintptr_t *)fp[0];
  }
  return false;
#else
  return true;
#endif
}

/* This sample's stack: the thread's (deepest point noted), else the alternate signal stack it runs on
 * (bounds kept for this sample's fp walk, which clears them), else one we know nothing about (a
 * makecontext() stack).  The bytes left below `sp`, or SIZE_MAX when unknown. */
static size_t stack_left(thread_stack_t *s, uintptr_t sp)
{
  s->alt_lo = s->alt_hi = 0;
  if (mprof_likely(in_span(sp, s->lo, s->hi))) {
    if (sp < s->mapped_lo) s->mapped_lo = PAGE_FLOOR(sp);
    return sp - s->lo;
  }
  stack_t ss;
  if (sigaltstack(NULL, &ss) == 0 && (ss.ss_flags & SS_ONSTACK) &&
      in_span(sp, (uintptr_t)ss.ss_sp, (uintptr_t)ss.ss_sp + ss.ss_size)) {
    s->alt_lo = PAGE_FLOOR(sp);    /* the page we run on and the rest of the stack above it */
    s->alt_hi = (uintptr_t)ss.ss_sp + ss.ss_size;
    return sp - (uintptr_t)ss.ss_sp;
  }
  if (s->hi != 0 || libc_allocating()) return SIZE_MAX;   /* unknown: not the thread's stack, or not yet */
  stack_lookup(s);                 /* the thread's first sample, off any alternate stack */
  if (!in_span(sp, s->lo, s->hi)) return SIZE_MAX;
  if (sp < s->mapped_lo) s->mapped_lo = PAGE_FLOOR(sp);
  return sp - s->lo;
}

/* Stack needed to unwind max frames with an unwinder whose own need is `base` (see NEED_*). */
static inline bool fits(const thread_stack_t *s, size_t base, size_t max)
{
  return s->left >= base + (max + MPROF_UNWIND_SLACK) * sizeof(uintptr_t);
}

/* Where libunwind would not fit, libgcc (which gives the same stack with less) is asked instead. */
MPROF_NOINLINE bool mprof_unwind_room(size_t max)
{
  thread_stack_t *s = &tstack;
  s->left = stack_left(s, (uintptr_t)__builtin_frame_address(0));
  mprof_unwinder_t u = __atomic_load_n(&unwinder, __ATOMIC_RELAXED);
  if (fits(s, u == MPROF_UNWIND_FP ? NEED_FP : u == MPROF_UNWIND_TABLE ? NEED_TABLE : NEED_LIBGCC, max))
    return true;
  s->alt_lo = s->alt_hi = 0;
  return false;
}

/* ---------------------------------------------------------------------------------------------------
   Frame pointers
--------------------------------------------------------------------------------------------------- */

/* A frame record (16 bytes on 64-bit) lies inside [lo, hi).  No `at + 16 <= hi`: junk near 2^64 wraps. */
static inline bool record_in(uintptr_t at, uintptr_t lo, uintptr_t hi)
{
  return hi - lo >= 2 * sizeof(uintptr_t) && at - lo <= hi - lo - 2 * sizeof(uintptr_t);
}

/* Reads a frame record (saved frame pointer, return address) that lies outside the memory proven mapped:
 * on a coroutine or fiber stack (makecontext, swapcontext) whose extent we do not know, or a junk frame
 * pointer.  The kernel checks the address for us (EFAULT for an unmapped or unreadable page), so a stale
 * frame pointer ends the walk but never faults it.  Where the call is refused (ENOSYS, EPERM), that is
 * remembered and the walk ends there from then on. */
bool mprof_unwind_read_bytes(uintptr_t addr, void *out, size_t n)
{
  if (__atomic_load_n(&vm_readv_refused, __ATOMIC_RELAXED)) return false;
  int saved_errno = errno;
  struct iovec local = {out, n};
  struct iovec remote = {(void *)addr, n};
  ssize_t got = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
  if (got < 0 && (errno == ENOSYS || errno == EPERM))
    __atomic_store_n(&vm_readv_refused, 1, __ATOMIC_RELAXED);
  errno = saved_errno;
  return got == (ssize_t)n;
}

bool mprof_unwind_read_words(uintptr_t addr, uintptr_t *out, size_t n)
{
  return mprof_unwind_read_bytes(addr, out, n * sizeof(uintptr_t));
}

bool mprof_unwind_foreign_refused(void) { return __atomic_load_n(&vm_readv_refused, __ATOMIC_RELAXED) != 0; }

static bool read_foreign(const uintptr_t *fp, uintptr_t record[2])
{
  return mprof_unwind_read_words((uintptr_t)fp, record, 2);
}

/* Each step is checked: aligned, strictly towards the stack's base, read directly only inside the thread's
 * stack (the part proven mapped), the alternate signal stack this sample runs on, or the library's own
 * leading frames (built with frame pointers, on the stack we run on: the records this walk starts from).
 * A leading return address into libmimalloc (a composite that called our leaf) is skipped too, but its
 * code keeps no frame pointer of its own, so the record it leads to is checked like any other. */
static MPROF_NOINLINE size_t unwind_fp(uintptr_t *out, size_t max)
{
  const thread_stack_t *s = &tstack;
  /* The thread's proven range, for a record's address, as [lo, lo + span]: one comparison per frame.
   * Empty: lo = 1, which no aligned address matches. */
  uintptr_t lo = 1, span = 0;
  if (s->hi - s->mapped_lo >= 2 * sizeof(uintptr_t)) {
    lo = s->mapped_lo;
    span = s->hi - lo - 2 * sizeof(uintptr_t);
  }
  const uintptr_t *fp = (const uintptr_t *)__builtin_frame_address(0);
  bool own = true;                  /* fp is a frame of this library: this function's, to begin with */
  size_t n = 0;
  while (n < max) {
    uintptr_t at = (uintptr_t)fp, record[2];
    if ((at & (sizeof(uintptr_t) - 1)) != 0) break;
    if (mprof_likely(at - lo <= span) || own || record_in(at, s->alt_lo, s->alt_hi)) {
      record[0] = fp[0];
      record[1] = fp[1];
    } else if (!read_foreign(fp, record)) {
      break;
    }
    uintptr_t ret = record[1];
    const uintptr_t *next = (const uintptr_t *)record[0];
    if (ret == 0) break;
    bool leading_own = n == 0 && not_program(ret);   /* the caller is not the program: not reported */
    if (!leading_own) out[n++] = ret;
    own = own && leading_own && in_self(ret) && MPROF_FRAME_POINTERS;
    if (next <= fp) break;          /* a frame chain only moves towards the stack's base */
    fp = next;
  }
  return n;
}

/* ---------------------------------------------------------------------------------------------------
   libunwind and libgcc: capture with slack, then drop the library's leading frames
--------------------------------------------------------------------------------------------------- */

static size_t skip_own(uintptr_t *out, const uintptr_t *raw, size_t n, size_t max)
{
  size_t first = 0;
  while (first < n && not_program(raw[first])) first++;
  size_t depth = n - first < max ? n - first : max;
  for (size_t i = 0; i < depth; i++) out[i] = raw[first + i];   /* out <= raw: a forward copy is safe */
  return depth;
}

/* Captures into out itself (it has MPROF_UNWIND_SLACK spare slots), then shifts the program's frames
 * down over the library's.  libgcc (glibc's backtrace) for a thread's first LIBGCC_FIRST samples (not the
 * main thread's), in a fork child that must not call libunwind, where libunwind's larger stack need does
 * not fit, and when it is the unwinder; libunwind otherwise.  Where libgcc_s could not be loaded,
 * libunwind takes every sample it can; the others are dropped (MI_PROF_DROP_UNWIND; a fork child's,
 * MI_PROF_DROP_FORK). */
/* glibc's backtrace(), counted as inside libgcc (a fork child's test). */
static int libgcc_backtrace(uintptr_t *out, int want)
{
  thread_stack_t *s = &tstack;
  s->inside |= INSIDE_LIBGCC;
  __atomic_add_fetch(&libgcc_inside, 1, __ATOMIC_SEQ_CST);
  int n = backtrace((void **)out, want);
  __atomic_sub_fetch(&libgcc_inside, 1, __ATOMIC_SEQ_CST);
  s->inside &= ~INSIDE_LIBGCC;
  return n;
}

#if HAVE_LIBUNWIND
static int libunwind_frames(uintptr_t *out, int want)
{
  thread_stack_t *s = &tstack;
  s->inside |= INSIDE_LIBUNWIND;
  int n = libunwind_backtrace((void **)out, want);
  s->inside &= ~INSIDE_LIBUNWIND;
#if defined(__aarch64__)
  /* libunwind 1.6's unw_backtrace gives each return address minus 1 on aarch64, where libgcc and the fp
   * walk give it whole; instructions are 4-byte aligned, so the 1 is put back and a site's samples from
   * libgcc (a thread's first) and libunwind intern as one stack (unwind_libgcc_and_libunwind_agree under
   * qemu-aarch64: 2 stacks per site before). */
  for (int k = 0; k < n; k++) out[k] += (out[k] & 3) == 3;
#endif
  return n;
}
#endif

static MPROF_NOINLINE size_t unwind_dwarf(uintptr_t *out, size_t max)
{
  thread_stack_t *s = &tstack;
  int want = (int)(max + MPROF_UNWIND_SLACK), n;
#if HAVE_LIBUNWIND
  if (mprof_unlikely(s->dwarf_samples == 0) && (!libgcc_primed || gettid() == getpid()))
    s->dwarf_samples = LIBGCC_FIRST;
  if (__atomic_load_n(&unwinder, __ATOMIC_RELAXED) == MPROF_UNWIND_LIBUNWIND && !child_libgcc_only &&
      s->dwarf_samples >= LIBGCC_FIRST && fits(s, NEED_LIBUNWIND, max)) {
    n = libunwind_frames(out, want);
  } else if (!libgcc_primed) {
    return 0;                      /* libunwind does not fit, and libgcc cannot be loaded in a sample */
  } else
#endif
  {
    s->dwarf_samples += s->dwarf_samples < LIBGCC_FIRST;
    n = libgcc_backtrace(out, want);
  }
  return n > 0 ? skip_own(out, out, (size_t)n, max) : 0;
}

/* ---------------------------------------------------------------------------------------------------
   The table unwinder (unwind_table.c)
--------------------------------------------------------------------------------------------------- */

#if MPROF_HAVE_TABLE
#if HAVE_LIBUNWIND
/* MIMALLOC_PROF_UNWIND_CHECK: the same stack from libunwind, compared frame by frame (unwind_table.c counts
 * and reports).  Not in a fork child that must not call libunwind, nor where its stack need does not fit. */
static MPROF_NOINLINE void check_with_libunwind(const uintptr_t *got, size_t n, size_t max,
                                                mprof_walk_end_t end, bool handed)
{
  thread_stack_t *s = &tstack;
  if (child_libgcc_only || !fits(s, NEED_LIBUNWIND + (max + MPROF_UNWIND_SLACK) * sizeof(uintptr_t), max)) {
    mprof_unwind_check_note(got, n, NULL, 0, end, handed);
    return;
  }
  uintptr_t ref[max + MPROF_UNWIND_SLACK];
  int m = libunwind_frames(ref, (int)(max + MPROF_UNWIND_SLACK));
  size_t k = m > 0 ? skip_own(ref, ref, (size_t)m, max) : 0;
  mprof_unwind_check_note(got, n, ref, k, end, handed);
}
#endif

/* The walk over the memory this thread may read directly (as the fp walk's).  A stack it cannot finish
 * for want of a rule the rows express goes to libgcc where priming loaded it (libgcc_s was in the process
 * already), which unwinds it whole; else the frames found so far are the stack. */
static MPROF_NOINLINE size_t unwind_with_table(uintptr_t *out, size_t max)
{
  thread_stack_t *s = &tstack;
  mprof_walk_env_t env = {.stack_lo = 1, .alt_lo = s->alt_lo, .alt_hi = s->alt_hi, .self_lo = self_lo,
                          .self_hi = self_hi, .mi_lo = mi_lo, .mi_hi = mi_hi, .slot = &s->table_slot,
                          .check = check_table};
  if (s->hi - s->mapped_lo >= sizeof(uintptr_t)) {
    env.stack_lo = s->mapped_lo;
    env.stack_span = s->hi - s->mapped_lo - sizeof(uintptr_t);
  }
  mprof_walk_end_t end;
  size_t n = mprof_unwind_table(out, max, &env, &end);
  bool handed = false;
  if (mprof_unlikely(end == MPROF_WALK_FALLBACK) && n < max && !child_no_dwarf &&
      __atomic_load_n(&prime_state, __ATOMIC_ACQUIRE) == PRIME_DONE && libgcc_primed &&
      fits(s, NEED_LIBGCC, max)) {
    int m = libgcc_backtrace(out, (int)(max + MPROF_UNWIND_SLACK));
    n = m > 0 ? skip_own(out, out, (size_t)m, max) : 0;
    handed = true;
  }
  if (mprof_unlikely(end != MPROF_WALK_DONE || handed || check_table))   /* no shared counter per sample */
    mprof_unwind_table_note(&env, end, handed);
#if HAVE_LIBUNWIND
  if (mprof_unlikely(check_table)) check_with_libunwind(out, n, max, end, handed);
#endif
  return n;
}
#endif

size_t mprof_unwind(uintptr_t *frames, size_t max, mi_prof_drop_reason_t *why)
{
  thread_stack_t *s = &tstack;
  size_t depth = 0;
  *why = MI_PROF_DROP_UNWIND;
  mprof_unwinder_t u = __atomic_load_n(&unwinder, __ATOMIC_RELAXED);
#if MPROF_HAVE_TABLE
  if (mprof_likely(u == MPROF_UNWIND_TABLE)) {
    depth = unwind_with_table(frames, max);
  } else
#endif
  if (u == MPROF_UNWIND_FP) {
    depth = unwind_fp(frames, max);
  } else if (mprof_unlikely(child_no_dwarf)) {
    *why = MI_PROF_DROP_FORK;
  } else if (mprof_likely(__atomic_load_n(&prime_state, __ATOMIC_ACQUIRE) == PRIME_DONE)) {
    depth = unwind_dwarf(frames, max);
  }
  s->alt_lo = s->alt_hi = s->left = 0;          /* mprof_unwind_room's, for this sample only */
  return depth;
}

/* ---------------------------------------------------------------------------------------------------
   fork (see the top of this file): nothing waits
--------------------------------------------------------------------------------------------------- */

void mprof_unwind_prefork(void) { fork_multithreaded = !__libc_single_threaded; }

/* In the child, the only thread is the one that forked; it may itself have been inside an unwinder (fork
 * from a signal handler): that unwind resumes when the handler returns, and is not counted against the
 * child.  A recursive lock such as the loader's write lock, held by the forking thread, would still not
 * be released there (its owner's thread id changed), hence no libunwind after that either. */
void mprof_unwind_postfork_child(void)
{
  thread_stack_t *s = &tstack;
  unsigned mine = (s->inside & INSIDE_LIBGCC) != 0;
  if (__atomic_load_n(&libgcc_inside, __ATOMIC_RELAXED) != mine) child_no_dwarf = true;
  __atomic_store_n(&libgcc_inside, mine, __ATOMIC_RELAXED);
  if (fork_multithreaded || (s->inside & INSIDE_LIBUNWIND) != 0) child_libgcc_only = true;
  if (child_libgcc_only && !libgcc_primed) child_no_dwarf = true;
#if MPROF_HAVE_TABLE
  mprof_unwtab_postfork_child(s->table_slot);
#endif
}

/* mi_prof_stop: the tables go (unwtab.c: once no walk can see them); the next session compiles again. */
void mprof_unwind_release(void)
{
#if MPROF_HAVE_TABLE
  mprof_unwtab_release();
#endif
}
