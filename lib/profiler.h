/* profiler.h - the profiler thread and the triggers that wake it */
#ifndef MPROF_PROFILER_H
#define MPROF_PROFILER_H

#include "internal.h"

/* Two-way by design: dump.c, peak.c and sheap.c wake this thread, which calls them back to dump and purge. */

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

#endif /* MPROF_PROFILER_H */
