/* control.h - the control socket (MIMALLOC_PROF_CONTROL), served by the profiler thread.  The protocol
 * (mimalloc_prof(3), CONTROL SOCKET): a request is a 4-byte big-endian length and that many bytes of text;
 * a reply is a 4-byte big-endian length and that many bytes: a status line ("ok", or "error ENAME:
 * message"), then the body. */
#ifndef MPROF_CONTROL_H
#define MPROF_CONTROL_H

#include "internal.h"

#define MPROF_CONTROL_MAX_REQUEST  64         /* bytes of a request's text */
#define MPROF_CONTROL_IO_TIMEOUT_S 5          /* to send a whole request; to take each part of a reply */
#define MPROF_CONTROL_PROTOCOL     1          /* the "protocol" line of a stats reply */
bool mprof_control_init(void);                 /* at load: the socket; true when the thread must serve it */
bool mprof_control_active(void);
void mprof_control_wake(void);                 /* wakes the thread's wait; async-signal-safe */
void mprof_control_wait(uint64_t until_ns);    /* one round: waits (CLOCK_MONOTONIC deadline), serves */
void mprof_control_shutdown(void);              /* nobody serves it (a fork child); async-signal-safe */

#endif /* MPROF_CONTROL_H */
