// cxx_helper.cc - C++ allocations (new/delete in their plain, array, aligned, sized and nothrow forms)
// must come from mimalloc through this library's malloc/free, with C++'s failure rules intact.
#include <cstdint>
#include <cstdio>
#include <limits>
#include <new>
#include <string>
#include <vector>

#include <mimalloc.h>

#include "cxx_helper.h"
#include "from_mimalloc.h"

static int fail(char *why, unsigned long len, const char *msg)
{
  std::snprintf(why, len, "%s", msg);
  return 0;
}

extern "C" int mprof_cxx_check(char *why, unsigned long why_len)
{
  int *one = new int(7);
  int *many = new int[1000];
  if (!mprof_test_from_mimalloc(one) || !mprof_test_from_mimalloc(many))
    return fail(why, why_len, "new did not return a mimalloc block");
  delete one;
  delete[] many;

  struct alignas(256) Wide { char c[300]; };
  Wide *w = new Wide;
  if ((reinterpret_cast<std::uintptr_t>(w) & 255) != 0 || !mprof_test_from_mimalloc(w))
    return fail(why, why_len, "aligned new: misaligned or not from mimalloc");
  delete w;

  std::vector<std::string> v;
  for (int i = 0; i < 10000; i++) v.push_back(std::string(40, char('a' + i % 26)));
  if (!mprof_test_from_mimalloc(v.data())) return fail(why, why_len, "vector storage not from mimalloc");
  v.clear();
  v.shrink_to_fit();

  // Above PTRDIFF_MAX: larger than any object can be (SIZE_MAX / 2 alone fits in a 32-bit process).
  // (Read through a volatile, so the compiler does not warn about the sizes it could see.)
  static volatile std::size_t huge_size = std::numeric_limits<std::size_t>::max() / 2 + 1;
  std::size_t huge = huge_size;
  void *q = ::operator new(huge, std::nothrow);
  if (q != nullptr) return fail(why, why_len, "nothrow new of a huge size did not return nullptr");
  bool threw = false;
  try {
    void *r = ::operator new(huge);
    ::operator delete(r);
  } catch (const std::bad_alloc &) {
    threw = true;
  }
  if (!threw) return fail(why, why_len, "new of a huge size did not throw std::bad_alloc");

  // The new_handler loop: a handler that gives up (uninstalls itself) runs once, then bad_alloc.
  static int handler_calls;
  handler_calls = 0;
  std::set_new_handler([] { handler_calls++; std::set_new_handler(nullptr); });
  threw = false;
  try {
    ::operator delete(::operator new(huge, std::align_val_t(64)));
  } catch (const std::bad_alloc &) {
    threw = true;
  }
  if (!threw || handler_calls != 1) return fail(why, why_len, "aligned new: new_handler loop or bad_alloc wrong");

  // nothrow new whose handler throws: the exception is swallowed, nullptr comes back.
  std::set_new_handler([] { throw std::bad_alloc(); });
  void *n1 = ::operator new(huge, std::nothrow);
  void *n2 = ::operator new[](huge, std::align_val_t(256), std::nothrow);
  std::set_new_handler(nullptr);
  if (n1 != nullptr || n2 != nullptr) return fail(why, why_len, "nothrow new with a throwing handler");

  // Sizes within an alignment of SIZE_MAX: the C++ runtime's aligned operator, which a failure is handed
  // to, rounds the size up to the alignment, and SIZE_MAX wrapped to 0 there (a 64-byte block came back).
  for (std::size_t back = 0; back < 64; back += 63) {
    std::size_t edge = (huge_size - 1) * 2 + 1 - back;   // SIZE_MAX - back
    threw = false;
    try {
      ::operator delete(::operator new(edge, std::align_val_t(64)));
    } catch (const std::bad_alloc &) {
      threw = true;
    }
    if (!threw) return fail(why, why_len, "aligned new of a size near SIZE_MAX did not throw std::bad_alloc");
    if (::operator new[](edge, std::align_val_t(64), std::nothrow) != nullptr)
      return fail(why, why_len, "nothrow aligned new of a size near SIZE_MAX did not return nullptr");
  }

  // Explicit aligned new of tiny blocks: malloc's 8-byte class is only 8-aligned.
  for (int i = 0; i < 64; i++) {
    void *t = ::operator new(8, std::align_val_t(16));
    bool misaligned = (reinterpret_cast<std::uintptr_t>(t) & 15) != 0;
    ::operator delete(t, std::align_val_t(16));
    if (misaligned) return fail(why, why_len, "operator new(8, align_val_t(16)) misaligned");
  }
  return 1;
}
