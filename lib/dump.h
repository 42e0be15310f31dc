/* dump.h - dumps, the final profile and the leak report (dump.c); the newest automatic profiles kept
 * (retain.c). */
#ifndef MPROF_DUMP_H
#define MPROF_DUMP_H

#include "objects.h"
#include "snapshot.h"

void mprof_dump_init(void);
void mprof_dump_session_begin(uint64_t rate);
void mprof_dump_session_reset(void);
void mprof_dump_session_end(void);             /* mi_prof_stop: the data stays, sampling stopped now */
void mprof_dump_session_discard(void);         /* the stopped session's data is gone */
/* An automatic dump of kind i, u, s or p (the profiler thread). */
void mprof_dump_auto(char kind);
void mprof_dump_final(void);                   /* the final profile and leak report, once per process */
bool mprof_dump_leak_write(int fd, const mprof_snapshot_t *snap, const mprof_objects_t *objs);
void mprof_dump_postfork_child(void);

/* The sequence number in the names of automatic profiles (dump.c, retain.c): zero-padded, so that they
 * sort by name in the order written (up to a million per process). */
#define MPROF_SEQ_FORMAT "%06llu"

/* MIMALLOC_PROF_KEEP, the newest automatic profiles of a kind in the directory `dir` (a
 * descriptor; dump_lock held) */
void mprof_retain(char kind, int dir);

#endif /* MPROF_DUMP_H */
