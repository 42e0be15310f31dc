/* unwind_table.c - the table unwinder's walk (MIMALLOC_PROF_UNWIND=table), and the check that compares
 * it with libunwind sample by sample (MIMALLOC_PROF_UNWIND_CHECK).
 *
 * The walk starts from the registers at a point of its own code (pc, stack pointer, frame pointer) and
 * steps one frame at a time with the row in effect at the frame's address (unwtab.h): the caller's stack
 * pointer is the CFA, its return address and frame pointer are read at their slots below the CFA.  A
 * return address is looked up one byte back (the call, not what follows it: a noreturn call may end a
 * function); an address interrupted by a signal is looked up as it is.  Like the fp walk it reads only
 * the memory unwind.c proves mapped (the thread's stack, the alternate signal stack this sample runs on)
 * and the library's own frames on the stack it runs on; anything else goes through process_vm_readv,
 * and where that is refused the walk ends there.  A frame must lie above the one before it, except across
 * a signal frame (an alternate stack may lie anywhere).
 *
 * Signal frames: a row of kind SIGNAL (x86-64's __restore_rt in glibc, the vdso's __kernel_rt_sigreturn on
 * aarch64: both are FDEs of an 'S' CIE), or an address outside every object whose code is the sigreturn
 * system call (qemu-user's trampoline), is checked to hold that code and then read as the kernel's
 * signal frame: the interrupted pc, stack pointer, frame pointer and, on aarch64, link register come from
 * the ucontext the kernel saved.  The frame after it may be a leaf whose return address is still in the
 * link register (aarch64) or that was stopped mid-prologue: rows for every instruction cover that.
 *
 * The walk ends cleanly where the return address is undefined (the program's _start, a thread's first
 * frame in clone), and otherwise reports why it stopped: no call-frame information (NONE), a rule the
 * rows cannot express (FALLBACK; unwind.c then asks another unwinder for that stack), or memory it may not
 * read.  Async-signal-safe and lock-free; stack use about 0.3 KiB besides a chunk's compilation.
 */
#include "unwtab.h"
#include "internal.h"
#include "pmem.h"
#include "unwind.h"

#include <dlfcn.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <ucontext.h>
#include <unistd.h>

#if MPROF_HAVE_TABLE

#define LEADING_MAX 64        /* the library's own frames, at most, before the program's */
#define OWN_FRAMES_MAX ((uintptr_t)16 << 10)  /* below the sample's deepest point: this walk's callers */

/* A word on the stack outside the thread's proven range: the library's own frames on the stack it runs on
 * (own), the alternate signal stack this sample runs on, else through process_vm_readv. */
static MPROF_NOINLINE bool load_slow(const mprof_walk_env_t *env, uintptr_t a, bool own, uintptr_t *v)
{
  if ((a & (sizeof(uintptr_t) - 1)) != 0) return false;
  if (own || (env->alt_hi - env->alt_lo >= sizeof(uintptr_t) &&
              a - env->alt_lo <= env->alt_hi - env->alt_lo - sizeof(uintptr_t))) {
    *v = *(const uintptr_t *)a;
    return true;
  }
  return mprof_unwind_read_words(a, v, 1);
}

static inline bool load(const mprof_walk_env_t *env, uintptr_t a, bool own, uintptr_t *v)
{
  if (mprof_likely(a - env->stack_lo <= env->stack_span)) {
    *v = *(const uintptr_t *)a;
    return true;
  }
  return load_slow(env, a, own, v);
}

static inline bool in_range(uintptr_t pc, uintptr_t lo, uintptr_t hi) { return pc - lo < hi - lo; }

/* ---------------------------------------------------------------------------------------------------
   Signal frames
--------------------------------------------------------------------------------------------------- */

#if defined(__x86_64__)
/* mov $15, %rax; syscall */
static const uint8_t sigreturn_code[] = {0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05};
#else
/* mov x8, #139; svc #0 */
static const uint8_t sigreturn_code[] = {0x68, 0x11, 0x80, 0xd2, 0x01, 0x00, 0x00, 0xd4};
#endif

/* The code at pc is the sigreturn system call.  `mapped`: pc lies in a loaded object's code that cannot go
 * away meanwhile (a permanent object); otherwise it is read through process_vm_readv, or directly where
 * that is refused (the address was the return address of a frame whose rules led here). */
static bool is_sigreturn(uintptr_t pc, bool mapped)
{
  uint8_t code[sizeof sigreturn_code];
  if (mapped) memcpy(code, (const void *)pc, sizeof code);
  else if (!mprof_unwind_read_bytes(pc, code, sizeof code)) {
    if (!mprof_unwind_foreign_refused()) return false;
    memcpy(code, (const void *)pc, sizeof code);
  }
  return memcmp(code, sigreturn_code, sizeof code) == 0;
}

typedef struct regs_s {
  uintptr_t pc, sp, fp, lr;
  unsigned flags;                /* LR_LIVE, FP_LOST */
} regs_t;

#define LR_LIVE  1u              /* lr holds the frame's link register (after a signal frame) */
#define FP_LOST  2u              /* the frame pointer's value is not known (saved in another register) */

/* At a sigreturn trampoline the stack pointer points at what the kernel pushed: on x86-64 the ucontext
 * (the handler's return address above it was popped), on aarch64 the siginfo and then the ucontext. */
static bool signal_step(const mprof_walk_env_t *env, regs_t *r)
{
#if defined(__x86_64__)
  uintptr_t g = r->sp + offsetof(ucontext_t, uc_mcontext.gregs);
  uintptr_t pc, sp, fp;
  if (!load(env, g + 8 * REG_RIP, false, &pc) || !load(env, g + 8 * REG_RSP, false, &sp) ||
      !load(env, g + 8 * REG_RBP, false, &fp))
    return false;
  *r = (regs_t){pc, sp, fp, 0, LR_LIVE};
#else
  uintptr_t m = r->sp + sizeof(siginfo_t) + offsetof(ucontext_t, uc_mcontext);
  uintptr_t pc, sp, fp, lr;
  if (!load(env, m + offsetof(mcontext_t, pc), false, &pc) ||
      !load(env, m + offsetof(mcontext_t, sp), false, &sp) ||
      !load(env, m + offsetof(mcontext_t, regs) + 8 * 29, false, &fp) ||
      !load(env, m + offsetof(mcontext_t, regs) + 8 * 30, false, &lr))
    return false;
  *r = (regs_t){pc, sp, fp, lr, LR_LIVE};
#endif
  return true;
}

#if defined(__aarch64__)
/* The return address without its pointer-authentication code (xpaclri: a no-op hint without PAC). */
static inline uintptr_t strip_pac(uintptr_t ra)
{
  register uintptr_t x30 __asm__("x30") = ra;
  __asm__("hint #7" : "+r"(x30));
  return x30;
}
#else
static inline uintptr_t strip_pac(uintptr_t ra) { return ra; }
#endif

/* ---------------------------------------------------------------------------------------------------
   The walk
--------------------------------------------------------------------------------------------------- */

/* A step by any row: the plain ones with memory read through load(), the return address in the link
 * register, a lost frame pointer, a PLT entry, a signal frame, the end of the stack and the rows that stop
 * the walk.  Updates r; returns MPROF_WALK_DONE to go on, else how the walk ends (END: DONE too, with *stop
 * set). */
static MPROF_NOINLINE mprof_walk_end_t odd_step(const mprof_walk_env_t *env, uint64_t rule, regs_t *r,
                                                bool own, bool permanent, bool *stop)
{
  unsigned *flags = &r->flags;
  uintptr_t cfa, ra;
  switch (MPROF_ROW_KIND(rule)) {
  case MPROF_KIND_STD:
  case MPROF_KIND_SLOW:          /* the return address in LR, or the frame pointer lost here */
    if ((rule & MPROF_ROW_FP_BASE) && (*flags & FP_LOST)) return MPROF_WALK_FALLBACK;
    cfa = ((rule & MPROF_ROW_FP_BASE) ? r->fp : r->sp) + MPROF_ROW_CFA_OFF(rule);
    if (MPROF_ROW_RA(rule) != 0) {
      if (cfa <= r->sp || !load(env, cfa - 8 * MPROF_ROW_RA(rule), own, &ra)) return MPROF_WALK_UNREADABLE;
    } else {
      if (!(*flags & LR_LIVE)) return MPROF_WALK_FALLBACK;
      if (cfa < r->sp) return MPROF_WALK_UNREADABLE;   /* a leaf may have no frame at all: cfa == sp */
      ra = r->lr;
    }
    if (MPROF_ROW_FP(rule) == MPROF_ROW_FP_LOST) {
      *flags |= FP_LOST;
    } else if (MPROF_ROW_FP(rule) != 0) {
      if (!load(env, cfa - 8 * MPROF_ROW_FP(rule), own, &r->fp)) return MPROF_WALK_UNREADABLE;
      *flags &= ~FP_LOST;
    }
    if (rule & MPROF_ROW_PAC) ra = strip_pac(ra);
    r->sp = cfa, r->pc = ra;
    *flags &= ~LR_LIVE;
    return MPROF_WALK_DONE;
  case MPROF_KIND_PLT:
    cfa = r->sp + MPROF_ROW_CFA_OFF(rule) + ((r->pc & 15) >= MPROF_ROW_FP(rule) ? 8 : 0);
    if (!load(env, cfa - 8, own, &ra)) return MPROF_WALK_UNREADABLE;
    r->sp = cfa, r->pc = ra;
    *flags &= ~LR_LIVE;
    return MPROF_WALK_DONE;
  case MPROF_KIND_SIGNAL:
    if (!is_sigreturn(r->pc, permanent) || !signal_step(env, r)) return MPROF_WALK_FALLBACK;
    return MPROF_WALK_DONE;
  case MPROF_KIND_END:
    *stop = true;
    return MPROF_WALK_DONE;
  case MPROF_KIND_NONE:
    return MPROF_WALK_NONE;
  default:
    return MPROF_WALK_FALLBACK;
  }
}

/* The walk's state outside the registers of its fast loop. */
typedef struct walk_s {
  regs_t r;
  uintptr_t adj;                 /* 1: r.pc is a return address, looked up one byte back; 0: where it runs */
  const mprof_uobj_t *obj, *prev; /* the object r.pc lies in, and the one before (often next again) */
  bool leading;                  /* still in the library's own frames (or libmimalloc's): not reported */
  unsigned leading_steps;
  mprof_ucursor_t cursor;
} walk_t;

/* One step of any kind: a frame in an object not met yet, an odd row, memory outside the thread's stack,
 * the library's leading frames, the frame after a signal frame.  MPROF_WALK_DONE with *stop false: go on
 * (*emit: report w->r.pc). */
static MPROF_NOINLINE mprof_walk_end_t step_slow(walk_t *w, const mprof_walk_env_t *env, bool *stop,
                                                 bool *emit)
{
  regs_t *r = &w->r;
  uintptr_t look = r->pc - w->adj;
  *emit = false;
  if (w->obj == NULL || look - w->obj->start >= w->obj->span) {
    const mprof_uobj_t *o = w->prev;
    if (o == NULL || look - o->start >= o->span) o = mprof_unwtab_find(look, &w->cursor);
    if (o == NULL) {                             /* outside every object: qemu-user's trampoline? */
      if (!is_sigreturn(r->pc, false) || !signal_step(env, r)) return MPROF_WALK_NONE;
      w->adj = 0;
      goto stepped;
    }
    w->prev = w->obj, w->obj = o;
  }
  uint64_t rule = mprof_unwtab_rule(w->obj, look - w->obj->start);
  mprof_walk_end_t why = odd_step(env, rule, r, w->leading, w->obj->permanent, stop);
  if (why != MPROF_WALK_DONE || *stop) return why;
  w->adj = MPROF_ROW_KIND(rule) == MPROF_KIND_SIGNAL ? 0 : 1;
stepped:
  if (r->pc == 0) {
    *stop = true;
    return MPROF_WALK_DONE;
  }
  if (w->leading) {
    if (in_range(r->pc, env->self_lo, env->self_hi) || in_range(r->pc, env->mi_lo, env->mi_hi))
      return ++w->leading_steps == LEADING_MAX ? MPROF_WALK_UNREADABLE : MPROF_WALK_DONE;
    w->leading = false;
  }
  *emit = true;
  return MPROF_WALK_DONE;
}

/* The fast loop keeps pc, sp and fp in registers and takes plain rows only: a frame in the object of the
 * frame before, its return address (and frame pointer) on the thread's stack.  Anything else goes through
 * step_slow, with the state in memory. */
MPROF_NOINLINE size_t
mprof_unwind_table(uintptr_t *out, size_t max, mprof_walk_env_t *env, mprof_walk_end_t *end)
{
  walk_t w;                      /* what step_slow and the lookups read, set field by field */
  w.r.flags = 0, w.r.lr = 0, w.obj = w.prev = NULL, w.leading = true, w.leading_steps = 0;
  w.cursor.obj = NULL, w.cursor.lo = 1, w.cursor.span = 0, w.cursor.n_checked = 0;
#if defined(__x86_64__) && MPROF_FRAME_POINTERS
  /* The library's frames keep frame pointers, and on x86-64 a frame record lies right below its CFA: the
   * records lead past them to the first frame that is not ours at the cost of the fp walk. */
  const uintptr_t *f = (const uintptr_t *)__builtin_frame_address(0);
  for (unsigned i = 0; in_range(f[1], env->self_lo, env->self_hi) && i < LEADING_MAX; i++) {
    const uintptr_t *next = (const uintptr_t *)f[0];
    if (next <= f) break;
    f = next;
  }
  uintptr_t pc = f[1], sp = (uintptr_t)(f + 2), fp = f[0];
  w.adj = 1;
#else
  uintptr_t pc, sp, fp;
#if defined(__x86_64__)
  __asm__ volatile("lea 0(%%rip), %0\n\tmov %%rsp, %1\n\tmov %%rbp, %2" : "=r"(pc), "=r"(sp), "=r"(fp));
#else
  /* And the link register: where this function's prologue has not saved it yet (the compiler may move
   * it past code that needs no frame), it still holds the return address, and the row here says so. */
  __asm__ volatile("adr %0, .\n\tmov %1, sp\n\tmov %2, x29\n\tmov %3, x30"
                   : "=r"(pc), "=r"(sp), "=r"(fp), "=r"(w.r.lr));
  w.r.flags = LR_LIVE;
#endif
  w.adj = 0;                     /* the walk starts where execution is */
#endif
  /* The walk's own frames may lie below the deepest point of the thread's stack noted for this sample
   * (mprof_unwind_room's), on the stack it runs on: all of it from sp up is mapped.  Where the library is
   * linked into the program they are reported frames, not leading ones read as our own. */
  if (env->stack_span != 0 && sp < env->stack_lo && env->stack_lo - sp <= OWN_FRAMES_MAX) {
    uintptr_t lo = sp & ~(uintptr_t)(sizeof(uintptr_t) - 1);
    env->stack_span += env->stack_lo - lo;
    env->stack_lo = lo;
  }
  const uintptr_t s_lo = env->stack_lo, s_span = env->stack_span, top = s_lo + s_span;
  uintptr_t *p = out, *p_end = out + max;
  mprof_walk_end_t why = MPROF_WALK_DONE;
  unsigned slot = mprof_unwtab_enter();
  *env->slot = slot + 1;
#if defined(__x86_64__) && MPROF_FRAME_POINTERS
  if (p < p_end && pc != 0 && !in_range(pc, env->self_lo, env->self_hi) &&
      !in_range(pc, env->mi_lo, env->mi_hi)) {
    *p++ = pc;                   /* the program's first frame, found by the records */
    w.leading = false;
  }
#endif
  /* Plain steps keep pc, sp and fp in registers: a frame whose row is a plain STD one, its return address
   * (and frame pointer) on the thread's stack between sp and top.  Every slot read lies above sp, which
   * only grows, so the CFA does too.  Anything else takes a step of step_slow, with the state in memory. */
  const mprof_tabchunk_t *ch = NULL;
  uintptr_t c_lo = 1;            /* ch covers [c_lo, c_lo + a chunk) */
  if (w.adj == 1 && !w.leading) goto plain;
  while (p < p_end) {
    w.r.pc = pc, w.r.sp = sp, w.r.fp = fp;
    bool stop = false, emit;
    why = step_slow(&w, env, &stop, &emit);
    if (why != MPROF_WALK_DONE || stop) break;
    pc = w.r.pc, sp = w.r.sp, fp = w.r.fp;
    if (emit) *p++ = pc;
    if (w.adj != 1 || w.r.flags != 0 || w.leading) continue;
    c_lo = 1;                    /* step_slow may have moved to another object */
  plain:
    if (sp - s_lo > s_span) continue;
    while (p < p_end) {
      uintptr_t look = pc - 1;
      if (mprof_unlikely(look - c_lo >= ((uintptr_t)1 << MPROF_TAB_CHUNK_SHIFT))) {
        const mprof_uobj_t *o = w.obj;
        if (o == NULL || look - o->start >= o->span) {
          o = w.prev;
          if (o == NULL || look - o->start >= o->span) o = mprof_unwtab_find(look, &w.cursor);
          if (o == NULL) break;
          w.prev = w.obj, w.obj = o;
        }
        uintptr_t off = look - o->start;
        ch = mprof_unwtab_chunk(o, off);
        if ((uintptr_t)ch <= (uintptr_t)MPROF_TAB_EMPTY) break;
        c_lo = look - (off & ((1u << MPROF_TAB_CHUNK_SHIFT) - 1));
      }
      const mprof_rule_t *rule = mprof_unwtab_chunk_rule(ch, (uint32_t)(look - c_lo));
      if (mprof_unlikely(rule->kind != MPROF_KIND_STD)) {
        if (rule->kind == MPROF_KIND_END) goto out;
        break;
      }
      uintptr_t cfa = ((rule->flags & MPROF_RULE_FP_BASE) ? fp : sp) + (uintptr_t)rule->cfa8 * 8;
      uintptr_t a = cfa + (uintptr_t)((intptr_t)rule->ra * 8), room = top - sp;
      if (mprof_unlikely(a - sp > room)) break;
      uintptr_t ra = *(const uintptr_t *)a;
      if (rule->fp != 0) {
        a = cfa + (uintptr_t)((intptr_t)rule->fp * 8);
        if (mprof_unlikely(a - sp > room)) break;
        fp = *(const uintptr_t *)a;
      }
#if defined(__aarch64__)
      if (rule->flags & MPROF_RULE_PAC) ra = strip_pac(ra);
#endif
      sp = cfa, pc = ra;
      if (mprof_unlikely(pc == 0)) goto out;
      *p++ = pc;
    }
  }
out:
  *env->slot = 0;
  mprof_unwtab_leave(slot);
  *end = why;
  env->stop_pc = pc;
  return (size_t)(p - out);
}

/* ---------------------------------------------------------------------------------------------------
   How walks end, and the check against libunwind
--------------------------------------------------------------------------------------------------- */

static uint64_t ends[4], handed_over;   /* relaxed atomics: walks by how they ended; stacks libgcc took */
#define STOPS_KEPT 8
static uintptr_t stops[STOPS_KEPT];     /* where the first walks that ended early stopped (the check's) */
static unsigned stop_end[STOPS_KEPT], n_stops;

void mprof_unwind_table_note(const mprof_walk_env_t *env, mprof_walk_end_t end, bool handed)
{
  __atomic_fetch_add(&ends[end], 1, __ATOMIC_RELAXED);
  if (handed) __atomic_fetch_add(&handed_over, 1, __ATOMIC_RELAXED);
  if (end != MPROF_WALK_DONE && env->check) {
    unsigned k = __atomic_fetch_add(&n_stops, 1, __ATOMIC_RELAXED);
    if (k < STOPS_KEPT) stops[k] = env->stop_pc, stop_end[k] = end;
  }
}

#define CHECK_KEEP   32        /* differing samples kept for the report */
#define CHECK_FRAMES 48        /* of each stack */

typedef struct check_sample_s {
  uint32_t na, nb, end, handed;
  uintptr_t a[CHECK_FRAMES], b[CHECK_FRAMES];
} check_sample_t;

static struct {
  uint64_t samples, same, unchecked, differ, shorter, longer, frame;
  uint64_t kept;                           /* slots of `keep` claimed */
  check_sample_t *keep;                    /* CHECK_KEEP of them, profiler memory (mapped at first need) */
} check;

void mprof_unwind_check_note(const uintptr_t *a, size_t na, const uintptr_t *b, size_t nb,
                             mprof_walk_end_t end, bool handed)
{
  __atomic_fetch_add(&check.samples, 1, __ATOMIC_RELAXED);
  if (b == NULL) {
    __atomic_fetch_add(&check.unchecked, 1, __ATOMIC_RELAXED);
    return;
  }
  size_t i = 0;
  while (i < na && i < nb && a[i] == b[i]) i++;
  if (i == na && i == nb) {
    __atomic_fetch_add(&check.same, 1, __ATOMIC_RELAXED);
    return;
  }
  __atomic_fetch_add(&check.differ, 1, __ATOMIC_RELAXED);
  __atomic_fetch_add(i == na ? &check.shorter : i == nb ? &check.longer : &check.frame, 1, __ATOMIC_RELAXED);
  check_sample_t *keep = __atomic_load_n(&check.keep, __ATOMIC_ACQUIRE);
  if (keep == NULL) {
    check_sample_t *mine = mprof_pmem_map(CHECK_KEEP * sizeof(check_sample_t));
    if (mine == NULL) return;
    if (!__atomic_compare_exchange_n(&check.keep, &keep, mine, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
      mprof_pmem_unmap(mine, CHECK_KEEP * sizeof(check_sample_t));
    else keep = mine;
  }
  uint64_t k = __atomic_fetch_add(&check.kept, 1, __ATOMIC_RELAXED);
  if (k >= CHECK_KEEP) return;
  check_sample_t *c = &keep[k];
  c->na = (uint32_t)(na < CHECK_FRAMES ? na : CHECK_FRAMES);
  c->nb = (uint32_t)(nb < CHECK_FRAMES ? nb : CHECK_FRAMES);
  c->end = end;
  c->handed = handed;
  memcpy(c->a, a, c->na * sizeof(uintptr_t));
  memcpy(c->b, b, c->nb * sizeof(uintptr_t));
}

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if ((size_t)n >= sizeof line) n = sizeof line - 1;
  ssize_t w = write(2, line, (size_t)n);
  (void)w;
}

static void say_frame(const char *who, size_t i, uintptr_t pc)
{
  Dl_info info;
  if (dladdr((void *)(pc - 1), &info) != 0 && info.dli_fname != NULL) {
    const char *obj = strrchr(info.dli_fname, '/');
    obj = obj != NULL ? obj + 1 : info.dli_fname;
    if (info.dli_sname != NULL)
      say("  %s #%zu %#lx %s+%#lx (%s+%#lx)\n", who, i, (unsigned long)pc, info.dli_sname,
          (unsigned long)(pc - (uintptr_t)info.dli_saddr), obj,
          (unsigned long)(pc - (uintptr_t)info.dli_fbase));
    else
      say("  %s #%zu %#lx (%s+%#lx)\n", who, i, (unsigned long)pc, obj,
          (unsigned long)(pc - (uintptr_t)info.dli_fbase));
  } else {
    say("  %s #%zu %#lx\n", who, i, (unsigned long)pc);
  }
}

static const char *const end_name[] = {"done", "no-cfi", "fallback", "unreadable"};

/* At exit, when the check ran: the counts, what the tables cost, and the first differing samples. */
__attribute__((destructor)) MPROF_LOAD_TEXT static void check_report(void)
{
  if (check.samples == 0) return;
  mprof_unwtab_stats_t st;
  mprof_unwtab_stats(&st);
  say("mimalloc-prof: unwind check: pid %d: %" PRIu64 " samples, %" PRIu64 " identical to libunwind, %" PRIu64
      " differ (table shorter %" PRIu64 ", longer %" PRIu64 ", a frame differs %" PRIu64 "), %" PRIu64
      " unchecked\n",
      (int)getpid(), check.samples, check.same, check.differ, check.shorter, check.longer, check.frame,
      check.unchecked);
  say("mimalloc-prof: unwind check: walks ended: done %" PRIu64 ", no-cfi %" PRIu64 ", fallback %" PRIu64
      " (libgcc took %" PRIu64 "), unreadable %" PRIu64 "; tables: %" PRIu64 " objects, %" PRIu64 " chunks, %"
      PRIu64 " rows, %" PRIu64 " bytes, %" PRIu64 " failed, %" PRIu64 " stale; read from files %" PRIu64
      " (%" PRIu64 " reads), in place %" PRIu64 ", objects copied %" PRIu64 ", object reads %" PRIu64 "\n",
      ends[0], ends[1], ends[2], handed_over, ends[3], st.objects, st.chunks, st.rows, st.chunk_bytes,
      st.chunk_failures, st.stale, st.file_compiles, st.file_preads, st.in_place_compiles, st.copies,
      st.object_reads);
  for (unsigned k = 0; k < n_stops && k < STOPS_KEPT; k++) {
    say("mimalloc-prof: unwind check: a walk ended (%s) at:\n", end_name[stop_end[k]]);
    say_frame("stopped  ", 0, stops[k]);
  }
  uint64_t kept = check.kept < CHECK_KEEP ? check.kept : CHECK_KEEP;
  for (uint64_t k = 0; k < kept && check.keep != NULL; k++) {
    const check_sample_t *c = &check.keep[k];
    size_t i = 0;
    while (i < c->na && i < c->nb && c->a[i] == c->b[i]) i++;
    say("mimalloc-prof: unwind check: differs at frame %zu (table %u frames, walk %s%s; libunwind %u):\n", i,
        c->na, end_name[c->end], c->handed ? ", libgcc took it" : "", c->nb);
    size_t from = i > 2 ? i - 2 : 0;
    for (size_t j = from; j < c->na && j < i + 4; j++) say_frame("table    ", j, c->a[j]);
    for (size_t j = from; j < c->nb && j < i + 4; j++) say_frame("libunwind", j, c->b[j]);
  }
}

#endif /* MPROF_HAVE_TABLE */
