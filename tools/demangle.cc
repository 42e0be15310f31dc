// demangle.cc - C++ names for people, with libiberty's demangler (the one the C++ runtime's
// abi::__cxa_demangle is built from, with its options), through its callback form, so that the output
// is bounded while it is made.  A mangled name may stand for far more text than its own: each
// substitution can repeat all that comes before it, and 363 bytes of nested std::pair demangle into
// 310 MB in 1.9 s (1,000 bytes, libiberty's longest, would take years).  A name whose demangled form
// would pass 4 KiB + 32 bytes per byte of the mangled name (real names take 1.5 to 5) stays mangled.
#include <csetjmp>
#include <cstdlib>
#include <cstring>

#define HAVE_DECL_BASENAME 1   // libiberty.h would declare basename again, as glibc's <string.h> has
#include <libiberty/demangle.h>

extern "C" char *tool_demangle(const char *name);

namespace {

struct output {
  char        *buf;
  size_t       len, cap, max;
  std::jmp_buf stop;             // where collect goes when the output passes max, or memory runs out
};

}  // namespace

// Appends a piece of the demangled name (libiberty's callback; it allocates nothing, so leaving it with
// longjmp leaks nothing).
extern "C" {
static void collect(const char *s, size_t n, void *data)
{
  output *o = static_cast<output *>(data);
  if (n > o->max - o->len) std::longjmp(o->stop, 1);
  if (o->len + n + 1 > o->cap) {
    size_t cap = o->cap * 2 > o->len + n + 1 ? o->cap * 2 : o->len + n + 1;
    char *bigger = static_cast<char *>(std::realloc(o->buf, cap < o->max + 1 ? cap : o->max + 1));
    if (bigger == nullptr) std::longjmp(o->stop, 1);
    o->buf = bigger;
    o->cap = cap < o->max + 1 ? cap : o->max + 1;
  }
  std::memcpy(o->buf + o->len, s, n);
  o->len += n;
}
}

// The demangled form of a mangled C++ name (malloc'd, for the caller to free), or NULL when `name`
// is not one, or its demangled form would be too long.
extern "C" char *tool_demangle(const char *name)
{
  if (name == nullptr || name[0] != '_' || name[1] != 'Z') return nullptr;
  // On the heap: what collect changes is read after longjmp (a local's registers would not be).
  output *o = static_cast<output *>(std::malloc(sizeof *o));
  char *buf = o != nullptr ? static_cast<char *>(std::malloc(256)) : nullptr;
  if (buf == nullptr) {
    std::free(o);
    return nullptr;
  }
  o->buf = buf;
  o->len = 0;
  o->cap = 256;
  o->max = 4096 + 32 * std::strlen(name);
  char *out = nullptr;
  if (setjmp(o->stop) == 0 && cplus_demangle_v3_callback(name, DMGL_PARAMS | DMGL_TYPES, collect, o)) {
    o->buf[o->len] = '\0';
    out = o->buf;
  } else {
    std::free(o->buf);
  }
  std::free(o);
  return out;
}
