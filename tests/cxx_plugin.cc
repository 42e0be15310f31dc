// cxx_plugin.cc - a C++ library that a C program dlopens after start-up (tests/dlopen_probe.c): its
// failed operator new must still throw std::bad_alloc and run the new_handler, although libstdc++
// was not loaded when libmimalloc-prof started.
#include <cstddef>
#include <cstdint>
#include <new>

static int handler_calls;

static void give_up()
{
  handler_calls++;
  std::set_new_handler(nullptr);
}

// Returns 2 when both failures behaved: bad_alloc caught, handler called once.
extern "C" int cxx_plugin_run(void)
{
  // Above PTRDIFF_MAX: larger than any object can be, on every platform (1 << 47 is 0 on 32-bit ones).
  std::size_t huge = std::size_t(PTRDIFF_MAX) + 1;
  int ok = 0;
  try {
    char *p = new char[huge];
    delete[] p;
  } catch (const std::bad_alloc &) {
    ok++;
  }
  std::set_new_handler(give_up);
  try {
    ::operator delete(::operator new(huge));
  } catch (const std::bad_alloc &) {
    ok += handler_calls == 1;
  }
  return ok;
}
