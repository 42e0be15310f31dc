/* snapshot.h - a consistent copy of the stacks and totals (mi_prof_visit, dumps) */
#ifndef MPROF_SNAPSHOT_H
#define MPROF_SNAPSHOT_H

#include "peak.h"

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

#endif /* MPROF_SNAPSHOT_H */
