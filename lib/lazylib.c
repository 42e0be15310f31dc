/* lazylib.c - zlib and protobuf-c, loaded when first needed (lazyload.h; the calls into them: lazylib.h).
 *
 * The library is linked to neither (nor to libm: mathfn.c): a process that links or preloads it and never
 * dumps maps neither and pays none of their start-up (their pages, which the loader's symbol lookups touch
 * while they are in the process's scope: doc/design/profiles.md has the measured cost).  They are
 * loaded by soname with dlopen(RTLD_LOCAL) and their functions looked up in those handles (never by name
 * in the process's scope, where a program's function of the same name would be found), before a dump
 * takes dump_lock (dump.c), and when the profiler thread starts (profiler.c): it never allocates, so it
 * cannot load them later.  Loading takes the loader's locks (rank -1 in internal.h), so no profiler lock
 * is held; it is never waited for: two threads that need them at once both load them (dlopen counts
 * references; their tables are the same), as a constructor that dumps while another thread loads must not
 * wait for the loader lock it holds.  What cannot be loaded stays so (one warning line): the callers fail
 * with ELIBACC.
 */
#define MPROF_LAZYLIB_IMPL
#include "lazyload.h"
#include "warn.h"

#include <dlfcn.h>
#include <errno.h>
#include <string.h>

#include "lazylib.h"

mprof_lazy_t mprof_lazy;
const char mprof_lazy_empty_string[] = "";   /* protobuf-c's default for string fields, never compared */

enum { LOAD_NOT, LOAD_DONE, LOAD_FAILED };
static int state[MPROF_LAZY_GROUPS];        /* atomic */
static int failure_said[MPROF_LAZY_GROUPS];

typedef struct symbol_s {
  const char *name;
  size_t      offset;                        /* in mprof_lazy_t */
} symbol_t;

#define SYM(field, name) {name, offsetof(mprof_lazy_t, field)}
static const symbol_t zlib_symbols[] = {
  SYM(z_deflate_init2, "deflateInit2_"), SYM(z_deflate, "deflate"), SYM(z_deflate_end, "deflateEnd"),
  {NULL, 0}};
static const symbol_t protobuf_symbols[] = {
  SYM(pb_pack_to_buffer, "protobuf_c_message_pack_to_buffer"), SYM(pb_pack, "protobuf_c_message_pack"),
  SYM(pb_packed_size, "protobuf_c_message_get_packed_size"), SYM(pb_unpack, "protobuf_c_message_unpack"),
  SYM(pb_free_unpacked, "protobuf_c_message_free_unpacked"), {NULL, 0}};
#undef SYM

/* Opens `soname` and looks up its symbols into *table; false (with the reason in *why) if any is missing. */
static bool open_symbols(const char *soname, const symbol_t *sym, mprof_lazy_t *table, const char **why)
{
  void *h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  if (h == NULL) {
    *why = dlerror();
    return false;
  }
  for (; sym->name != NULL; sym++) {
    void *f = dlsym(h, sym->name);
    if (f == NULL) {
      *why = dlerror();
      return false;
    }
    memcpy((char *)table + sym->offset, &f, sizeof f);
  }
  return true;
}

static void copy_symbols(const symbol_t *sym, const mprof_lazy_t *from)
{
  for (; sym->name != NULL; sym++) {
    void *f;
    memcpy(&f, (const char *)from + sym->offset, sizeof f);
    __atomic_store_n((void **)((char *)&mprof_lazy + sym->offset), f, __ATOMIC_RELAXED);
  }
}

bool mprof_lazy_loaded(mprof_lazy_group_t group)
{
  return __atomic_load_n(&state[group], __ATOMIC_ACQUIRE) == LOAD_DONE;
}

bool mprof_lazy_load(mprof_lazy_group_t group)
{
  int s = __atomic_load_n(&state[group], __ATOMIC_ACQUIRE);
  if (s != LOAD_NOT) {
    if (s == LOAD_DONE) return true;
    errno = ELIBACC;
    return false;
  }
  mprof_lazy_t table;
  const char *why = NULL;
  bool ok = open_symbols(MPROF_ZLIB_SONAME, zlib_symbols, &table, &why) &&
            open_symbols(MPROF_PROTOBUF_C_SONAME, protobuf_symbols, &table, &why);
  if (ok) copy_symbols(zlib_symbols, &table), copy_symbols(protobuf_symbols, &table);
  __atomic_store_n(&state[group], ok ? LOAD_DONE : LOAD_FAILED, __ATOMIC_RELEASE);
  if (ok) return true;
  if (mprof_warn_once_claim(&failure_said[group]))
    mprof_warn("cannot load " MPROF_ZLIB_SONAME " and " MPROF_PROTOBUF_C_SONAME " (heap profiles cannot be "
               "written): %s", why != NULL ? why : "dlopen failed");
  errno = ELIBACC;
  return false;
}
