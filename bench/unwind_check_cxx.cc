// unwind_check_cxx.cc - a C++ program for bench/unwind_check.sh: exceptions thrown through many frames
// (their objects allocated while libgcc's unwinder runs: samples inside it), destructors that allocate
// during unwinding, standard containers, and a signal handler that allocates, interrupting a deep
// recursion wherever it is (a second thread sends the signals; the handler allocates only while the main
// thread is in that recursion, which allocates nothing: malloc itself is not async-signal-safe).  Built
// without frame pointers.
//
// Usage: unwind_check_cxx [ROUNDS]   (default 2000)
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <pthread.h>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

std::atomic<bool> done{false};
volatile sig_atomic_t in_compute;
volatile unsigned long sink;
pthread_t main_thread;

void on_signal(int)
{
  if (!in_compute) return;
  void *p = std::malloc(100 + sink % 200);
  sink += reinterpret_cast<uintptr_t>(p) & 1;
  std::free(p);
}

// Recursion without allocation, for the handler to interrupt anywhere (prologues and epilogues too).
__attribute__((noinline)) unsigned long compute(unsigned depth, unsigned long x)
{
  if (depth == 0) {
    for (unsigned i = 0; i < 200; i++) x = x * 6364136223846793005ul + 1442695040888963407ul;
    return x;
  }
  unsigned long r = compute(depth - 1, x ^ depth) + (x >> 7);
  sink += r & 1;
  return r;
}

struct Noisy {
  std::string s;
  explicit Noisy(unsigned n) : s(n % 300 + 20, 'x') {}
  ~Noisy() { sink += std::string(s.size() + 40, 'y').size(); }   // allocates while unwinding
};

__attribute__((noinline)) unsigned thrower(unsigned depth, unsigned n)
{
  Noisy guard(n + depth);
  if (depth == 0) {
    if (n % 3 == 0) throw std::runtime_error(std::string(n % 500 + 50, 'e'));
    if (n % 3 == 1) throw std::out_of_range("range " + std::to_string(n));
    return n;
  }
  unsigned r = thrower(depth - 1, n) + 1;
  sink += r;
  return r;
}

__attribute__((noinline)) unsigned catcher(unsigned n)
{
  try {
    return thrower(n % 40, n);
  } catch (const std::out_of_range &e) {
    return static_cast<unsigned>(e.what()[0]);
  } catch (const std::exception &e) {
    try {
      throw;                       // rethrown through another frame
    } catch (const std::runtime_error &r) {
      return static_cast<unsigned>(std::string(r.what()).size());
    }
  }
}

__attribute__((noinline)) void containers(unsigned n)
{
  std::map<std::string, std::vector<int>> m;
  for (unsigned i = 0; i < 40; i++) m[std::to_string(i * n)].resize(i + n % 64);
  auto v = std::make_unique<std::vector<std::string>>();
  for (unsigned i = 0; i < 50; i++) v->push_back(std::string(i + 10, 'z'));
  sink += m.size() + v->size();
}

void *signaller(void *)
{
  while (!done.load()) {
    pthread_kill(main_thread, SIGUSR1);
    for (volatile int i = 0; i < 20000; i++) {
    }
  }
  return nullptr;
}

}  // namespace

int main(int argc, char **argv)
{
  unsigned rounds = argc > 1 ? static_cast<unsigned>(std::strtoul(argv[1], nullptr, 10)) : 2000;
  struct sigaction sa = {};
  sa.sa_handler = on_signal;
  sa.sa_flags = SA_RESTART;
  sigaction(SIGUSR1, &sa, nullptr);
  main_thread = pthread_self();
  pthread_t th;
  pthread_create(&th, nullptr, signaller, nullptr);
  unsigned long total = 0;
  for (unsigned n = 0; n < rounds; n++) {
    total += catcher(n);
    containers(n);
    in_compute = 1;
    total += compute(n % 50 + 5, n);
    in_compute = 0;
  }
  done.store(true);
  pthread_join(th, nullptr);
  std::printf("%lu\n", total + sink % 2);
  return 0;
}
