/* tool_probe.c - a program for the tests of `mimalloc-prof run` (tests/test_tool_run.c).  It allocates
 * and keeps 1 MiB, prints "ready", then:
 *   tool_probe env       prints MIMALLOC_PROF_FINAL_SIGNALS's value ("(unset)") and exits 0
 *   tool_probe handler   waits for SIGTERM with a handler of its own, prints "got TERM", exits 0
 *   tool_probe forever   waits for signals until one ends it
 *   tool_probe count     counts SIGINTs (printing "int N" at each) until SIGTERM, then prints
 *                        "ints N" and exits 0
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t got_term, got_int;

static void on_term(int sig)
{
  (void)sig;
  got_term = 1;
}

static void on_int(int sig)
{
  (void)sig;
  got_int++;
}

int main(int argc, char **argv)
{
  const char *mode = argc > 1 ? argv[1] : "env";
  static char *kept[16];
  for (int i = 0; i < 16; i++) kept[i] = malloc(65536);
  if (strcmp(mode, "handler") == 0 || strcmp(mode, "count") == 0) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_term;
    sigaction(SIGTERM, &sa, NULL);
    sa.sa_handler = on_int;
    if (strcmp(mode, "count") == 0) sigaction(SIGINT, &sa, NULL);
  }
  sigset_t block, old;
  sigemptyset(&block);
  sigaddset(&block, SIGTERM);
  sigaddset(&block, SIGINT);
  sigprocmask(SIG_BLOCK, &block, &old);     /* no SIGTERM between the check and the wait */
  printf("ready\n");
  fflush(stdout);
  if (strcmp(mode, "env") == 0) {
    const char *v = getenv("MIMALLOC_PROF_FINAL_SIGNALS");
    printf("final_signals %s\n", v ? v : "(unset)");
    return 0;
  }
  int seen = 0;
  while (!got_term) {
    sigsuspend(&old);
    if (got_int != seen && !got_term) {
      seen = got_int;
      printf("int %d\n", seen);
      fflush(stdout);
    }
  }
  if (strcmp(mode, "count") == 0) {
    printf("ints %d\n", (int)got_int);
    return 0;
  }
  printf("got TERM\n");
  return kept[0] == NULL;
}
