/* pprof.h - the gzipped profile.proto writer */
#ifndef MPROF_PPROF_H
#define MPROF_PPROF_H

#include "objects.h"
#include "snapshot.h"

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

#endif /* MPROF_PPROF_H */
