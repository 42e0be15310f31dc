/* objects.c - the loaded objects as dumps see them: executable segments (pprof's mappings) and names for
 * code addresses.
 *
 * The dynamic loader's locks come first in the lock order (internal.h): a thread inside dlopen() holds
 * dl_load_lock while the new object's constructors run, and a constructor may call into the profiler
 * (mi_prof_dump, fork, a sampled malloc).  So nothing that takes a loader lock (dl_iterate_phdr, dladdr) is
 * called with a profiler lock held.  A dump first copies what it needs from the loader's list with
 * dl_iterate_phdr, holding no lock of ours (mprof_objects_take): each object's path, GNU build ID,
 * executable segments and where its dynamic symbol table lies in memory.  Inside the callback the object
 * cannot be unloaded, so its program headers, notes, dynamic section and hash table are read directly.
 *
 * Names are looked up later, under the dump lock, in the objects' dynamic symbol tables (.dynsym and
 * .dynstr: the exported functions, the table dladdr(3) searches), read with process_vm_readv(2) on our own
 * process rather than directly: an object dlclosed after the copy then reads as EFAULT (no name), never
 * as a crash, and no loader lock is taken.  The rule is dladdr's: the function whose [value, value + size)
 * holds the address, the one starting nearest below it if several do.  Where process_vm_readv is refused
 * (EPERM: a seccomp filter such as Docker's default; ENOSYS: qemu-user), the same bytes go through a pipe
 * made for the read: write(2) from the address fails with EFAULT just as safely, two more system calls
 * per read and three per lookup.
 */
#include "objects.h"
#include "pmem.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

/* Objects loaded between the sizing pass and the filling pass: room for this many more (beyond it, they
 * are left out, and addresses in them get no mapping). */
#define SLACK_OBJECTS  8
#define SLACK_SEGMENTS 16
#define SLACK_TEXT     4096

#define BUILD_ID_HEX   130                /* a 64-byte build ID as hex, and its NUL */
#define NAME_UNSET     UINT64_MAX         /* mprof_objects_name's mark: the pc's object, no symbol yet */
#define CHUNK_SYMS     (4096 / sizeof(ElfW(Sym)))   /* symbols read per process_vm_readv */

typedef struct walk_s {
  mprof_objects_t *o;
  const char      *exe;                   /* the program's path, from /proc/self/exe ("" if unknown) */
  size_t           objects, segments, text;   /* sizing pass: totals; filling pass: used */
  size_t           cap_objects, cap_segments, cap_text;
  char            *strings;               /* filling pass: the list's text */
  bool             fill;
} walk_t;

/* Session text: the table unwinder learns a build ID when a sample meets an object (lib/unwtab.c). */
MPROF_SESSION_TEXT size_t mprof_objects_note_build_id(uintptr_t at, uintptr_t stop,
                                                      bool (*read)(uintptr_t, void *, size_t),
                                                      uintptr_t *desc)
{
  for (unsigned k = 0; k < 64 && stop - at >= sizeof(ElfW(Nhdr)); k++) {     /* a bound on hostile lists */
    ElfW(Nhdr) nh;
    char name[4];
    if (!read(at, &nh, sizeof nh)) return 0;
    uintptr_t d = at + sizeof nh + ((nh.n_namesz + 3) & ~(uintptr_t)3);
    if (d < at || d > stop || nh.n_descsz > stop - d) return 0;      /* the last note may lack padding */
    if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 && nh.n_descsz > 0 &&
        read(at + sizeof nh, name, 4) && memcmp(name, "GNU", 4) == 0) {
      *desc = d;
      return nh.n_descsz;
    }
    uintptr_t next = d + ((nh.n_descsz + 3) & ~(uintptr_t)3);
    if (next > stop || next <= at) return 0;
    at = next;
  }
  return 0;
}

static bool read_here(uintptr_t addr, void *dst, size_t n)
{
  memcpy(dst, (const void *)addr, n);
  return true;
}

/* The GNU build ID of an object as lower-case hex into out (BUILD_ID_HEX bytes), "" when it has none. */
static void build_id_hex(const struct dl_phdr_info *info, char *out)
{
  out[0] = '\0';
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_NOTE) continue;
    uintptr_t at = info->dlpi_addr + ph->p_vaddr, desc;
    size_t n = mprof_objects_note_build_id(at, at + ph->p_memsz, read_here, &desc);
    if (n == 0 || n * 2 >= BUILD_ID_HEX) continue;
    static const char hex[] = "0123456789abcdef";
    for (size_t k = 0; k < n; k++) {
      unsigned char b = ((const unsigned char *)desc)[k];
      out[2 * k] = hex[b >> 4];
      out[2 * k + 1] = hex[b & 15];
    }
    out[2 * n] = '\0';
    return;
  }
}

/* A dynamic-section address.  glibc relocates these entries in place on most targets, but not where the
 * dynamic section is read-only (and the vDSO's never): a value below the load bias is still relative. */
static uintptr_t dyn_addr(uintptr_t base, ElfW(Addr) value) { return value < base ? base + value : value; }

/* The number of .dynsym entries: DT_HASH says it; with only DT_GNU_HASH it is one past the last symbol of
 * the longest chain (the hash table lists every symbol from symoffset on). */
static uint32_t count_symbols(uintptr_t hash, uintptr_t gnu_hash)
{
  if (hash != 0) return ((const uint32_t *)hash)[1];
  if (gnu_hash == 0) return 0;
  const uint32_t *h = (const uint32_t *)gnu_hash;
  uint32_t nbuckets = h[0], symoffset = h[1], bloom_words = h[2];
  const uint32_t *buckets = (const uint32_t *)((const ElfW(Addr) *)(h + 4) + bloom_words);
  const uint32_t *chain = buckets + nbuckets;
  uint32_t last = 0;
  for (uint32_t b = 0; b < nbuckets; b++)
    if (buckets[b] > last) last = buckets[b];
  if (last < symoffset) return symoffset;
  while ((chain[last - symoffset] & 1) == 0) last++;
  return last + 1;
}

/* Where the object's .dynsym and .dynstr are; left 0 when it has none usable. */
static void read_dynamic(const struct dl_phdr_info *info, mprof_object_t *ob)
{
  const ElfW(Dyn) *dyn = NULL;
  for (int i = 0; i < info->dlpi_phnum; i++)
    if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
      dyn = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
  if (dyn == NULL) return;
  uintptr_t base = info->dlpi_addr, symtab = 0, strtab = 0, hash = 0, gnu_hash = 0;
  size_t strsz = 0, syment = 0;
  for (; dyn->d_tag != DT_NULL; dyn++) {
    switch (dyn->d_tag) {
    case DT_SYMTAB: symtab = dyn_addr(base, dyn->d_un.d_ptr); break;
    case DT_STRTAB: strtab = dyn_addr(base, dyn->d_un.d_ptr); break;
    case DT_HASH: hash = dyn_addr(base, dyn->d_un.d_ptr); break;
    case DT_GNU_HASH: gnu_hash = dyn_addr(base, dyn->d_un.d_ptr); break;
    case DT_STRSZ: strsz = dyn->d_un.d_val; break;
    case DT_SYMENT: syment = dyn->d_un.d_val; break;
    default: break;
    }
  }
  if (symtab == 0 || strtab == 0 || strsz == 0 || syment != sizeof(ElfW(Sym))) return;
  ob->symtab = symtab;
  ob->strtab = strtab;
  ob->strsz = strsz;
  ob->nsyms = count_symbols(hash, gnu_hash);
}

/* A copy of s in the list's text (filling pass); NULL when there is no room left. */
static const char *copy_text(walk_t *w, const char *s)
{
  size_t n = strlen(s) + 1;
  if (n > w->cap_text - w->text) return NULL;
  char *at = w->strings + w->text;
  memcpy(at, s, n);
  w->text += n;
  return at;
}

static int walk_one(struct dl_phdr_info *info, size_t size, void *arg)
{
  (void)size;
  walk_t *w = arg;
  const char *path = info->dlpi_name;
  if (path == NULL || path[0] == '\0') path = w->exe;           /* the program */
  if (path[0] != '/') return 0;                  /* the vDSO and the like: no file to symbolize from */
  char build_id[BUILD_ID_HEX];
  build_id_hex(info, build_id);
  size_t n_exec = 0;
  for (int i = 0; i < info->dlpi_phnum; i++)
    n_exec += info->dlpi_phdr[i].p_type == PT_LOAD && (info->dlpi_phdr[i].p_flags & PF_X);
  if (!w->fill) {
    w->objects++;
    w->segments += n_exec;
    w->text += strlen(path) + strlen(build_id) + 2;
    return 0;
  }
  if (w->objects == w->cap_objects || w->segments + n_exec > w->cap_segments) return 0;
  mprof_objects_t *o = w->o;
  mprof_object_t *ob = &o->object[w->objects];
  memset(ob, 0, sizeof *ob);
  size_t text_before = w->text;
  ob->path = copy_text(w, path);
  ob->build_id = copy_text(w, build_id);
  if (ob->path == NULL || ob->build_id == NULL) {
    w->text = text_before;
    return 0;
  }
  ob->base = info->dlpi_addr;
  ob->map_start = UINTPTR_MAX;
  ob->first_segment = (uint32_t)w->segments;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD) continue;
    uintptr_t start = info->dlpi_addr + ph->p_vaddr;
    if ((start & ~(uintptr_t)4095) < ob->map_start) ob->map_start = start & ~(uintptr_t)4095;
    if (!(ph->p_flags & PF_X)) continue;
    mprof_segment_t *seg = &o->segment[w->segments++];
    seg->start = start;
    seg->limit = start + ph->p_memsz;
    seg->file_offset = ph->p_offset;
    seg->object = (uint32_t)w->objects;
  }
  ob->n_segments = (uint32_t)(w->segments - ob->first_segment);
  read_dynamic(info, ob);
  w->objects++;
  return 0;
}

bool mprof_objects_take(mprof_objects_t *o)
{
  memset(o, 0, sizeof *o);
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  exe[n > 0 ? n : 0] = '\0';
  walk_t w = {.o = o, .exe = exe};
  dl_iterate_phdr(walk_one, &w);
  w.cap_objects = w.objects + SLACK_OBJECTS;
  w.cap_segments = w.segments + SLACK_SEGMENTS;
  w.cap_text = w.text + SLACK_TEXT;
  o->bytes = w.cap_objects * sizeof(mprof_object_t) +
             w.cap_segments * (sizeof(mprof_segment_t) + sizeof(uint32_t)) + w.cap_text;
  o->mem = mprof_pmem_map_temp(o->bytes);
  if (o->mem == NULL) {
    errno = ENOMEM;
    return false;
  }
  o->object = o->mem;
  o->segment = (mprof_segment_t *)(o->object + w.cap_objects);
  o->by_start = (uint32_t *)(o->segment + w.cap_segments);
  w.strings = (char *)(o->by_start + w.cap_segments);
  w.objects = w.segments = w.text = 0;
  w.fill = true;
  dl_iterate_phdr(walk_one, &w);
  o->n_objects = w.objects;
  o->n_segments = w.segments;
  /* Sorted by start for lookups (insertion sort: glibc's qsort may call malloc; a few hundred segments). */
  for (size_t i = 0; i < o->n_segments; i++) {
    size_t j = i;
    for (; j > 0 && o->segment[o->by_start[j - 1]].start > o->segment[i].start; j--)
      o->by_start[j] = o->by_start[j - 1];
    o->by_start[j] = (uint32_t)i;
  }
  return true;
}

void mprof_objects_release(mprof_objects_t *o)
{
  mprof_pmem_unmap_temp(o->mem, o->bytes);
  o->mem = NULL;
}

size_t mprof_objects_find(const mprof_objects_t *o, uintptr_t addr)
{
  size_t lo = 0, hi = o->n_segments;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    const mprof_segment_t *seg = &o->segment[o->by_start[mid]];
    if (addr < seg->start) hi = mid;
    else if (addr >= seg->limit) lo = mid + 1;
    else return o->by_start[mid] + 1;
  }
  return 0;
}

/* ---------------------------------------------------------------------------------------------------
   Names, from the dynamic symbol tables, read through process_vm_readv (or a pipe)
--------------------------------------------------------------------------------------------------- */

static int vm_readv_refused;        /* process_vm_readv gave ENOSYS or EPERM: pipes from then on (atomic) */

/* peek through a pipe of its own, a page at a time (what any pipe holds), non-blocking: the kernel copies
 * from `at` into the pipe (EFAULT, or a short count, at an unmapped page) and back out.  The descriptors
 * live only for this call. */
static size_t peek_pipe(char *buf, uintptr_t at, size_t len)
{
  int fd[2];
  if (pipe2(fd, O_CLOEXEC | O_NONBLOCK) != 0) return 0;
  size_t done = 0;
  while (done < len) {
    size_t want = len - done < 4096 ? len - done : 4096;
    ssize_t w = write(fd[1], (const void *)(at + done), want);
    if (w <= 0 || read(fd[0], buf + done, (size_t)w) != w) break;
    done += (size_t)w;
    if ((size_t)w < want) break;
  }
  close(fd[0]);
  close(fd[1]);
  return done;
}

/* Reads up to len bytes of this process at `at`; the count read (short at an unmapped page). */
static size_t peek(void *buf, uintptr_t at, size_t len)
{
  int saved = errno;
  size_t got = 0;
  if (!__atomic_load_n(&vm_readv_refused, __ATOMIC_RELAXED)) {
    struct iovec local = {buf, len}, remote = {(void *)at, len};
    ssize_t n = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
    if (n >= 0 || (errno != ENOSYS && errno != EPERM)) {
      errno = saved;
      return n > 0 ? (size_t)n : 0;
    }
    __atomic_store_n(&vm_readv_refused, 1, __ATOMIC_RELAXED);
  }
  got = peek_pipe(buf, at, len);
  errno = saved;
  return got;
}

/* Before the object's symbols are read (!done): marks its pcs (those whose address pc - 1 lies in its
 * segments) NAME_UNSET; after (done): turns each mark into a name key and offset, or 0. */
static bool mark_object(const mprof_objects_t *o, const mprof_object_t *ob, const uintptr_t *pcs, size_t n,
                        uint64_t *names, uint32_t *offsets, bool done)
{
  bool any = false;
  for (uint32_t s = ob->first_segment; s < ob->first_segment + ob->n_segments; s++) {
    size_t i = mprof_lower_bound(pcs, n, o->segment[s].start + 1),
           end = mprof_lower_bound(pcs, n, o->segment[s].limit + 1);
    for (; i < end; i++) {
      any = true;
      if (!done) {
        names[i] = NAME_UNSET;
        continue;
      }
      if (offsets != NULL) offsets[i] = names[i] == NAME_UNSET ? 0 : (uint32_t)(names[i] >> 32) + 1;
      names[i] = names[i] == NAME_UNSET ? 0 : MPROF_NAME_KEY(ob - o->object, (uint32_t)names[i]);
    }
  }
  return any;
}

/* One symbol: the pcs in its range take it when it starts nearer below them than the one they have. */
static void name_from(const ElfW(Sym) *sym, const mprof_object_t *ob, const uintptr_t *pcs, size_t n,
                      uint64_t *names)
{
  unsigned type = ELF64_ST_TYPE(sym->st_info);   /* the same bits in ELF32_ST_TYPE */
  if ((type != STT_FUNC && type != STT_GNU_IFUNC) || sym->st_shndx == SHN_UNDEF || sym->st_shndx == SHN_ABS ||
      sym->st_size == 0 || sym->st_name == 0 || sym->st_name >= ob->strsz)
    return;
  uintptr_t start = ob->base + sym->st_value, end = start + sym->st_size;
  for (size_t i = mprof_lower_bound(pcs, n, start + 1); i < n && pcs[i] - 1 < end; i++) {
    uint64_t distance = pcs[i] - 1 - start;
    if (names[i] == 0 || distance >= (names[i] >> 32)) continue;   /* 0: another object's pc */
    names[i] = distance << 32 | sym->st_name;
  }
}

void mprof_objects_name(const mprof_objects_t *o, const uintptr_t *pcs, size_t n, uint64_t *names,
                        uint32_t *offsets)
{
  memset(names, 0, n * sizeof *names);
  if (offsets != NULL) memset(offsets, 0, n * sizeof *offsets);
  ElfW(Sym) chunk[CHUNK_SYMS];
  for (size_t k = 0; k < o->n_objects; k++) {
    const mprof_object_t *ob = &o->object[k];
    if (ob->symtab == 0 || !mark_object(o, ob, pcs, n, names, offsets, false)) continue;
    for (uint32_t first = 0; first < ob->nsyms;) {
      size_t want = ob->nsyms - first < CHUNK_SYMS ? ob->nsyms - first : CHUNK_SYMS;
      size_t got = peek(chunk, ob->symtab + (uintptr_t)first * sizeof(ElfW(Sym)), want * sizeof(ElfW(Sym))) /
                   sizeof(ElfW(Sym));
      for (size_t j = 0; j < got; j++) name_from(&chunk[j], ob, pcs, n, names);
      if (got < want) break;                      /* unloaded meanwhile */
      first += (uint32_t)got;
    }
    mark_object(o, ob, pcs, n, names, offsets, true);
  }
}

bool mprof_objects_key_name(const mprof_objects_t *o, uint64_t key, char *buf, size_t len)
{
  size_t k = (size_t)(key >> 32) - 1;
  uint32_t at = (uint32_t)key;
  if (len == 0 || k >= o->n_objects || at >= o->object[k].strsz) return false;
  const mprof_object_t *ob = &o->object[k];
  size_t want = ob->strsz - at < len ? ob->strsz - at : len;
  size_t got = peek(buf, ob->strtab + at, want);
  return got > 1 && memchr(buf, '\0', got) != NULL;
}
