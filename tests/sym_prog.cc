// sym_prog.cc - a C++ program for the symbolization tests (tests/test_symbolize.c): built with -g -O2 as
// a PIE, linked with a shared library of its own (sym_lib.cc), allocating through a class template
// whose allocating member is inlined, a static function inlined into its caller, and the library.
// Every block is kept until exit, so a final profile shows all of them in use.
//   sym_prog          allocate, print "ready", exit 0
//   sym_prog forever  allocate, print "ready", then wait for signals until killed
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <unistd.h>
#include <vector>

#include "sym_lib.h"

namespace shapes {

template <typename T>
struct Pool {
  std::vector<T *> kept;

  // Always inlined into fill: the profile's location has make's frame inside fill's.
  static inline __attribute__((always_inline)) T *make(std::size_t bytes)
  {
    T *p = static_cast<T *>(::operator new(bytes));
    std::memset(p, 0, bytes);
    return p;
  }

  __attribute__((noinline)) void fill(std::size_t n, std::size_t bytes)
  {
    kept.reserve(n);
    for (std::size_t i = 0; i < n; i++) kept.push_back(make(bytes));
  }
};

}  // namespace shapes

static inline __attribute__((always_inline)) char *grab(std::size_t n)
{
  char *p = static_cast<char *>(std::malloc(n));
  if (p != nullptr) std::memset(p, 1, n);
  return p;
}

static __attribute__((noinline)) char *build_buffer(std::size_t n)
{
  return grab(n);
}

int main(int argc, char **argv)
{
  static shapes::Pool<double> pool;
  static std::vector<char *> buffers;
  symlib::Store &store = *new symlib::Store;   // never destroyed: in use at exit
  pool.fill(64, 16384);                       // 1 MiB: the largest in-use stack
  for (int i = 0; i < 32; i++) buffers.push_back(build_buffer(8192));
  store.add_many(32, 4096);
  std::printf("ready %zu\n", store.size());
  std::fflush(stdout);
  if (argc > 1 && std::strcmp(argv[1], "forever") == 0) {
    for (;;) pause();
  }
  return 0;
}
