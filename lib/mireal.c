/* mireal.c - the real mimalloc functions, reached through a table of pointers.
 *
 * This library exports mimalloc's own names (mi_malloc, mi_free, ... : mi_api.c), so a call to
 * `mi_malloc` from here would come back to our wrapper.  Every call into libmimalloc.so.2 therefore goes
 * through mprof_mi, one pointer per function of mimalloc_api.def: `jmp *mprof_mi+k(%rip)` costs what a
 * call through the GOT costs, so the fast paths keep their shape.
 *
 * The pointers are found in libmimalloc.so.2's own symbol table, never by name lookup through the
 * process (which would find these wrappers first).  Each pointer starts at a stub that looks up its own
 * function, stores it and makes the call: a process pays for the functions it calls (about 200
 * instructions each), not for all 98 at start-up (25 k instructions, which made a stopped python3 start
 * 0.08% dearer).  The object's tables are found once, by the constructor or by whichever stub runs
 * first (an allocation by the loader or another library's constructor before ours).  Resolution is
 * idempotent (every thread that races through it stores the same values), allocates nothing and takes no
 * profiler lock: finding the object takes the loader's list lock, in dl_iterate_phdr (see the lock order
 * in internal.h); a lookup after that reads memory only, so it is async-signal-safe.
 */
#include "mireal.h"

#include <elf.h>
#include <link.h>
#include <stdlib.h>
#include <unistd.h>

static void *resolve_one(void **slot, const char *name);

/* Each stub's name is a writable array, so it sits in .data, on the page the loader writes anyway: as a
 * string constant it would be in .rodata, whose pages a process that never profiles otherwise never
 * reads (doc/design.md, "Pages a stopped process maps"). */
#define MI_FN(ret, name, params, args)                                                                 \
  static char name_##name[] = #name;                                                                  \
  static ret stub_##name params                                                                       \
  {                                                                                                   \
    return ((ret(*) params)resolve_one((void **)&mprof_mi.name, name_##name)) args;                   \
  }
#define MI_VOID(name, params, args)                                                                    \
  static char name_##name[] = #name;                                                                  \
  static void stub_##name params                                                                      \
  {                                                                                                   \
    ((void(*) params)resolve_one((void **)&mprof_mi.name, name_##name)) args;                         \
  }
#include "mimalloc_api.def"
#undef MI_FN
#undef MI_VOID

mprof_mi_t mprof_mi = {
#define MI_FN(ret, name, params, args) .name = stub_##name,
#define MI_VOID(name, params, args)    .name = stub_##name,
#include "mimalloc_api.def"
#undef MI_FN
#undef MI_VOID
};

static void die(const char *what)
{
  static const char msg[] = "mimalloc-prof: fatal: libmimalloc.so.2 has no ";
  ssize_t w = write(2, msg, sizeof msg - 1);
  w = write(2, what, __builtin_strlen(what));
  w = write(2, "\n", 1);
  (void)w;
  abort();
}

/* ---------------------------------------------------------------------------------------------------
   Finding them: libmimalloc's own dynamic symbol table, read where the loader mapped it.  No dlopen or
   dlsym: both may allocate (dlopen always, dlsym on failure), and an allocation here comes straight back
   to these stubs; dl_iterate_phdr allocates nothing.
--------------------------------------------------------------------------------------------------- */

typedef struct object_s {
  uintptr_t        probe;        /* an address inside libmimalloc: mi_version, never exported by us */
  uintptr_t        base;
  const ElfW(Sym) *symtab;
  const char      *strtab;
  const uint32_t  *gnu_hash, *sysv_hash;
} object_t;

static int find_object(struct dl_phdr_info *info, size_t size, void *arg)
{
  (void)size;
  object_t *o = arg;
  const ElfW(Dyn) *dyn = NULL;
  bool mine = false;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    uintptr_t start = info->dlpi_addr + ph->p_vaddr;
    if (ph->p_type == PT_LOAD && o->probe - start < ph->p_memsz) mine = true;
    if (ph->p_type == PT_DYNAMIC) dyn = (const ElfW(Dyn) *)start;
  }
  if (!mine || dyn == NULL) return 0;
  o->base = info->dlpi_addr;
  for (; dyn->d_tag != DT_NULL; dyn++) {
    /* The loader rewrites these to addresses on most targets, not on all: take either. */
    uintptr_t a = dyn->d_un.d_ptr < o->base ? o->base + dyn->d_un.d_ptr : dyn->d_un.d_ptr;
    if (dyn->d_tag == DT_SYMTAB) o->symtab = (const ElfW(Sym) *)a;
    else if (dyn->d_tag == DT_STRTAB) o->strtab = (const char *)a;
    else if (dyn->d_tag == DT_GNU_HASH) o->gnu_hash = (const uint32_t *)a;
    else if (dyn->d_tag == DT_HASH) o->sysv_hash = (const uint32_t *)a;
  }
  return 1;
}

static bool defines(const object_t *o, uint32_t index, const char *name)
{
  const ElfW(Sym) *sym = &o->symtab[index];
  return sym->st_shndx != SHN_UNDEF && sym->st_value != 0 && (sym->st_info & 0xf) == STT_FUNC &&
         __builtin_strcmp(o->strtab + sym->st_name, name) == 0;
}

/* The GNU hash table: buckets of symbol chains sorted by hash, the low bit marking a chain's end. */
static void *lookup_gnu(const object_t *o, const char *name)
{
  uint32_t h = 5381;
  for (const unsigned char *c = (const unsigned char *)name; *c; c++) h = h * 33 + *c;
  const uint32_t nbuckets = o->gnu_hash[0], symoffset = o->gnu_hash[1], bloom_size = o->gnu_hash[2];
  const uint32_t *buckets = o->gnu_hash + 4 + bloom_size * (sizeof(ElfW(Addr)) / 4);
  const uint32_t *chain = buckets + nbuckets;
  uint32_t i = buckets[h % nbuckets];
  if (i < symoffset) return NULL;
  for (;; i++) {
    uint32_t ch = chain[i - symoffset];
    if ((ch | 1) == (h | 1) && defines(o, i, name)) return (void *)(o->base + o->symtab[i].st_value);
    if (ch & 1) return NULL;
  }
}

/* Without a GNU hash table: every symbol, in the order of the SysV hash table's chain array. */
static void *lookup_sysv(const object_t *o, const char *name)
{
  for (uint32_t i = 0; i < o->sysv_hash[1]; i++) {
    if (defines(o, i, name)) return (void *)(o->base + o->symtab[i].st_value);
  }
  return NULL;
}

/* libmimalloc's tables: found once and published (FOUND, release); a racing finder uses its own copy. */
enum { OBJ_NOT, OBJ_CLAIMED, OBJ_FOUND };
static object_t obj;
static int obj_state;

static const object_t *object(object_t *local)
{
  if (__atomic_load_n(&obj_state, __ATOMIC_ACQUIRE) == OBJ_FOUND) return &obj;
  *local = (object_t){.probe = (uintptr_t)mi_version};
  if (dl_iterate_phdr(find_object, local) == 0 || local->symtab == NULL || local->strtab == NULL ||
      (local->gnu_hash == NULL && local->sysv_hash == NULL))
    die("dynamic symbol table");
  int expected = OBJ_NOT;
  if (__atomic_compare_exchange_n(&obj_state, &expected, OBJ_CLAIMED, false, __ATOMIC_RELAXED,
                                  __ATOMIC_RELAXED)) {
    obj = *local;
    __atomic_store_n(&obj_state, OBJ_FOUND, __ATOMIC_RELEASE);
  }
  return local;
}

/* Looks `name` up in libmimalloc, stores it in its slot of mprof_mi and returns it. */
static void *resolve_one(void **slot, const char *name)
{
  object_t local;
  const object_t *o = object(&local);
  void *f = o->gnu_hash != NULL ? lookup_gnu(o, name) : lookup_sysv(o, name);
  if (f == NULL) die(name);
  __atomic_store_n(slot, f, __ATOMIC_RELAXED);
  return f;
}

/* Before the library's other constructors: finds the object while nothing else runs yet. */
__attribute__((constructor(101))) static void mireal_init(void)
{
  object_t local;
  (void)object(&local);
}
