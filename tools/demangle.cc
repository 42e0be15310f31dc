// demangle.cc - C++ names for people, with the C++ runtime's demangler (abi::__cxa_demangle).
#include <cstdlib>
#include <cxxabi.h>

extern "C" char *tool_demangle(const char *name);

// The demangled form of a mangled C++ name (malloc'd, for the caller to free), or NULL when `name`
// is not one.
extern "C" char *tool_demangle(const char *name)
{
  if (name == nullptr || name[0] != '_' || name[1] != 'Z') return nullptr;
  int status = 0;
  char *out = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  if (status != 0) {
    std::free(out);
    return nullptr;
  }
  return out;
}
