/* unwtab.h - the table unwinder's parts, shared by ehframe.c (DWARF call-frame information compiled into
 * rows), unwtab.c (the per-object tables: lookup, publication, reclamation) and unwind_table.c (the walk).
 * Only x86-64 and aarch64 with glibc 2.35 or later (_dl_find_object) have it: MPROF_HAVE_TABLE.
 *
 * A row says, from its address on (until the next row's), how to find the caller's frame:
 *   CFA = SP or FP + offset (a multiple of 8, below 512 KiB); the return address at CFA - 8k or, on
 *   aarch64, still in LR (k = 0); FP saved at CFA - 8m, or unchanged (m = 0), or lost (m =
 *   MPROF_ROW_FP_LOST: held in another register, or saved by an expression).  Other kinds: the end of the
 *   stack (the return address is undefined: _start, a thread's first frame), a sigreturn trampoline,
 *   x86-64's PLT, no call-frame information at all, and a rule no row can express (a CFA computed from
 *   another register or by an expression, a return address kept in another register, ...).  A rule is 64
 *   bits (a chunk keeps each distinct one once; its rows are 4 bytes), laid out for the walk's common case
 *   (kind 0, one comparison; each field a load of its own, the offsets scaled by the address arithmetic
 *   itself): mprof_rule_t below, cfa_off/8:16 | -k:16 | -m:16 | fp_base,pac:8 | kind:8.  (16-bit slots:
 *   aarch64 saves x29 and x30 at the bottom of a large frame, CFA - 1064 and further.)
 * (pac: aarch64's return address is signed with pointer authentication there; the walk strips it.) */
#ifndef MPROF_UNWTAB_H
#define MPROF_UNWTAB_H

#include "internal.h"

#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 35)) && \
    (defined(__x86_64__) || defined(__aarch64__))
#define MPROF_HAVE_TABLE 1
#else
#define MPROF_HAVE_TABLE 0
#endif

enum {
  MPROF_KIND_STD,       /* the rule above, with the return address on the stack and FP known */
  MPROF_KIND_SLOW,      /* the rule above with the return address in LR, or FP lost */
  MPROF_KIND_NONE,      /* no call-frame information covers the address */
  MPROF_KIND_END,       /* the return address is undefined: the outermost frame */
  MPROF_KIND_SIGNAL,    /* a sigreturn trampoline (a CIE with augmentation 'S'): registers in the ucontext */
  MPROF_KIND_PLT,       /* x86-64 .plt: CFA = SP + off, plus 8 from offset m of each 16-byte entry on */
  MPROF_KIND_FALLBACK   /* a rule no row expresses: another unwinder takes the stack */
};

/* A rule as the walk reads it (a chunk's dictionary of them), and the same 8 bytes as one uint64_t (what
 * the compiler produces and compares): little-endian, so cfa8 is bits 0-15, ra 16-31, fp 32-47, flags
 * 48-55, kind 56-63.  The slots are stored negated, so an address is the CFA plus 8 times a field. */
typedef struct mprof_rule_s {
  uint16_t cfa8;                  /* the CFA's offset from SP or FP, in words */
  int16_t  ra;                    /* -k: the return address at CFA - 8k; 0: in LR (aarch64) */
  int16_t  fp;                    /* -m: FP at CFA - 8m; 0: unchanged */
  uint8_t  flags;                 /* MPROF_RULE_FP_BASE, MPROF_RULE_PAC */
  uint8_t  kind;
} mprof_rule_t;
#define MPROF_RULE_FP_BASE    1u
#define MPROF_RULE_PAC        2u

#define MPROF_ROW_KIND(r)     ((unsigned)((r) >> 56))
#define MPROF_ROW_FAST_MAX    ((uint64_t)1 << 56)  /* rule < this: kind STD */
#define MPROF_ROW_CFA_OFF(r)  ((uintptr_t)((r) & 0xffffu) * 8)
#define MPROF_ROW_FP_BASE     ((uint64_t)MPROF_RULE_FP_BASE << 48)
#define MPROF_ROW_PAC         ((uint64_t)MPROF_RULE_PAC << 48)
#define MPROF_ROW_RA(r)       ((uintptr_t)(uint16_t)-(int16_t)(uint16_t)((r) >> 16))   /* k */
#define MPROF_ROW_FP(r)       ((uintptr_t)(uint16_t)-(int16_t)(uint16_t)((r) >> 32))   /* m */
#define MPROF_ROW_FP_LOST     0x7fffu
#define MPROF_ROW_OFF_MAX     (0xffffu * 8)
#define MPROF_ROW_SLOT_MAX    0x7ffeu
#define MPROF_ROW_MAKE(kind, fp_base, cfa_off, ra, fp) \
  ((uint64_t)((cfa_off) / 8) | ((fp_base) ? MPROF_ROW_FP_BASE : 0) | \
   ((uint64_t)(uint16_t)-(int32_t)(ra) << 16) | ((uint64_t)(uint16_t)-(int32_t)(fp) << 32) | \
   ((uint64_t)(kind) << 56))
#define MPROF_ROW_NONE        ((uint64_t)MPROF_KIND_NONE << 56)
#define MPROF_ROW_END         ((uint64_t)MPROF_KIND_END << 56)
#define MPROF_ROW_SIGNAL      ((uint64_t)MPROF_KIND_SIGNAL << 56)
#define MPROF_ROW_FALLBACK    ((uint64_t)MPROF_KIND_FALLBACK << 56)

static inline uint64_t mprof_rule_bits(const mprof_rule_t *r)
{
  uint64_t bits;
  __builtin_memcpy(&bits, r, sizeof bits);
  return bits;
}

/* ---------------------------------------------------------------------------------------------------
   ehframe.c: .eh_frame_hdr and .eh_frame, read through a view
--------------------------------------------------------------------------------------------------- */

typedef struct mprof_cfi_pager_s mprof_cfi_pager_t;

/* An object's bytes [lo, hi) as readable at mem + (address - lo): the loaded image itself, or a copy;
 * mem NULL: read from the object's file through pager (cfifile.c). */
typedef struct mprof_cfi_view_s {
  const uint8_t     *mem;
  uintptr_t          lo, hi;
  mprof_cfi_pager_t *pager;
} mprof_cfi_view_t;

/* An object's .eh_frame_hdr: its search table of (initial location, FDE) pairs, sorted by location, each
 * a 4-byte offset from the header (the encoding every GNU and LLVM linker writes). */
typedef struct mprof_cfi_index_s {
  uintptr_t hdr;          /* the header's address (PT_GNU_EH_FRAME) */
  uintptr_t table;        /* the search table's */
  uintptr_t eh_frame;     /* .eh_frame's */
  uint32_t  fde_count;
  uintptr_t loc_first, loc_last;   /* the first and last entries' locations (mprof_cfi_index_span); 0, 0 */
} mprof_cfi_index_t;

/* Rows being compiled for [from, from + span): start offsets from `from`, sorted, and their rules. */
typedef struct mprof_rowbuf_s {
  uint32_t *start;
  uint64_t *rule;
  size_t    n, cap;
} mprof_rowbuf_t;

/* Reads the header at hdr; the caller checks that the table (8 * fde_count bytes) lies in its view. */
bool mprof_cfi_index(const mprof_cfi_view_t *v, uintptr_t hdr, mprof_cfi_index_t *out);
/* Then notes the locations the table starts and ends with, which let a compile through a file view find
 * its first entry reading one window of the table (mprof_cfi_compile); without them it halves the table. */
void mprof_cfi_index_span(const mprof_cfi_view_t *v, mprof_cfi_index_t *ix);
/* Compiles the rows of [from, from + span) into out (which starts empty); false when out is too small. */
bool mprof_cfi_compile(const mprof_cfi_view_t *v, const mprof_cfi_index_t *ix, uintptr_t from, size_t span,
                       mprof_rowbuf_t *out);

/* ---------------------------------------------------------------------------------------------------
   cfifile.c: a view read from the object's file
--------------------------------------------------------------------------------------------------- */

#define MPROF_UOBJ_ID_MAX 32
#define MPROF_CFI_SLOTS   4
#define MPROF_CFI_SLOT    ((size_t)4 << 10)
#define MPROF_CFI_WINDOW_BYTES (MPROF_CFI_SLOTS * MPROF_CFI_SLOT)

/* Where an object's call-frame information lies in its file, learnt when the object is registered. */
typedef struct mprof_cfi_file_s {
  const char *path;                   /* absolute (the program's: /proc/self/exe); NULL: none */
  uint64_t    lo_off;                 /* the file offset of the view's lo */
  uint64_t    id_off;                 /* of the GNU build ID's descriptor */
  const uint8_t *id;                  /* what it must read (the object's in memory) */
  size_t      id_len;
} mprof_cfi_file_t;

/* An open file and its windows, for one compile. */
struct mprof_cfi_pager_s {
  int       fd;
  int       saved_errno;              /* the caller's, given back at close */
  uint64_t  lo_off;
  uint8_t  *windows;                  /* MPROF_CFI_WINDOW_BYTES of the caller's memory */
  uintptr_t at[MPROF_CFI_SLOTS];      /* each window's first address */
  uint32_t  len[MPROF_CFI_SLOTS];     /* its bytes; 0: empty */
  uint32_t  used[MPROF_CFI_SLOTS], clock;   /* when each was last read (least recent: reused first) */
  uint32_t  last, prev;               /* the windows read last and before (their used[] the newest) */
  uint32_t  preads;                   /* how many reads the compile took */
  bool      failed;                   /* a read failed: what was compiled is not to be used */
  bool      too_long;                 /* a record outgrew a window: its FDE's rows are FALLBACK */
  bool      another;                  /* open: the name holds another file (not regular, or its build ID) */
};

/* Opens f's file for reading into windows and checks its build ID; false (errno kept) when the file cannot
 * be opened, or (pg->another) is not the object's. */
bool mprof_cfi_file_open(mprof_cfi_pager_t *pg, const mprof_cfi_file_t *f, uint8_t *windows);
void mprof_cfi_file_close(mprof_cfi_pager_t *pg);
/* [at, at + need) of a file view, in one window: its first byte, and in *avail how many bytes of the
 * window start there; NULL when that range is outside the view, longer than a window holds with a record's
 * alignment (MPROF_CFI_SLOT - 64: pager->too_long) or unreadable (pager->failed). */
const uint8_t *mprof_cfi_fetch_slow(const mprof_cfi_view_t *v, uintptr_t at, size_t need, size_t *avail);
static inline const uint8_t *mprof_cfi_fetch(const mprof_cfi_view_t *v, uintptr_t at, size_t need,
                                             size_t *avail)
{
  mprof_cfi_pager_t *pg = v->pager;              /* most reads are in the window read last, or the one
                                                  * before (a search-table entry, its FDE, the next) */
  for (int k = 0; k < 2; k++) {
    uint32_t i = k == 0 ? pg->last : pg->prev, len = pg->len[i];
    size_t in = at - pg->at[i];                   /* wraps above len when at is below the window */
    if (mprof_likely(in <= len && need <= len - in)) {
      if (k == 1) pg->prev = pg->last, pg->last = i, pg->used[i] = ++pg->clock;   /* LRU order kept */
      *avail = len - in;
      return pg->windows + (size_t)i * MPROF_CFI_SLOT + in;
    }
  }
  return mprof_cfi_fetch_slow(v, at, need, avail);
}

/* ---------------------------------------------------------------------------------------------------
   unwtab.c: per-object tables, compiled a chunk of text at a time
--------------------------------------------------------------------------------------------------- */

#define MPROF_TAB_CHUNK_SHIFT 10                      /* 1 KiB of an object's address range per chunk */
#define MPROF_TAB_BLOCK_SHIFT 6                   /* a chunk's index: the first row of each 64 bytes */
#define MPROF_TAB_BLOCKS (1u << (MPROF_TAB_CHUNK_SHIFT - MPROF_TAB_BLOCK_SHIFT))

/* A compiled chunk: its distinct rules, then its rows (each a 16-bit start offset into the chunk and a
 * rule's index), then one more row starting at 0xffff that stops the lookup's scan.  first[b] is the byte
 * offset (from the chunk) of the row in effect at the start of 64-byte block b.  4 bytes a row. */
typedef struct mprof_tabrow_s {
  uint16_t start, rule;
} mprof_tabrow_t;

typedef struct mprof_tabchunk_s {
  uint32_t nrows, nrules;
  uint16_t first[MPROF_TAB_BLOCKS];
  mprof_rule_t rule[];                            /* nrules, then mprof_tabrow_t row[nrows + 1] */
} mprof_tabchunk_t;

#define MPROF_TAB_FAILED ((mprof_tabchunk_t *)1)  /* could not be compiled: its rows are all FALLBACK */
#define MPROF_TAB_EMPTY  ((mprof_tabchunk_t *)2)  /* an object without call-frame information: all NONE */

/* Memory a walk may still see when it is taken out of the tables: freed once no such walk is left. */
typedef struct mprof_retired_s mprof_retired_t;
struct mprof_retired_s {
  mprof_retired_t *next;
  uint64_t         epoch;                         /* the epoch it was retired in */
  size_t           bytes;                         /* of its mapping */
  bool             is_object;                     /* an mprof_uobj_t (else a list of objects) */
};

typedef struct mprof_uobj_s mprof_uobj_t;
struct mprof_uobj_s {
  mprof_retired_t retired;                        /* bytes: this record's mapping */
  uintptr_t      start, span;                     /* [start, start + span): the object's mapping */
  const void    *link_map, *eh_frame;             /* who it is (with start and span) */
  uintptr_t      id_at;                           /* where its identity bytes are; 0: none known */
  uint8_t        id_len;                          /* how many (MPROF_UOBJ_ID_MAX at most) */
  uint8_t        id[32];                          /* its build ID, else the start of .eh_frame_hdr */
  bool           permanent;                       /* loaded before the library: never unloaded */
  mprof_cfi_view_t  view;                         /* where its call-frame information is read */
  mprof_cfi_file_t  file;                         /* view.mem NULL: read from here */
  int            file_gone;                       /* atomic: the file is another now (non-permanent) */
  mprof_cfi_index_t index;                        /* fde_count 0: none (every row NONE) */
  void          *copy;                            /* profiler memory holding view's bytes, or NULL */
  size_t         copy_bytes;
  struct mprof_tabslab_s *slabs;                  /* atomic: where its chunks are carved, newest first */
  uint32_t       nchunks;
  mprof_tabchunk_t *chunk[];                         /* atomic; NULL: not compiled yet */
};

/* What the walk remembers between frames about the object it is in. */
typedef struct mprof_ucursor_s {
  const mprof_uobj_t *obj;
  uintptr_t lo, span;                             /* obj's range; span 0: none */
  const void *checked[4];                         /* objects that may be unloaded, checked this walk */
  unsigned n_checked;
} mprof_ucursor_t;

/* Readers: every walk runs between enter and leave (an epoch), and tables leave memory only once no walk
 * that could have seen them is left.  Both are async-signal-safe and lock-free. */
extern uint64_t mprof_unwtab_epoch MPROF_HIDDEN;          /* atomic */
extern uint64_t mprof_unwtab_readers[2] MPROF_HIDDEN;     /* atomic: walks under way by epoch parity */

static inline unsigned mprof_unwtab_enter(void)
{
  for (;;) {
    uint64_t e = __atomic_load_n(&mprof_unwtab_epoch, __ATOMIC_SEQ_CST);
    unsigned slot = (unsigned)(e & 1);
    __atomic_fetch_add(&mprof_unwtab_readers[slot], 1, __ATOMIC_SEQ_CST);
    if (mprof_likely(__atomic_load_n(&mprof_unwtab_epoch, __ATOMIC_SEQ_CST) == e)) return slot;
    __atomic_fetch_sub(&mprof_unwtab_readers[slot], 1, __ATOMIC_RELEASE);   /* it moved on meanwhile */
  }
}

static inline void mprof_unwtab_leave(unsigned slot)
{
  __atomic_fetch_sub(&mprof_unwtab_readers[slot], 1, __ATOMIC_RELEASE);
}
/* The object holding pc (cursor updated), registered on first sight; false when pc lies in none. */
bool     mprof_unwtab_object(uintptr_t pc, mprof_ucursor_t *c);

/* The published objects, sorted by start: an array replaced whole when one is added or found gone. */
typedef struct mprof_objset_entry_s {
  uintptr_t start, end;
  mprof_uobj_t *obj;
} mprof_objset_entry_t;

typedef struct mprof_objset_s {
  mprof_retired_t retired;
  size_t n;
  mprof_objset_entry_t e[];
} mprof_objset_t;

extern mprof_objset_t *mprof_unwtab_objset MPROF_HIDDEN;   /* atomic */

/* mprof_unwtab_object's common case inline: a permanent object already known (a process has a few). */
static inline const mprof_uobj_t *mprof_unwtab_find(uintptr_t pc, mprof_ucursor_t *c)
{
  const mprof_objset_t *set = __atomic_load_n(&mprof_unwtab_objset, __ATOMIC_ACQUIRE);
  for (size_t i = 0, n = set != NULL ? set->n : 0; i < n; i++) {   /* sorted, disjoint */
    if (pc < set->e[i].end) {
      if (pc >= set->e[i].start && set->e[i].obj->permanent) return set->e[i].obj;
      break;
    }
  }
  return mprof_unwtab_object(pc, c) ? c->obj : NULL;
}
/* The chunk of obj covering offset `off`, compiled on first need (MPROF_TAB_FAILED when it cannot be). */
const mprof_tabchunk_t *mprof_unwtab_chunk_slow(const mprof_uobj_t *obj, size_t index);
void     mprof_unwtab_note_initial(uintptr_t map_start);   /* at load: an object there from the start */
void     mprof_unwtab_release(void);              /* every table, once no walk can see it */
void     mprof_unwtab_postfork_child(unsigned my_slot_plus_one);

/* Counters (relaxed atomics): what the tables cost and what they could not do. */
typedef struct mprof_unwtab_stats_s {
  uint64_t objects, chunks, chunk_bytes, chunk_failures, rows;
  uint64_t stale;                                 /* objects found replaced (dlclose, dlopen) */
  uint64_t file_compiles, file_preads;            /* chunks compiled from files (cfifile.c), their reads */
  uint64_t in_place_compiles;                     /* chunks of permanent objects read in place */
  uint64_t copies;                                /* objects whose call-frame information was copied */
  uint64_t object_reads;                          /* process_vm_readv calls on objects' memory */
} mprof_unwtab_stats_t;
void mprof_unwtab_stats(mprof_unwtab_stats_t *out);

/* The chunk of obj covering offset `off` (< obj->span), compiled on first need; MPROF_TAB_FAILED or
 * MPROF_TAB_EMPTY when it has no rows. */
static inline const mprof_tabchunk_t *mprof_unwtab_chunk(const mprof_uobj_t *obj, uintptr_t off)
{
  size_t ci = off >> MPROF_TAB_CHUNK_SHIFT;
  const mprof_tabchunk_t *ch = __atomic_load_n(&obj->chunk[ci], __ATOMIC_ACQUIRE);
  return mprof_likely(ch != NULL) ? ch : mprof_unwtab_chunk_slow(obj, ci);
}

/* The rule at offset `in` of a compiled chunk: the row in effect at its 64-byte block, then a short scan
 * (the last row stands beyond the object's end, so any in < 4 KiB is fine). */
static inline const mprof_rule_t *mprof_unwtab_chunk_rule(const mprof_tabchunk_t *ch, uint32_t in)
{
  const char *base = (const char *)ch;
  const mprof_tabrow_t *at = (const mprof_tabrow_t *)(base + ch->first[in >> MPROF_TAB_BLOCK_SHIFT]);
  while (at[1].start <= in) at++;                 /* a row or two per 64 bytes of code */
  return &ch->rule[at->rule];
}

/* The rule for offset `off` (< span) of obj. */
static inline uint64_t mprof_unwtab_rule(const mprof_uobj_t *obj, uintptr_t off)
{
  const mprof_tabchunk_t *ch = mprof_unwtab_chunk(obj, off);
  if (mprof_unlikely((uintptr_t)ch <= (uintptr_t)MPROF_TAB_EMPTY))
    return ch == MPROF_TAB_FAILED ? MPROF_ROW_FALLBACK : MPROF_ROW_NONE;
  return mprof_rule_bits(mprof_unwtab_chunk_rule(ch, (uint32_t)(off & ((1u << MPROF_TAB_CHUNK_SHIFT) - 1))));
}

/* ---------------------------------------------------------------------------------------------------
   unwind_table.c: the walk; unwind.c gives it the memory it may read directly
--------------------------------------------------------------------------------------------------- */

typedef struct mprof_walk_env_s mprof_walk_env_t;
struct mprof_walk_env_s {
  uintptr_t stack_lo, stack_span;                 /* a word at a is readable when a - stack_lo <= span */
  unsigned *slot;                                 /* set to the walk's reader slot + 1 while it runs */
  bool check;                                     /* MIMALLOC_PROF_UNWIND_CHECK: note where walks stop */
  uintptr_t stop_pc;                              /* out: the frame the walk could not step from */
  uintptr_t alt_lo, alt_hi;                       /* the alternate signal stack this sample runs on */
  uintptr_t self_lo, self_hi;                     /* the library's code: leading frames not reported */
  uintptr_t mi_lo, mi_hi;                         /* libmimalloc's: leading frames not reported either */
};

typedef enum mprof_walk_end_e {
  MPROF_WALK_DONE,        /* the outermost frame, or max frames */
  MPROF_WALK_NONE,        /* a frame without call-frame information (or outside every object) */
  MPROF_WALK_FALLBACK,    /* a frame the table cannot express */
  MPROF_WALK_UNREADABLE   /* memory it may not read (or a frame that does not move up the stack) */
} mprof_walk_end_t;

size_t mprof_unwind_table(uintptr_t *out, size_t max, mprof_walk_env_t *env, mprof_walk_end_t *end);
/* Counts how a walk ended (handed: libgcc took the stack): called for walks that end otherwise than DONE,
 * and for every walk under the check, which keeps the first frames where walks stopped early. */
void   mprof_unwind_table_note(const mprof_walk_env_t *env, mprof_walk_end_t end, bool handed);
/* MIMALLOC_PROF_UNWIND_CHECK: a sample's stack from the table (a) and from libunwind (b; NULL: not asked),
 * counted and, for the first ones that differ, kept for the report at exit. */
void   mprof_unwind_check_note(const uintptr_t *a, size_t na, const uintptr_t *b, size_t nb,
                               mprof_walk_end_t end, bool handed);

#endif /* MPROF_UNWTAB_H */
