/* cfi_probe.c - checks the table unwinder's compiler (lib/ehframe.c, built into this program) against
 * binutils' reading of the same call-frame information, row by row, for tests/test_unwind.c.
 *
 * Usage: cfi_probe FILE [READELF]
 * FILE (an ELF object of this machine) is mapped whole and its .eh_frame_hdr and .eh_frame read through a
 * view of that mapping, as the library reads a loaded image; with CFI_PROBE_FILE=1, through the file
 * itself (lib/cfifile.c's windows, opened afresh for each chunk), as the library reads the objects loaded
 * before it.  Every row `readelf -wF` prints (the state at
 * each location where any register's rule changes, FDE by FDE) is turned into the row the table should
 * hold there, by rules stated independently of ehframe.c's: a CIE with augmentation 'S' gives SIGNAL, an
 * undefined return address END, a CFA from SP or FP plus a multiple of 8 STD (or SLOW when the return
 * address is still in LR or FP is saved where no row says), an expression PLT or FALLBACK, anything else
 * FALLBACK.  Each must equal what the compiled chunk holds at that address, and the end of every FDE that
 * no other starts at must be NONE.  Prints "key value" lines: fdes, rows (compared), mismatches, the first
 * mismatches as "mismatch ADDR want ... got ...", chunks (compiled), preads (reads of the file) and redone
 * (chunks compiled again in place: the probe's own cfi_probe_long_fde on x86-64).  Exit status 0 when it
 * could compare; mismatches are the test's to judge.
 */
#define _GNU_SOURCE 1

#include <elf.h>
#include <fcntl.h>
#include <inttypes.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "unwtab.h"

#define PROBE_NAME "cfi_probe"
#include "probe_util.h"

/* ehframe.c needs nothing else of the library. */

#if MPROF_HAVE_TABLE

#if defined(__x86_64__)
#define SP_NAME "rsp"
#define FP_NAME "rbp"
#else
#define SP_NAME "sp"
#define FP_NAME "x29"
#endif

static mprof_cfi_view_t view;
static mprof_cfi_index_t ix;
static const uint8_t *image;       /* the segment as mapped (view.mem, unless the view reads the file) */
static mprof_cfi_file_t file;      /* CFI_PROBE_FILE=1: read through the file, as the library does */
static uint8_t windows[MPROF_CFI_WINDOW_BYTES];

/* Compiles (or reads the index) through the file when asked: opened for it, closed after (fresh windows
 * every time, like each compile of the library). */
static bool through_file(mprof_cfi_pager_t *pg)
{
  if (file.path == NULL) return false;
  if (!mprof_cfi_file_open(pg, &file, windows)) die("cannot open the file through cfifile.c");
  view.pager = pg;
  return true;
}

/* The compiled chunk's rule at address addr (chunks compiled on first need and kept: readelf lists FDEs
 * in .eh_frame's order, not by address). */
typedef struct chunk_s {
  uintptr_t from;
  mprof_rowbuf_t rows;
} chunk_t;

static uint64_t preads, redone;

#if defined(__x86_64__)
/* A function whose FDE outgrows a window of lib/cfifile.c (4 KiB, this one about 5): 240 calls with six
 * arguments on the stack, each push a CFA change.  Its chunks cannot be compiled through the file's windows
 * and are compiled again in place, as the library does.  Never called. */
__attribute__((noipa)) long cfi_probe_sink12(long a, long b, long c, long d, long e, long f, long g, long h,
                                             long i, long j, long k, long l)
{
  return a + b + c + d + e + f + g + h + i + j + k + l;
}
#define LONG_CALL(i) \
  acc += cfi_probe_sink12(acc, i, 2, 3, 4, 5, acc + 6, i + 7, acc ^ 8, 9, acc * 10, i - 11);
#define LONG_CALLS(i) LONG_CALL(i##0) LONG_CALL(i##1) LONG_CALL(i##2) LONG_CALL(i##3) LONG_CALL(i##4) \
  LONG_CALL(i##5) LONG_CALL(i##6) LONG_CALL(i##7) LONG_CALL(i##8) LONG_CALL(i##9)
__attribute__((noinline, optimize("omit-frame-pointer"))) long cfi_probe_long_fde(long acc)
{
  LONG_CALLS(1) LONG_CALLS(2) LONG_CALLS(3) LONG_CALLS(4) LONG_CALLS(5) LONG_CALLS(6) LONG_CALLS(7)
  LONG_CALLS(8) LONG_CALLS(9) LONG_CALLS(10) LONG_CALLS(11) LONG_CALLS(12) LONG_CALLS(13) LONG_CALLS(14)
  LONG_CALLS(15) LONG_CALLS(16) LONG_CALLS(17) LONG_CALLS(18) LONG_CALLS(19) LONG_CALLS(20) LONG_CALLS(21)
  LONG_CALLS(22) LONG_CALLS(23) LONG_CALLS(24)
  return acc;
}
#endif

#define MAX_CHUNKS 65536
static chunk_t chunks[MAX_CHUNKS];
static size_t n_chunks;

static const mprof_rowbuf_t *chunk_at(uintptr_t from)
{
  for (size_t i = n_chunks; i-- > 0;)
    if (chunks[i].from == from) return &chunks[i].rows;
  if (n_chunks == MAX_CHUNKS) die("too many chunks");
  size_t cap = (size_t)1 << MPROF_TAB_CHUNK_SHIFT;
  chunk_t *c = &chunks[n_chunks++];
  c->from = from;
  c->rows = (mprof_rowbuf_t){malloc(cap * sizeof(uint32_t)), malloc(cap * sizeof(uint64_t)), 0, cap};
  if (c->rows.start == NULL || c->rows.rule == NULL) die("out of memory");
  mprof_cfi_pager_t pg;
  bool paged = through_file(&pg), ok = mprof_cfi_compile(&view, &ix, from, cap, &c->rows);
  if (paged) {
    preads += pg.preads;
    mprof_cfi_file_close(&pg);
    view.mem = image;                /* in place, once the windows could not serve it (lib/unwtab.c) */
    if (pg.failed || pg.too_long) ok = mprof_cfi_compile(&view, &ix, from, cap, &c->rows), redone++;
    view.mem = NULL;
  }
  if (!ok) die("a chunk overflowed");
  return &c->rows;
}

static uint64_t rule_at(uintptr_t addr)
{
  uintptr_t from = addr & ~(((uintptr_t)1 << MPROF_TAB_CHUNK_SHIFT) - 1);
  const mprof_rowbuf_t *r = chunk_at(from);
  size_t lo = 0, hi = r->n;        /* the last row starting at or before addr */
  while (hi - lo > 1) {
    size_t mid = (lo + hi) / 2;
    if (r->start[mid] <= addr - from) lo = mid;
    else hi = mid;
  }
  return r->rule[lo];
}

/* Maps FILE and sets the view over the PT_LOAD segment holding PT_GNU_EH_FRAME (addresses as in the file's
 * program headers, relative to a load bias of 0). */
static void open_file(const char *path)
{
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) die("cannot open the file");
  const uint8_t *base = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (base == MAP_FAILED) die("cannot map the file");
  close(fd);
  const ElfW(Ehdr) *eh = (const ElfW(Ehdr) *)base;
  if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0) die("not an ELF file");
  const ElfW(Phdr) *ph = (const ElfW(Phdr) *)(base + eh->e_phoff);
  uintptr_t hdr = 0;
  for (int i = 0; i < eh->e_phnum; i++)
    if (ph[i].p_type == PT_GNU_EH_FRAME) hdr = ph[i].p_vaddr;
  if (hdr == 0) die("no PT_GNU_EH_FRAME");
  for (int i = 0; i < eh->e_phnum; i++) {
    if (ph[i].p_type != PT_LOAD || hdr - ph[i].p_vaddr >= ph[i].p_filesz) continue;
    view.lo = ph[i].p_vaddr;
    view.hi = ph[i].p_vaddr + ph[i].p_filesz;
    view.mem = image = base + ph[i].p_offset;
    file.lo_off = ph[i].p_offset;
  }
  const char *paged = getenv("CFI_PROBE_FILE");
  mprof_cfi_pager_t pg;
  if (paged != NULL && strcmp(paged, "1") == 0) file.path = path, view.mem = NULL;   /* id_len 0: none */
  bool through = through_file(&pg);
  if (view.hi == 0 || !mprof_cfi_index(&view, hdr, &ix) || ix.table + (uintptr_t)ix.fde_count * 8 > view.hi)
    die("cannot read .eh_frame_hdr");
  mprof_cfi_index_span(&view, &ix);  /* as lib/unwtab.c does: a file view's compiles start from it */
  if (through) mprof_cfi_file_close(&pg);
}

static uintptr_t table_loc(size_t k)
{
  int32_t rel;
  memcpy(&rel, image + (ix.table + 8 * k - view.lo), 4);
  return ix.hdr + (uintptr_t)(intptr_t)rel;
}

/* A readelf register rule "c-N": N, else 0 (and *other for anything but "u" or nothing). */
static long slot_of(const char *v, bool *other)
{
  *other = false;
  if (v == NULL || strcmp(v, "u") == 0) return 0;
  if (strncmp(v, "c-", 2) == 0) return strtol(v + 2, NULL, 10);
  *other = true;
  return 0;
}

typedef struct cie_s {
  unsigned long off;
  bool signal;
  char cfa[32], ra[32], fp[32];    /* its initial row */
  bool has_ra, has_fp;
} cie_t;

#define MAX_CIES 4096
static cie_t cies[MAX_CIES];
static size_t n_cies;

/* The row readelf's columns call for: the CFA, the return address ("ra") and FP columns (NULL: none). */
static uint64_t expected(const cie_t *c, const char *cfa, const char *ra, const char *fp, bool *either_plt,
                         bool *either_end)
{
  *either_plt = *either_end = false;
  if (c->signal) return MPROF_ROW_SIGNAL;
  bool ra_other, fp_other;
  long ra_slot = slot_of(ra, &ra_other), fp_slot = slot_of(fp, &fp_other);
#if defined(__x86_64__)
  if (ra != NULL && strcmp(ra, "u") == 0) return MPROF_ROW_END;
#else
  /* readelf prints "u" both for an undefined register and for one without a rule yet: on aarch64 the
   * return address (x30) has none at a function's entry, where it is still in LR.  Either may be right:
   * the caller compares with both. */
  if (ra != NULL && strcmp(ra, "u") == 0) {
    *either_end = true;
    ra = NULL;
  }
#endif
  if (strcmp(cfa, "exp") == 0) {
    *either_plt = true;            /* x86-64's PLT expression, or any other */
    return MPROF_ROW_FALLBACK;
  }
  unsigned k = 0, m = 0;
  if (ra_other || (ra_slot != 0 && (ra_slot % 8 != 0 || ra_slot / 8 > MPROF_ROW_SLOT_MAX)))
    return MPROF_ROW_FALLBACK;
  k = (unsigned)(ra_slot / 8);
#if defined(__x86_64__)
  if (k == 0) return MPROF_ROW_FALLBACK;
#endif
  if (fp_other || (fp_slot != 0 && (fp_slot % 8 != 0 || fp_slot / 8 > MPROF_ROW_SLOT_MAX)))
    m = MPROF_ROW_FP_LOST;
  else m = (unsigned)(fp_slot / 8);
  char reg[16];
  long off;
  if (sscanf(cfa, "%15[a-z0-9]+%ld", reg, &off) != 2) return MPROF_ROW_FALLBACK;
  bool fp_base = strcmp(reg, FP_NAME) == 0;
  if ((!fp_base && strcmp(reg, SP_NAME) != 0) || off < 0 || off % 8 != 0 || off > (long)MPROF_ROW_OFF_MAX)
    return MPROF_ROW_FALLBACK;
  unsigned kind = k == 0 || m == MPROF_ROW_FP_LOST ? MPROF_KIND_SLOW : MPROF_KIND_STD;
  return MPROF_ROW_MAKE(kind, fp_base, off, k, m);
}

static unsigned long n_rows, n_mismatch, n_fdes;

static void compare(uintptr_t addr, uint64_t want, bool either_plt, bool either_end, const char *line)
{
  uint64_t got = rule_at(addr);
  n_rows++;
  /* The PAC bit (aarch64's signed return addresses) is not in readelf's table: not compared. */
  got &= ~MPROF_ROW_PAC;
  if (got == want || (either_plt && MPROF_ROW_KIND(got) == MPROF_KIND_PLT) ||
      (either_end && got == MPROF_ROW_END))
    return;
  if (n_mismatch++ < 20)
    printf("mismatch %#lx want %#llx got %#llx (%s)\n", (unsigned long)addr, (unsigned long long)want,
           (unsigned long long)got, line);
}

/* Splits a table line into its columns (at most 64). */
static int columns(char *line, char **col)
{
  int n = 0;
  for (char *t = strtok(line, " \t\n"); t != NULL && n < 64; t = strtok(NULL, " \t\n")) col[n++] = t;
  return n;
}

int main(int argc, char **argv)
{
  if (argc < 2) die("usage: cfi_probe FILE [READELF]");
  open_file(argv[1]);
  char cmd[4096];
  snprintf(cmd, sizeof cmd, "%s -wF '%s' 2>/dev/null", argc > 2 ? argv[2] : "readelf", argv[1]);
  FILE *f = popen(cmd, "r");
  if (f == NULL) die("cannot run readelf");
  char line[4096], copy[4096], *col[64], *head[64];
  int n_head = 0;
  cie_t *cie = NULL, *cur_cie = NULL;
  bool in_fde = false, fde_rows = false;
  uintptr_t pc_begin = 0, pc_end = 0, fde_start = 0;
  static uintptr_t ends[1 << 20];
  size_t n_ends = 0;
  static char heads[4096];
  while (fgets(line, sizeof line, f) != NULL) {
    unsigned long off, len, id, cie_off;
    char aug[32];
    if (sscanf(line, "%lx %lx %lx CIE \"%31[^\"]\"", &off, &len, &id, aug) == 4) {
      if (n_cies == MAX_CIES) die("too many CIEs");
      cie = &cies[n_cies++];
      *cie = (cie_t){.off = off, .signal = strchr(aug, 'S') != NULL};
      in_fde = false;
      continue;
    }
    if (sscanf(line, "%lx %lx %lx FDE cie=%lx pc=%" SCNxPTR "..%" SCNxPTR, &off, &len, &id, &cie_off,
               &pc_begin, &pc_end) == 6) {
      /* An FDE without rows is the CIE's initial row over its whole range. */
      if (in_fde && !fde_rows && cur_cie != NULL) {
        bool plt, end;
        uint64_t want = expected(cur_cie, cur_cie->cfa, cur_cie->has_ra ? cur_cie->ra : NULL,
                                 cur_cie->has_fp ? cur_cie->fp : NULL, &plt, &end);
        compare(fde_start, want, plt, end, "no rows");
      }
      cur_cie = NULL;
      for (size_t i = 0; i < n_cies; i++)
        if (cies[i].off == cie_off) cur_cie = &cies[i];
      in_fde = cur_cie != NULL;
      fde_rows = false;
      fde_start = pc_begin;       /* for an FDE without rows */
      if (n_ends < sizeof ends / sizeof ends[0]) ends[n_ends++] = pc_end;
      n_fdes++;
      cie = NULL;
      continue;
    }
    if (strstr(line, "LOC") != NULL && strstr(line, "CFA") != NULL) {
      strcpy(heads, line);
      n_head = columns(heads, head);
      continue;
    }
    uintptr_t loc;
    if (n_head < 2 || sscanf(line, "%" SCNxPTR, &loc) != 1 || strchr(line, ' ') == NULL) continue;
    strcpy(copy, line);
    int n = columns(line, col);
    if (n != n_head) continue;
    const char *ra = NULL, *fp = NULL;
    for (int i = 2; i < n; i++) {
      if (strcmp(head[i], "ra") == 0) ra = col[i];
      else if (strcmp(head[i], FP_NAME) == 0) fp = col[i];
    }
    copy[strcspn(copy, "\n")] = 0;
    if (cie != NULL) {                 /* the CIE's initial row */
      snprintf(cie->cfa, sizeof cie->cfa, "%s", col[1]);
      if (ra != NULL) cie->has_ra = true, snprintf(cie->ra, sizeof cie->ra, "%s", ra);
      if (fp != NULL) cie->has_fp = true, snprintf(cie->fp, sizeof cie->fp, "%s", fp);
      continue;
    }
    if (!in_fde || loc < pc_begin || loc >= pc_end) continue;
    fde_rows = true;
    bool plt, end;
    uint64_t want = expected(cur_cie, col[1], ra, fp, &plt, &end);
    compare(loc, want, plt, end, copy);
  }
  if (in_fde && !fde_rows && cur_cie != NULL) {
    bool plt, end;
    uint64_t want = expected(cur_cie, cur_cie->cfa, cur_cie->has_ra ? cur_cie->ra : NULL,
                             cur_cie->has_fp ? cur_cie->fp : NULL, &plt, &end);
    compare(fde_start, want, plt, end, "no rows");
  }
  pclose(f);
  /* Where an FDE ends and none starts, no rule applies. */
  unsigned long gaps = 0;
  for (size_t i = 0; i < n_ends; i++) {
    uintptr_t e = ends[i];
    size_t lo = 0, hi = ix.fde_count;          /* the search table is sorted: is there an FDE at e? */
    while (lo < hi) {
      size_t mid = (lo + hi) / 2;
      if (table_loc(mid) < e) lo = mid + 1;
      else hi = mid;
    }
    if (lo < ix.fde_count && table_loc(lo) == e) continue;
    gaps++;
    compare(e, MPROF_ROW_NONE, false, false, "end of an FDE");
  }
  printf("fdes %lu\nindexed %u\nrows %lu\ngaps %lu\nmismatches %lu\nchunks %zu\npreads %" PRIu64
         "\nredone %" PRIu64 "\n", n_fdes, ix.fde_count, n_rows, gaps, n_mismatch, n_chunks, preads, redone);
  return 0;
}

#else

int main(void)
{
  printf("skipped 1\n");
  return 0;
}

#endif
