// cxx_demo.cc - a small C++ program for the README's main job (scripts/demo.sh): an inventory of
// items in a std::map of std::vector, a template cache whose allocating member is inlined, and text
// built with std::string.  Built with -g -O2, so `mimalloc-prof run` names every frame, demangled, with
// file:line and inlined frames.
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace demo {

struct Item {
  std::string name;
  std::vector<double> history;
};

template <typename Key, typename Value>
class Cache {
public:
  // Inlined into its callers: the profile shows it inside them.
  inline Value &slot(const Key &key) { return entries_[key]; }
  std::size_t size() const { return entries_.size(); }

private:
  std::map<Key, Value> entries_;
};

__attribute__((noinline)) std::string describe(int i)
{
  std::string s = "item-";
  for (int k = 0; k < 8; k++) s += std::to_string(i * 31 + k);
  return s;
}

__attribute__((noinline)) void stock(Cache<int, Item> &cache, int n)
{
  for (int i = 0; i < n; i++) {
    Item &item = cache.slot(i);
    item.name = describe(i);
    item.history.assign(64 + i % 64, 1.0);
  }
}

}  // namespace demo

int main()
{
  auto cache = std::make_unique<demo::Cache<int, demo::Item>>();
  demo::stock(*cache, 20000);
  std::printf("%zu items\n", cache->size());
  cache.release();                            // kept: the final profile shows it in use
  return 0;
}
