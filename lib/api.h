/* api.h - what api.c (the mi_prof_* API, the constructor, the fork handlers) offers the rest: the control
 * socket's start, stop and reset (run on the profiler thread: no priming, no callback check) */
#ifndef MPROF_API_H
#define MPROF_API_H

#include "record.h"

/* Registers the fork handlers, once; before anything that can take a profiler lock or start a session
 * (the API's calls and the constructor when an option is set).  Thread-safe. */
void mprof_fork_handlers(void);

bool mprof_api_control_start(size_t sample_rate, mprof_discarded_t *gone);
bool mprof_api_control_stop(void);
bool mprof_api_control_reset(mprof_discarded_t *gone);

#endif /* MPROF_API_H */
