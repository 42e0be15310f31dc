/* sampler.h - the sampling decision, weights and samples */
#ifndef MPROF_SAMPLER_H
#define MPROF_SAMPLER_H

#include "internal.h"

void mprof_session_publish(uint64_t id, bool running, uint64_t rate, uint64_t seed);
void mprof_sampler_prefork(void);
bool mprof_sampler_postfork_child(void);
extern bool mprof_frozen;   /* a fork child that may have inherited half-done tables: no more sampling */
uint64_t mprof_sampler_slow_path_calls(void);
void     mprof_sampler_reset_calls(void);
/* 64 bits nobody else can predict (getrandom(2), else a mix of clocks, ids and addresses); seeds and the
 * temporary files' names.  Async-signal-safe. */
uint64_t mprof_random64(void);
bool     mprof_take_sample(mprof_tls_t *t, size_t size, size_t before);          /* guard up */
void    *mprof_sample_alloc(mprof_tls_t *t, const mprof_req_t *r);
mi_heap_t *mprof_sample_heap(const mprof_req_t *r);   /* the heap a sampled block belongs to */
uint64_t mprof_sample_stack(mprof_tls_t *t, size_t size, uint64_t *now, mi_prof_drop_reason_t *why);
bool     mprof_sample_record(mprof_tls_t *t, void *p, size_t size, mi_heap_t *heap, uint64_t stack_id,
                             mi_prof_drop_reason_t why, uint64_t now);
void     mprof_sampler_session_begin(void);   /* reads the process's name (thread labels) */

#endif /* MPROF_SAMPLER_H */
