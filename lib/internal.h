/* internal.h - types and prototypes shared between the library's files, a section per file.
 * Internal names that cross files are mprof_<concern>_<verb>; they are hidden (-fvisibility=hidden) and
 * never match the ^mi_prof_ export pattern. */
#ifndef MPROF_INTERNAL_H
#define MPROF_INTERNAL_H

#include "config.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <mimalloc.h>

#include "inline.h"

/* "mireal.c": libmimalloc.so.2's own functions.  This library exports the same names (mi_api.c), so it
 * never calls them by name: always through this table (each pointer starts at a stub that looks its
 * function up, stores it and calls it). */
typedef struct mprof_mi_s {
#define MI_FN(ret, name, params, args) ret(*name) params;
#define MI_VOID(name, params, args)    void(*name) params;
#include "mimalloc_api.def"
#undef MI_FN
#undef MI_VOID
} mprof_mi_t;

extern mprof_mi_t mprof_mi MPROF_HIDDEN;   /* hidden: addressed %rip-relative */

/* Only "leaf" functions of libmimalloc may be called after a fast path charged the countdown: some of its
 * functions call others of its exported functions through the PLT (mi_realloc tail-calls
 * mi_heap_realloc, mi_malloc_aligned_at tail-calls mi_heap_malloc_aligned_at, the aligned reallocs call
 * it to move, mi_strdup calls mi_heap_strdup, ...), and since this library exports those names too, such
 * a call would come back to our wrapper and be charged twice.  mi_heap_malloc_aligned_at and
 * mi_heap_zalloc_aligned_at are leaves (and take mimalloc's general aligned path: Debian's 2.0.9
 * mi_malloc_aligned() returns misaligned blocks for power-of-two sizes of 256..1024 bytes at alignments
 * 32..size, mimalloc issue #700), and so is mi_heap_realloc.  tests/test_mi_api.c checks every entry
 * point for a double charge. */
#define mprof_mi_malloc_aligned(size, alignment) \
  mprof_mi.mi_heap_malloc_aligned_at(mprof_mi.mi_heap_get_default(), (size), (alignment), 0)
#define mprof_mi_zalloc_aligned(size, alignment) \
  mprof_mi.mi_heap_zalloc_aligned_at(mprof_mi.mi_heap_get_default(), (size), (alignment), 0)
#define mprof_mi_realloc(p, size) mprof_mi.mi_heap_realloc(mprof_mi.mi_heap_get_default(), (p), (size))

/* Two composites are called on purpose (realloc -> mi_realloc, the aligned C functions ->
 * mi_malloc_aligned_at): their PLT call to our mi_heap_realloc / mi_heap_malloc_aligned_at charges the
 * countdown, once.  On x86-64 and aarch64 that call is a tail call; on i386 it cannot be (PIC code needs
 * %ebx, callee-saved, for the PLT), so the composite's frame, without a frame pointer, lies between ours
 * and the program's, and only inside it is the program's return address kept: where we jump into the
 * composite, the fp walk then lost the program's function (the stack started in libmimalloc, at the
 * program's caller).  MPROF_KEEP_FRAME(q) after such a call keeps it a call there: our frame, chained by
 * the frame pointer the composite leaves alone, holds the return address, and the unwinders skip the
 * composite as a leading frame (unwind.c). */
#if defined(__i386__)
#define MPROF_KEEP_FRAME(q) __asm__ volatile("" : "+r"(q))
#else
#define MPROF_KEEP_FRAME(q) ((void)0)
#endif

/* Requests above PTRDIFF_MAX can never be served; mimalloc then returns NULL without setting errno, so
 * the slow paths (which every such request reaches: no countdown is that large) set ENOMEM. */
#define MPROF_MAX_REQUEST ((size_t)PTRDIFF_MAX)

#if MPROF_PPROF

#include <pthread.h>
#include <sys/types.h>
#include <time.h>

#include "mimalloc-prof.h"

/* Fixed point for estimated object counts: a sample of an s-byte allocation stands for 1/p objects,
 * kept in units of 1/MPROF_FX_ONE object so sums of many samples add and subtract exactly. */
#define MPROF_FX_ONE 1024

/* Locks, in the one global order every path and the atfork handlers take them (a lower rank is taken
 * first; no path takes a lower rank while holding a higher one):
 *  -1. glibc     dl_load_lock, dl_load_write_lock   the dynamic loader's, and the locks libunwind and
 *                libgcc take inside them.  dlopen and dlclose hold dl_load_lock while constructors and
 *                destructors run: any code, which may malloc (and be sampled), call mi_prof_*, or fork.
 *                dl_iterate_phdr holds dl_load_write_lock while its callback runs (unwinders'; a sampled
 *                malloc in one).  dlopen, dlsym, dladdr, dl_iterate_phdr, the unwinders' first calls
 *                (mprof_unwind_prime) and pthread_create take them.  So no profiler lock is ever held
 *                while calling any of these, and nothing waits for a thread that may be waiting for them:
 *                stacks are captured before any profiler lock (unwind.c); priming is never waited for and
 *                the fork handlers do not wait for unwinds; dumps copy the loaded objects before taking
 *                dump_lock and read names without the loader (objects.c).
 *   0. dump.c    dump_lock       one dump at a time, and exit waiting for one being written (a dump
 *                                then takes 1, 3 and 4 briefly); its holder never waits for a loader lock.
 *                                fork does not take it (a writer may wait on a pipe the forking thread
 *                                reads): the child re-initialises it (dump.c).
 *   1. api.c     api_lock        start, stop, reset, stats, observer changes
 *   2. sheap.c   sheap_lock      every operation on the slots of sampled blocks
 *   3. record.c  shard[i].lock   one shard of the record table, in index order when taking several
 *   4. stacktab.c shard[i].lock  one shard of the stack table, in index order when taking several
 *   5. peak.c    peak_lock       every change of the estimates (in-use, allocated, freed), the peak and the
 *                                timeline; taken only inside one record shard lock, nothing inside it
 * The profiler thread serving the control socket (control.c) holds none of these while it waits for a client
 * or talks to one: it takes dump_lock (through mi_prof_dump_fd) to write a profile into memory, and sends it
 * afterwards; start, stop, reset and stats take api_lock as the API does.
 * fork: glibc runs the atfork prepare handlers (api.c: 1..4 in order, after waiting for unwinders) before
 * it takes its own fork locks (stdio's list, malloc's); nothing of the profiler uses stdio streams.
 * Profiler memory (pmem.c) and the counters of dropped samples are lock-free atomics. */

/* "options.c" (unwinder values first: MIMALLOC_PROF_UNWIND's row uses them) */
typedef enum mprof_unwinder_e {
  MPROF_UNWIND_FP, MPROF_UNWIND_LIBUNWIND, MPROF_UNWIND_LIBGCC, MPROF_UNWIND_TABLE, MPROF_UNWIND_AUTO
} mprof_unwinder_t;

/* Option bounds that are sizes of address space (options.def rows), for the platform's.  A 32-bit process
 * has 3-4 GiB in all: there the sampled-block window can only be the 112 MiB below a non-PIE program's
 * image and the arena's other chunks lie wherever the kernel has room (arena.c), at most half of it in
 * all; and the profiler's budget must stay well below 4 GiB, which a size_t cannot hold. */
#if UINTPTR_MAX > 0xffffffffu
#define MPROF_ARENA_DEFAULT ((uint64_t)64 << 30)
#define MPROF_ARENA_MAX     ((uint64_t)1 << 40)
#define MPROF_BUDGET_MAX    ((uint64_t)1 << 40)
#else
#define MPROF_ARENA_DEFAULT ((uint64_t)1 << 30)
#define MPROF_ARENA_MAX     ((uint64_t)2 << 30)
#define MPROF_BUDGET_MAX    ((uint64_t)2 << 30)
#endif

typedef enum mprof_option_e {
#define OPT(id, name, kind, dflt, min, max, range) MPROF_OPT_##id,
#include "options.def"
#undef OPT
  MPROF_OPT_COUNT
} mprof_option_t;

void        mprof_options_init(void);
uint64_t    mprof_option(mprof_option_t id);
const char *mprof_option_str(mprof_option_t id);
/* Parses `text` as the value of the environment option `name` with the start-up parser, without
 * clipping: 1 valid (*value set; a string option's value points into text), 0 malformed or out of range
 * (why: a phrase such as "is not a byte count", to follow the value), -1 no option has that name.
 * For the mimalloc-prof command, which compiles options.c in; needs no initialisation, allocates nothing. */
int         mprof_option_parse(const char *name, const char *text, uint64_t *value, char *why, size_t why_len);
/* Secure mode: the kernel set AT_SECURE (a set-user-ID or set-group-ID program, or one that gained
 * capabilities at exec).  Then no MIMALLOC_PROF_* variable is read: every option keeps its default. */
bool        mprof_options_secure(void);

/* "warn.c" */
void mprof_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void mprof_warn_strs(const char *s, ...) __attribute__((sentinel));   /* no formatting: small stacks */
bool mprof_warn_once_claim(int *flag);

/* "alloc.c": helpers every entry point shares */
static inline bool mprof_is_pow2(size_t x) { return x != 0 && (x & (x - 1)) == 0; }
size_t mprof_page_size(void);                  /* sysconf(_SC_PAGESIZE), read once */
bool   mprof_fail(int err) MPROF_NOINLINE MPROF_COLD;   /* sets errno to err; returns false */
static inline void *mprof_fail_null(int err) { mprof_fail(err); return NULL; }

/* The first index i with a[i] >= v in the sorted a[0..n) (objects.c, pprof.c). */
static inline size_t mprof_lower_bound(const uintptr_t *a, size_t n, uintptr_t v)
{
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (a[mid] < v) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/* "lazylib.c": the libraries loaded when first needed (the calls into them: lazylib.h) */
typedef enum mprof_lazy_group_e {
  MPROF_LAZY_PPROF,      /* zlib, protobuf-c: heap profiles (before a dump's dump_lock; the profiler thread) */
  MPROF_LAZY_GROUPS
} mprof_lazy_group_t;

/* Loads a group's libraries (once; a thread that finds them loading loads them too rather than wait).
 * False, with errno ELIBACC and one warning line per group, when they cannot be loaded (then never): the
 * callers fail likewise.  Takes the loader's locks (rank -1) and allocates: never with a profiler lock
 * held, nor in a signal handler. */
bool mprof_lazy_load(mprof_lazy_group_t group);
bool mprof_lazy_loaded(mprof_lazy_group_t group);   /* lock-free, async-signal-safe */

/* "pmem.c": profiler memory, raw mmap under the MIMALLOC_PROF_MAX_BYTES budget.
 *
 * What one dump needs (dump.c, pprof.c, objects.c), kept free by the tables (see pmem.c): a fixed part and
 * a part per stack and per frame of the stack table.  Fixed: zlib's deflate at windowBits 14 and memLevel 6
 * ((1 << 16) + (1 << 15) bytes by zlib.h's formula, plus 16 KiB for its state; against windowBits 15 and
 * memLevel 8 it saves 160 KiB for profiles 2% larger at most, measured on python3's), pprof.c's staging
 * and output buffers, two copies of the loaded-object list (two dumps may prepare at once; a list of up
 * to MPROF_DUMP_OBJECTS_BYTES, about 150 objects, is covered), the page rounding of the dump's four
 * other mappings, and the "dropped (reason)" stacks, which live outside the stack table (128 bytes each
 * cover a one-frame stack's share; with MIMALLOC_PROF_LIFETIMES their lifetime buckets too).  Per frame of
 * a stack: the snapshot's copy, and pprof.c's sorted distinct return addresses and their names (one word
 * each).  Per label set and lifetime bucket (stacktab.c): its snapshot entry (snapshot.c) and pprof.c's
 * index of thread labels; a stack takes none of its own in a dump, and in a visit (one per stack) only
 * when it has a label set, which then takes none.  The timeline (peak.c) is copied whole, and once more by
 * pprof.c into the message's three arrays.  The leak report and a visit need less (a snapshot). */
#define MPROF_DUMP_ZLIB_WBITS    14
#define MPROF_DUMP_ZLIB_MEMLEVEL 6
#define MPROF_DUMP_ZLIB_BYTES    (((size_t)1 << (MPROF_DUMP_ZLIB_WBITS + 2)) + \
                                  ((size_t)1 << (MPROF_DUMP_ZLIB_MEMLEVEL + 9)) + ((size_t)16 << 10))
#define MPROF_DUMP_IO_BYTES      ((size_t)16 << 10)
#define MPROF_DUMP_OBJECTS_BYTES ((size_t)32 << 10)
#define MPROF_TIMELINE_POINTS    1024
#define MPROF_DUMP_TIMELINE_BYTES ((MPROF_TIMELINE_POINTS + 2) * 3 * sizeof(uint64_t))
#define MPROF_DUMP_FIXED_BYTES   (MPROF_DUMP_ZLIB_BYTES + MPROF_DUMP_IO_BYTES + 2 * MPROF_DUMP_OBJECTS_BYTES + \
                                  2 * MPROF_DUMP_TIMELINE_BYTES + 6 * (size_t)4096 + \
                                  MI_PROF_DROP_REASONS * (size_t)128)
#define MPROF_DUMP_STACK_BYTES   (2 * sizeof(size_t) + 10 * sizeof(uint64_t) + 16 /* the snapshot's entry */ \
                                  + 16 + sizeof(uint64_t))   /* pprof.c: the thread label's index, 2 words */
#define MPROF_DUMP_FRAME_BYTES   (2 * sizeof(uintptr_t) + sizeof(uint64_t))
#define MPROF_DUMP_LIFETIMES_BYTES (MI_PROF_DROP_REASONS * 65 /* MPROF_LIFETIME_BUCKETS */ * \
                                    MPROF_DUMP_STACK_BYTES)

void  *mprof_pmem_map(size_t bytes);           /* tables; NULL when over budget or mmap fails */
void   mprof_pmem_unmap(void *p, size_t bytes);
bool   mprof_pmem_reserve(size_t bytes);       /* keeps bytes free for dumps (a stack added); false: budget */
void   mprof_pmem_unreserve(size_t bytes);
/* The same for the stack table and the unwinder's tables, within their share of the budget (half of what
 * the tables may commit). */
void  *mprof_pmem_map_stacks(size_t bytes);
void   mprof_pmem_unmap_stacks(void *p, size_t bytes);
bool   mprof_pmem_reserve_stacks(size_t bytes);
void   mprof_pmem_unreserve_stacks(size_t bytes);
void  *mprof_pmem_map_temp(size_t bytes);      /* a dump's or a visit's temporaries */
void   mprof_pmem_unmap_temp(void *p, size_t bytes);
size_t mprof_pmem_mapped(void);
size_t mprof_pmem_temp_peak(void);
void   mprof_pmem_postfork_child(void);

/* "slow.c": the slow paths the fast paths fall into when a countdown runs out or a block may be sampled.
 * A request as they see it, from the C malloc family and from mimalloc's API alike: */
typedef struct mprof_req_s mprof_req_t;
struct mprof_req_s {
  mi_heap_t *heap;                /* the heap asked for; NULL: the thread's default heap */
  size_t     size;                /* bytes */
  size_t     alignment, offset;   /* (p + offset) % alignment == 0; alignment 0: none asked */
  bool       zero;
  void *(*plain)(const mprof_req_t *r);                 /* serves it unsampled: the entry point's own
                                                         * semantics (errno, NULL) */
  void *(*plain_realloc)(void *p, const mprof_req_t *r); /* realloc entry points: p ordinary, unsampled */
};

void  *mprof_alloc_slow(size_t size, size_t alignment, bool zero) MPROF_NOINLINE MPROF_COLD;   /* C family */
void  *mprof_realloc_slow(void *p, size_t size) MPROF_NOINLINE MPROF_COLD;
void  *mprof_alloc_slow_req(const mprof_req_t *r) MPROF_NOINLINE MPROF_COLD;
/* realloc: `wrapped` when the caller charged the countdown and it ran out; else it did not charge (p may
 * be sampled) */
void  *mprof_realloc_slow_req(void *p, const mprof_req_t *r, bool wrapped) MPROF_NOINLINE MPROF_COLD;
/* a realloc mimalloc can only do in place: p kept, or NULL */
void  *mprof_realloc_keep_req(void *p, const mprof_req_t *r) MPROF_NOINLINE MPROF_COLD;
void   mprof_free_slow(void *p) MPROF_NOINLINE MPROF_COLD;
size_t mprof_usable_size_slow(const void *p) MPROF_NOINLINE MPROF_COLD;

/* "mathfn.c": log and expm1, computed here (no libm): finite arguments; x > 0 and x <= 0 */
double mprof_math_log(double x);
double mprof_math_expm1(double x);

/* "sampler.c": the sampling decision, weights and samples */
/* The session every thread compares its own against on each slow path.  `word` is (id << 1) | running;
 * rate and seed are written before word (release) and stay fixed for the session. */
typedef struct mprof_session_s {
  uint64_t word;
  uint64_t rate;     /* sample rate, bytes */
  uint64_t seed;     /* 0 = fresh entropy per thread */
} mprof_session_t;

extern mprof_session_t mprof_session;

/* The reentrancy guard.  It is up while the profiler runs on this thread: a sample, the free or realloc
 * of a sampled block, an observer callback, an API call that takes profiler locks.  An allocation then
 * (by the profiler, a callback, or a signal handler that interrupted the profiler) is served unsampled;
 * a free of a sampled block then is deferred until the guard goes down, so no profiler lock is ever
 * taken twice by one thread; and the countdown is put back when the guard goes down, so what happens
 * inside never shifts the sampling of the program's own allocations.  The fast paths keep charging the
 * countdown meanwhile; only the slow paths know to serve those allocations unsampled. */
static inline size_t mprof_guard_enter(void)
{
  mprof_tls.guard++;
  return mprof_tls.countdown;
}

void mprof_guard_drain(mprof_tls_t *t);   /* frees what was deferred; guard still up */

/* The profiler's own locks (ranks 1..5), counted per thread: a fork from a signal handler that interrupted
 * its thread while that thread held one must not take them again (api.c's fork handlers). */
static inline void mprof_lock(pthread_mutex_t *m)
{
  mprof_tls.locks++;
  pthread_mutex_lock(m);
}

static inline void mprof_unlock(pthread_mutex_t *m)
{
  pthread_mutex_unlock(m);
  mprof_tls.locks--;
}

static inline void mprof_guard_leave(size_t countdown)
{
  mprof_tls_t *t = &mprof_tls;
  t->countdown = countdown;
  if (t->guard == 1 && __atomic_load_n(&t->deferred, __ATOMIC_RELAXED) != NULL) mprof_guard_drain(t);
  t->guard--;
}

void mprof_session_publish(uint64_t id, bool running, uint64_t rate, uint64_t seed);
void mprof_sampler_prefork(void);
bool mprof_sampler_postfork_child(void);
extern bool mprof_frozen;   /* a fork child that may have inherited half-done tables: no more sampling */
uint64_t mprof_sampler_slow_path_calls(void);
void     mprof_sampler_reset_calls(void);
/* 64 bits nobody else can predict (getrandom(2), else a mix of clocks, ids and addresses); seeds and the
 * temporary files' names.  Async-signal-safe. */
uint64_t mprof_random64(void);
bool     mprof_take_sample(mprof_tls_t *t, size_t size, size_t before);          /* guard up */
void    *mprof_sample_alloc(mprof_tls_t *t, const mprof_req_t *r);
mi_heap_t *mprof_sample_heap(const mprof_req_t *r);   /* the heap a sampled block belongs to */
uint64_t mprof_sample_stack(mprof_tls_t *t, size_t size, uint64_t *now, mi_prof_drop_reason_t *why);
bool     mprof_sample_record(mprof_tls_t *t, void *p, size_t size, mi_heap_t *heap, uint64_t stack_id,
                             mi_prof_drop_reason_t why, uint64_t now);
void     mprof_sampler_session_begin(void);   /* reads the process's name (thread labels) */

/* An unsampled allocation straight from mimalloc (the slow paths' fallback). */
static inline void *mprof_plain_alloc(size_t size, size_t alignment, bool zero)
{
  if (alignment == 0) return zero ? mprof_mi.mi_zalloc(size) : mprof_mi.mi_malloc(size);
  return zero ? mprof_mi_zalloc_aligned(size, alignment) : mprof_mi_malloc_aligned(size, alignment);
}

/* "arena.c": the address space that holds sampled blocks' slots, claimed a chunk at a time: a window (and
 * on 32-bit platforms, once it is full, chunks anywhere: MPROF_ARENA_WHOLE, the chunk map covers the
 * whole address space) */
#define MPROF_CHUNK_SHIFT 20
#define MPROF_CHUNK       ((size_t)1 << MPROF_CHUNK_SHIFT)
#define MPROF_CHUNK_SLOTS 1                  /* a chunk map entry: sheap.c's slots */
#if UINTPTR_MAX > 0xffffffffu
#define MPROF_ARENA_WHOLE 0
#else
#define MPROF_ARENA_WHOLE 1
extern uint8_t *mprof_arena_map MPROF_HIDDEN; /* a byte per chunk of the address space; NULL before init */
#endif
bool      mprof_arena_init(void);             /* the window and its chunk map; false: no window */
size_t    mprof_arena_page(void);
bool      mprof_arena_contains(const void *p); /* exactly: p lies in a chunk of ours (lock-free) */
void      mprof_arena_window(uintptr_t *lo, uintptr_t *hi);
uintptr_t mprof_arena_base(void);             /* the lowest address a chunk can have */
size_t    mprof_arena_limit(void);            /* the address space its chunks may take at once */
void  *mprof_arena_chunk_alloc(void);          /* a fresh chunk; NULL with errno ENOSPC or ENOMEM */
void   mprof_arena_chunk_free(void *chunk);
size_t mprof_arena_mapped(void);

/* "sheap.c": where sampled blocks live (each at the start of a slice: a slot of ours, or mimalloc's own
 * block); lock rank 2 */
typedef struct mprof_sheap_usage_s {
  size_t limit_bytes;      /* the address space the slots may take (MIMALLOC_PROF_ARENA_SIZE) */
  size_t mapped_bytes;     /* slot chunks mapped, and the live sampled blocks in mimalloc */
  size_t resident_bytes;   /* at most resident: slots' pages written and not given back, and the former */
  size_t live_blocks;
  size_t live_bytes;       /* usable bytes of the live recorded blocks, as the program sees them */
} mprof_sheap_usage_t;

bool     mprof_sheap_init(void);                /* the window and the filter (once, under api_lock) */
bool     mprof_sheap_init_done(void);
bool     mprof_sheap_in_slot(const void *p);    /* exactly, lock-free */
void    *mprof_sheap_alloc(const mprof_req_t *r, mi_prof_drop_reason_t *why);
void     mprof_sheap_free(void *p);             /* its record is gone (or it never had one) */
size_t   mprof_sheap_usable(const void *p);     /* what the program may use of sampled p; lock-free */
bool     mprof_sheap_fits(const void *p, size_t size);   /* realloc in place: true if p holds size ... */
void     mprof_sheap_resize(void *p, size_t size);       /* ... which it then does */
void     mprof_sheap_track(const void *p);      /* beside every record insert ... */
void     mprof_sheap_untrack(const void *p);    /* ... and removal */
void     mprof_sheap_orphan(void *p, size_t size, mi_heap_t *heap);   /* an orphan record, tracked */
void     mprof_sheap_purge_all(void);           /* every free slot's pages, now (stop, reset) */
uint64_t mprof_sheap_purge_due(void);           /* CLOCK_MONOTONIC_COARSE ns; 0: none waiting */
void     mprof_sheap_purge_tick(void);          /* the purge that is due (the profiler thread) */
void     mprof_sheap_usage(mprof_sheap_usage_t *out);
void     mprof_sheap_prefork(void);
void     mprof_sheap_postfork(void);
void     mprof_sheap_postfork_reinit(void);   /* a child forked with profiler locks held: a fresh lock */

/* True when p, which starts a slice and is not NULL, may be a sampled block: it lies in the slots'
 * window (32-bit platforms: in a chunk of slots, by the chunk map), or the filter counts a record at its
 * slice (sheap.c).  Lock-free; false means certainly not (an ordinary block that starts a slice: the slow
 * paths hand it straight to mimalloc). */
#define MPROF_FILTER_SLOTS ((size_t)1 << 16)
extern uintptr_t mprof_sheap_window_lo MPROF_HIDDEN, mprof_sheap_window_size MPROF_HIDDEN;
extern uint8_t *mprof_sheap_filter MPROF_HIDDEN;
static inline bool mprof_sheap_maybe(const void *p)
{
  uintptr_t a = (uintptr_t)p;
#if MPROF_ARENA_WHOLE
  const uint8_t *m = __atomic_load_n(&mprof_arena_map, __ATOMIC_ACQUIRE);
  if (m == NULL) return false;                /* nothing was ever sampled */
  if (__atomic_load_n(&m[a >> MPROF_CHUNK_SHIFT], __ATOMIC_RELAXED) == MPROF_CHUNK_SLOTS) return true;
#else
  if (a - mprof_sheap_window_lo < mprof_sheap_window_size) return true;
#endif
  const uint8_t *f = __atomic_load_n(&mprof_sheap_filter, __ATOMIC_ACQUIRE);
  if (f == NULL) return false;
  return __atomic_load_n(&f[(a >> MPROF_SLICE_SHIFT) & (MPROF_FILTER_SLOTS - 1)], __ATOMIC_RELAXED) != 0;
}

/* "record.c": live sampled blocks, a sharded address -> record table */
#define MPROF_RECORD_OBSERVED 1u              /* the observer's on_sample saw this block */
#define MPROF_RECORD_ORPHAN   2u              /* no longer a sample: no weight, no stack (record.c) */
#define MPROF_RECORD_HALF_A   4u              /* in half A, half B of the samples (peak.c), or both */
#define MPROF_RECORD_HALF_B   8u

typedef struct mprof_record_s {
  uintptr_t addr;         /* block address; 0 = empty slot */
  size_t    size;         /* requested bytes (current size after an in-place realloc) */
  uint64_t  obj_fx;       /* estimated objects this sample stands for, 1/MPROF_FX_ONE units */
  uint64_t  inuse_bytes;  /* estimated bytes it adds to in-use: size * obj_fx / MPROF_FX_ONE */
  uint64_t  half_bytes;   /* the bytes it stands for in its half, or halves (peak.c) */
  uint64_t  stack_id;     /* interned label set (0 = none) */
  mi_heap_t *heap;        /* the mimalloc heap it was allocated from (mi_heap_destroy frees it) */
  uint64_t  alloc_ns : 60; /* CLOCK_MONOTONIC when it was sampled (lifetimes, the timeline): 36 years */
  uint64_t  flags : 4;    /* MPROF_RECORD_* */
} mprof_record_t;         /* 64 bytes: one cache line */

/* Sums over the live records and the session's samples. */
typedef struct mprof_totals_s {
  uint64_t samples;          /* recorded since start or reset */
  uint64_t live;             /* live records */
  uint64_t live_req_bytes;   /* their requested bytes */
  uint64_t inuse_obj_fx;
  uint64_t inuse_bytes;
  uint64_t alloc_obj_fx;
  uint64_t alloc_bytes;
  uint64_t untracked_frees;  /* stale records replaced by a new sample at the same address */
  uint64_t peak_obj_fx;      /* the estimated in-use total at its high-water mark since start or reset */
  uint64_t peak_bytes;       /*   (peak.c) */
  uint64_t peak_ns;          /*   when it was reached, CLOCK_REALTIME; 0 = no session yet */
} mprof_totals_t;

typedef enum { MPROF_INSERT_OK, MPROF_INSERT_SESSION, MPROF_INSERT_MEMORY } mprof_insert_t;

/* Every record shard lock, in order (stats snapshots, visits, session changes, fork). */
void           mprof_record_lock_all(void);
void           mprof_record_postfork_reinit(void);
void           mprof_record_unlock_all(void);

/* What a start, or a reset while stopped, discarded of an earlier session's data (control.c says it). */
typedef struct mprof_discarded_s {
  uint64_t live;             /* live samples, and their estimated bytes in use */
  uint64_t inuse_bytes;
  uint64_t samples;          /* samples taken, and their estimated bytes allocated */
  uint64_t alloc_bytes;
  uint64_t peak_bytes;       /* the peak's estimate */
  uint64_t stacks;           /* distinct stack traces */
} mprof_discarded_t;

void           mprof_record_begin(uint64_t session_word, mprof_discarded_t *gone);
void           mprof_record_end(void);
void           mprof_record_discard(mprof_discarded_t *gone);
mprof_insert_t mprof_record_insert(const mprof_record_t *r, uint64_t session_word);
bool           mprof_record_remove(uintptr_t addr, mprof_record_t *out);
bool           mprof_record_count(uint64_t stack_id, uint64_t obj_fx, uint64_t bytes, uint64_t session_word);
bool           mprof_record_orphan(uintptr_t addr, size_t size, mi_heap_t *heap);
bool           mprof_record_find(uintptr_t addr, mprof_record_t *out);
size_t         mprof_record_take_heap(mi_heap_t *heap, bool (*fn)(const mprof_record_t *r, void *arg), void *arg);
void           mprof_record_retag(mi_heap_t *from, mi_heap_t *to);
void           mprof_record_each_heap(mi_heap_t *heap, bool (*fn)(const mprof_record_t *r, void *arg), void *arg);
bool           mprof_record_heap_may_have(const mi_heap_t *heap);   /* false: certainly no record of it */
void           mprof_record_totals(mprof_totals_t *out);
void           mprof_record_totals_locked(mprof_totals_t *out);   /* every shard lock held */
void           mprof_record_reset_alloc(void);

/* "stacktab.c": interned stacks with their label sets and per-label-set counters.
 *
 * Labels of a sample (pprof's Sample.label): the allocating thread (its name, else "tid N") and the
 * requested size, bucketed (mprof_bytes_bucket); a freed sample adds its lifetime bucket. */
#define MPROF_THREAD_LABEL 16              /* a thread's name: 15 bytes and the NUL (TASK_COMM_LEN) */
typedef struct mprof_labels_s {
  union {
    char     thread[MPROF_THREAD_LABEL];   /* NUL-padded; "" = none */
    uint64_t thread_words[2];              /*   the same, compared and hashed a word at a time */
  };
  uint64_t bytes;                           /* bucketed requested size; 0 = none */
} mprof_labels_t;

/* The requested size with all but its three highest bits cleared: exact below 8 bytes, then four
 * classes per power of two (8, 10, 12, 14, 16, 20, 24, 28, 32, 40, ...), at most 20% below the size. */
static inline uint64_t mprof_bytes_bucket(uint64_t size)
{
  if (size < 8) return size;
  unsigned drop = (unsigned)(61 - __builtin_clzll(size));   /* bit length - 3 */
  return size >> drop << drop;
}

/* Lifetimes: bucket b > 0 holds lifetimes of [2^(b-1), 2^b) ns, b = 0 a lifetime of 0; the label is the
 * bucket's lower bound. */
#define MPROF_LIFETIME_BUCKETS 65
static inline unsigned mprof_lifetime_bucket(uint64_t ns)
{
  return ns == 0 ? 0 : 64 - (unsigned)__builtin_clzll(ns);
}
static inline uint64_t mprof_lifetime_floor(unsigned b) { return b == 0 ? 0 : (uint64_t)1 << (b - 1); }

/* Entries of the stack table: a stack (its frames; counts nothing itself), a label set of a stack
 * (allocated, in-use and peak counters; a record holds its id), and a lifetime bucket of a label set
 * (freed counters; only with MIMALLOC_PROF_LIFETIMES).  All the entries of one stack live in one shard. */
enum { MPROF_ENTRY_STACK, MPROF_ENTRY_SET, MPROF_ENTRY_FREED };
#define MPROF_ENTRY_NONE UINT32_MAX        /* link of the "dropped" entries: their own frames */

typedef struct mprof_stack_s {
  uint64_t         hash;           /* of the entry's key */
  const uintptr_t *frames;         /* return addresses, innermost first (the stack's copy) */
  uint32_t         depth;          /* frames */
  uint8_t          kind;           /* MPROF_ENTRY_* */
  uint8_t          lifetime;       /* FREED: the bucket */
  uint8_t          shard;          /* where it is: its shard (the "dropped" entries: past the last) */
  uint32_t         link;           /* SET: its stack's entry number; FREED: its set's; STACK: label sets */
  uint32_t         number;         /*   and its number there */
  mprof_labels_t   labels;         /* SET, FREED */
  /* Changed under peak_lock (peak.c) inside a record shard lock, so a snapshot holding every record
   * shard lock sees them stand still: */
  uint64_t         alloc_obj_fx;   /* estimated allocated objects (fixed point) and bytes; FREED: the */
  uint64_t         alloc_bytes;    /*   estimated objects and bytes freed after a lifetime in the bucket
                                    *   (relaxed atomics, added under a record shard lock only) */
  uint64_t         inuse_obj_fx;   /* estimated in-use objects (fixed point) and bytes */
  uint64_t         inuse_bytes;
  uint64_t         half_obj_fx;    /* in use in half B of the samples (peak.c) */
  uint64_t         half_bytes;
  uint64_t         peak_obj_fx;    /* half B's in-use at the peak of generation peak_gen (peak.c) */
  uint64_t         peak_bytes;
  uint64_t         peak_gen;
  void            *snap;           /* STACK: its place in the snapshot being taken (snapshot.c) */
  struct mprof_stack_s *freed_hint; /* SET: the FREED entry of its last free (relaxed atomic; record.c) */
} mprof_stack_t;

/* Ids are the entries' addresses (entries never move during a session; 0 = none), resolved only by
 * record.c under a record shard lock of the current session (the table is released at stop only while
 * every record shard lock is held, and the records lose their ids then). */
static inline mprof_stack_t *mprof_stack_get(uint64_t id) { return (mprof_stack_t *)(uintptr_t)id; }

/* The label set's id for a sample with these frames and labels; 0 when it cannot be interned, with
 * *why = MI_PROF_DROP_MEMORY or _STACKS, or MI_PROF_DROP_REASONS when the session is over (not a drop).
 * Beyond MPROF_LABEL_SETS label sets of one stack, a sample goes to the set of thread "[other]" and its
 * size's power of two. */
#define MPROF_LABEL_SETS 32
#define MPROF_OTHER_THREAD "[other]"
uint64_t       mprof_stack_intern(const uintptr_t *frames, size_t depth, const mprof_labels_t *labels,
                                  uint64_t session_word, mi_prof_drop_reason_t *why);
/* The FREED entry of a set for lifetime bucket b (record shard lock held); a "dropped (memory)" one when
 * it cannot be added. */
uint64_t       mprof_stack_freed(uint64_t set_id, unsigned b);
uint64_t       mprof_stack_dropped(mi_prof_drop_reason_t why);   /* the one-frame "dropped (why)" set */
void           mprof_stacks_begin(uint64_t session_word);
void           mprof_stacks_end(void);
void           mprof_stacks_close(void);   /* stop: no new stack, the table stays */
void           mprof_stacks_reset_alloc(void);
/* Calls fn for every entry, a stack before its sets and a set before its FREED entries, with the stack
 * it belongs to (NULL for the "dropped" entries, which hold their own frame); every record shard lock
 * held, so the counters stand still. */
void           mprof_stacks_each(void (*fn)(mprof_stack_t *e, mprof_stack_t *stack, void *arg), void *arg);
void           mprof_stacks_prefork(void);
void           mprof_stacks_postfork(void);
void           mprof_stacks_postfork_reinit(void);

/* "peak.c": the estimated totals over time: in-use and allocated, the peak (the in-use of every label
 * set when the in-use total reached its high-water mark) and the timeline.  Every change goes through
 * mprof_peak_sample or mprof_peak_free, under the record shard lock of the block concerned. */
typedef struct mprof_point_s {
  uint64_t t_ns;                   /* CLOCK_MONOTONIC */
  uint64_t inuse_bytes, alloc_bytes;   /* estimated totals then */
} mprof_point_t;

extern bool mprof_lifetimes;       /* MIMALLOC_PROF_LIFETIMES, fixed at load */

static inline uint64_t mprof_mono_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A sample and its free: mprof_peak_sample and mprof_peak_free (peak.h, inline in record.c).  A dropped
 * sample's allocated weight, with nothing in use: */
void mprof_peak_alloc_only(mprof_stack_t *e, uint64_t obj_fx, uint64_t bytes);
/* Every record shard lock held: */
void mprof_peak_begin(uint64_t now_ns);            /* a session starts */
void mprof_peak_end(void);                         /* its data is discarded: no session */
void mprof_peak_reset(uint64_t now_ns);            /* mi_prof_reset: a new peak, allocated from 0 */
void mprof_peak_totals(mprof_totals_t *t);         /* the peak's fields of t */
void mprof_peak_of(const mprof_stack_t *e, uint64_t *obj_fx, uint64_t *bytes);   /* e's in-use at the peak */
size_t mprof_peak_timeline(mprof_point_t *out, uint64_t *realtime_offset_ns);   /* room: POINTS + 2 */
/* A session's start (api_lock; a fork child: async-signal-safe): the sample rate (the timeline's least
 * step is four sample periods), and the interval and peak triggers (profiler.c's MIMALLOC_PROF_INTERVAL
 * and _GDUMP): a profile each time the allocated estimate grows by interval_bytes, and when the in-use
 * estimate passes the last such profile's by a tenth and at least gdump_floor bytes; 0 = off. */
void mprof_peak_configure(uint64_t rate, uint64_t interval_bytes, uint64_t gdump_floor);
void mprof_peak_postfork_reinit(void);

/* "snapshot.c": a consistent copy of the stacks and totals (mi_prof_visit, dumps) */
typedef struct mprof_snap_stack_s {
  mi_prof_stack_counts_t counts;      /* FREED entries: 0 */
  uint64_t               freed_objects, freed_bytes;
  mprof_labels_t         labels;      /* per stack (visits, the leak report): none */
  uint64_t               lifetime;    /* FREED entries: the bucket + 1; 0 = none */
  size_t                 depth;
  uintptr_t             *frames;      /* into the snapshot's memory */
} mprof_snap_stack_t;

typedef struct mprof_snapshot_s {
  bool                all;            /* stacks with nothing in use too (MIMALLOC_PROF_ACCUM) */
  bool                sets;           /* an entry per label set and lifetime bucket (dumps), else per stack */
  mprof_snap_stack_t *stack;          /* n stacks */
  size_t              n, cap;
  mprof_totals_t      totals;         /* the record totals at the same instant */
  mprof_point_t      *timeline;       /* n_points, oldest first (the current state is not among them) */
  size_t              n_points;
  uint64_t            realtime_offset_ns;   /* CLOCK_REALTIME - CLOCK_MONOTONIC for the timeline */
  uintptr_t          *frame_next;
  size_t              frames_left;
  void               *mem;            /* profiler memory holding it all */
  size_t              bytes;
} mprof_snapshot_t;

/* sets: an entry per label set and lifetime bucket (dumps), else one per stack with the sum of its sets
 * (visits, the leak report). */
bool mprof_snapshot_take(mprof_snapshot_t *s, bool all, bool sets);   /* false: ENOMEM */
void mprof_snapshot_release(mprof_snapshot_t *s);

/* "objects.c": the loaded objects, copied from the loader's list before any profiler lock is taken */
typedef struct mprof_segment_s {
  uintptr_t start, limit;        /* an executable PT_LOAD segment: [start, limit) */
  uint64_t  file_offset;
  uint32_t  object;              /* index into mprof_objects_t.object */
} mprof_segment_t;

typedef struct mprof_object_s {
  const char *path;              /* absolute path (the program's from /proc/self/exe) */
  const char *build_id;          /* GNU build ID in lower-case hex, "" when none */
  uintptr_t   base;              /* load bias (dlpi_addr) */
  uintptr_t   map_start;         /* lowest mapped address (dladdr's dli_fbase) */
  uint32_t    first_segment, n_segments;   /* its executable segments in mprof_objects_t.segment */
  uintptr_t   symtab, strtab;    /* .dynsym and .dynstr in memory; symtab 0: no names */
  size_t      strsz;
  uint32_t    nsyms;
} mprof_object_t;

typedef struct mprof_objects_s {
  mprof_object_t  *object;       /* in the loader's order, the program first */
  size_t           n_objects;
  mprof_segment_t *segment;      /* executable segments in the same order: mapping id = index + 1 */
  size_t           n_segments;
  uint32_t        *by_start;     /* segment indices sorted by start */
  void            *mem;          /* temporary profiler memory holding it all */
  size_t           bytes;
} mprof_objects_t;

/* A name: (object index + 1) << 32 | offset into its .dynstr; 0 = none. */
#define MPROF_NAME_KEY(object, name) ((((uint64_t)(object) + 1) << 32) | (uint32_t)(name))

bool   mprof_objects_take(mprof_objects_t *o);     /* no profiler lock held (takes the loader's); ENOMEM */
void   mprof_objects_release(mprof_objects_t *o);
size_t mprof_objects_find(const mprof_objects_t *o, uintptr_t addr);   /* segment index + 1, 0 = none */
/* The GNU build ID among the ELF notes in [at, stop), each read through read (false: unreadable): the
 * descriptor's address in *desc and its length, 0 when there is none. */
size_t mprof_objects_note_build_id(uintptr_t at, uintptr_t stop, bool (*read)(uintptr_t, void *, size_t),
                                   uintptr_t *desc);
/* names[i]: the key of the exported function holding pcs[i] - 1 (pcs sorted, distinct), 0 when none;
 * offsets (NULL: not wanted): pcs[i] minus the function's start, 0 when none. */
void   mprof_objects_name(const mprof_objects_t *o, const uintptr_t *pcs, size_t n, uint64_t *names,
                          uint32_t *offsets);
bool   mprof_objects_key_name(const mprof_objects_t *o, uint64_t key, char *buf, size_t len);

/* "pprof.c": the gzipped profile.proto writer */
#define MPROF_FRAME_IS_DROPPED(pc) ((uintptr_t)(pc) - 1 < (uintptr_t)MI_PROF_DROP_REASONS)   /* 1..8 */

typedef struct mprof_pprof_meta_s {
  uint64_t              sample_rate;  /* bytes */
  uint64_t              time_ns;      /* collection time (the snapshot), CLOCK_REALTIME */
  uint64_t              duration_ns;  /* CLOCK_MONOTONIC time since the session started or was reset */
  uint64_t              stopped_ns;   /* when sampling stopped, CLOCK_REALTIME; 0: it runs (or no session) */
  uint64_t              dropped[MI_PROF_DROP_REASONS];
  const mprof_totals_t *totals;
} mprof_pprof_meta_t;

const char *mprof_drop_name(mi_prof_drop_reason_t why);   /* "memory", "too_large", ... */
/* Writes the profile; names are read from objs (dump_lock held: no loader lock is taken).  errno. */
bool mprof_pprof_write(int fd, const mprof_snapshot_t *snap, const mprof_objects_t *objs,
                       const mprof_pprof_meta_t *meta);

/* "dump.c": dumps, the final profile, the leak report */
void mprof_dump_init(void);
void mprof_dump_session_begin(uint64_t rate);
void mprof_dump_session_reset(void);
void mprof_dump_session_end(void);             /* mi_prof_stop: the data stays, sampling stopped now */
void mprof_dump_session_discard(void);         /* the stopped session's data is gone */
void mprof_dump_auto(char kind);               /* an automatic dump of kind i, u, s or p (the profiler thread) */
void mprof_dump_final(void);                   /* the final profile and leak report, once per process */
bool mprof_dump_leak_write(int fd, const mprof_snapshot_t *snap, const mprof_objects_t *objs);
void mprof_dump_postfork_child(void);

/* "api.c": the control socket's start, stop and reset (the profiler thread: no priming, no callback check) */
bool mprof_api_control_start(size_t sample_rate, mprof_discarded_t *gone);
bool mprof_api_control_stop(void);
bool mprof_api_control_reset(mprof_discarded_t *gone);

/* The sequence number in the names of automatic profiles (dump.c, retain.c): zero-padded, so that they
 * sort by name in the order written (up to a million per process). */
#define MPROF_SEQ_FORMAT "%06llu"

/* "retain.c": MIMALLOC_PROF_KEEP, the newest automatic profiles of a kind in the directory `dir` (a
 * descriptor; dump_lock held) */
void mprof_retain(char kind, int dir);

/* "fsout.c": everything the library creates or removes in the file system (the rules: fsout.c).  No
 * function here allocates; all set errno on failure.
 *
 * A profile is written to o->fd between one of the openings and mprof_fsout_end: mprof_fsout_create makes
 * a temporary file `<stem>.<16 hex digits>.tmp` in the directory of `prefix` (its last component is not
 * used), to be published under a name of that directory; mprof_fsout_open_path opens the path the
 * program named: in place when it exists (never through a symbolic link: ELOOP), else as a temporary
 * file beside it, to be published under its name.  mprof_fsout_publish renames the temporary file to
 * `name` in the directory, replacing what is there only with `replace` (else -1 with EEXIST: the caller
 * tries another name); nothing to do in place.  mprof_fsout_close closes o->fd (close(2)'s result);
 * mprof_fsout_end closes what is open and removes the temporary file if it was not published. */
typedef struct mprof_fsout_s {
  int   dir;                    /* the directory, O_PATH; -1: none */
  int   fd;                     /* the file being written; -1: none */
  bool  in_place;               /* fd is the existing file the program named */
  char  tmp[256];               /* the temporary file's name in dir; "" when none is left to remove */
  dev_t tmp_dev;                /* and its identity, checked before removing it */
  ino_t tmp_ino;
} mprof_fsout_t;

bool mprof_fsout_create(mprof_fsout_t *o, const char *prefix, const char *stem);
bool mprof_fsout_open_path(mprof_fsout_t *o, const char *path);
int  mprof_fsout_publish(mprof_fsout_t *o, const char *name, bool replace);
int  mprof_fsout_close(mprof_fsout_t *o);
void mprof_fsout_end(mprof_fsout_t *o);
/* Whether `name` in `dir` is, without following a link, of `type` (S_IFREG, S_IFSOCK) and owned by our
 * effective user; the removal of such a name only (unlinkat).  Retention and the control socket. */
bool mprof_fsout_is_own(int dir, const char *name, unsigned type);
bool mprof_fsout_remove_own(int dir, const char *name, unsigned type);
/* The control socket's directory `path`: made 0700 if missing, opened without following a link (O_PATH)
 * and checked: a directory of our effective user, closed to others (`named`, MIMALLOC_PROF_CONTROL's: to
 * others' writing).  Its descriptor; or -1 with *why ("is not a directory", ...; "cannot be created" with
 * mkdir's errno). */
int  mprof_fsout_private_dir(const char *path, bool named, const char **why);
/* Binds `sock` to `name` inside the checked directory `dir` (whose path is dir_path), after removing a
 * socket of ours left there; mode 0600.  Anything else at name stays: EADDRINUSE. */
bool mprof_fsout_bind(int sock, int dir, const char *dir_path, const char *name);
/* Removes the socket `name` of ours from the directory dir_path (not through a link), at exit. */
void mprof_fsout_unbind(const char *dir_path, const char *name);

/* "ctldir.c": where control sockets are (shared with the mimalloc-prof command, which compiles it in).
 * dir: MIMALLOC_PROF_CONTROL's directory, NULL for the default ($XDG_RUNTIME_DIR/mimalloc-prof, else
 * /tmp/mimalloc-prof-UID); the socket is DIR/PID.sock, at most MPROF_CONTROL_PATH_MAX - 1 bytes (false:
 * too long). */
#define MPROF_CONTROL_PATH_MAX 108            /* sockaddr_un's sun_path, its NUL included */
bool mprof_control_dir(const char *dir, const char *xdg_runtime_dir, unsigned uid, char *out, size_t len);
bool mprof_control_socket(const char *dir, int pid, char *out, size_t len);

/* "control.c": the control socket (MIMALLOC_PROF_CONTROL), served by the profiler thread.  The protocol
 * (mimalloc_prof(3), CONTROL SOCKET): a request is a 4-byte big-endian length and that many bytes of text;
 * a reply is a 4-byte big-endian length and that many bytes: a status line ("ok", or "error ENAME:
 * message"), then the body. */
#define MPROF_CONTROL_MAX_REQUEST  64         /* bytes of a request's text */
#define MPROF_CONTROL_IO_TIMEOUT_S 5          /* to send a whole request; to take each part of a reply */
#define MPROF_CONTROL_PROTOCOL     1          /* the "protocol" line of a stats reply */
bool mprof_control_init(void);                 /* at load: the socket; true when the thread must serve it */
bool mprof_control_active(void);
void mprof_control_wake(void);                 /* wakes the thread's wait; async-signal-safe */
void mprof_control_wait(uint64_t until_ns);    /* one round: waits (CLOCK_MONOTONIC deadline), serves */
void mprof_control_shutdown(void);              /* nobody serves it (a fork child); async-signal-safe */

/* "profiler.c": the profiler thread and the triggers that wake it */
bool mprof_profiler_init(void);                /* at load: starts the thread if a trigger needs it */
void mprof_profiler_session_begin(uint64_t rate);
#define MPROF_TRIGGER_INTERVAL 1u
#define MPROF_TRIGGER_PEAK     2u
void mprof_profiler_trigger(unsigned triggers); /* peak.c: MPROF_TRIGGER_* passed; async-signal-safe */
bool mprof_profiler_final_pending(void);      /* a final signal waits to be re-raised */
bool mprof_profiler_reraise(void);             /* re-raises it (after the final profile); true when that
                                                  * ends the process (default action) */
void mprof_profiler_postfork_child(void);
void mprof_profiler_purge_wake(void);         /* sheap.c: a purge will be due (async-signal-safe) */

/* "unwind.c": stack capture.  mprof_unwind_room() then mprof_unwind(), once each per sample, on the
 * sampling thread with the guard up and no profiler lock held; both are async-signal-safe (a sample may
 * be taken in a signal handler that allocates) except on a thread's first sample, which looks up its
 * stack with pthread_getattr_np (and reads /proc on the main thread, when the library was not loaded
 * there).  mprof_unwind_prime() may take the loader locks (rank -1): never call it holding a lock. */
#define MPROF_BT_MAX_CAP    256        /* MIMALLOC_PROF_BT_MAX's upper bound */
#define MPROF_UNWIND_SLACK  16         /* extra room mprof_unwind needs in `frames` beyond `max` */
void             mprof_unwind_init(void);
void             mprof_unwind_prime(void);       /* loads the unwinder; returns at once if another thread does */
bool             mprof_unwind_room(size_t max);  /* enough stack left here to unwind `max` frames */
/* Fills frames (max + MPROF_UNWIND_SLACK slots) with at most max return addresses, innermost first; 0
 * with *why = MI_PROF_DROP_UNWIND (no frame, or the unwinder is still being loaded) or MI_PROF_DROP_FORK
 * (a fork child where the unwinder's lock may be held by a thread that is gone). */
size_t           mprof_unwind(uintptr_t *frames, size_t max, mi_prof_drop_reason_t *why);
mprof_unwinder_t mprof_unwind_current(void);
void             mprof_unwind_prefork(void);        /* notes whether the parent has other threads */
void             mprof_unwind_postfork_child(void); /* what the child may still call; nothing waits */
void             mprof_unwind_release(void);        /* mi_prof_stop: the table unwinder's tables go */
const char      *mprof_unwind_name(mprof_unwinder_t u);

/* "observer.c": the sample/free callbacks and the dropped-sample counters */
typedef struct mprof_observer_s {
  mi_prof_sample_fn *on_sample;
  mi_prof_free_fn   *on_free;
  void              *arg;
} mprof_observer_t;

void mprof_observer_get(mprof_observer_t *out);
void mprof_observer_set(const mprof_observer_t *obs);   /* under the API lock */
void mprof_drop(mi_prof_drop_reason_t why);
void mprof_drops_read(uint64_t out[MI_PROF_DROP_REASONS]);
void mprof_drops_reset(void);

#else /* !MPROF_PPROF */

/* A --disable-pprof build reaches these only for requests above MPROF_MAX_REQUEST (see inline.h). */
#include <errno.h>
static inline void *mprof_alloc_slow(size_t size, size_t alignment, bool zero)
{
  (void)size, (void)alignment, (void)zero;
  errno = ENOMEM;
  return NULL;
}
static inline void *mprof_realloc_slow(void *p, size_t size) { return mprof_alloc_slow(size, 0, !p); }
static inline void mprof_free_slow(void *p) { mprof_mi.mi_free(p); }

/* mimalloc's API (mi_api.c) passes everything through. */
typedef struct mprof_req_s mprof_req_t;
struct mprof_req_s {
  mi_heap_t *heap;
  size_t     size, alignment, offset;
  bool       zero;
  void *(*plain)(const mprof_req_t *r);
  void *(*plain_realloc)(void *p, const mprof_req_t *r);
};
static inline void *mprof_alloc_slow_req(const mprof_req_t *r) { return r->plain(r); }
static inline void *mprof_realloc_slow_req(void *p, const mprof_req_t *r, bool wrapped)
{
  (void)wrapped;
  return r->plain_realloc(p, r);
}
static inline void *mprof_realloc_keep_req(void *p, const mprof_req_t *r) { return r->plain_realloc(p, r); }
static inline size_t mprof_sheap_usable(const void *p) { return mprof_mi.mi_usable_size(p); }
static inline bool mprof_sheap_in_slot(const void *p) { (void)p; return false; }
static inline bool mprof_sheap_maybe(const void *p) { (void)p; return false; }
static inline size_t mprof_usable_size_slow(const void *p) { return mprof_mi.mi_usable_size(p); }

#endif /* MPROF_PPROF */

#endif /* MPROF_INTERNAL_H */
