/* lazyload.h - the libraries loaded when first needed (lazylib.c); the calls into them: lazylib.h. */
#ifndef MPROF_LAZYLOAD_H
#define MPROF_LAZYLOAD_H

#include "internal.h"

typedef enum mprof_lazy_group_e {
  /* zlib, protobuf-c: heap profiles (before a dump's dump_lock; the profiler thread) */
  MPROF_LAZY_PPROF,
  MPROF_LAZY_GROUPS
} mprof_lazy_group_t;

/* Loads a group's libraries (once; a thread that finds them loading loads them too rather than wait).
 * False, with errno ELIBACC and one warning line per group, when they cannot be loaded (then never): the
 * callers fail likewise.  Takes the loader's locks (rank -1) and allocates: never with a profiler lock
 * held, nor in a signal handler. */
bool mprof_lazy_load(mprof_lazy_group_t group);
bool mprof_lazy_loaded(mprof_lazy_group_t group);   /* lock-free, async-signal-safe */

#endif /* MPROF_LAZYLOAD_H */
