/* peak.h - the estimated totals over time: in-use and allocated, the peak (the in-use of every label
 * set when the in-use total reached its high-water mark) and the timeline.  Every change goes through
 * mprof_peak_sample or mprof_peak_free, under the record shard lock of the block concerned. */
#ifndef MPROF_PEAK_H
#define MPROF_PEAK_H

#include "record.h"
#include "stacktab.h"

/* Two-way by design: record.c calls these under its shard locks, and they read its records and totals. */

typedef struct mprof_point_s {
  uint64_t t_ns;                   /* CLOCK_MONOTONIC */
  uint64_t inuse_bytes, alloc_bytes;   /* estimated totals then */
} mprof_point_t;

static inline uint64_t mprof_mono_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A sample and its free: mprof_peak_sample and mprof_peak_free (peak_inline.h, inline in record.c).  A
 * dropped sample's allocated weight, with nothing in use: */
void mprof_peak_alloc_only(mprof_stack_t *e, uint64_t obj_fx, uint64_t bytes);
/* Every record shard lock held: */
void mprof_peak_begin(uint64_t now_ns);            /* a session starts */
void mprof_peak_end(void);                         /* its data is discarded: no session */
void mprof_peak_reset(uint64_t now_ns);            /* mi_prof_reset: a new peak, allocated from 0 */
void mprof_peak_totals(mprof_totals_t *t);         /* the peak's fields of t */
void mprof_peak_of(const mprof_stack_t *e, uint64_t *obj_fx, uint64_t *bytes);   /* e's in-use at the peak */
size_t mprof_peak_timeline(mprof_point_t *out, uint64_t *realtime_offset_ns);   /* room: POINTS + 2 */
/* A session's start (api_lock; a fork child: async-signal-safe): the sample rate (the timeline's least
 * step is four sample periods), and the interval and peak triggers (profiler.c's MIMALLOC_PROF_INTERVAL
 * and _GDUMP): a profile each time the allocated estimate grows by interval_bytes, and when the in-use
 * estimate passes the last such profile's by a tenth and at least gdump_floor bytes; 0 = off. */
void mprof_peak_configure(uint64_t rate, uint64_t interval_bytes, uint64_t gdump_floor);
void mprof_peak_postfork_reinit(void);

#endif /* MPROF_PEAK_H */
