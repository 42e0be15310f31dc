/* dwarf.c - names, files, lines and inlined frames for addresses in an ELF object, with elfutils
 * (libdwfl, libdw) and, when DEBUGINFOD_URLS is set, libdebuginfod.
 *
 * Finding the object: the file at the mapping's path when its GNU build ID is the profile's; else, by
 * build ID, DIR/.build-id/xx/rest (an executable) or DIR/.build-id/xx/rest.debug (a separate debug
 * file, which has the same program headers, symbol table and DWARF) in each debug directory
 * (--debug-dir, then /usr/lib/debug); else debuginfod.  So a profile from another machine symbolizes
 * wherever the same files or their debug files are.  Separate debug information of a file found this
 * way is looked up by build ID in the same directories, then by its .gnu_debuglink name (beside the file,
 * in its .debug subdirectory, under each debug directory), then by debuginfod.
 *
 * The paths come from a profile, maybe from another machine: no open here may block or touch anything
 * but a regular file (a FIFO at a mapping's path would block open() for ever, a device's open may act),
 * so each is checked with stat() before and fstat() after an O_NONBLOCK open (open_regular).  That is
 * why the separate debug file is found here and not by libdwfl's standard callback, whose open() blocks.
 *
 * Each object gets a Dwfl of its own, reported at its link-time addresses (bias 0): profiles merged from
 * several processes may hold objects whose addresses overlap, and a profile's address is turned into a
 * link-time one from its mapping (start, file offset) and the object's PT_LOAD segments.
 *
 * Per address: the CU (libdwfl, from .debug_aranges or the CUs' ranges), then the function whose code
 * covers it, by binary search in a table of the CU's function ranges built once per CU, then its
 * inlined subroutines that cover it, walking down from the function (call file and line of each give
 * the caller's position); the line table gives the innermost position.  (dwarf_getscopes does the
 * same walk from the CU's root at every call, and fails on GCC LTO output whose functions take their
 * names from another CU.)  Without DWARF, the symbol table (.symtab, else .dynsym) gives the function, by
 * binary search in a table sorted once per object (libdwfl's own symbol lookup scans every symbol).
 */
#include "sym.h"

#include <dwarf.h>
#include <elfutils/debuginfod.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

typedef struct sym_entry_s {
  GElf_Addr   start, end;
  const char *name;
} sym_entry_t;

struct sym_obj_s {
  Dwfl        *dwfl;
  Dwfl_Module *mod;
  GElf_Phdr   *loads;           /* PT_LOAD segments of the object */
  size_t       n_loads;
  bool         has_dwarf, has_lines;
  sym_entry_t *syms;            /* function symbols by start address */
  size_t       n_syms;
  Dwarf       *dw;
  struct cu_fns_s *cus;         /* per CU: its functions' ranges (open addressing by CU offset) */
  size_t       cu_cap, n_cus;
};

/* The address ranges of a CU's functions (DIEs at its top level or in namespaces), sorted: a lookup
 * is one binary search, then a walk down that function's inlined subroutines. */
typedef struct fn_range_s {
  Dwarf_Addr lo, hi;
  Dwarf_Off  die;
} fn_range_t;

typedef struct cu_fns_s {
  Dwarf_Off   cu;               /* 0: empty slot */
  fn_range_t *ranges;
  size_t      n;
} cu_fns_t;

static char *debuginfo_path;                  /* libdwfl's search path: --debug-dir..., then the default */
static debuginfod_client *debuginfod;
static bool debuginfod_tried;

static debuginfod_client *debuginfod_get(void)
{
  if (!debuginfod_tried) {
    debuginfod_tried = true;
    const char *urls = getenv("DEBUGINFOD_URLS");
    if (urls != NULL && urls[0] != '\0') debuginfod = debuginfod_begin();
  }
  return debuginfod;
}

void sym_finish(void)
{
  if (debuginfod != NULL) debuginfod_end(debuginfod);
  debuginfod = NULL;
  debuginfod_tried = false;
  free(debuginfo_path);
  debuginfo_path = NULL;
}

static int find_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
                          const char *file_name, const char *debuglink_file, GElf_Word debuglink_crc,
                          char **debuginfo_file_name);

static const Dwfl_Callbacks callbacks = {
  .find_elf = dwfl_build_id_find_elf,
  .find_debuginfo = find_debuginfo,
  .section_address = dwfl_offline_section_address,
  .debuginfo_path = &debuginfo_path,
};

/* The debug directories, most specific first; libdwfl's default (":.debug:/usr/lib/debug") last. */
static void set_debuginfo_path(const sym_opts_t *o)
{
  if (debuginfo_path != NULL) return;
  size_t len = 64;
  for (size_t i = 0; i < o->n_debug_dirs; i++) len += strlen(o->debug_dirs[i]) + 1 + 4096;
  debuginfo_path = malloc(len);
  if (debuginfo_path == NULL) abort();
  size_t n = 0;
  for (size_t i = 0; i < o->n_debug_dirs; i++) {
    char abs[4096];
    const char *d = realpath(o->debug_dirs[i], abs) ? abs : o->debug_dirs[i];
    n += (size_t)snprintf(debuginfo_path + n, len - n, "%s:", d);
  }
  snprintf(debuginfo_path + n, len - n, ":.debug:/usr/lib/debug");
}

/* ---------------------------------------------------------------------------------------------------
   Finding and opening the object
--------------------------------------------------------------------------------------------------- */

static void hex(const unsigned char *bits, size_t n, char *out, size_t len)
{
  static const char digits[] = "0123456789abcdef";
  size_t o = 0;
  for (size_t i = 0; i < n && o + 2 < len; i++) {
    out[o++] = digits[bits[i] >> 4];
    out[o++] = digits[bits[i] & 15];
  }
  out[o] = '\0';
}

/* What a file that is not a regular one is, for messages. */
static const char *file_kind(mode_t mode)
{
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

/* Opens a regular file for reading without ever blocking: stat() first, so that nothing else is opened
 * at all, then O_NONBLOCK (in case a FIFO took the name in between) and fstat() on what was opened.
 * -1 when it cannot be opened or is not a regular file; then *kind (when not NULL) is what it is, or
 * NULL when there is nothing readable under the name. */
static int open_regular(const char *path, const char **kind)
{
  struct stat st;
  int fd = -1;
  if (kind != NULL) *kind = NULL;
  if (stat(path, &st) != 0) return -1;
  if (S_ISREG(st.st_mode)) fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd >= 0 && fstat(fd, &st) != 0) st.st_mode = 0;
  if (!S_ISREG(st.st_mode)) {
    if (kind != NULL) *kind = file_kind(st.st_mode);
    if (fd >= 0) close(fd);
    return -1;
  }
  if (fd >= 0) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

/* The build ID of the ELF file open on fd, as hex ("" when it has none); false when not ELF. */
static bool file_build_id(int fd, char *out, size_t len)
{
  Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
  out[0] = '\0';
  if (elf == NULL || elf_kind(elf) != ELF_K_ELF) {
    if (elf != NULL) elf_end(elf);
    return false;
  }
  const void *bits;
  ssize_t n = dwelf_elf_gnu_build_id(elf, &bits);
  if (n > 0) hex(bits, (size_t)n, out, len);
  elf_end(elf);
  return true;
}

/* A build ID as a profile gives it is a file name below .build-id/: hex digits only (no '/', no ".."). */
static bool valid_build_id(const char *build_id)
{
  size_t n = strlen(build_id);
  return n >= 4 && n <= 128 && strspn(build_id, "0123456789abcdefABCDEF") == n;
}

/* A file named by build ID in the debug directories: the executable (when `executable`), then the
 * debug file. */
static int open_by_build_id(const char *build_id, bool executable, char *path, size_t len)
{
  char *dirs = strdup(debuginfo_path), *save = NULL;
  if (dirs == NULL || !valid_build_id(build_id)) {
    free(dirs);
    return -1;
  }
  int fd = -1;
  for (char *d = strtok_r(dirs, ":", &save); d != NULL && fd < 0; d = strtok_r(NULL, ":", &save)) {
    if (d[0] != '/') continue;                /* relative entries are relative to the file, absent here */
    static const char *const suffix[] = {"", ".debug"};
    for (size_t i = executable ? 0 : 1; i < 2 && fd < 0; i++) {
      snprintf(path, len, "%s/.build-id/%.2s/%s%s", d, build_id, build_id + 2, suffix[i]);
      fd = open_regular(path, NULL);
    }
  }
  free(dirs);
  return fd;
}

/* Whether the file open on fd is the separate debug file of `mod`: the same build ID when the module
 * has one, else the CRC-32 its .gnu_debuglink gives (0: unchecked); never the main file itself. */
static bool debug_file_matches(Dwfl_Module *mod, int fd, GElf_Word crc)
{
  const unsigned char *bits;
  GElf_Addr vaddr;
  int n = dwfl_module_build_id(mod, &bits, &vaddr);
  const char *main_name = NULL;
  dwfl_module_info(mod, NULL, NULL, NULL, NULL, NULL, &main_name, NULL);
  struct stat a, b;
  if (main_name != NULL && stat(main_name, &a) == 0 && fstat(fd, &b) == 0 && a.st_dev == b.st_dev &&
      a.st_ino == b.st_ino)
    return false;
  if (n > 0) {
    char want[160], got[160];
    hex(bits, (size_t)n, want, sizeof want);
    return file_build_id(fd, got, sizeof got) && strcmp(got, want) == 0;
  }
  if (crc == 0) return true;
  uLong sum = crc32(0, Z_NULL, 0);
  unsigned char buf[65536];
  ssize_t r;
  off_t off = 0;
  while ((r = pread(fd, buf, sizeof buf, off)) > 0) {
    sum = crc32(sum, buf, (uInt)r);
    off += r;
  }
  return r == 0 && (GElf_Word)sum == crc;
}

/* The separate debug file of a module: by build ID in the debug directories, then by its
 * .gnu_debuglink name in each entry of the search path in turn (an empty one: beside the file; a
 * relative one, ".debug": that subdirectory of the file's directory; an absolute one: DIR/FILE'S-DIR/
 * NAME), then from debuginfod. */
static int find_debug_file(Dwfl_Module *mod, const char *file_name, const char *debuglink, GElf_Word crc,
                           char **found)
{
  char path[8192];
  const unsigned char *bits;
  GElf_Addr vaddr;
  int n = dwfl_module_build_id(mod, &bits, &vaddr), fd = -1;
  if (n > 0 && n <= 64) {
    char id[160];
    hex(bits, (size_t)n, id, sizeof id);
    if ((fd = open_by_build_id(id, false, path, sizeof path)) >= 0 && !debug_file_matches(mod, fd, crc)) {
      close(fd);
      fd = -1;
    }
  }
  const char *slash = file_name ? strrchr(file_name, '/') : NULL;
  if (fd < 0 && debuglink != NULL && slash != NULL) {
    int dir_len = (int)(slash - file_name);
    char *dirs = strdup(debuginfo_path), *rest = dirs, *d;
    while (fd < 0 && rest != NULL && (d = strsep(&rest, ":")) != NULL) {
      if (d[0] == '\0')
        snprintf(path, sizeof path, "%.*s/%s", dir_len, file_name, debuglink);   /* beside it */
      else if (d[0] != '/')
        snprintf(path, sizeof path, "%.*s/%s/%s", dir_len, file_name, d, debuglink);
      else if (file_name[0] == '/')
        snprintf(path, sizeof path, "%s%.*s/%s", d, dir_len, file_name, debuglink);
      else continue;
      if ((fd = open_regular(path, NULL)) >= 0 && !debug_file_matches(mod, fd, crc)) {
        close(fd);
        fd = -1;
      }
    }
    free(dirs);
  }
  if (fd >= 0) {
    *found = strdup(path);
    return fd;
  }
  debuginfod_client *c = debuginfod_get();
  if (n <= 0 || c == NULL || (fd = debuginfod_find_debuginfo(c, bits, n, found)) < 0) return -1;
  return fd;
}

/* libdwfl's callback for separate debug information.  It calls it for the module's debug file, and
 * again with the name in the debug file's .gnu_debugaltlink (dwz's shared file); that one is named by a
 * file found here, not by the profile, and libdwfl's standard search (which knows its rules) finds it. */
static int find_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
                          const char *file_name, const char *debuglink_file, GElf_Word debuglink_crc,
                          char **debuginfo_file_name)
{
  Dwarf_Addr bias;
  Elf *elf = dwfl_module_getelf(mod, &bias);
  GElf_Word crc = 0;
  const char *link = elf != NULL ? dwelf_elf_gnu_debuglink(elf, &crc) : NULL;
  if (debuglink_file != NULL && (link == NULL || strcmp(link, debuglink_file) != 0 || crc != debuglink_crc))
    return dwfl_standard_find_debuginfo(mod, userdata, modname, base, file_name, debuglink_file,
                                        debuglink_crc, debuginfo_file_name);
  return find_debug_file(mod, file_name, debuglink_file, debuglink_crc, debuginfo_file_name);
}

static int hex_to_bits(const char *h, unsigned char *bits, size_t max)
{
  size_t n = strlen(h) / 2;
  if (n > max) return -1;
  for (size_t i = 0; i < n; i++) {
    unsigned v;
    if (sscanf(h + 2 * i, "%2x", &v) != 1) return -1;
    bits[i] = (unsigned char)v;
  }
  return (int)n;
}

/* debuginfod: the executable, else the debug file (which serves as well for names and lines). */
static int open_from_debuginfod(const char *build_id, char *path, size_t len)
{
  debuginfod_client *c = debuginfod_get();
  unsigned char bits[64];
  int n = hex_to_bits(build_id, bits, sizeof bits);
  if (c == NULL || n <= 0) return -1;
  char *got = NULL;
  int fd = debuginfod_find_executable(c, bits, n, &got);
  if (fd < 0) fd = debuginfod_find_debuginfo(c, bits, n, &got);
  if (fd >= 0 && got != NULL) snprintf(path, len, "%s", got);
  free(got);
  return fd < 0 ? -1 : fd;
}

static int cmp_sym(const void *a, const void *b)
{
  const sym_entry_t *x = a, *y = b;
  if (x->start != y->start) return x->start < y->start ? -1 : 1;
  return x->end > y->end ? -1 : x->end < y->end;   /* the larger first: it is kept */
}

/* The function symbols, sorted by address (duplicates at one address: the first kept). */
static void load_symbols(sym_obj_t *obj)
{
  int n = dwfl_module_getsymtab(obj->mod);
  if (n <= 0) return;
  obj->syms = malloc((size_t)n * sizeof *obj->syms);
  if (obj->syms == NULL) return;
  for (int i = 1; i < n; i++) {
    GElf_Sym sym;
    GElf_Addr addr;
    GElf_Word shndx;
    const char *name = dwfl_module_getsym_info(obj->mod, i, &sym, &addr, &shndx, NULL, NULL);
    int type = GELF_ST_TYPE(sym.st_info);
    if (name == NULL || name[0] == '\0' || sym.st_shndx == SHN_UNDEF || sym.st_size == 0 ||
        (type != STT_FUNC && type != STT_GNU_IFUNC))
      continue;
    obj->syms[obj->n_syms++] = (sym_entry_t){addr, addr + sym.st_size, name};
  }
  qsort(obj->syms, obj->n_syms, sizeof *obj->syms, cmp_sym);
  size_t kept = 0;
  for (size_t i = 0; i < obj->n_syms; i++) {
    if (kept == 0 || obj->syms[i].start != obj->syms[kept - 1].start) obj->syms[kept++] = obj->syms[i];
  }
  obj->n_syms = kept;
}

/* Reports the file open on fd as the object's one module and reads what it offers. */
static sym_obj_t *obj_from(int fd, const char *path, sym_status_t *status)
{
  sym_obj_t *obj = calloc(1, sizeof *obj);
  if (obj == NULL) abort();
  obj->dwfl = dwfl_begin(&callbacks);
  if (obj->dwfl == NULL) abort();
  dwfl_report_begin(obj->dwfl);
  const char *base = strrchr(path, '/');
  obj->mod = dwfl_report_elf(obj->dwfl, base ? base + 1 : path, path, fd, 0, true);
  dwfl_report_end(obj->dwfl, NULL, NULL);
  Dwarf_Addr bias;
  Elf *elf = obj->mod ? dwfl_module_getelf(obj->mod, &bias) : NULL;
  size_t phnum;
  if (elf == NULL || elf_getphdrnum(elf, &phnum) != 0) {
    if (obj->mod == NULL) close(fd);
    *status = SYM_NOT_ELF;
    sym_obj_close(obj);
    return NULL;
  }
  obj->loads = calloc(phnum + 1, sizeof *obj->loads);
  for (size_t i = 0; obj->loads != NULL && i < phnum; i++) {
    GElf_Phdr ph;
    if (gelf_getphdr(elf, (int)i, &ph) != NULL && ph.p_type == PT_LOAD) obj->loads[obj->n_loads++] = ph;
  }
  Dwarf_Addr dbias;
  Dwarf *dw = dwfl_module_getdwarf(obj->mod, &dbias);
  obj->dw = dw;
  obj->has_dwarf = dw != NULL;
  if (dw != NULL) {                           /* any CU with a line table */
    Dwarf_Die *cu = NULL;
    while (!obj->has_lines && (cu = dwfl_module_nextcu(obj->mod, cu, &dbias)) != NULL) {
      Dwarf_Lines *lines;
      size_t nl;
      obj->has_lines = dwarf_getsrclines(cu, &lines, &nl) == 0 && nl > 0;
    }
  }
  load_symbols(obj);
  if (!obj->has_dwarf && obj->n_syms == 0) {
    *status = SYM_NO_SYMBOLS;
    sym_obj_close(obj);
    return NULL;
  }
  *status = SYM_FOUND;
  return obj;
}

sym_obj_t *sym_obj_open(const char *path, const char *build_id, const sym_opts_t *o, sym_status_t *status,
                        char *detail, size_t detail_len)
{
  elf_version(EV_CURRENT);
  set_debuginfo_path(o);
  char file[4096], found_id[160];
  detail[0] = '\0';
  *status = SYM_NO_FILE;
  const char *kind = NULL;
  int fd = path[0] != '\0' ? open_regular(path, &kind) : -1;
  if (kind != NULL) {
    *status = SYM_NOT_REGULAR;
    snprintf(detail, detail_len, "%s", kind);
  }
  if (fd >= 0) {
    if (!file_build_id(fd, found_id, sizeof found_id)) {
      *status = SYM_NOT_ELF;
      close(fd);
      fd = -1;
    } else if (build_id[0] != '\0' && strcmp(found_id, build_id) != 0) {
      *status = SYM_MISMATCH;
      snprintf(detail, detail_len, "%s", found_id[0] ? found_id : "none");
      close(fd);
      fd = -1;
    } else {
      snprintf(file, sizeof file, "%s", path);
    }
  }
  if (fd < 0 && valid_build_id(build_id)) {
    fd = open_by_build_id(build_id, true, file, sizeof file);
    if (fd < 0) fd = open_from_debuginfod(build_id, file, sizeof file);
  }
  if (fd < 0) return NULL;
  sym_obj_t *obj = obj_from(fd, file, status);
  if (obj == NULL) snprintf(detail, detail_len, "%s", file);
  return obj;
}

void sym_obj_close(sym_obj_t *obj)
{
  if (obj == NULL) return;
  if (obj->dwfl != NULL) dwfl_end(obj->dwfl);
  free(obj->loads);
  free(obj->syms);
  for (size_t i = 0; i < obj->cu_cap; i++) free(obj->cus[i].ranges);
  free(obj->cus);
  free(obj);
}

void sym_obj_caps(const sym_obj_t *obj, bool *functions, bool *lines, bool *inlines)
{
  *functions = obj->has_dwarf || obj->n_syms > 0;
  *lines = obj->has_lines;
  *inlines = obj->has_dwarf;
}

bool sym_obj_addr(const sym_obj_t *obj, const mapping_t *m, uint64_t address, uint64_t *file_addr)
{
  for (size_t i = 0; i < obj->n_loads; i++) {      /* the segment at the mapping's file offset */
    const GElf_Phdr *ph = &obj->loads[i];
    if (ph->p_filesz == 0 || m->file_offset < ph->p_offset || m->file_offset >= ph->p_offset + ph->p_filesz)
      continue;
    *file_addr = address - m->memory_start + ph->p_vaddr + (m->file_offset - ph->p_offset);
    return true;
  }
  /* A separate debug file keeps the program headers' addresses and sizes, not their file offsets and
   * contents: the executable segment of the mapping's size. */
  for (size_t i = 0; i < obj->n_loads; i++) {
    const GElf_Phdr *ph = &obj->loads[i];
    if (!(ph->p_flags & PF_X) || ph->p_memsz != m->memory_limit - m->memory_start) continue;
    *file_addr = address - m->memory_start + ph->p_vaddr;
    return true;
  }
  return false;
}

/* ---------------------------------------------------------------------------------------------------
   Lookups
--------------------------------------------------------------------------------------------------- */

static const char *die_name(Dwarf_Die *die, const char **linkage)
{
  Dwarf_Attribute a;
  *linkage = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_linkage_name, &a));
  if (*linkage == NULL) *linkage = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &a));
  return dwarf_formstring(dwarf_attr_integrate(die, DW_AT_name, &a));
}

static void frame_names(sym_frame_t *f, const char *name, const char *linkage)
{
  f->system_name = linkage ? linkage : name ? name : "";
  f->owned = linkage ? tool_demangle(linkage) : NULL;
  f->name = f->owned ? f->owned : name ? name : f->system_name;
}

static void frame_decl(sym_frame_t *f, Dwarf_Die *die)
{
  f->decl_file = dwarf_decl_file(die);
  if (f->decl_file == NULL) f->decl_file = "";
  if (dwarf_decl_line(die, &f->decl_line) != 0) f->decl_line = 0;
}

static int cmp_range(const void *a, const void *b)
{
  const fn_range_t *x = a, *y = b;
  return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static void add_ranges(cu_fns_t *c, size_t *cap, Dwarf_Die *die)
{
  Dwarf_Addr base, lo, hi;
  ptrdiff_t off = 0;
  while ((off = dwarf_ranges(die, off, &base, &lo, &hi)) > 0) {
    if (lo >= hi) continue;
    if (c->n == *cap) {
      *cap = *cap ? *cap * 2 : 64;
      c->ranges = realloc(c->ranges, *cap * sizeof *c->ranges);
      if (c->ranges == NULL) abort();
    }
    c->ranges[c->n++] = (fn_range_t){lo, hi, dwarf_dieoffset(die)};
  }
}

/* The functions with code among the children of `parent` (descending into namespaces). */
static void collect_functions(cu_fns_t *c, size_t *cap, Dwarf_Die *parent, int depth)
{
  Dwarf_Die child;
  if (depth > 16 || dwarf_child(parent, &child) != 0) return;
  do {
    int tag = dwarf_tag(&child);
    if (tag == DW_TAG_subprogram) add_ranges(c, cap, &child);
    else if (tag == DW_TAG_namespace || tag == DW_TAG_module) collect_functions(c, cap, &child, depth + 1);
  } while (dwarf_siblingof(&child, &child) == 0);
}

static cu_fns_t *cu_functions(sym_obj_t *obj, Dwarf_Die *cu)
{
  Dwarf_Off off = dwarf_dieoffset(cu) + 1;          /* + 1: never 0 */
  if ((obj->n_cus + 1) * 2 > obj->cu_cap) {
    size_t cap = obj->cu_cap ? obj->cu_cap * 2 : 64;
    cu_fns_t *t = calloc(cap, sizeof *t);
    if (t == NULL) abort();
    for (size_t i = 0; i < obj->cu_cap; i++) {
      if (obj->cus[i].cu == 0) continue;
      size_t k = (size_t)(obj->cus[i].cu * 0x9e3779b97f4a7c15ull >> 17) & (cap - 1);
      while (t[k].cu != 0) k = (k + 1) & (cap - 1);
      t[k] = obj->cus[i];
    }
    free(obj->cus);
    obj->cus = t;
    obj->cu_cap = cap;
  }
  size_t k = (size_t)(off * 0x9e3779b97f4a7c15ull >> 17) & (obj->cu_cap - 1);
  while (obj->cus[k].cu != 0 && obj->cus[k].cu != off) k = (k + 1) & (obj->cu_cap - 1);
  cu_fns_t *c = &obj->cus[k];
  if (c->cu == 0) {
    size_t cap = 0;
    c->cu = off;
    collect_functions(c, &cap, cu, 0);
    qsort(c->ranges, c->n, sizeof *c->ranges, cmp_range);
    obj->n_cus++;
  }
  return c;
}

/* The function DIE whose code covers pc (the innermost when ranges nest), or false. */
static bool function_at(sym_obj_t *obj, Dwarf_Die *cu, Dwarf_Addr pc, Dwarf_Die *out)
{
  cu_fns_t *c = cu_functions(obj, cu);
  size_t lo = 0, hi = c->n;
  while (lo < hi) {                           /* the first range starting after pc */
    size_t mid = (lo + hi) / 2;
    if (c->ranges[mid].lo <= pc) lo = mid + 1;
    else hi = mid;
  }
  for (size_t i = lo; i-- > 0;) {             /* ranges may nest (a nested function's lie inside) */
    if (pc < c->ranges[i].hi) return dwarf_offdie(obj->dw, c->ranges[i].die, out) != NULL;
    if (lo - i > 64) break;
  }
  return false;
}

/* The inlined subroutines around pc inside `fn`, outermost first, into chain (up to max). */
static size_t inlined_at(Dwarf_Die *fn, Dwarf_Addr pc, Dwarf_Die *chain, size_t max)
{
  size_t n = 0;
  Dwarf_Die scope = *fn, child;
  for (int guard = 0; guard < 256 && dwarf_child(&scope, &child) == 0; guard++) {
    bool found = false;
    do {
      int tag = dwarf_tag(&child);
      if ((tag == DW_TAG_inlined_subroutine || tag == DW_TAG_lexical_block || tag == DW_TAG_try_block ||
           tag == DW_TAG_catch_block) && dwarf_haspc(&child, pc) > 0) {
        if (tag == DW_TAG_inlined_subroutine && n < max) chain[n++] = child;
        scope = child;
        found = true;
        break;
      }
    } while (dwarf_siblingof(&child, &child) == 0);
    if (!found) break;
  }
  return n;
}

/* The source position of addr from the line table (its file, "" and *line 0 when there is none), only
 * when the row that gives it starts inside the function found for addr: the DWARF function fn (bias: its
 * CU's), else the symbol [lo, hi).  libdwfl gives an address outside every CU's ranges to the CU below
 * it, and the last row below the address there belongs to other code: _start, in crt1.o without DWARF,
 * would get the line of an inlined std::string member from the C++ code linked before it, where
 * addr2line says ??:?.  A frame without a line shows none. */
static const char *line_of(sym_obj_t *obj, uint64_t addr, Dwarf_Die *fn, Dwarf_Addr bias, GElf_Addr lo,
                           GElf_Addr hi, int *line)
{
  *line = 0;
  Dwfl_Line *ln = dwfl_module_getsrc(obj->mod, addr);
  Dwarf_Addr row = 0;
  int l = 0;
  const char *file = ln != NULL ? dwfl_lineinfo(ln, &row, &l, NULL, NULL, NULL) : NULL;
  if (file == NULL) return "";
  bool inside = fn != NULL ? dwarf_haspc(fn, row - bias) > 0 : row >= lo && row < hi;
  if (!inside) return "";
  *line = l;
  return file;
}

static size_t lookup_dwarf(sym_obj_t *obj, uint64_t addr, sym_frame_t *frames, size_t max)
{
  Dwarf_Addr bias;
  Dwarf_Die *cu = dwfl_module_addrdie(obj->mod, addr, &bias);
  Dwarf_Die fn, chain[64];
  if (cu == NULL || max == 0 || !function_at(obj, cu, addr - bias, &fn)) return 0;
  size_t depth = inlined_at(&fn, addr - bias, chain, max - 1 < 64 ? max - 1 : 64);
  int line;
  const char *file = line_of(obj, addr, &fn, bias, 0, 0, &line);
  Dwarf_Files *files = NULL;
  size_t nfiles = 0, n = 0;
  for (size_t i = depth + 1; i-- > 0;) {      /* innermost first: chain[depth-1] .. chain[0], then fn */
    Dwarf_Die *s = i > 0 ? &chain[i - 1] : &fn;
    const char *linkage, *name = die_name(s, &linkage);
    sym_frame_t *f = &frames[n++];
    frame_names(f, name, linkage);
    frame_decl(f, s);
    f->file = file;
    f->line = line;
    if (i == 0) break;
    Dwarf_Attribute a;                        /* where this inlined call is, in its caller */
    Dwarf_Word v;
    file = "";
    line = 0;
    if (dwarf_formudata(dwarf_attr(s, DW_AT_call_file, &a), &v) == 0 &&
        (files != NULL || dwarf_getsrcfiles(cu, &files, &nfiles) == 0) && v < nfiles) {
      const char *cf = dwarf_filesrc(files, v, NULL, NULL);
      if (cf != NULL) file = cf;
    }
    if (dwarf_formudata(dwarf_attr(s, DW_AT_call_line, &a), &v) == 0) line = (int)v;
  }
  return n;
}

static size_t lookup_symtab(sym_obj_t *obj, uint64_t addr, sym_frame_t *f)
{
  size_t lo = 0, hi = obj->n_syms;
  while (lo < hi) {                           /* the first symbol starting after addr */
    size_t mid = (lo + hi) / 2;
    if (obj->syms[mid].start <= addr) lo = mid + 1;
    else hi = mid;
  }
  if (lo == 0 || addr >= obj->syms[lo - 1].end) return 0;
  const char *name = obj->syms[lo - 1].name;
  memset(f, 0, sizeof *f);
  frame_names(f, NULL, name);
  f->decl_file = "";
  f->file = obj->has_lines ? line_of(obj, addr, NULL, 0, obj->syms[lo - 1].start, obj->syms[lo - 1].end,
                                     &f->line) : "";
  return 1;
}

size_t sym_obj_lookup(sym_obj_t *obj, uint64_t addr, sym_frame_t *frames, size_t max)
{
  memset(frames, 0, max * sizeof *frames);
  size_t n = obj->has_dwarf ? lookup_dwarf(obj, addr, frames, max) : 0;
  if (n == 0 && max > 0) n = lookup_symtab(obj, addr, frames);
  return n;
}

void sym_frames_free(sym_frame_t *frames, size_t n)
{
  for (size_t i = 0; i < n; i++) free(frames[i].owned);
}
