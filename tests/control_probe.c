/* control_probe.c - the program the control-socket tests talk to (test_control.c, test_tool_service.c):
 * linked with the library, run with MIMALLOC_PROF_CONTROL set, and told what to allocate by lines on its
 * stdin, so that a test knows exactly which allocations come before and after each request it sends.
 * Built with -g, frame pointers, no inlining and -export-dynamic: each site is its own frame, named by
 * the library (dladdr) and by pprof.
 *
 * It prints "ready" once set up, then answers each line of stdin with one line on stdout:
 *   alloc SITE N SIZE   N blocks of SIZE bytes from site_a, site_b or site_c (SITE a, b, c), kept live;
 *                       "done SITE N"
 *   free SITE           frees that site's blocks (contents checked); "freed SITE"
 *   work N              N rounds of a fixed computation over allocated blocks: "checksum X", the same
 *                       for the same N whatever else happens to the process
 *   closefds            closes every descriptor from 3 up (as a daemon does at start-up), then opens a
 *                       pipe and a socket pair of its own on the freed numbers (kept until the end),
 *                       writes to the pipe and reads it back: "closed ok"
 *   fork                forks a child that allocates and exits through exit(3); "child STATUS"
 *   pid                 "pid PID"
 * and at the end of stdin frees everything and prints "allocations ok".  Failures it cannot report
 * otherwise: "control_probe: ..." on stderr and exit status 1 (stderr otherwise belongs to the library).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define PROBE_NAME "control_probe"
#include "probe_util.h"

#define MAX_BLOCKS 65536

typedef struct site_s {
  unsigned char *block[MAX_BLOCKS];
  size_t n, size;
} site_t;

static site_t sites[3];              /* static: the probe's bookkeeping is never sampled */

/* One allocation site per function (not inlined): every block has the same stack up to main. */
#define SITE(name, k)                                                          \
  __attribute__((noinline)) void name(size_t n, size_t size)                  \
  {                                                                            \
    site_t *s = &sites[k];                                                     \
    for (size_t i = 0; i < n && s->n < MAX_BLOCKS; i++) {                      \
      unsigned char *p = malloc(size);                                         \
      if (p == NULL) die("malloc failed");                                     \
      memset(p, (int)((s->n + k) & 0xff), size);                               \
      s->block[s->n++] = p;                                                    \
    }                                                                          \
    s->size = size;                                                            \
  }
SITE(site_a, 0)
SITE(site_b, 1)
SITE(site_c, 2)
#undef SITE

static void free_site(size_t k)
{
  site_t *s = &sites[k];
  for (size_t i = 0; i < s->n; i++) {
    if (s->block[i][0] != (unsigned char)((i + k) & 0xff) || s->block[i][s->size - 1] != (unsigned char)((i + k) & 0xff))
      die("block contents changed");
    free(s->block[i]);
  }
  s->n = 0;
}

/* A fixed computation through the allocator: its result depends on nothing but n. */
__attribute__((noinline)) static uint64_t work(size_t n)
{
  uint64_t x = 0x9e3779b97f4a7c15ull, sum = 0;
  for (size_t r = 0; r < n; r++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    size_t size = 1 + (size_t)(x % 20000);
    uint64_t *p = malloc(size * sizeof *p);
    if (p == NULL) die("malloc failed");
    for (size_t i = 0; i < size; i++) p[i] = x + i;
    p = realloc(p, (size / 2 + 1) * sizeof *p);
    if (p == NULL) die("realloc failed");
    for (size_t i = 0; i < size / 2 + 1; i++) sum += p[i] * (i + 1);
    free(p);
  }
  return sum;
}

static int own_fds[4] = {-1, -1, -1, -1};

static void close_fds(void)
{
  if (close_range(3, ~0u, 0) != 0) die("close_range");
  if (pipe(own_fds) != 0 || socketpair(AF_UNIX, SOCK_STREAM, 0, own_fds + 2) != 0) die("pipe, socketpair");
  char buf[16] = {0};
  if (write(own_fds[1], "mine", 4) != 4 || read(own_fds[0], buf, sizeof buf) != 4 || memcmp(buf, "mine", 4) != 0)
    die("the program's own pipe");
}

int main(void)
{
  char line[256];
  printf("ready\n");
  fflush(stdout);
  while (fgets(line, sizeof line, stdin) != NULL) {
    char site;
    size_t n, size;
    if (sscanf(line, "alloc %c %zu %zu", &site, &n, &size) == 3 && site >= 'a' && site <= 'c' && size > 0) {
      void (*const fn[3])(size_t, size_t) = {site_a, site_b, site_c};
      fn[site - 'a'](n, size);
      printf("done %c %zu\n", site, n);
    } else if (sscanf(line, "free %c", &site) == 1 && site >= 'a' && site <= 'c') {
      free_site((size_t)(site - 'a'));
      printf("freed %c\n", site);
    } else if (sscanf(line, "work %zu", &n) == 1) {
      printf("checksum %" PRIu64 "\n", work(n));
    } else if (strcmp(line, "closefds\n") == 0) {
      close_fds();
      printf("closed ok\n");
    } else if (strcmp(line, "fork\n") == 0) {
      fflush(stdout);
      pid_t pid = fork();
      if (pid == 0) {
        site_c(100, 64);
        exit(0);
      }
      int status = -1;
      if (pid < 0 || waitpid(pid, &status, 0) != pid) die("fork");
      printf("child %d\n", status);
    } else if (strcmp(line, "pid\n") == 0) {
      printf("pid %d\n", (int)getpid());
    } else {
      die("unknown command");
    }
    fflush(stdout);
  }
  for (size_t k = 0; k < 4; k++)
    if (own_fds[k] >= 0) close(own_fds[k]);
  for (size_t k = 0; k < 3; k++) free_site(k);
  printf("allocations ok\n");
  return 0;
}
