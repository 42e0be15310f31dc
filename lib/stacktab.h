/* stacktab.h - interned stacks with their label sets and per-label-set counters.
 *
 * Labels of a sample (pprof's Sample.label): the allocating thread (its name, else "tid N") and the
 * requested size, bucketed (mprof_bytes_bucket); a freed sample adds its lifetime bucket. */
#ifndef MPROF_STACKTAB_H
#define MPROF_STACKTAB_H

#include "internal.h"

#define MPROF_THREAD_LABEL 16              /* a thread's name: 15 bytes and the NUL (TASK_COMM_LEN) */
typedef struct mprof_labels_s {
  union {
    char     thread[MPROF_THREAD_LABEL];   /* NUL-padded; "" = none */
    uint64_t thread_words[2];              /*   the same, compared and hashed a word at a time */
  };
  uint64_t bytes;                           /* bucketed requested size; 0 = none */
} mprof_labels_t;

/* The requested size with all but its three highest bits cleared: exact below 8 bytes, then four
 * classes per power of two (8, 10, 12, 14, 16, 20, 24, 28, 32, 40, ...), at most 20% below the size. */
static inline uint64_t mprof_bytes_bucket(uint64_t size)
{
  if (size < 8) return size;
  unsigned drop = (unsigned)(61 - __builtin_clzll(size));   /* bit length - 3 */
  return size >> drop << drop;
}

/* Lifetimes: bucket b > 0 holds lifetimes of [2^(b-1), 2^b) ns, b = 0 a lifetime of 0; the label is the
 * bucket's lower bound. */
#define MPROF_LIFETIME_BUCKETS 65
static inline unsigned mprof_lifetime_bucket(uint64_t ns)
{
  return ns == 0 ? 0 : 64 - (unsigned)__builtin_clzll(ns);
}
static inline uint64_t mprof_lifetime_floor(unsigned b) { return b == 0 ? 0 : (uint64_t)1 << (b - 1); }

/* Entries of the stack table: a stack (its frames; counts nothing itself), a label set of a stack
 * (allocated, in-use and peak counters; a record holds its id), and a lifetime bucket of a label set
 * (freed counters; only with MIMALLOC_PROF_LIFETIMES).  All the entries of one stack live in one shard. */
enum { MPROF_ENTRY_STACK, MPROF_ENTRY_SET, MPROF_ENTRY_FREED };
#define MPROF_ENTRY_NONE UINT32_MAX        /* link of the "dropped" entries: their own frames */

typedef struct mprof_stack_s {
  uint64_t         hash;           /* of the entry's key */
  const uintptr_t *frames;         /* return addresses, innermost first (the stack's copy) */
  uint32_t         depth;          /* frames */
  uint8_t          kind;           /* MPROF_ENTRY_* */
  uint8_t          lifetime;       /* FREED: the bucket */
  uint8_t          shard;          /* where it is: its shard (the "dropped" entries: past the last) */
  uint32_t         link;           /* SET: its stack's entry number; FREED: its set's; STACK: label sets */
  uint32_t         number;         /*   and its number there */
  mprof_labels_t   labels;         /* SET, FREED */
  /* Changed under peak_lock (peak.c) inside a record shard lock, so a snapshot holding every record
   * shard lock sees them stand still: */
  uint64_t         alloc_obj_fx;   /* estimated allocated objects (fixed point) and bytes; FREED: the */
  uint64_t         alloc_bytes;    /*   estimated objects and bytes freed after a lifetime in the bucket
                                    *   (relaxed atomics, added under a record shard lock only) */
  uint64_t         inuse_obj_fx;   /* estimated in-use objects (fixed point) and bytes */
  uint64_t         inuse_bytes;
  uint64_t         half_obj_fx;    /* in use in half B of the samples (peak.c) */
  uint64_t         half_bytes;
  uint64_t         peak_obj_fx;    /* half B's in-use at the peak of generation peak_gen (peak.c) */
  uint64_t         peak_bytes;
  uint64_t         peak_gen;
  void            *snap;           /* STACK: its place in the snapshot being taken (snapshot.c) */
  struct mprof_stack_s *freed_hint; /* SET: the FREED entry of its last free (relaxed atomic; record.c) */
} mprof_stack_t;

/* Ids are the entries' addresses (entries never move during a session; 0 = none), resolved only by
 * record.c under a record shard lock of the current session (the table is released at stop only while
 * every record shard lock is held, and the records lose their ids then). */
static inline mprof_stack_t *mprof_stack_get(uint64_t id) { return (mprof_stack_t *)(uintptr_t)id; }

/* The label set's id for a sample with these frames and labels; 0 when it cannot be interned, with
 * *why = MI_PROF_DROP_MEMORY or _STACKS, or MI_PROF_DROP_REASONS when the session is over (not a drop).
 * Beyond MPROF_LABEL_SETS label sets of one stack, a sample goes to the set of thread "[other]" and its
 * size's power of two. */
#define MPROF_LABEL_SETS 32
#define MPROF_OTHER_THREAD "[other]"
uint64_t       mprof_stack_intern(const uintptr_t *frames, size_t depth, const mprof_labels_t *labels,
                                  uint64_t session_word, mi_prof_drop_reason_t *why);
/* The FREED entry of a set for lifetime bucket b (record shard lock held); a "dropped (memory)" one when
 * it cannot be added. */
uint64_t       mprof_stack_freed(uint64_t set_id, unsigned b);
uint64_t       mprof_stack_dropped(mi_prof_drop_reason_t why);   /* the one-frame "dropped (why)" set */
void           mprof_stacks_begin(uint64_t session_word);
void           mprof_stacks_end(void);
void           mprof_stacks_close(void);   /* stop: no new stack, the table stays */
void           mprof_stacks_reset_alloc(void);
/* Calls fn for every entry, a stack before its sets and a set before its FREED entries, with the stack
 * it belongs to (NULL for the "dropped" entries, which hold their own frame); every record shard lock
 * held, so the counters stand still. */
void           mprof_stacks_each(void (*fn)(mprof_stack_t *e, mprof_stack_t *stack, void *arg), void *arg);
void           mprof_stacks_prefork(void);
void           mprof_stacks_postfork(void);
void           mprof_stacks_postfork_reinit(void);
void           mprof_stacks_postfork_child(void);   /* first in a fork child: no lookup under way there */

#endif /* MPROF_STACKTAB_H */
