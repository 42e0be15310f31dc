/* observer.h - the sample/free callbacks and the dropped-sample counters */
#ifndef MPROF_OBSERVER_H
#define MPROF_OBSERVER_H

#include "internal.h"

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

#endif /* MPROF_OBSERVER_H */
