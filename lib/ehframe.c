/* ehframe.c - DWARF call-frame information compiled into the table unwinder's rows (unwtab.h).
 *
 * Input: an object's .eh_frame_hdr (the PT_GNU_EH_FRAME segment _dl_find_object names), whose search table
 * lists every FDE by initial location, and the CIEs and FDEs of .eh_frame it points to.  Output: for an
 * address range (a chunk of the object, unwtab.c), the sorted rows in effect over it, consecutive equal
 * rules merged, gaps between FDEs marked NONE.  Only what the walk uses is tracked: the CFA rule, the
 * return address and the frame pointer (rbp on x86-64, x29 on aarch64); every other register's rule is
 * parsed and dropped.  A rule the row cannot hold (a CFA from another register or an expression, a return
 * address in another register or computed, offsets beyond the row's fields) becomes FALLBACK, and the
 * walk hands that stack to another unwinder.  Two expressions are recognised: x86-64's PLT, whose CFA
 * steps by 8 within each 16-byte entry, and any FDE of a CIE with augmentation 'S' (a sigreturn
 * trampoline) is SIGNAL whatever its rules say.
 *
 * Every byte is read through a view with bounds (unwtab.c decides whether that is the loaded image, a
 * copy, or the object's file through cfifile.c's windows): a corrupt or hostile length, offset or LEB128
 * ends that FDE (its range becomes FALLBACK) and never reads outside the view.  .debug_frame is not read:
 * every Debian object has .eh_frame (for C++ exceptions and unwinders alike), while .debug_frame is
 * stripped into a separate debug file, which only a lookup by build ID (a package, debuginfod) finds: no
 * work for a sample.
 *
 * No allocation, no lock, async-signal-safe: it runs inside a sample, on the sampling thread.  Stack use:
 * the register state and 8 remembered states, about 0.4 KiB.
 */
#include "unwtab.h"
#include "internal.h"

#include <string.h>

#if MPROF_HAVE_TABLE

#if defined(__x86_64__)
#define REG_SP 7u
#define REG_FP 6u
#else
#define REG_SP 31u
#define REG_FP 29u
#endif

/* ---------------------------------------------------------------------------------------------------
   Reading through a view
--------------------------------------------------------------------------------------------------- */

typedef struct rd_s {
  const uint8_t *p, *end;          /* the next byte; the end of what may be read (within the view) */
  uintptr_t delta;                 /* a byte's address: (uintptr_t)p + delta */
  const mprof_cfi_view_t *v;
  bool bad;
} rd_t;

static const uint8_t nothing[1];

/* A file view's bytes from `at`: all of [at, end) when that is a record's body (short), else what the
 * window has (rd_record asks for the rest of a record); *stop: where they end.  NULL: unreadable.  Apart
 * from rd_open, so that a reader's fields stay in registers. */
static MPROF_NOINLINE const uint8_t *file_bytes(const mprof_cfi_view_t *v, uintptr_t at, uintptr_t end,
                                                const uint8_t **stop)
{
  size_t avail, need = end - at <= MPROF_CFI_SLOT - 64 ? end - at : 32;
  const uint8_t *p = mprof_cfi_fetch(v, at, need, &avail);
  if (p != NULL) *stop = p + (avail < end - at ? avail : end - at);
  return p;
}

/* [at, end) of the view (of a file view, as much as file_bytes gives). */
static inline bool rd_open(rd_t *r, const mprof_cfi_view_t *v, uintptr_t at, uintptr_t end)
{
  const uint8_t *p = nothing, *stop = nothing;
  r->v = v;
  r->bad = at < v->lo || end > v->hi || at > end;
  if (!r->bad && v->mem != NULL) {
    p = v->mem + (at - v->lo);
    stop = v->mem + (end - v->lo);
  } else if (!r->bad && (p = file_bytes(v, at, end, &stop)) == NULL) {
    p = stop = nothing;
    r->bad = true;
  }
  r->p = p;
  r->end = stop;
  r->delta = r->bad ? v->lo - (uintptr_t)nothing : at - (uintptr_t)p;
  return !r->bad;
}

static inline uintptr_t rd_addr(const rd_t *r) { return (uintptr_t)r->p + r->delta; }

/* The end of what r may read, moved to address `end` (within what it may read already). */
static inline void rd_limit(rd_t *r, uintptr_t end)
{
  if (end - rd_addr(r) > (uintptr_t)(r->end - r->p)) r->bad = true;
  else r->end = r->p + (end - rd_addr(r));
}

static inline const uint8_t *rd_take(rd_t *r, size_t n)
{
  if (mprof_unlikely(n > (size_t)(r->end - r->p))) {
    r->bad = true;
    r->p = r->end;
    return NULL;
  }
  const uint8_t *p = r->p;
  r->p += n;
  return p;
}

static inline uint8_t rd_u8(rd_t *r)
{
  if (mprof_likely(r->p < r->end)) return *r->p++;
  r->bad = true;
  return 0;
}

static uint64_t rd_uint(rd_t *r, size_t n)   /* little-endian n-byte unsigned (both targets are) */
{
  const uint8_t *p = rd_take(r, n);
  uint64_t v = 0;
  if (p != NULL) memcpy(&v, p, n);
  return v;
}

static int64_t rd_sint(rd_t *r, size_t n)
{
  uint64_t v = rd_uint(r, n);
  unsigned shift = 64 - 8 * (unsigned)n;
  return (int64_t)(v << shift) >> shift;
}

static inline uint64_t rd_uleb(rd_t *r)
{
  uint8_t b = rd_u8(r);
  if (mprof_likely(!(b & 0x80))) return b;     /* most are one byte */
  uint64_t v = b & 0x7f;
  for (unsigned shift = 7; shift < 64; shift += 7) {
    b = rd_u8(r);
    v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) return v;
  }
  r->bad = true;
  return 0;
}

static inline int64_t rd_sleb(rd_t *r)
{
  uint64_t v = 0;
  for (unsigned shift = 0; shift < 64; shift += 7) {
    uint8_t b = rd_u8(r);
    v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      if (shift + 7 < 64 && (b & 0x40)) v |= ~(uint64_t)0 << (shift + 7);
      return (int64_t)v;
    }
  }
  r->bad = true;
  return 0;
}

/* DW_EH_PE_* pointer encodings: the format (low nibble) and how it applies (pcrel to the field's own
 * address, datarel to `data`); indirect, textrel and funcrel pointers mark the reader bad, except where
 * only the size matters (a personality routine being skipped: `skip`). */
#define PE_OMIT 0xff
static uint64_t rd_encoded(rd_t *r, uint8_t enc, uintptr_t data, bool skip)
{
  if (enc == PE_OMIT) return 0;
  uintptr_t field = rd_addr(r);
  uint64_t v;
  switch (enc & 0x0f) {
  case 0x00: v = rd_uint(r, sizeof(uintptr_t)); break;   /* absptr */
  case 0x01: v = rd_uleb(r); break;
  case 0x02: v = rd_uint(r, 2); break;
  case 0x03: v = rd_uint(r, 4); break;
  case 0x04: v = rd_uint(r, 8); break;
  case 0x09: v = (uint64_t)rd_sleb(r); break;
  case 0x0a: v = (uint64_t)rd_sint(r, 2); break;
  case 0x0b: v = (uint64_t)rd_sint(r, 4); break;
  case 0x0c: v = (uint64_t)rd_sint(r, 8); break;
  default: r->bad = true; return 0;
  }
  if (skip) return 0;
  switch (enc & 0x70) {
  case 0x00: break;
  case 0x10: v += field; break;                          /* pcrel */
  case 0x30: v += data; break;                           /* datarel */
  default: r->bad = true; return 0;
  }
  if (enc & 0x80) r->bad = true;                         /* indirect */
  return v;
}

/* ---------------------------------------------------------------------------------------------------
   .eh_frame_hdr
--------------------------------------------------------------------------------------------------- */

#define TABLE_ENC 0x3b   /* DW_EH_PE_datarel | DW_EH_PE_sdata4 */

bool mprof_cfi_index(const mprof_cfi_view_t *v, uintptr_t hdr, mprof_cfi_index_t *out)
{
  rd_t r;
  memset(out, 0, sizeof *out);
  if (!rd_open(&r, v, hdr, v->hi)) return false;
  uint8_t version = (uint8_t)rd_uint(&r, 1), ptr_enc = (uint8_t)rd_uint(&r, 1);
  uint8_t count_enc = (uint8_t)rd_uint(&r, 1), table_enc = (uint8_t)rd_uint(&r, 1);
  uintptr_t eh_frame = (uintptr_t)rd_encoded(&r, ptr_enc, hdr, false);
  uint64_t count = count_enc == PE_OMIT ? 0 : rd_encoded(&r, count_enc, hdr, false);
  if (r.bad || version != 1 || table_enc != TABLE_ENC || count > UINT32_MAX) return false;
  out->hdr = hdr;
  out->table = rd_addr(&r);
  out->eh_frame = eh_frame;
  out->fde_count = (uint32_t)count;
  return true;
}

/* Search-table entry i (the caller checked the table lies in the view): its initial location and its
 * FDE's address, each the header's address plus a 4-byte offset; the header's own when a file view cannot
 * read it (the compile then fails). */
static inline void table_entry(const mprof_cfi_view_t *v, const mprof_cfi_index_t *ix, size_t i,
                               uintptr_t *loc, uintptr_t *fde)
{
  int32_t rel[2] = {0, 0};
  size_t avail;
  uintptr_t at = ix->table + 8 * i;
  const uint8_t *p = v->mem != NULL ? v->mem + (at - v->lo) : mprof_cfi_fetch(v, at, 8, &avail);
  if (p != NULL) memcpy(rel, p, 8);
  *loc = ix->hdr + (uintptr_t)(intptr_t)rel[0];
  *fde = ix->hdr + (uintptr_t)(intptr_t)rel[1];
}

static uintptr_t table_loc(const mprof_cfi_view_t *v, const mprof_cfi_index_t *ix, size_t i)
{
  uintptr_t loc, fde;
  table_entry(v, ix, i, &loc, &fde);
  return loc;
}

void mprof_cfi_index_span(const mprof_cfi_view_t *v, mprof_cfi_index_t *ix)
{
  ix->loc_first = ix->loc_last = 0;
  if (ix->fde_count < 2) return;
  uintptr_t first = table_loc(v, ix, 0), last = table_loc(v, ix, ix->fde_count - 1);
  if (first < last) ix->loc_first = first, ix->loc_last = last;   /* else unsorted: halve as before */
}

/* ---------------------------------------------------------------------------------------------------
   CIEs and FDEs
--------------------------------------------------------------------------------------------------- */

enum { R_SAME, R_UNDEF, R_AT, R_OTHER };                 /* a register's rule */
enum { C_REG, C_PLT, C_OTHER };                          /* the CFA's */

typedef struct col_s {
  uint8_t how;
  int32_t off;                     /* R_AT: saved at CFA + off */
} col_t;

/* 28 bytes: a few of them live on the sampling thread's stack at once. */
typedef struct cfa_state_s {
  uint8_t cfa_how;
  uint8_t plt_k;                   /* C_PLT: from this offset within a 16-byte entry, 8 more */
  bool pac;                        /* aarch64: the return address is signed from here on */
  uint32_t cfa_reg;
  int32_t cfa_off;                 /* C_PLT: the offset from SP before the entry's push */
  col_t ra, fp;
} cfa_state_t;

typedef struct cie_s {
  uintptr_t addr;
  uintptr_t insns, end;            /* its initial instructions */
  uint64_t  code_align;
  int64_t   data_align;
  uint64_t  ra_reg;
  uint8_t   fde_enc;
  bool      z, signal;
  bool      init_ok;               /* its initial instructions ran: init is every FDE's first state */
  cfa_state_t init;
} cie_t;

typedef struct emit_s emit_t;
static bool run(const mprof_cfi_view_t *v, uintptr_t at, uintptr_t end, const cie_t *c,
                const cfa_state_t *initial, cfa_state_t *s, emit_t *e, uintptr_t *loc, uintptr_t pc_end);

/* Reads the record's length and limits r to it; 0 when unusable (64-bit lengths are not used in
 * .eh_frame by any toolchain here). */
static uintptr_t rd_record(rd_t *r)
{
  uintptr_t at = rd_addr(r);
  uint32_t len = (uint32_t)rd_uint(r, 4);
  if (r->bad || len == 0 || len == 0xffffffffu) return 0;
  uintptr_t end = rd_addr(r) + len;
  if (r->v->mem == NULL && len > (size_t)(r->end - r->p) && end > at) {   /* the whole record, in a window */
    size_t avail;
    const uint8_t *p = mprof_cfi_fetch(r->v, at, end - at, &avail);
    if (p == NULL) return r->bad = true, 0;
    r->p = p + 4;
    r->end = p + avail;
    r->delta = at - (uintptr_t)p;
  }
  rd_limit(r, end);
  return r->bad ? 0 : end;
}

static bool parse_cie(const mprof_cfi_view_t *v, uintptr_t addr, cie_t *c)
{
  rd_t r;
  if (!rd_open(&r, v, addr, v->hi)) return false;
  uintptr_t end = rd_record(&r);
  uint32_t id = (uint32_t)rd_uint(&r, 4);
  uint8_t version = rd_u8(&r);
  if (end == 0 || r.bad || id != 0 || (version != 1 && version != 3)) return false;
  char aug[8];
  size_t na = 0;
  for (;;) {
    uint8_t ch = rd_u8(&r);
    if (r.bad || na == sizeof aug) return false;
    aug[na++] = (char)ch;
    if (ch == 0) break;
  }
  memset(c, 0, sizeof *c);
  c->addr = addr;
  c->fde_enc = 0;                  /* absptr unless 'R' says otherwise */
  size_t k = 0;
  if (aug[0] == 'e' && aug[1] == 'h') {                  /* gcc 2's pointer */
    (void)rd_take(&r, sizeof(uintptr_t));
    k = 2;
  }
  c->code_align = rd_uleb(&r);
  c->data_align = rd_sleb(&r);
  c->ra_reg = version == 1 ? rd_u8(&r) : rd_uleb(&r);
  if (aug[k] == 'z') {
    c->z = true;
    uint64_t alen = rd_uleb(&r);
    if (r.bad || alen > (uint64_t)(r.end - r.p)) return false;
    const uint8_t *aend = r.p + alen;
    for (k++; aug[k] != 0 && !r.bad; k++) {
      if (aug[k] == 'R') c->fde_enc = rd_u8(&r);
      else if (aug[k] == 'L') (void)rd_u8(&r);
      else if (aug[k] == 'P') {
        uint8_t enc = rd_u8(&r);
        (void)rd_encoded(&r, enc, 0, true);
      } else if (aug[k] == 'S') c->signal = true;
      else if (aug[k] != 'B' && aug[k] != 'G') break;  /* unknown: the rest is skipped by length */
    }
    r.p = aend;
  } else if (aug[k] != 0) {
    return false;                  /* an augmentation we cannot skip */
  }
  if (r.bad || c->code_align == 0) return false;
  c->insns = rd_addr(&r);
  c->end = end;
  c->init = (cfa_state_t){.cfa_how = C_REG, .cfa_reg = REG_SP, .ra = {R_SAME, 0}, .fp = {R_SAME, 0}};
  uintptr_t loc = 0;
  c->init_ok = run(v, c->insns, c->end, c, &c->init, &c->init, NULL, &loc, 0);
  return true;
}

typedef struct fde_s {
  uintptr_t pc_begin, pc_end;
  uintptr_t insns, end;
} fde_t;

/* The FDE at addr, its CIE parsed into *cache unless it is there already. */
static bool parse_fde(const mprof_cfi_view_t *v, uintptr_t addr, cie_t *cache, fde_t *f)
{
  rd_t r;
  if (!rd_open(&r, v, addr, v->hi)) return false;
  uintptr_t end = rd_record(&r), id_at = rd_addr(&r);
  uint32_t id = (uint32_t)rd_uint(&r, 4);
  if (end == 0 || r.bad || id == 0 || id > id_at) return false;
  uintptr_t cie = id_at - id;
  if (cache->addr != cie && !parse_cie(v, cie, cache)) {
    cache->addr = 0;
    return false;
  }
  f->pc_begin = (uintptr_t)rd_encoded(&r, cache->fde_enc, 0, false);
  uintptr_t range = (uintptr_t)rd_encoded(&r, cache->fde_enc & 0x0f, 0, false);
  if (cache->z) {
    uint64_t alen = rd_uleb(&r);
    if (alen > (uint64_t)(r.end - r.p)) return false;
    r.p += alen;
  }
  if (r.bad || range > UINTPTR_MAX - f->pc_begin) return false;
  f->pc_end = f->pc_begin + range;
  f->insns = rd_addr(&r);
  f->end = end;
  return true;
}

/* ---------------------------------------------------------------------------------------------------
   The CFA program, for the three columns the walk uses
--------------------------------------------------------------------------------------------------- */

#define REMEMBER_MAX 4             /* nested remember_state (compilers use one) */

/* Offsets and register numbers narrowed to the state's fields: anything out of range becomes a value
 * every rule refuses (a CFA offset that is negative, a register no row uses). */
static int32_t narrow_off(int64_t v) { return v > INT32_MAX || v < INT32_MIN ? INT32_MIN : (int32_t)v; }
static uint32_t narrow_reg(uint64_t v) { return v > 255 ? 255 : (uint32_t)v; }

/* x86-64 binutils' PLT expression: breg7 (rsp) A; breg16 (rip) 0; lit15; and; litK; ge; lit3; shl; plus:
 * CFA = rsp + A, plus 8 from offset K of each 16-byte entry on (once the entry has pushed its index). */
static bool plt_expression(const uint8_t *p, size_t n, cfa_state_t *s)
{
#if defined(__x86_64__)
  static const uint8_t tail[] = {0x2a, 0x33, 0x24, 0x22};
  if (n == 11 && p[0] == 0x77 && p[1] < 0x40 && p[2] == 0x80 && p[3] == 0 && p[4] == 0x3f && p[5] == 0x1a &&
      p[6] >= 0x30 && p[6] <= 0x3f && memcmp(p + 7, tail, sizeof tail) == 0) {
    s->cfa_how = C_PLT;
    s->cfa_off = p[1];
    s->plt_k = (uint8_t)(p[6] - 0x30);
    return true;
  }
#else
  (void)p, (void)n, (void)s;
#endif
  return false;
}

/* A CFA offset a row of kind STD or SLOW can hold: whole words, below MPROF_ROW_OFF_MAX. */
static inline bool cfa_off_fits(int32_t off)
{
  return off >= 0 && off % 8 == 0 && off <= (int64_t)MPROF_ROW_OFF_MAX;
}

static uint64_t encode(const cfa_state_t *s, const cie_t *c)
{
  if (c->signal) return MPROF_ROW_SIGNAL;
  if (s->ra.how == R_UNDEF) return MPROF_ROW_END;
  unsigned ra = 0, fp = 0;
  if (s->ra.how == R_AT) {
    if (s->ra.off >= 0 || s->ra.off % 8 != 0 || -(int64_t)s->ra.off / 8 > MPROF_ROW_SLOT_MAX)
      return MPROF_ROW_FALLBACK;
    ra = (unsigned)(-s->ra.off / 8);
  } else if (s->ra.how != R_SAME || c->ra_reg != 30) {   /* still in LR: aarch64 only */
    return MPROF_ROW_FALLBACK;
  }
  if (s->fp.how == R_AT) {
    if (s->fp.off >= 0 || s->fp.off % 8 != 0 || -(int64_t)s->fp.off / 8 > MPROF_ROW_SLOT_MAX)
      fp = MPROF_ROW_FP_LOST;
    else fp = (unsigned)(-s->fp.off / 8);
  } else if (s->fp.how == R_OTHER) {
    fp = MPROF_ROW_FP_LOST;
  }
  uint64_t pac = s->pac ? MPROF_ROW_PAC : 0;
  if (s->cfa_how == C_PLT) {     /* the fp field holds K: a PLT entry leaves the frame pointer alone */
    if (ra != 1 || fp != 0 || s->cfa_off % 8 != 0) return MPROF_ROW_FALLBACK;
    return MPROF_ROW_MAKE(MPROF_KIND_PLT, false, s->cfa_off, ra, s->plt_k);
  }
  if (s->cfa_how != C_REG || (s->cfa_reg != REG_SP && s->cfa_reg != REG_FP) || !cfa_off_fits(s->cfa_off))
    return MPROF_ROW_FALLBACK;
  unsigned kind = ra == 0 || fp == MPROF_ROW_FP_LOST ? MPROF_KIND_SLOW : MPROF_KIND_STD;
  return MPROF_ROW_MAKE(kind, s->cfa_reg == REG_FP, s->cfa_off, ra, fp) | pac;
}

struct emit_s {
  mprof_rowbuf_t *out;
  uintptr_t from, to;
  bool full;
  unsigned dirty;                  /* what changed in the state since `rule` was encoded: DIRTY_* */
  uint64_t rule;
};

#define DIRTY_CFA_OFF 1u           /* only the CFA's offset (a push or a pop): the common case */
#define DIRTY_ALL     2u           /* anything else the row holds, or nothing encoded yet */

/* encode(), again only when the state changed.  Most locations of an FDE change only the CFA's offset,
 * which replaces the offset field of a rule of kind STD or SLOW (the rest of it is unchanged). */
static uint64_t encode_cached(const cfa_state_t *s, const cie_t *c, emit_t *e)
{
  if (mprof_likely(e->dirty == DIRTY_CFA_OFF) && MPROF_ROW_KIND(e->rule) <= MPROF_KIND_SLOW) {
    if (cfa_off_fits(s->cfa_off))
      e->rule = (e->rule & ~(uint64_t)0xffff) | (uint64_t)(s->cfa_off / 8);
    else e->rule = MPROF_ROW_FALLBACK;
  } else if (e->dirty != 0) {
    e->rule = encode(s, c);
  }
  e->dirty = 0;
  return e->rule;
}

/* Appends (start, rule), merging with what is there: a row at the same start is replaced (a later FDE
 * wins), one whose rule repeats the previous row's is dropped. */
static bool push_row(mprof_rowbuf_t *o, uint32_t start, uint64_t rule)
{
  while (o->n > 0 && o->start[o->n - 1] > start) o->n--;   /* overlapping FDEs: the later one wins */
  if (o->n > 0 && o->start[o->n - 1] == start) o->n--;
  if (o->n > 0 && o->rule[o->n - 1] == rule) return true;
  if (o->n == o->cap) return false;
  o->start[o->n] = start;
  o->rule[o->n] = rule;
  o->n++;
  return true;
}


/* The rule of state s holds over [loc, next). */
static void emit(emit_t *e, uintptr_t loc, uintptr_t next, uint64_t rule)
{
  if (next <= e->from || loc >= e->to || next <= loc) return;
  uintptr_t at = loc > e->from ? loc : e->from;
  if (!push_row(e->out, (uint32_t)(at - e->from), rule)) e->full = true;
}

/* State s holds over [loc, next): a row where that meets the chunk, encoded only then (an FDE that starts
 * before the chunk runs through its earlier locations without a row). */
static inline void emit_state(emit_t *e, uintptr_t loc, uintptr_t next, const cfa_state_t *s, const cie_t *c)
{
  if (next <= e->from || loc >= e->to || next <= loc) return;
  emit(e, loc, next, encode_cached(s, c, e));
}

/* Runs instructions [at, end) from state s; with e, emits a row per location of the FDE [loc, pc_end).
 * false: an instruction could not be read or understood (the rest of the FDE is FALLBACK). */
static bool run(const mprof_cfi_view_t *v, uintptr_t at, uintptr_t end, const cie_t *c,
                const cfa_state_t *initial, cfa_state_t *s, emit_t *e, uintptr_t *loc, uintptr_t pc_end)
{
  cfa_state_t remembered[REMEMBER_MAX];
  unsigned depth = 0;
  rd_t r;
  if (!rd_open(&r, v, at, end)) return false;
  const uint64_t ra_reg = c->ra_reg;
  unsigned none, *dirty = e != NULL ? &e->dirty : &none;
  while (r.p < r.end && !r.bad) {
    uint8_t op = rd_u8(&r);
    uint64_t reg = 0, advance = 0;
    int64_t off = 0;
    uint8_t high = op & 0xc0, low = op & 0x3f;
    if (high == 0x40) {
      advance = low;
    } else if (high == 0x80) {                           /* offset */
      reg = low, off = (int64_t)rd_uleb(&r) * c->data_align;
      goto set_at;
    } else if (high == 0xc0) {                           /* restore */
      reg = low;
      goto restore;
    } else {
      switch (op) {
      case 0x00: continue;                               /* nop */
      case 0x01: {                                       /* set_loc */
        uintptr_t to = (uintptr_t)rd_encoded(&r, c->fde_enc, 0, false);
        if (r.bad || to < *loc) return false;
        if (e != NULL) emit_state(e, *loc, to < pc_end ? to : pc_end, s, c);
        *loc = to;
        continue;
      }
      case 0x02: advance = rd_u8(&r); break;
      case 0x03: advance = rd_uint(&r, 2); break;
      case 0x04: advance = rd_uint(&r, 4); break;
      case 0x05: reg = rd_uleb(&r), off = (int64_t)rd_uleb(&r) * c->data_align; goto set_at;
      case 0x06: reg = rd_uleb(&r); goto restore;
      case 0x07:                                         /* undefined */
        reg = rd_uleb(&r);
        if (reg == ra_reg) s->ra.how = R_UNDEF, *dirty |= DIRTY_ALL;
        else if (reg == REG_FP) s->fp.how = R_SAME, *dirty |= DIRTY_ALL;   /* the stack ends here */
        continue;
      case 0x08:                                         /* same_value */
        reg = rd_uleb(&r);
        if (reg == ra_reg) s->ra.how = R_SAME, *dirty |= DIRTY_ALL;
        else if (reg == REG_FP) s->fp.how = R_SAME, *dirty |= DIRTY_ALL;
        continue;
      case 0x09:                                         /* register */
        reg = rd_uleb(&r);
        (void)rd_uleb(&r);
        if (reg == ra_reg) s->ra.how = R_OTHER, *dirty |= DIRTY_ALL;
        else if (reg == REG_FP) s->fp.how = R_OTHER, *dirty |= DIRTY_ALL;
        continue;
      case 0x0a:                                         /* remember_state */
        if (depth == REMEMBER_MAX) return false;
        remembered[depth++] = *s;
        continue;
      case 0x0b:                                         /* restore_state */
        if (depth == 0) return false;
        *s = remembered[--depth];
        *dirty |= DIRTY_ALL;
        continue;
      case 0x0c:                                         /* def_cfa */
        s->cfa_how = C_REG, s->cfa_reg = narrow_reg(rd_uleb(&r));
        s->cfa_off = narrow_off((int64_t)rd_uleb(&r));
        *dirty |= DIRTY_ALL;
        continue;
      case 0x0d:                                         /* def_cfa_register */
        if (s->cfa_how != C_REG) s->cfa_how = C_OTHER;
        s->cfa_reg = narrow_reg(rd_uleb(&r));
        *dirty |= DIRTY_ALL;
        continue;
      case 0x0e:                                         /* def_cfa_offset */
        s->cfa_off = narrow_off((int64_t)rd_uleb(&r));
        *dirty |= DIRTY_CFA_OFF;
        continue;
      case 0x0f: {                                       /* def_cfa_expression */
        uint64_t n = rd_uleb(&r);
        const uint8_t *p = n <= 64 ? rd_take(&r, (size_t)n) : NULL;
        if (p == NULL) return false;
        if (!plt_expression(p, (size_t)n, s)) s->cfa_how = C_OTHER;
        *dirty |= DIRTY_ALL;
        continue;
      }
      case 0x10: case 0x16: {                            /* expression, val_expression */
        reg = rd_uleb(&r);
        uint64_t n = rd_uleb(&r);
        if (n > (uint64_t)(r.end - r.p)) return false;
        r.p += n;
        if (reg == ra_reg) s->ra.how = R_OTHER, *dirty |= DIRTY_ALL;
        else if (reg == REG_FP) s->fp.how = R_OTHER, *dirty |= DIRTY_ALL;
        continue;
      }
      case 0x11: reg = rd_uleb(&r), off = rd_sleb(&r) * c->data_align; goto set_at;   /* offset_extended_sf */
      case 0x12:                                         /* def_cfa_sf */
        s->cfa_how = C_REG, s->cfa_reg = narrow_reg(rd_uleb(&r));
        s->cfa_off = narrow_off(rd_sleb(&r) * c->data_align);
        *dirty |= DIRTY_ALL;
        continue;
      case 0x13:                                         /* def_cfa_offset_sf */
        s->cfa_off = narrow_off(rd_sleb(&r) * c->data_align);
        *dirty |= DIRTY_CFA_OFF;
        continue;
      case 0x14: case 0x15:                              /* val_offset(_sf): a value, not a slot */
        reg = rd_uleb(&r);
        if (op == 0x14) (void)rd_uleb(&r);
        else (void)rd_sleb(&r);
        if (reg == ra_reg) s->ra.how = R_OTHER, *dirty |= DIRTY_ALL;
        else if (reg == REG_FP) s->fp.how = R_OTHER, *dirty |= DIRTY_ALL;
        continue;
      case 0x2d:                                         /* AARCH64_negate_ra_state (SPARC's window_save) */
        s->pac = !s->pac, *dirty |= DIRTY_ALL;
        continue;
      case 0x2e: (void)rd_uleb(&r); continue;            /* GNU_args_size */
      case 0x2f: reg = rd_uleb(&r), off = -(int64_t)rd_uleb(&r) * c->data_align; goto set_at;
      default: return false;
      }
    }
    /* advance_loc */
    {
      if (advance > (UINTPTR_MAX - *loc) / c->code_align) return false;
      uintptr_t to = *loc + (uintptr_t)(advance * c->code_align);
      if (e != NULL) {
        emit_state(e, *loc, to < pc_end ? to : pc_end, s, c);
        if (to >= e->to) return true;                    /* the rest lies beyond the chunk */
      }
      *loc = to;
      continue;
    }
  set_at:
    if (reg == ra_reg) s->ra = (col_t){R_AT, narrow_off(off)}, *dirty |= DIRTY_ALL;
    else if (reg == REG_FP) s->fp = (col_t){R_AT, narrow_off(off)}, *dirty |= DIRTY_ALL;
    continue;
  restore:
    if (reg == ra_reg) s->ra = initial->ra, *dirty |= DIRTY_ALL;
    else if (reg == REG_FP) s->fp = initial->fp, *dirty |= DIRTY_ALL;
    continue;
  }
  return !r.bad;
}

/* ---------------------------------------------------------------------------------------------------
   A range of rows
--------------------------------------------------------------------------------------------------- */

/* The first search-table entry whose FDE may cover `from`: the last one starting at or before it.  A file
 * view reads the table a window (512 entries) at a time, and halving the table read one window per step
 * (python3's table spans 26: 6.2 reads a compile).  So there the window holding the entry interpolated
 * between the table's first and last locations is looked at first: its first and last entries bound the
 * search, which then stays inside it when `from` lies between them (FDEs cover a text fairly evenly). */
static size_t first_entry(const mprof_cfi_view_t *v, const mprof_cfi_index_t *ix, uintptr_t from)
{
  size_t lo = 0, hi = ix->fde_count;
  uintptr_t span = ix->loc_last - ix->loc_first, t = ix->table;
  if (v->mem == NULL && hi > MPROF_CFI_SLOT / 8 && from - ix->loc_first < span && span <= UINT32_MAX) {
    size_t guess = (size_t)((uint64_t)(from - ix->loc_first) * (hi - 1) / span);    /* < 2^32 * 2^32 */
    uintptr_t page = (t + 8 * guess) & ~(uintptr_t)(MPROF_CFI_SLOT - 1);
    size_t a = page > t ? (page - t + 7) / 8 : 0;                 /* its first and last entries wholly in */
    size_t b = (page + MPROF_CFI_SLOT - 8 - t) / 8;               /* it (b wraps when none ends in it) */
    if (table_loc(v, ix, a) <= from) lo = a + 1;  /* entries below lo start at or before from, */
    else hi = a;                                  /* those from hi on after it */
    if (b < hi && b >= lo) {
      if (table_loc(v, ix, b) <= from) lo = b + 1;
      else hi = b;
    }
  }
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (table_loc(v, ix, mid) <= from) lo = mid + 1;
    else hi = mid;
  }
  return lo > 0 ? lo - 1 : 0;
}

bool mprof_cfi_compile(const mprof_cfi_view_t *v, const mprof_cfi_index_t *ix, uintptr_t from, size_t span,
                       mprof_rowbuf_t *out)
{
  emit_t e = {.out = out, .from = from, .to = from + span};
  out->n = 0;
  if (!push_row(out, 0, MPROF_ROW_NONE)) return false;
  cie_t cie = {0};
  for (size_t i = first_entry(v, ix, from); i < ix->fde_count && !e.full; i++) {
    uintptr_t loc, fde;
    table_entry(v, ix, i, &loc, &fde);
    if (loc >= e.to) break;
    fde_t f;
    if (!parse_fde(v, fde, &cie, &f)) {
      /* Unreadable: its range (as far as the next entry) is left to another unwinder. */
      uintptr_t next = i + 1 < ix->fde_count ? table_loc(v, ix, i + 1) : loc + 1;
      emit(&e, loc, next, MPROF_ROW_FALLBACK);
      emit(&e, next, next + 1, MPROF_ROW_NONE);
      continue;
    }
    if (f.pc_end <= from) continue;
    uintptr_t at = f.pc_begin;
    e.dirty = DIRTY_ALL;                           /* its CIE's signal flag and columns count too */
    if (!cie.init_ok) {
      emit(&e, f.pc_begin, f.pc_end, MPROF_ROW_FALLBACK);
    } else {
      cfa_state_t s = cie.init;
      if (run(v, f.insns, f.end, &cie, &cie.init, &s, &e, &at, f.pc_end))
        emit_state(&e, at, f.pc_end, &s, &cie);
      else emit(&e, at, f.pc_end, MPROF_ROW_FALLBACK);
    }
    emit(&e, f.pc_end, f.pc_end + 1, MPROF_ROW_NONE);
  }
  return !e.full && (v->mem != NULL || !v->pager->failed);
}

#endif /* MPROF_HAVE_TABLE */
