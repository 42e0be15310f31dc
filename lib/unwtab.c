/* unwtab.c - the table unwinder's tables: one per loaded object that a sampled stack passes through,
 * compiled lazily a 1 KiB chunk of its address range at a time, shared by every thread.
 *
 * Objects.  A walk meeting an address outside every known object asks _dl_find_object (glibc 2.35: no
 * lock, async-signal-safe) for the object there: its mapping, its link map and its .eh_frame_hdr.  The
 * record made for it is published in `objset`, a sorted array replaced whole (copy, then compare-and-swap)
 * whenever an object is added or found gone: readers never wait, writers never lock.  Two threads that
 * register the same object at once keep the first published record; the other is freed unseen.
 *
 * Chunks.  An object's range is cut into 1 KiB chunks, each compiled from .eh_frame (ehframe.c; a
 * permanent object's read from its file, cfifile.c, else in place) the first time a walk needs a row in
 * it, and published with one compare-and-swap into the record's chunk array: two threads compiling the
 * same chunk both finish, and the loser frees its copy.  So the first
 * sample through some code pays for its chunks (a few FDEs each), and memory follows the code samples
 * actually run through, not the size of the program.
 *
 * dlclose.  Objects loaded before the library (the program and its libraries: glibc never unloads them)
 * are permanent.  Any other is checked once per walk that meets it: _dl_find_object must still report the
 * same mapping, link map and .eh_frame_hdr, and the object's build ID must still read the same (one
 * process_vm_readv), else the record is replaced by the object now there (the old one is retired,
 * below).  Compiling a chunk never reads such an object's memory: its call-frame information is read
 * from its file (cfifile.c; its name copied into the record, the build ID checked at every compile; a file
 * that cannot be opened now leaves the chunk to a later walk, one that is another file now leaves its
 * rows FALLBACK), else copied into profiler memory when registered (process_vm_readv: an object unloaded
 * meanwhile gives EFAULT, never a fault); where process_vm_readv is refused (qemu-user, seccomp) it is
 * read in place, which is only unsafe if a thread unloads an object that a wrong step of the walk led
 * into.  The walk itself reads only the stack, these tables and that build ID.  What a walk can still see
 * is never freed under it:
 *
 * Reclamation (epochs).  A walk counts itself in readers[epoch & 1] for its whole duration.  Retired
 * memory (a replaced objset, a stale object with its chunks and copy; everything at mi_prof_stop) is
 * tagged with the epoch it was retired in; the epoch advances only when nobody is counted under the
 * previous one, and memory retired in epoch e is freed once the epoch reaches e + 2, when every walk
 * that could have loaded a pointer to it has left.  Nothing ever waits: memory whose walks are still
 * running is freed by a later retire or release.
 *
 * Memory: profiler memory (pmem.c), never malloc, in the stacks' share of the budget (what records need
 * stays theirs); nothing per thread.
 */
#include "unwtab.h"
#include "objects.h"
#include "pmem.h"
#include "unwind.h"

#include <dlfcn.h>
#include <link.h>
#include <sys/auxv.h>
#include <string.h>

#if MPROF_HAVE_TABLE

_Static_assert(sizeof(mprof_rule_t) == sizeof(uint64_t) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
               "a rule is the 8 bytes of its uint64_t form");

typedef mprof_objset_entry_t objset_entry_t;
typedef mprof_objset_t objset_t;

mprof_objset_t *mprof_unwtab_objset;     /* atomic: the published objects, sorted by start */
#define objset mprof_unwtab_objset
uint64_t mprof_unwtab_epoch;             /* atomic */
uint64_t mprof_unwtab_readers[2];        /* atomic: walks under way that entered in an even / odd epoch */
static mprof_retired_t *limbo;           /* atomic: retired memory not freed yet (a stack) */
static mprof_unwtab_stats_t stats;       /* relaxed atomics */

#define INITIAL_MAX 256
static uintptr_t initial[INITIAL_MAX] MPROF_LOAD_DATA;   /* mapping starts of the objects loaded before us */
static size_t n_initial MPROF_LOAD_DATA;

#define COPY_MAX ((size_t)64 << 20)      /* the most call-frame information copied for one object */
/* pmem.c's kept temporary is a compile's working memory (compile(), below), then the windows a file view
 * is read into (cfifile.c). */
#define WINDOWS_AT (MPROF_PMEM_KEPT_BYTES - MPROF_CFI_WINDOW_BYTES)

static void count(uint64_t *c, uint64_t n) { __atomic_fetch_add(c, n, __ATOMIC_RELAXED); }

static size_t chunk_bytes(uint32_t nrows, uint32_t nrules)
{
  return sizeof(mprof_tabchunk_t) + (size_t)nrules * sizeof(uint64_t) +
         ((size_t)nrows + 1) * sizeof(mprof_tabrow_t);
}

/* ---------------------------------------------------------------------------------------------------
   Epochs and retired memory
--------------------------------------------------------------------------------------------------- */

/* One step forward when no walk is counted under the previous epoch. */
static void try_advance(void)
{
  uint64_t e = __atomic_load_n(&mprof_unwtab_epoch, __ATOMIC_SEQ_CST);
  if (__atomic_load_n(&mprof_unwtab_readers[(e + 1) & 1], __ATOMIC_SEQ_CST) == 0)
    __atomic_compare_exchange_n(&mprof_unwtab_epoch, &e, e + 1, false, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED);
}

/* Chunks are carved from an object's slabs (a bump pointer each, taken with fetch_add): a chunk of a few
 * hundred bytes in a page of its own would multiply what the tables keep resident.  An object's first slab
 * is a page and each next one twice the last, up to SLAB_MAX: most objects need a few chunks, and a slab
 * counts against the budget's share for stacks as soon as it is mapped. */
typedef struct mprof_tabslab_s {
  struct mprof_tabslab_s *next;
  size_t bytes;                          /* of the mapping */
  size_t used;                           /* atomic: bytes handed out (may overshoot: then it is full) */
  _Alignas(8) char mem[];
} tabslab_t;

#define SLAB_FIRST ((size_t)4 << 10)
#define SLAB_MAX   ((size_t)64 << 10)

static void *slab_alloc(mprof_uobj_t *o, size_t n)
{
  n = (n + 7) & ~(size_t)7;
  for (;;) {
    tabslab_t *s = __atomic_load_n(&o->slabs, __ATOMIC_ACQUIRE);
    if (s != NULL) {
      size_t at = __atomic_fetch_add(&s->used, n, __ATOMIC_RELAXED);
      if (at + n <= s->bytes - sizeof(tabslab_t)) return s->mem + at;
    }
    size_t step = s == NULL ? SLAB_FIRST : s->bytes < SLAB_MAX ? 2 * s->bytes : SLAB_MAX;
    size_t bytes = n + sizeof(tabslab_t) > step ? n + sizeof(tabslab_t) : step;
    tabslab_t *fresh = mprof_pmem_map_stacks(bytes);
    if (fresh == NULL) return NULL;
    fresh->bytes = bytes;
    fresh->used = n;
    fresh->next = s;
    if (__atomic_compare_exchange_n(&o->slabs, &s, fresh, false, __ATOMIC_RELEASE, __ATOMIC_RELAXED))
      return fresh->mem;
    mprof_pmem_unmap_stacks(fresh, bytes);     /* another thread's slab came first: carve from it */
  }
}

static void free_object(mprof_uobj_t *o)
{
  for (tabslab_t *s = o->slabs, *next; s != NULL; s = next) {
    next = s->next;
    mprof_pmem_unmap_stacks(s, s->bytes);
  }
  mprof_pmem_unmap_stacks(o->copy, o->copy_bytes);
  mprof_pmem_unmap_stacks(o, o->retired.bytes);
}

static void free_retired(mprof_retired_t *r)
{
  if (r->is_object) free_object((mprof_uobj_t *)r);
  else mprof_pmem_unmap_stacks(r, r->bytes);
}

static void push_limbo(mprof_retired_t *first, mprof_retired_t *last)
{
  mprof_retired_t *head = __atomic_load_n(&limbo, __ATOMIC_RELAXED);
  do last->next = head;
  while (!__atomic_compare_exchange_n(&limbo, &head, first, true, __ATOMIC_RELEASE, __ATOMIC_RELAXED));
}

/* Frees what no walk can see any more; the rest goes back. */
static void reclaim(void)
{
  mprof_retired_t *list = __atomic_exchange_n(&limbo, NULL, __ATOMIC_ACQUIRE);
  mprof_retired_t *keep = NULL, *keep_last = NULL;
  uint64_t e = __atomic_load_n(&mprof_unwtab_epoch, __ATOMIC_SEQ_CST);
  while (list != NULL) {
    mprof_retired_t *next = list->next;
    if (list->epoch + 2 <= e) {
      free_retired(list);
    } else {
      list->next = keep;
      keep = list;
      if (keep_last == NULL) keep_last = list;
    }
    list = next;
  }
  if (keep != NULL) push_limbo(keep, keep_last);
}

static void retire(mprof_retired_t *r)
{
  r->epoch = __atomic_load_n(&mprof_unwtab_epoch, __ATOMIC_SEQ_CST);
  push_limbo(r, r);
}

/* Two steps if they can be taken, then whatever that made free. */
static void settle(void)
{
  try_advance();
  try_advance();
  reclaim();
}

void mprof_unwtab_postfork_child(unsigned my_slot_plus_one)
{
  /* The walks of threads that do not exist here will never leave. */
  mprof_unwtab_readers[0] = mprof_unwtab_readers[1] = 0;
  if (my_slot_plus_one != 0) mprof_unwtab_readers[my_slot_plus_one - 1] = 1;
}

void mprof_unwtab_stats(mprof_unwtab_stats_t *out)
{
  out->objects = __atomic_load_n(&stats.objects, __ATOMIC_RELAXED);
  out->chunks = __atomic_load_n(&stats.chunks, __ATOMIC_RELAXED);
  out->chunk_bytes = __atomic_load_n(&stats.chunk_bytes, __ATOMIC_RELAXED);
  out->chunk_failures = __atomic_load_n(&stats.chunk_failures, __ATOMIC_RELAXED);
  out->rows = __atomic_load_n(&stats.rows, __ATOMIC_RELAXED);
  out->stale = __atomic_load_n(&stats.stale, __ATOMIC_RELAXED);
  out->file_compiles = __atomic_load_n(&stats.file_compiles, __ATOMIC_RELAXED);
  out->file_preads = __atomic_load_n(&stats.file_preads, __ATOMIC_RELAXED);
  out->in_place_compiles = __atomic_load_n(&stats.in_place_compiles, __ATOMIC_RELAXED);
  out->copies = __atomic_load_n(&stats.copies, __ATOMIC_RELAXED);
  out->object_reads = __atomic_load_n(&stats.object_reads, __ATOMIC_RELAXED);
}

/* ---------------------------------------------------------------------------------------------------
   Objects
--------------------------------------------------------------------------------------------------- */

/* Which objects were there before the library ran: the program and its libraries, which glibc never
 * unloads (unwind.c tells, from the constructor; a library loaded with dlopen would count what was loaded
 * before it too, but this one replaces malloc and is always loaded at start). */
MPROF_COLD MPROF_LOAD_TEXT void mprof_unwtab_note_initial(uintptr_t map_start)
{
  if (map_start != UINTPTR_MAX && n_initial < INITIAL_MAX) initial[n_initial++] = map_start;
}

static bool is_initial(uintptr_t start)
{
  for (size_t i = 0; i < n_initial; i++)
    if (initial[i] == start) return true;
  return false;
}

/* The entry of set whose range holds pc, or NULL. */
static const objset_entry_t *set_find(const objset_t *set, uintptr_t pc)
{
  if (set == NULL) return NULL;
  size_t lo = 0, hi = set->n;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (set->e[mid].start <= pc) lo = mid + 1;
    else hi = mid;
  }
  if (lo == 0 || pc >= set->e[lo - 1].end) return NULL;
  return &set->e[lo - 1];
}

static bool copy_in(uintptr_t addr, void *dst, size_t n)
{
  count(&stats.object_reads, 1);
  return mprof_unwind_read_bytes(addr, dst, n);
}

/* An object's identity bytes: the descriptor of its NT_GNU_BUILD_ID note, found through the program
 * headers at the start of its mapping, else the first bytes of its .eh_frame_hdr (which name its search
 * table's place and length: weaker, for objects linked without a build ID).  The loader's own report
 * (mapping, link map, .eh_frame_hdr) is not enough: a module dlclosed and another dlopened in its place
 * often gets the freed link map back, and two builds of one plugin can share every address. */
static bool read_at(uintptr_t addr, void *dst, size_t n)
{
  if (copy_in(addr, dst, n)) return true;
  if (!mprof_unwind_foreign_refused()) return false;
  memcpy(dst, (const void *)addr, n);              /* where the loader reports an object: see above */
  return true;
}

/* The first bytes of an object's mapping, read with one call: its ELF header, its program headers and
 * its notes (1,144 bytes at most in the 1,294 programs and libraries of a Debian 12 system).  One call,
 * not one per header: each process_vm_readv takes the address space's lock, which mimalloc's mmap and
 * mprotect hold for writing, and a thread that waits for it sleeps and hands its CPU to another thread of
 * the program, which fills its heap meanwhile (eight threads of bench/mstress_like meeting the program's
 * objects together slept in 40 calls an object about five times a run; doc/performance.md).  A read
 * outside these bytes goes to the object itself (read_at). */
#define HEAD_BYTES 1280
typedef struct head_s {
  uintptr_t at;                                    /* the mapping's start */
  size_t    n;                                     /* bytes read: 0 when none could be */
  uint8_t   b[HEAD_BYTES];
} head_t;

static void head_load(head_t *h, const mprof_uobj_t *o)
{
  size_t n = o->span < HEAD_BYTES ? o->span : HEAD_BYTES;
  h->at = o->start;
  h->n = read_at(o->start, h->b, n) ? n : 0;
}

static bool head_read(const head_t *h, uintptr_t addr, void *dst, size_t n)
{
  if (addr - h->at <= h->n && n <= h->n - (addr - h->at)) {
    memcpy(dst, h->b + (addr - h->at), n);
    return true;
  }
  return read_at(addr, dst, n);
}

/* Reads a copy of the head (mprof_objects_note_build_id's reader for notes inside it). */
static bool read_copied(uintptr_t addr, void *dst, size_t n)
{
  memcpy(dst, (const void *)addr, n);
  return true;
}

/* The ELF header at the start of o's mapping, its program headers in the first page, and the load bias
 * (the first PT_LOAD is mapped at start); false when it is not readable so. */
typedef struct elf_s {
  ElfW(Ehdr) eh;
  uintptr_t  bias;
} elf_t;

static bool read_phdr(const head_t *h, const elf_t *e, size_t i, ElfW(Phdr) *ph)
{
  return head_read(h, h->at + e->eh.e_phoff + i * sizeof *ph, ph, sizeof *ph);
}

static bool read_elf(const head_t *h, elf_t *e)
{
  ElfW(Phdr) ph;
  uintptr_t first = UINTPTR_MAX;
  ElfW(Ehdr) *eh = &e->eh;
  if (!head_read(h, h->at, eh, sizeof *eh) || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 ||
      eh->e_phentsize != sizeof ph || eh->e_phoff >= 4096 || eh->e_phnum > (4096 - eh->e_phoff) / sizeof ph)
    return false;
  for (size_t i = 0; i < eh->e_phnum; i++)
    if (read_phdr(h, e, i, &ph) && ph.p_type == PT_LOAD && ph.p_vaddr < first) first = ph.p_vaddr;
  e->bias = h->at - (first & ~(uintptr_t)0xfff);
  return first != UINTPTR_MAX;
}

/* The build ID's descriptor in the note list [at, stop): its length (0: none) and *desc. */
static size_t note_build_id(const head_t *h, uintptr_t at, uintptr_t stop, uintptr_t *desc)
{
  uintptr_t copy = (uintptr_t)h->b - h->at;        /* added to an address inside the head: its copy */
  if (at - h->at > h->n || stop - h->at > h->n || stop < at)
    return mprof_objects_note_build_id(at, stop, read_at, desc);
  size_t n = mprof_objects_note_build_id(at + copy, stop + copy, read_copied, desc);
  if (n != 0) *desc -= copy;
  return n;
}

static void learn_identity(mprof_uobj_t *o, const head_t *h, uintptr_t hdr)
{
  elf_t e;
  ElfW(Phdr) ph;
  uintptr_t end = o->start + o->span;
  bool elf = read_elf(h, &e);
  for (size_t i = 0; elf && i < e.eh.e_phnum; i++) {
    if (!read_phdr(h, &e, i, &ph) || ph.p_type != PT_NOTE) continue;
    uintptr_t at = e.bias + ph.p_vaddr, stop = at + ph.p_memsz, desc;
    if (at < o->start || stop > end || stop < at) continue;
    size_t n = note_build_id(h, at, stop, &desc);
    if (n == 0) continue;
    n = n < MPROF_UOBJ_ID_MAX ? n : MPROF_UOBJ_ID_MAX;
    if (head_read(h, desc, o->id, n)) o->id_at = desc, o->id_len = (uint8_t)n;
    return;
  }
  if (hdr != 0 && hdr - o->start < o->span) {
    size_t n = end - hdr < MPROF_UOBJ_ID_MAX ? end - hdr : MPROF_UOBJ_ID_MAX;
    if (read_at(hdr, o->id, n)) o->id_at = hdr, o->id_len = (uint8_t)n;
  }
}

/* The name the loader opened the object f describes by, when absolute; the program's: /proc/self/exe
 * (the file mapped, whatever its name now).  Used only for objects that are never unloaded: the loader's
 * string lives as long as they do. */
static const char *object_path(const struct dl_find_object *f)
{
  const struct link_map *lm = f->dlfo_link_map;
  uintptr_t phdr = (uintptr_t)getauxval(AT_PHDR), start = (uintptr_t)f->dlfo_map_start;
  if (lm == NULL || lm->l_name == NULL) return NULL;
  if (lm->l_name[0] == '/') return lm->l_name;
  if (lm->l_name[0] == '\0' && phdr - start < (uintptr_t)f->dlfo_map_end - start) return "/proc/self/exe";
  return NULL;                                   /* the vDSO, or a name relative to some directory */
}

/* A non-permanent object's name, copied into its record (dst, PATH_COPY bytes) when absolute: the loader's
 * string goes with the object, maybe while we read it (read_at: a freed page reads as unreadable).  Read
 * a piece at a time that stays within a page.  NULL: none (the build ID check catches a wrong one). */
#define PATH_COPY 1024
static const char *copy_path(const struct dl_find_object *f, char *dst)
{
  const char *name;
  const struct link_map *lm = f->dlfo_link_map;
  if (lm == NULL || !read_at((uintptr_t)&lm->l_name, &name, sizeof name) || name == NULL) return NULL;
  for (size_t k = 0; k < PATH_COPY;) {
    uintptr_t at = (uintptr_t)name + k;
    size_t n = 4096 - (at & 4095);
    n = n < 64 ? n : 64;
    n = n < PATH_COPY - k ? n : PATH_COPY - k;
    if (!read_at(at, dst + k, n)) return NULL;
    if (memchr(dst + k, 0, n) != NULL) return dst[0] == '/' ? dst : NULL;
    k += n;
  }
  return NULL;
}

/* The file view of an object with a build ID: the file-backed part of the PT_LOAD segment holding
 * .eh_frame_hdr, and where it and the build ID lie in the file (cfifile.c).  False: read in place. */
static bool learn_file(mprof_uobj_t *o, const head_t *h, uintptr_t hdr, const char *path)
{
  elf_t e;
  ElfW(Phdr) ph;
  bool seg = false, id = false;
  if (path == NULL || o->id_at == 0 || o->id_at == hdr || !read_elf(h, &e)) return false;
  for (size_t i = 0; i < e.eh.e_phnum; i++) {
    if (!read_phdr(h, &e, i, &ph) || ph.p_type != PT_LOAD) continue;
    uintptr_t at = e.bias + ph.p_vaddr, stop = at + ph.p_filesz;
    if (stop < at || at < o->start || stop > o->start + o->span) continue;
    if (hdr >= at && hdr < stop) {
      o->view = (mprof_cfi_view_t){NULL, at, stop, NULL};
      o->file.lo_off = ph.p_offset;
      seg = true;
    }
    if (o->id_at >= at && o->id_at < stop && o->id_len <= stop - o->id_at) {
      o->file.id_off = ph.p_offset + (o->id_at - at);
      id = true;
    }
  }
  if (!seg || !id) return o->view = (mprof_cfi_view_t){0}, false;
  o->file.path = path;
  o->file.id = o->id;
  o->file.id_len = o->id_len;
  return true;
}

static bool copy_cfi(mprof_uobj_t *o, uintptr_t hdr);

/* The view of an object whose file is not read: a permanent object in place, another from a copy (in
 * place where process_vm_readv is refused); false: none. */
static bool view_without_file(mprof_uobj_t *o, uintptr_t hdr)
{
  if (o->permanent || (!copy_cfi(o, hdr) && mprof_unwind_foreign_refused()))
    o->view = (mprof_cfi_view_t){(const uint8_t *)o->start, o->start, o->start + o->span, NULL};
  return o->view.hi != 0;
}

/* .eh_frame_hdr through v, its search table inside v (and its span noted). */
static bool index_in(const mprof_cfi_view_t *v, uintptr_t hdr, mprof_cfi_index_t *ix)
{
  if (!mprof_cfi_index(v, hdr, ix) || ix->table < v->lo || ix->table > v->hi ||
      (uintptr_t)ix->fde_count * 8 > v->hi - ix->table)
    return false;
  mprof_cfi_index_span(v, ix);
  return true;
}

/* The object's index: a file view's through its file (with .eh_frame in the same segment), else in place,
 * which a permanent object always allows. */
static bool read_index(mprof_uobj_t *o, uintptr_t hdr)
{
  if (o->view.mem == NULL) {
    mprof_cfi_view_t v = o->view;
    mprof_cfi_pager_t pg;
    uint8_t *tmp = mprof_pmem_take_kept();
    bool ok = false;
    if (tmp != NULL && mprof_cfi_file_open(&pg, &o->file, tmp + WINDOWS_AT)) {
      v.pager = &pg;
      ok = index_in(&v, hdr, &o->index) && o->index.eh_frame >= v.lo && o->index.eh_frame < v.hi;
      mprof_cfi_file_close(&pg);
    }
    if (tmp != NULL) mprof_pmem_give_kept(tmp);
    if (ok) return true;
    o->file.path = NULL;
    o->view = (mprof_cfi_view_t){0};
    if (!view_without_file(o, hdr)) return false;
  }
  return index_in(&o->view, hdr, &o->index);
}

/* Whether the record o still describes the object the loader reports in f.  The identity bytes are read
 * with process_vm_readv (an address that is no longer mapped reads as different); where that is refused
 * they are read in place only inside the mapping's first page, which any object mapped there has
 * readable, else not compared. */
static bool same_object(const mprof_uobj_t *o, const struct dl_find_object *f)
{
  if (o->start != (uintptr_t)f->dlfo_map_start || o->start + o->span != (uintptr_t)f->dlfo_map_end ||
      o->link_map != f->dlfo_link_map || o->eh_frame != f->dlfo_eh_frame)
    return false;
  if (o->id_at == 0) return true;
  uint8_t now[MPROF_UOBJ_ID_MAX];
  if (copy_in(o->id_at, now, o->id_len)) return memcmp(now, o->id, o->id_len) == 0;
  if (!mprof_unwind_foreign_refused()) return false;
  if (o->id_at + o->id_len - o->start > 4096) return true;
  return memcmp((const void *)o->id_at, o->id, o->id_len) == 0;
}

/* The view of a non-permanent object's call-frame information: a copy of [.eh_frame_hdr, the end of
 * .eh_frame) in profiler memory.  False when it cannot be read (the view stays unset). */
static bool copy_cfi(mprof_uobj_t *o, uintptr_t hdr)
{
  uintptr_t end = o->start + o->span;
  uint8_t head[32];
  size_t head_n = end - hdr < sizeof head ? end - hdr : sizeof head;
  if (!copy_in(hdr, head, head_n)) return false;
  mprof_cfi_view_t small = {head, hdr, hdr + head_n, NULL};
  mprof_cfi_index_t ix;
  if (!mprof_cfi_index(&small, hdr, &ix) || ix.fde_count == 0) return false;
  size_t table_bytes = (size_t)ix.fde_count * 8;
  if (ix.table < hdr || ix.table - hdr > end - hdr || table_bytes > end - ix.table) return false;
  size_t hdr_bytes = ix.table - hdr + table_bytes;
  if (hdr_bytes > COPY_MAX) return false;
  uint8_t *tab = mprof_pmem_map_temp(hdr_bytes);
  if (tab == NULL) return false;
  uintptr_t fde_end = 0;
  if (copy_in(hdr, tab, hdr_bytes)) {
    uintptr_t last = 0;
    for (size_t i = 0; i < ix.fde_count; i++) {
      int32_t rel;
      memcpy(&rel, tab + (ix.table - hdr) + 8 * i + 4, 4);
      uintptr_t f = hdr + (uintptr_t)(intptr_t)rel;
      if (f > last) last = f;
    }
    uint32_t len;
    if (last >= o->start && last < end - 4 && copy_in(last, &len, 4) && len != 0xffffffffu)
      fde_end = last + 4 + len;
  }
  mprof_pmem_unmap_temp(tab, hdr_bytes);
  uintptr_t lo = hdr < ix.eh_frame ? hdr : ix.eh_frame;
  uintptr_t hi = fde_end > hdr + hdr_bytes ? fde_end : hdr + hdr_bytes;
  if (fde_end == 0 || lo < o->start || hi > end || hi - lo > COPY_MAX) return false;
  void *copy = mprof_pmem_map_stacks(hi - lo);
  if (copy == NULL) return false;
  if (!copy_in(lo, copy, hi - lo)) {
    mprof_pmem_unmap_stacks(copy, hi - lo);
    return false;
  }
  o->copy = copy;
  o->copy_bytes = hi - lo;
  count(&stats.copies, 1);
  o->view = (mprof_cfi_view_t){copy, lo, hi, NULL};
  return true;
}

/* A new record for the object f describes; NULL when there is no memory for it. */
static mprof_uobj_t *make_object(const struct dl_find_object *f)
{
  uintptr_t start = (uintptr_t)f->dlfo_map_start, span = (uintptr_t)f->dlfo_map_end - start;
  size_t nchunks = (span + ((size_t)1 << MPROF_TAB_CHUNK_SHIFT) - 1) >> MPROF_TAB_CHUNK_SHIFT;
  size_t name_at = sizeof(mprof_uobj_t) + nchunks * sizeof(mprof_tabchunk_t *);
  bool permanent = is_initial(start);
  size_t bytes = name_at + (permanent ? 0 : PATH_COPY);
  if (span == 0 || nchunks > UINT32_MAX) return NULL;
  mprof_uobj_t *o = mprof_pmem_map_stacks(bytes);
  if (o == NULL) return NULL;
  o->retired.bytes = bytes;
  o->retired.is_object = true;
  o->start = start;
  o->span = span;
  o->link_map = f->dlfo_link_map;
  o->eh_frame = f->dlfo_eh_frame;
  o->permanent = permanent;
  o->nchunks = (uint32_t)nchunks;
  uintptr_t hdr = (uintptr_t)f->dlfo_eh_frame;
  bool has_cfi = hdr != 0 && hdr - start < span;
  head_t h;                                       /* read only where has_cfi or !permanent */
  if (has_cfi || !permanent) head_load(&h, o), learn_identity(o, &h, hdr);
  const char *path = permanent ? object_path(f) : copy_path(f, (char *)o + name_at);
  bool viewed = has_cfi && (learn_file(o, &h, hdr, path) || view_without_file(o, hdr));
  if (viewed && !read_index(o, hdr)) o->index.fde_count = 0;
  count(&stats.objects, 1);
  return o;
}

/* Publishes o, replacing every entry its range overlaps (objects gone); returns the record to use: o, or
 * an equal record another thread published first (o is then freed). */
static mprof_uobj_t *publish(mprof_uobj_t *o)
{
  uintptr_t o_end = o->start + o->span;
  for (int attempt = 0; attempt < 16; attempt++) {
    objset_t *cur = __atomic_load_n(&objset, __ATOMIC_ACQUIRE);
    size_t n = cur != NULL ? cur->n : 0, k = 0;
    for (size_t i = 0; i < n; i++) {
      const mprof_uobj_t *p = cur->e[i].obj;
      if (p->start == o->start && p->span == o->span && p->link_map == o->link_map &&
          p->eh_frame == o->eh_frame && p->id_len == o->id_len && memcmp(p->id, o->id, o->id_len) == 0) {
        free_object(o);                        /* registered meanwhile: never seen by anyone */
        return cur->e[i].obj;
      }
    }
    size_t bytes = sizeof(objset_t) + (n + 1) * sizeof(objset_entry_t);
    objset_t *next = mprof_pmem_map_stacks(bytes);
    if (next == NULL) break;
    next->retired.bytes = bytes;
    bool placed = false;
    for (size_t i = 0; i < n; i++) {
      const objset_entry_t *e = &cur->e[i];
      if (e->start < o_end && o->start < e->end) continue;    /* overlapped: gone */
      if (!placed && e->start > o->start) next->e[k++] = (objset_entry_t){o->start, o_end, o}, placed = true;
      next->e[k++] = *e;
    }
    if (!placed) next->e[k++] = (objset_entry_t){o->start, o_end, o};
    next->n = k;
    if (__atomic_compare_exchange_n(&objset, &cur, next, false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
      for (size_t i = 0; i < n; i++) {
        const objset_entry_t *e = &cur->e[i];
        if (e->start < o_end && o->start < e->end) {
          count(&stats.stale, 1);
          retire(&e->obj->retired);
        }
      }
      if (cur != NULL) retire(&cur->retired);
      settle();
      return o;
    }
    mprof_pmem_unmap_stacks(next, bytes);             /* lost the race: never seen by anyone */
  }
  free_object(o);
  return NULL;
}

static void cursor_set(mprof_ucursor_t *c, const mprof_uobj_t *o)
{
  c->obj = o;
  c->lo = o->start;
  c->span = o->span;
}

bool mprof_unwtab_object(uintptr_t pc, mprof_ucursor_t *c)
{
  const objset_entry_t *e = set_find(__atomic_load_n(&objset, __ATOMIC_ACQUIRE), pc);
  if (e != NULL) {
    const mprof_uobj_t *o = e->obj;
    if (o->permanent) return cursor_set(c, o), true;
    for (unsigned i = 0; i < c->n_checked; i++)
      if (c->checked[i] == o) return cursor_set(c, o), true;
  }
  struct dl_find_object f;
  if (_dl_find_object((void *)pc, &f) != 0) return false;
  if (e != NULL && same_object(e->obj, &f)) {
    if (c->n_checked < sizeof c->checked / sizeof c->checked[0]) c->checked[c->n_checked++] = e->obj;
    return cursor_set(c, e->obj), true;
  }
  mprof_uobj_t *o = make_object(&f);
  if (o == NULL || (o = publish(o)) == NULL) return false;
  if (!o->permanent && c->n_checked < sizeof c->checked / sizeof c->checked[0])
    c->checked[c->n_checked++] = o;
  cursor_set(c, o);
  return true;
}

/* ---------------------------------------------------------------------------------------------------
   Chunks
--------------------------------------------------------------------------------------------------- */

#define CHUNK_SPAN ((size_t)1 << MPROF_TAB_CHUNK_SHIFT)

/* The rule's index in dict (n distinct so far), added when new; -1 when the dictionary is full.  hash:
 * DICT_SLOTS open-addressing slots of index + 1. */
#define DICT_SLOTS 4096u
static inline uint32_t dict_slot(uint64_t rule) { return (uint32_t)((rule * 0x9e3779b97f4a7c15u) >> 52); }

static int rule_index(uint64_t *dict, uint32_t *n, uint16_t *hash, uint64_t rule)
{
  for (uint32_t h = dict_slot(rule);; h = (h + 1) & (DICT_SLOTS - 1)) {
    if (hash[h] == 0) {
      if (*n == DICT_SLOTS / 2) return -1;
      dict[*n] = rule;
      hash[h] = (uint16_t)++*n;
      return (int)*n - 1;
    }
    if (dict[hash[h] - 1] == rule) return hash[h] - 1;
  }
}

/* A compile's working memory, pmem.c's kept temporary: a row per byte at most (rule, start), the distinct
 * rules and their hash, which is all zeros between compiles (a fresh mapping's, and each compile clears
 * the slots it used); then a file view's windows. */
_Static_assert(CHUNK_SPAN * (sizeof(uint64_t) + sizeof(uint32_t)) + DICT_SLOTS / 2 * sizeof(uint64_t) +
                   DICT_SLOTS * sizeof(uint16_t) <= WINDOWS_AT,
               "a compile's scratch and windows fit pmem.c's kept temporary");

#define MPROF_TAB_RETRY ((mprof_tabchunk_t *)3)   /* not compiled now, nor published: a later walk retries */

/* The view a compile of o reads: a file view with its file open in pg, else a permanent object's bytes in
 * place.  A non-permanent object's file that cannot be opened now leaves no view (hi 0: retried later); one
 * that is another file now leaves none for good (its chunks FALLBACK). */
static mprof_cfi_view_t compile_view(mprof_uobj_t *o, mprof_cfi_pager_t *pg, uint8_t *windows)
{
  mprof_cfi_view_t v = o->view;
  if (v.mem == NULL && !__atomic_load_n(&o->file_gone, __ATOMIC_RELAXED)) {
    if (mprof_cfi_file_open(pg, &o->file, windows)) {
      v.pager = pg;
      count(&stats.file_compiles, 1);
      return v;
    }
    if (pg->another && !o->permanent) __atomic_store_n(&o->file_gone, 1, __ATOMIC_RELAXED);
  }
  if (v.mem == NULL && !o->permanent) return (mprof_cfi_view_t){0};
  if (v.mem == NULL) v.mem = (const uint8_t *)v.lo;
  if (o->permanent) count(&stats.in_place_compiles, 1);
  return v;
}

static mprof_tabchunk_t *compile(const mprof_uobj_t *o, size_t index)
{
  uintptr_t from = o->start + (index << MPROF_TAB_CHUNK_SHIFT);
  size_t left = o->span - (index << MPROF_TAB_CHUNK_SHIFT), span = left < CHUNK_SPAN ? left : CHUNK_SPAN;
  uint64_t *tmp = mprof_pmem_take_kept();
  if (tmp == NULL) return MPROF_TAB_FAILED;
  uint64_t *dict = tmp + CHUNK_SPAN;
  uint32_t nrules = 0;
  mprof_rowbuf_t rows = {(uint32_t *)(dict + DICT_SLOTS / 2), tmp, 0, span};
  uint16_t *hash = (uint16_t *)(rows.start + CHUNK_SPAN);
  mprof_tabchunk_t *ch = MPROF_TAB_FAILED;
  mprof_cfi_pager_t pg;
  mprof_cfi_view_t view = compile_view((mprof_uobj_t *)o, &pg, (uint8_t *)tmp + WINDOWS_AT);
  bool ok = view.hi != 0 && mprof_cfi_compile(&view, &o->index, from, span, &rows) && rows.n > 0;
  bool retry = view.hi == 0 && !__atomic_load_n(&o->file_gone, __ATOMIC_RELAXED);
  if (view.pager != NULL) {
    count(&stats.file_preads, pg.preads);
    mprof_cfi_file_close(&pg);
    if (o->permanent && (pg.failed || pg.too_long)) {    /* what the windows could not serve: in place */
      view = (mprof_cfi_view_t){(const uint8_t *)view.lo, view.lo, view.hi, NULL};
      count(&stats.in_place_compiles, 1);
      ok = mprof_cfi_compile(&view, &o->index, from, span, &rows) && rows.n > 0;
    }
    retry = !o->permanent && pg.failed;
  }
  for (size_t i = 0; ok && i < rows.n; i++) {    /* rule[i] becomes its index in dict */
    int k = rule_index(dict, &nrules, hash, rows.rule[i]);
    if (k < 0) ok = false;
    rows.rule[i] = (uint64_t)k;
  }
  uint32_t n = (uint32_t)rows.n;
  size_t bytes = chunk_bytes(n, nrules);
  if (ok && bytes - sizeof(mprof_tabrow_t) <= UINT16_MAX) {   /* first[] reaches every row */
    ch = slab_alloc((mprof_uobj_t *)o, bytes);
    if (ch == NULL) {
      ch = MPROF_TAB_FAILED;
    } else {
      ch->nrows = n;
      ch->nrules = nrules;
      memcpy(ch->rule, dict, nrules * sizeof(uint64_t));
      mprof_tabrow_t *row = (mprof_tabrow_t *)(ch->rule + nrules);
      for (uint32_t i = 0; i < n; i++)
        row[i] = (mprof_tabrow_t){(uint16_t)rows.start[i], (uint16_t)rows.rule[i]};
      row[n] = (mprof_tabrow_t){0xffff, 0};      /* no row starts there: the lookup's scan stops */
      uint32_t i = 0;
      for (uint32_t b = 0; b < MPROF_TAB_BLOCKS; b++) {
        uint32_t at = b << MPROF_TAB_BLOCK_SHIFT;
        while (row[i + 1].start <= at) i++;
        ch->first[b] = (uint16_t)((const char *)&row[i] - (const char *)ch);
      }
      count(&stats.chunks, 1);
      count(&stats.rows, n);
      count(&stats.chunk_bytes, bytes);
    }
  }
  for (uint32_t k = 0; k < nrules; k++) {         /* the hash back to zeros, slot by slot: valgrind counts a
                                                   * memset of its 8 KiB as 0.3 M instructions in python3's
                                                   * start */
    uint32_t h = dict_slot(dict[k]);
    while (hash[h] != k + 1) h = (h + 1) & (DICT_SLOTS - 1);
    hash[h] = 0;
  }
  mprof_pmem_give_kept(tmp);
  if (ch == MPROF_TAB_FAILED) count(&stats.chunk_failures, 1);
  return ch == MPROF_TAB_FAILED && retry ? MPROF_TAB_RETRY : ch;
}

const mprof_tabchunk_t *mprof_unwtab_chunk_slow(const mprof_uobj_t *obj, size_t index)
{
  mprof_uobj_t *o = (mprof_uobj_t *)obj;
  mprof_tabchunk_t *ch = o->index.fde_count == 0 ? MPROF_TAB_EMPTY : compile(o, index);
  if (ch == MPROF_TAB_RETRY) return MPROF_TAB_FAILED;    /* for this walk only */
  mprof_tabchunk_t *expected = NULL;
  if (__atomic_compare_exchange_n(&o->chunk[index], &expected, ch, false, __ATOMIC_RELEASE, __ATOMIC_ACQUIRE))
    return ch;
  return expected;                                /* another thread's, published first (ours stays in the
                                                     * slab, unused, until the object goes) */
}

/* ---------------------------------------------------------------------------------------------------
   Release
--------------------------------------------------------------------------------------------------- */

void mprof_unwtab_release(void)
{
  objset_t *set = __atomic_exchange_n(&objset, NULL, __ATOMIC_ACQ_REL);
  if (set != NULL) {
    for (size_t i = 0; i < set->n; i++) retire(&set->e[i].obj->retired);
    retire(&set->retired);
  }
  settle();
  mprof_pmem_drop_kept();
}

#endif /* MPROF_HAVE_TABLE */
