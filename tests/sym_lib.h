/* sym_lib.h - the shared library of tests/sym_prog (symbolization tests). */
#ifndef MPROF_TEST_SYM_LIB_H
#define MPROF_TEST_SYM_LIB_H

#include <cstddef>
#include <string>
#include <vector>

namespace symlib {

class Store {
public:
  void add_many(std::size_t n, std::size_t each);   // n strings of `each` bytes, kept
  std::size_t size() const { return items_.size(); }

private:
  std::vector<std::string> items_;
};

}  // namespace symlib

#endif
