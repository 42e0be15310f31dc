/* mimalloc-prof.h - sampled heap profiling on top of mimalloc.
 *
 * Linking with -lmimalloc-prof (or LD_PRELOAD=libmimalloc-prof.so.0) makes this library the process
 * allocator: the malloc family, C++ new/delete and mimalloc's own allocation API (mi_malloc,
 * mi_heap_malloc, ...; declared by <mimalloc.h>) are served by mimalloc, and while a session runs an
 * allocation of s bytes is sampled with probability 1 - exp(-s/sample_rate).  This header declares the
 * control API.  Every function is present in every build; a library configured with --disable-pprof
 * fails each of them with ENOTSUP.
 *
 * Conventions: functions that can fail return false and set errno.  The API does not print, with two
 * exceptions: the first mi_prof_start() that cannot set up the sampled blocks' window says so in one line
 * on stderr (as does the first dropped sample of each reason), and so does the first dump that cannot load
 * zlib or protobuf-c (they are loaded at the first dump).  All byte quantities are bytes.  Estimated
 * quantities are unbiased estimates of what the sampled program did (see mimalloc_prof(3), "ESTIMATES").
 */
#ifndef MIMALLOC_PROF_H
#define MIMALLOC_PROF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define mi_prof_decl_export __attribute__((visibility("default")))
#else
#define mi_prof_decl_export
#endif

/* Version of this header.  mi_prof_version() gives the library's. */
#define MI_PROF_VERSION_MAJOR 0
#define MI_PROF_VERSION_MINOR 3
#define MI_PROF_VERSION_PATCH 0
#define MI_PROF_VERSION \
  (MI_PROF_VERSION_MAJOR * 10000 + MI_PROF_VERSION_MINOR * 100 + MI_PROF_VERSION_PATCH)

/* Default mean number of bytes between samples. */
#define MI_PROF_DEFAULT_SAMPLE_RATE 524288

/**
 * mi_prof_version() - version of the loaded library.
 * Return: MAJOR*10000 + MINOR*100 + PATCH of the library (compare with MI_PROF_VERSION).
 * Thread safety: MT-Safe.  Async-signal safety: AS-Safe.
 */
mi_prof_decl_export int mi_prof_version(void);

/**
 * mi_prof_available() - whether the sampling engine is compiled in.
 * Return: true when built with --enable-pprof; false with errno ENOTSUP otherwise.
 * Thread safety: MT-Safe.  Async-signal safety: AS-Safe.
 */
mi_prof_decl_export bool mi_prof_available(void);

/**
 * mi_prof_start() - start sampling heap allocations.
 * @sample_rate: mean bytes between samples; 0 = MIMALLOC_PROF_SAMPLE_RATE, else 524288.
 *               Range 1 .. 2^40.
 * Starts a fresh session: counters from an earlier session are gone.  The intervals are seeded from
 * MIMALLOC_PROF_SEED (0, the default, = fresh entropy).  The calling thread samples from its next
 * allocation; other running threads notice within MI_PROF_RECHECK_BYTES of their own allocated bytes.
 * Return: true if started; false with errno set: EALREADY already running; EINVAL rate out of range;
 *   ENOMEM the sampled blocks' window could not be set up (its chunk map or the filter could not be
 *   mapped; counted in dropped[MI_PROF_DROP_NO_ARENA]; a later call tries again);
 *   EDEADLK called from an observer callback; ENOTRECOVERABLE in a fork child that was forked from a
 *   signal handler inside the profiler's locks (its tables may be half-written: it never samples);
 *   ENOTSUP built with --disable-pprof.
 * Thread safety: MT-Safe.  Async-signal safety: AS-Unsafe (takes the profiler lock).
 */
mi_prof_decl_export bool mi_prof_start(size_t sample_rate);

/**
 * mi_prof_start_seeded() - mi_prof_start() with a fixed random seed.
 * @seed: nonzero = each thread's interval generator is seeded from (seed, thread ordinal), so a
 *        single-threaded program repeats its samples exactly; 0 = fresh entropy (getrandom(2)),
 *        whatever MIMALLOC_PROF_SEED says.
 * Return, thread and signal safety: as mi_prof_start().
 */
mi_prof_decl_export bool mi_prof_start_seeded(size_t sample_rate, uint64_t seed);

/* Bytes a running thread may allocate after mi_prof_start(), mi_prof_stop() or a rate change before it
 * notices (design bound of the per-thread recheck; see doc/design.md). */
#define MI_PROF_RECHECK_BYTES (1u << 20)

/**
 * mi_prof_stop() - stop sampling.
 * Every live sample stops being one: mi_prof_stats() reports live_samples and the in-use estimates as 0,
 * and the stacks are released; the cumulative counters of the session stay until the next start.
 * Sampled blocks still live stay valid: freeing them later, or destroying their mimalloc heap, is safe
 * and is not reported to the observer.  Each such block keeps a record without weight until it is freed
 * (its free and mi_heap_destroy() must find it), so that much profiler memory stays mapped until then.
 * Return: true if a running session was stopped; false with errno EALREADY (not running), EDEADLK
 *   (called from an observer callback) or ENOTSUP.
 * Thread safety: MT-Safe.  Async-signal safety: AS-Unsafe.
 */
mi_prof_decl_export bool mi_prof_stop(void);

/**
 * mi_prof_is_enabled() - whether a session is running.
 * Return: true while started; false otherwise (errno ENOTSUP in a --disable-pprof build).
 * Thread safety: MT-Safe.  Async-signal safety: AS-Safe (one atomic load).
 */
mi_prof_decl_export bool mi_prof_is_enabled(void);

/**
 * mi_prof_reset() - forget the cumulative counters: samples, alloc_objects, alloc_bytes,
 * untracked_frees, slow_path_calls, dropped[] and every stack's allocated (and freed) estimates, and
 * start a new peak from what is in use now (and a new timeline).  Live samples and their in-use
 * estimates are kept.
 * Return: true; false with errno EALREADY (not running), EDEADLK (from a callback) or ENOTSUP.
 * Thread safety: MT-Safe.  Async-signal safety: AS-Unsafe.
 */
mi_prof_decl_export bool mi_prof_reset(void);

/* Why a sample was not fully recorded (an index into mi_prof_stats_t.dropped); NO_ARENA counts failed
 * starts instead. */
typedef enum mi_prof_drop_reason_e {
  MI_PROF_DROP_MEMORY = 0,  /* profiler memory (MIMALLOC_PROF_MAX_BYTES, or mmap) ran out for the
                             * sample's stack, or for its record (the block then stays untracked) */
  MI_PROF_DROP_TOO_LARGE,   /* not counted: a sampled block of any size is mimalloc's own or a slot */
  MI_PROF_DROP_ALIGNMENT,   /* mi_malloc_aligned_at (and kin) with an offset that is not a multiple of the
                             * alignment: a sampled block starts on a slice, which that forbids */
  MI_PROF_DROP_NO_ARENA,    /* mi_prof_start() could not set up the sampled blocks' window */
  MI_PROF_DROP_UNWIND,      /* the stack could not be captured (unwinder failure, too little stack left) */
  MI_PROF_DROP_STACKS,      /* the stack table is full */
  MI_PROF_DROP_FORK,        /* in a fork child where no unwinder is safe to call (mimalloc_prof(3)) */
  MI_PROF_DROP_ARENA_FULL,  /* no sampled block could be had now: the window of the slots is full, or the
                             * address space (RLIMIT_AS, RLIMIT_DATA) even after giving back the idle slots;
                             * or mimalloc could not serve a sampled block of more than two slices */
  MI_PROF_DROP_REASONS = 8  /* size of the dropped[] array */
} mi_prof_drop_reason_t;

/* A sample that is not fully recorded keeps its weight in every total, under a stack of one synthetic
 * frame that names the reason: all of it (allocated and in use) when only its stack is missing (UNWIND,
 * STACKS, FORK, MEMORY for the stack); its allocated weight only when its block cannot be tracked
 * (ALIGNMENT, ARENA_FULL: mimalloc serves it unsampled; MEMORY for the record).
 * mi_prof_visit() shows that frame as this value (1..8, never a code address); heap profiles name it
 * "[mimalloc-prof: dropped (REASON)]". */
#define MI_PROF_FRAME_DROPPED(reason) ((void *)((uintptr_t)(reason) + 1))

/* Counters of the running (or last) session.  Versioned by size: pass sizeof(mi_prof_stats_t). */
typedef struct mi_prof_stats_s {
  uint64_t sample_rate;      /* bytes; the rate in force, 0 when stopped */
  uint64_t samples;          /* samples taken since start or reset, the not fully recorded included */
  uint64_t live_samples;     /* sampled blocks recorded and not freed yet */
  uint64_t inuse_objects;    /* estimated objects in use */
  uint64_t inuse_bytes;      /* estimated bytes in use */
  uint64_t alloc_objects;    /* estimated objects allocated since start or reset */
  uint64_t alloc_bytes;      /* estimated bytes allocated since start or reset */
  uint64_t dropped[MI_PROF_DROP_REASONS]; /* samples not fully recorded since start or reset, by
                                          * mi_prof_drop_reason_t (NO_ARENA: failed starts) */
  uint64_t untracked_frees;  /* records replaced by a new sample at their address: blocks released
                              * without this library (0 when every release goes through it) */
  uint64_t profiler_bytes;   /* profiler memory mapped now (records, tables), bytes */
  uint64_t profiler_bytes_max; /* the budget, MIMALLOC_PROF_MAX_BYTES */
  uint64_t arena_bytes;      /* bytes of the sampled blocks' homes: the slots' chunks mapped now (1 MiB
                              * each, mapped as sampled blocks of up to 128 KiB need them and unmapped when
                              * idle) and the live sampled blocks that are mimalloc's own (above 128 KiB);
                              * 0 before the first start */
  /* Since 0.2 (a caller compiled with 0.1's header passes the smaller size and gets the fields above): */
  uint64_t slow_path_calls;  /* times a thread's sample countdown ran out since start or reset; the
                              * caller of mi_prof_start() takes one at its next allocation, so 0 while
                              * running means allocations are not reaching this library (valgrind's
                              * memcheck, a static malloc) */
  uint64_t arena_limit_bytes;    /* the slots' window: MIMALLOC_PROF_ARENA_SIZE clipped to the platform (0
                                  * before the first start) */
  uint64_t arena_resident_bytes; /* what of those may be resident: the slots' pages written and not given
                                  * back, their chunks' headers, and the sampled blocks that are mimalloc's
                                  * (an upper bound on what sampled blocks hold) */
  uint64_t sampled_bytes;        /* usable bytes of the live sampled blocks (what the program may use of
                                  * them; arena_resident_bytes - sampled_bytes is overhead) */
  /* Since 0.3 (a caller compiled with 0.2's header passes MI_PROF_STATS_SIZE_V2): */
  uint64_t peak_inuse_objects;   /* estimated objects in use at the peak: when the estimated bytes in use */
  uint64_t peak_inuse_bytes;     /* were highest since start or reset (mi_prof_reset starts a new peak from
                                  * what is in use then); kept after mi_prof_stop until the next start */
  uint64_t peak_time_ns;         /* when: CLOCK_REALTIME nanoseconds since the epoch (0 before the first
                                  * start) */
} mi_prof_stats_t;

/* sizeof(mi_prof_stats_t) in 0.1 and 0.2, which mi_prof_stats() still accepts. */
#define MI_PROF_STATS_SIZE_V1 offsetof(mi_prof_stats_t, slow_path_calls)
#define MI_PROF_STATS_SIZE_V2 offsetof(mi_prof_stats_t, peak_inuse_objects)

/**
 * mi_prof_stats() - read the counters.
 * @stats: filled in.
 * @size: sizeof(mi_prof_stats_t) as the caller was compiled with (this header's, or
 *        MI_PROF_STATS_SIZE_V2 / _V1 for a caller built against 0.2 / 0.1: only the fields it knows are
 *        written).
 * Return: true; false with errno EINVAL (stats NULL or size not a known version) or ENOTSUP.
 *   Works while stopped (counts of the last session, sample_rate 0).
 * Thread safety: MT-Safe.  The record counters (samples .. alloc_bytes, untracked_frees) and the peak
 *   are one consistent snapshot; the arena_* fields, dropped[], profiler_bytes and slow_path_calls are read
 *   just after.
 * Async-signal safety: AS-Unsafe.
 */
mi_prof_decl_export bool mi_prof_stats(mi_prof_stats_t *stats, size_t size);

/**
 * mi_prof_debug_stats() - live record count and their total requested bytes (unstable, for tests).
 * Return: true; false with errno ENOTSUP.  Either pointer may be NULL.
 * Thread safety: MT-Safe.  Async-signal safety: AS-Unsafe.
 */
mi_prof_decl_export bool mi_prof_debug_stats(size_t *live_records, size_t *live_bytes);

/* Observer callbacks.  on_sample runs on the allocating thread after the sampled block is recorded and
 * before it is returned to the program (also for a sample recorded without its stack; not for one whose
 * block could not be tracked).  on_free runs on the thread that releases the block (free, delete,
 * mi_free, a realloc, mi_heap_destroy of its heap) before its memory is released, with the pointer and
 * size that on_sample got.  A realloc is the allocation of the new size and the free of the old block,
 * so a realloc of a sampled block reports on_free of the old one, and, when the realloc is itself
 * sampled, on_sample of the new one: in place (same pointer) on_free(old size) then on_sample(new size);
 * moved, on_sample(new) then on_free(old); not sampled, on_free only, also when the block keeps its
 * address.  Both run with no profiler lock held and with sampling suspended on the calling thread (an
 * allocation inside a callback is neither sampled nor counted; a free of a sampled block inside one is
 * deferred until the library's own work on that thread ends, then reported); mi_prof_start, _stop,
 * _reset and _set_observer fail with EDEADLK inside a callback.  A callback may change errno. */
typedef void mi_prof_sample_fn(void *ptr, size_t size, size_t weight_bytes, size_t sample_rate,
                               uint64_t thread_id, void *arg);
typedef void mi_prof_free_fn(void *ptr, size_t size, void *arg);

/**
 * mi_prof_set_observer() - install (or, with NULLs, remove) the sample and free callbacks.
 * @on_sample: called for each sample: pointer, requested size in bytes, weight (estimated bytes the
 *             sample stands for), the sample rate in force, and the sampling thread's id (gettid).
 * @on_free: called when a block reported to an on_sample is freed or reallocated (by whichever
 *            observer is installed then; not for blocks sampled before a stop).
 * @arg: passed to both.
 * Return: true; false with errno EDEADLK (from a callback) or ENOTSUP.
 * Thread safety: MT-Safe; a callback may still be running on another thread when this returns.
 * Async-signal safety: AS-Unsafe.
 */
mi_prof_decl_export bool mi_prof_set_observer(mi_prof_sample_fn *on_sample, mi_prof_free_fn *on_free,
                                              void *arg);

/* Estimated counters of one stack (see mi_prof_visit). */
typedef struct mi_prof_stack_counts_s {
  uint64_t alloc_objects;    /* estimated objects allocated here since start or reset */
  uint64_t alloc_bytes;      /* estimated bytes allocated here since start or reset */
  uint64_t inuse_objects;    /* estimated objects allocated here and still in use */
  uint64_t inuse_bytes;      /* estimated bytes allocated here and still in use */
  /* Since 0.3: */
  uint64_t peak_objects;     /* estimated objects allocated here and in use at the peak (mi_prof_stats) */
  uint64_t peak_bytes;       /* estimated bytes allocated here and in use at the peak */
} mi_prof_stack_counts_t;

/* One stack of mi_prof_visit: its return addresses, innermost first (the program's frame that called the
 * allocation function comes first; the library's own frames are not included), and its counters.  The
 * samples not fully recorded for one reason form a stack of depth 1 whose frame is
 * MI_PROF_FRAME_DROPPED(reason).  Return true to go on, false to stop the visit. */
typedef bool mi_prof_visit_fn(void *const *frames, size_t depth, const mi_prof_stack_counts_t *counts,
                              void *arg);

/**
 * mi_prof_visit() - call a function for every sampled stack of the current session.
 * @visitor: called once per stack sampled since start, its label sets added up (with
 *           MIMALLOC_PROF_ACCUM=0: only for stacks with something in use now or at the peak).
 * @arg: passed to the visitor.
 * The stacks and counters are one consistent snapshot, taken before the first call: the sums over all
 * stacks of inuse_bytes, alloc_bytes and peak_bytes equal mi_prof_stats()'s inuse_bytes, alloc_bytes
 * and peak_inuse_bytes (objects too, up to per-stack rounding).
 * The visitor runs with no profiler lock held and may call anything, including the allocator and the
 * mi_prof_* API; the frames arrays are valid only during its call.  After mi_prof_stop() there is
 * nothing to visit.
 * Return: true; false with errno EINVAL (visitor NULL), ENOMEM (the snapshot did not fit in
 *   MIMALLOC_PROF_MAX_BYTES), ENOTRECOVERABLE (a fork child forked inside the profiler's locks, as for
 *   mi_prof_start) or ENOTSUP.
 * Thread safety: MT-Safe.  Async-signal safety: AS-Unsafe.
 */
mi_prof_decl_export bool mi_prof_visit(mi_prof_visit_fn *visitor, void *arg);

/**
 * mi_prof_dump() - write a heap profile (gzipped pprof profile.proto) to a file.
 * @path: the file to create or truncate (mode 0644); NULL = the next automatic name,
 *        <MIMALLOC_PROF_PREFIX>.<pid>.<seq>.m.pb.gz, <seq> zero-padded to six digits (relative to the
 *        current directory unless the prefix is absolute).
 * The profile holds a sample per label set (thread, bucketed size) of every stack sampled since start
 * (with MIMALLOC_PROF_ACCUM=0 only those with something in use now or at the peak) and six values:
 * alloc_objects, alloc_space (bytes), inuse_objects, inuse_space, peak_objects, peak_space (with
 * MIMALLOC_PROF_LIFETIMES two more, freed_objects, freed_space, in samples per lifetime bucket); a
 * comment gives the peak and when; the period is the sample rate (mimalloc_prof(3), HEAP PROFILE
 * FORMAT).  Open it with `go tool pprof PROGRAM FILE`.  While stopped it writes a valid profile with no
 * samples.
 * The first dump loads zlib and protobuf-c (dlopen).
 * Return: true; false with errno from open(2), write(2) or close(2), ENOMEM (the profile did not fit
 *   in MIMALLOC_PROF_MAX_BYTES), EIO (compression failed), ELIBACC (zlib or protobuf-c could not be
 *   loaded: said once on stderr), ENAMETOOLONG, ENOTRECOVERABLE (a fork child
 *   forked inside the profiler's locks, as for mi_prof_start) or ENOTSUP.  A file this
 *   call created is removed again on failure; an existing file is left truncated, and an existing
 *   path that is not a regular file (a symbolic link's target, a device) is never removed.
 * Thread safety: MT-Safe (dumps are serialised); not a cancellation point (a cancelled thread finishes
 *   the dump first); SIGPIPE is blocked during the call (a closed reader gives EPIPE, no signal).
 *   Async-signal safety: AS-Unsafe: from a signal handler, use MIMALLOC_PROF_SIGNAL instead.
 */
mi_prof_decl_export bool mi_prof_dump(const char *path);

/**
 * mi_prof_dump_fd() - write a heap profile to an open file descriptor (from its current offset).
 * Return: true; false with errno EBADF (fd < 0, or from write(2) for a descriptor not open for
 *   writing), another errno from write(2) (EPIPE without SIGPIPE), ENOMEM, EIO, ELIBACC,
 *   ENOTRECOVERABLE or ENOTSUP.
 * Thread safety: MT-Safe; not a cancellation point, as mi_prof_dump().  Async-signal safety: AS-Unsafe.
 */
mi_prof_decl_export bool mi_prof_dump_fd(int fd);

#ifdef __cplusplus
}
#endif

#endif /* MIMALLOC_PROF_H */
