/* unwind.h - stack capture.  mprof_unwind_room() then mprof_unwind(), once each per sample, on the
 * sampling thread with the guard up and no profiler lock held; both are async-signal-safe (a sample may
 * be taken in a signal handler that allocates) except on a thread's first sample, which looks up its
 * stack with pthread_getattr_np (and reads /proc on the main thread, when the library was not loaded
 * there).  mprof_unwind_prime() may take the loader locks (rank -1): never call it holding a lock. */
#ifndef MPROF_UNWIND_H
#define MPROF_UNWIND_H

#include "options.h"

#define MPROF_BT_MAX_CAP    256        /* MIMALLOC_PROF_BT_MAX's upper bound */
#define MPROF_UNWIND_SLACK  16         /* extra room mprof_unwind needs in `frames` beyond `max` */
void             mprof_unwind_init(void);
/* Loads the unwinder; returns at once if another thread does. */
void             mprof_unwind_prime(void);
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

/* Reads n words (bytes) at addr outside the memory proven mapped (process_vm_readv); false when it
 * cannot.  The table unwinder (unwtab.c, unwind_table.c) reads through these while unwind.c calls it to
 * walk: the two depend on each other by design (one owns the thread's stack, the other the tables). */
bool             mprof_unwind_read_words(uintptr_t addr, uintptr_t *out, size_t n);
bool             mprof_unwind_read_bytes(uintptr_t addr, void *out, size_t n);
bool             mprof_unwind_foreign_refused(void);   /* process_vm_readv gave ENOSYS or EPERM */

#endif /* MPROF_UNWIND_H */
