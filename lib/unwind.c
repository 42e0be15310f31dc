/* unwind.c - stack traces for samples: a frame-pointer walk, libunwind, or glibc's backtrace() (libgcc).
 *
 * Called on the sampling thread before any profiler lock is taken, with the reentrancy guard up (so what
 * an unwinder allocates is served unsampled).  Every unwinder returns return addresses, innermost first,
 * with the library's own frames (the malloc entry point, the slow path, this file) skipped by address:
 * leading frames inside the library's executable segments are dropped.
 *
 * MIMALLOC_PROF_UNWIND selects the unwinder; "auto" takes libunwind when the library was built with it,
 * else libgcc (doc/design.md has the measurements behind that choice).  The frame-pointer walk reads
 * frames inside the thread's stack (bounds cached per thread) directly and any other frame (a coroutine
 * stack) through process_vm_readv, and validates every step: aligned, readable, strictly moving towards
 * the stack's base.
 *
 * fork: the unwinders take locks of their own (libgcc's, libunwind's, the loader's dl_iterate_phdr
 * lock) that a fork child would inherit held if another thread were unwinding at that moment; the
 * child's next sample would then hang.  So the prepare handler raises `fork_pending` and waits until no
 * thread is inside an unwinder; a sample that starts meanwhile is dropped (MI_PROF_DROP_UNWIND).
 */
#include "internal.h"

#include <execinfo.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <sys/uio.h>
#include <unistd.h>

#include <dlfcn.h>

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
  if (libunwind_backtrace != NULL) return true;
  void *h = dlopen(MPROF_LIBUNWIND_SONAME, RTLD_NOW | RTLD_LOCAL);
  if (h != NULL) libunwind_backtrace = (unw_backtrace_fn *)dlsym(h, MPROF_STR(unw_backtrace));
  return libunwind_backtrace != NULL;
}
#endif

static mprof_unwinder_t unwinder = MPROF_UNWIND_LIBGCC;
static uintptr_t self_lo, self_hi; /* the library's executable segments (DSO build) */

typedef struct stack_bounds_s {
  uintptr_t lo, hi;               /* [lo, hi): this thread's stack; hi == 0: not known yet */
} stack_bounds_t;

static __thread stack_bounds_t stack_bounds __attribute__((tls_model("initial-exec")));

static inline bool in_self(uintptr_t pc) { return pc - self_lo < self_hi - self_lo; }

/* ---------------------------------------------------------------------------------------------------
   Where the library's code is
--------------------------------------------------------------------------------------------------- */

static int find_self(struct dl_phdr_info *info, size_t size, void *arg)
{
  (void)size;
  uintptr_t probe = (uintptr_t)arg, lo = UINTPTR_MAX, hi = 0;
  bool mine = false;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X)) continue;
    uintptr_t start = info->dlpi_addr + ph->p_vaddr, end = start + ph->p_memsz;
    if (probe - start < end - start) mine = true;
    if (start < lo) lo = start;
    if (end > hi) hi = end;
  }
  if (!mine) return 0;
  /* In a static link the library's code is the program's: then nothing can be told apart by
   * address, and no frame is skipped (drop_frames in the profile still hides the entry points). */
  if (info->dlpi_name == NULL || info->dlpi_name[0] == '\0') return 1;
  self_lo = lo;
  self_hi = hi;
  return 1;
}

static const char *const unwinder_name[] = {
  [MPROF_UNWIND_FP] = "fp", [MPROF_UNWIND_LIBUNWIND] = "libunwind", [MPROF_UNWIND_LIBGCC] = "libgcc"};

const char *mprof_unwind_name(mprof_unwinder_t u) { return unwinder_name[u]; }

/* At load: where our code is, and which unwinder MIMALLOC_PROF_UNWIND asks for. */
void mprof_unwind_init(void)
{
  dl_iterate_phdr(find_self, (void *)(uintptr_t)&mprof_unwind_init);
  uint64_t want = mprof_option(MPROF_OPT_UNWIND);
#if !HAVE_LIBUNWIND
  if (want == MPROF_UNWIND_LIBUNWIND) {
    mprof_warn("MIMALLOC_PROF_UNWIND=libunwind, but this build has no libunwind; using libgcc");
    want = MPROF_UNWIND_LIBGCC;
  }
#endif
  if (want == MPROF_UNWIND_AUTO) want = HAVE_LIBUNWIND ? MPROF_UNWIND_LIBUNWIND : MPROF_UNWIND_LIBGCC;
  unwinder = (mprof_unwinder_t)want;
}

mprof_unwinder_t mprof_unwind_current(void) { return unwinder; }

/* Before the first sample (under api_lock, guard up): load libunwind; libgcc's unwinder loads itself
 * (and allocates) on first use, so call it once. */
void mprof_unwind_prime(void)
{
  void *frames[4];
#if HAVE_LIBUNWIND
  if (unwinder == MPROF_UNWIND_LIBUNWIND && !load_libunwind()) {
    mprof_warn("cannot load %s (%s); unwinding with libgcc", MPROF_LIBUNWIND_SONAME, dlerror());
    unwinder = MPROF_UNWIND_LIBGCC;
  }
#endif
  if (unwinder == MPROF_UNWIND_LIBGCC) (void)backtrace(frames, 4);
}

/* ---------------------------------------------------------------------------------------------------
   Frame pointers
--------------------------------------------------------------------------------------------------- */

/* This thread's stack bounds, looked up once per thread (pthread_getattr_np reads /proc and allocates
 * on the main thread: the guard is up, so those allocations are not sampled). */
static const stack_bounds_t *thread_stack(void)
{
  stack_bounds_t *b = &stack_bounds;
  if (mprof_likely(b->hi != 0)) return b;
  pthread_attr_t attr;
  void *addr;
  size_t size;
  if (pthread_getattr_np(pthread_self(), &attr) == 0) {
    if (pthread_attr_getstack(&attr, &addr, &size) == 0) {
      b->lo = (uintptr_t)addr;
      b->hi = (uintptr_t)addr + size;
    }
    pthread_attr_destroy(&attr);
  }
  if (b->hi == 0) {                /* unknown: allow 1 MiB above the current frame */
    b->lo = (uintptr_t)__builtin_frame_address(0);
    b->hi = b->lo + ((uintptr_t)1 << 20);
  }
  return b;
}

/* Reads a frame record (saved frame pointer, return address) that lies outside the thread's stack: a
 * coroutine or fiber stack (makecontext, swapcontext) whose extent we do not know.  The kernel checks
 * the address for us (EFAULT for an unmapped or unreadable page), so a stale frame pointer can end the
 * walk but never fault it.  A sandbox that forbids the call only ends the walk early. */
static bool read_foreign(const uintptr_t *fp, uintptr_t record[2])
{
  struct iovec local = {record, 2 * sizeof(uintptr_t)};
  struct iovec remote = {(void *)(uintptr_t)fp, 2 * sizeof(uintptr_t)};
  return process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == (ssize_t)(2 * sizeof(uintptr_t));
}

static MPROF_NOINLINE size_t unwind_fp(uintptr_t *out, size_t max)
{
  const stack_bounds_t *b = thread_stack();
  const uintptr_t *fp = (const uintptr_t *)__builtin_frame_address(0);
  size_t n = 0;
  while (n < max) {
    uintptr_t at = (uintptr_t)fp, record[2];
    if ((at & (sizeof(uintptr_t) - 1)) != 0) break;
    if (at >= b->lo && at <= b->hi - 2 * sizeof(uintptr_t)) {   /* no `at + 16`: junk near 2^64 wraps */
      record[0] = fp[0];
      record[1] = fp[1];
    } else if (!read_foreign(fp, record)) {
      break;
    }
    uintptr_t ret = record[1];
    const uintptr_t *next = (const uintptr_t *)record[0];
    if (ret == 0) break;
    if (n > 0 || !in_self(ret)) out[n++] = ret;
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
  while (first < n && in_self(raw[first])) first++;
  size_t depth = n - first < max ? n - first : max;
  for (size_t i = 0; i < depth; i++) out[i] = raw[first + i];   /* out <= raw: a forward copy is safe */
  return depth;
}

/* Captures into out itself (it has MPROF_UNWIND_SLACK spare slots), then shifts the program's frames
 * down over the library's. */
static MPROF_NOINLINE size_t unwind_dwarf(uintptr_t *out, size_t max)
{
  int want = (int)(max + MPROF_UNWIND_SLACK), n;
#if HAVE_LIBUNWIND
  if (unwinder == MPROF_UNWIND_LIBUNWIND) n = libunwind_backtrace((void **)out, want);
  else
#endif
    n = backtrace((void **)out, want);
  return n > 0 ? skip_own(out, out, (size_t)n, max) : 0;
}

static unsigned unwinding;          /* threads inside an unwinder (atomic) */
static int fork_pending;            /* a fork is being prepared (atomic) */

size_t mprof_unwind(uintptr_t *frames, size_t max)
{
  size_t depth = 0;
  __atomic_add_fetch(&unwinding, 1, __ATOMIC_SEQ_CST);
  if (mprof_likely(!__atomic_load_n(&fork_pending, __ATOMIC_SEQ_CST)))
    depth = unwinder == MPROF_UNWIND_FP ? unwind_fp(frames, max) : unwind_dwarf(frames, max);
  __atomic_sub_fetch(&unwinding, 1, __ATOMIC_SEQ_CST);
  return depth;
}

/* Before fork: no thread may be inside an unwinder (see the top of this file).  Unwinds take
 * microseconds, so yielding until they are done is short. */
void mprof_unwind_prefork(void)
{
  __atomic_store_n(&fork_pending, 1, __ATOMIC_SEQ_CST);
  while (__atomic_load_n(&unwinding, __ATOMIC_SEQ_CST) != 0) sched_yield();
}

void mprof_unwind_postfork(void) { __atomic_store_n(&fork_pending, 0, __ATOMIC_SEQ_CST); }
