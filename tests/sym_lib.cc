// sym_lib.cc - the shared library of tests/sym_prog: a class method that allocates through
// std::string and std::vector (their allocation paths are inlined into it).
#include "sym_lib.h"

namespace symlib {

void Store::add_many(std::size_t n, std::size_t each)
{
  for (std::size_t i = 0; i < n; i++) items_.emplace_back(each, static_cast<char>('a' + i % 26));
}

}  // namespace symlib
