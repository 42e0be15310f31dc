// accuracy_cxx.cc - the C++ workload of bench/accuracy: operator new (plain, array, aligned, nothrow)
// and the matching deletes, each from its own site.  The sites are extern "C" so that dladdr gives
// their plain names.  The size counted is the size operator new is called with: sizeof the type for
// new T, the array's bytes for new char[n] (no cookie: char has no destructor).
#include <cstddef>
#include <cstdint>
#include <new>

#include "accuracy.h"

namespace {

struct Node {
  char data[200];
};

struct alignas(128) Aligned {
  char data[384];
};

}  // namespace

extern "C" {

ACC_SITE void *site_cxx_new() { return new Node; }
ACC_SITE void *site_cxx_new_array(std::size_t n) { return new char[n]; }
ACC_SITE void *site_cxx_new_aligned() { return new Aligned; }
ACC_SITE void *site_cxx_new_nothrow(std::size_t n) { return new (std::nothrow) char[n]; }

// About 32 MiB from each site; even-numbered objects kept, the others deleted at once.
void acc_w_cxx(uint64_t rate, uint64_t seed, size_t div)
{
  acc_start(rate, seed);
  acc_use(ACC_cxx_new), acc_use(ACC_cxx_new_array), acc_use(ACC_cxx_new_aligned), acc_use(ACC_cxx_new_nothrow);
  for (size_t i = 0, n = acc_scaled(160000, div, 1); i < n; i++) {
    Node *p = static_cast<Node *>(acc_check(site_cxx_new()));
    acc_alloc(ACC_cxx_new, sizeof(Node));
    if (i % 2 == 0) acc_keep(p, sizeof(Node), ACC_cxx_new);
    else delete p;
  }
  for (size_t i = 0, n = acc_scaled(10000, div, 1); i < n; i++) {
    char *p = static_cast<char *>(acc_check(site_cxx_new_array(3000)));
    acc_alloc(ACC_cxx_new_array, 3000);
    if (i % 2 == 0) acc_keep(p, 3000, ACC_cxx_new_array);
    else delete[] p;
  }
  for (size_t i = 0, n = acc_scaled(80000, div, 1); i < n; i++) {
    Aligned *p = static_cast<Aligned *>(acc_check(site_cxx_new_aligned()));
    if (reinterpret_cast<std::uintptr_t>(p) % alignof(Aligned) != 0) acc_die("misaligned object");
    acc_alloc(ACC_cxx_new_aligned, sizeof(Aligned));
    if (i % 2 == 0) acc_keep(p, sizeof(Aligned), ACC_cxx_new_aligned);
    else delete p;
  }
  for (size_t i = 0, n = acc_scaled(64000, div, 1); i < n; i++) {
    char *p = static_cast<char *>(acc_check(site_cxx_new_nothrow(500)));
    acc_alloc(ACC_cxx_new_nothrow, 500);
    if (i % 2 == 0) acc_keep(p, 500, ACC_cxx_new_nothrow);
    else delete[] p;
  }
}

}  // extern "C"
