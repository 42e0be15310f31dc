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
 *   exhaustfds          lowers its RLIMIT_NOFILE to 64 and opens /dev/null until open fails, so that the
 *                       library can accept no connection: "exhausted"
 *   releasefds          closes those and restores the limit: "released"
 *   impostor            puts a listening socket of its own (backlog 0) at the control socket's path,
 *                       MIMALLOC_PROF_CONTROL/PID.sock, in place of the library's: "impostor listening"
 *   answer FILE         accepts one connection there, reads its request frame and replies with a frame
 *                       whose text is FILE's bytes, as a hostile process would: "answered REQUEST"
 * and at the end of stdin frees everything and prints "allocations ok".  Failures it cannot report
 * otherwise: "control_probe: ..." on stderr and exit status 1 (stderr otherwise belongs to the library).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
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

static int spent_fds[64], n_spent = -1;              /* -1: not exhausted */
static struct rlimit nofile;

static void exhaust_fds(void)
{
  struct rlimit low;
  if (getrlimit(RLIMIT_NOFILE, &nofile) != 0) die("getrlimit");
  low = (struct rlimit){64, nofile.rlim_max};
  if (setrlimit(RLIMIT_NOFILE, &low) != 0) die("setrlimit");
  n_spent = 0;
  for (int fd; n_spent < 64 && (fd = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;)
    spent_fds[n_spent++] = fd;
  if (errno != EMFILE) die("not out of descriptors");
}

static void release_fds(void)
{
  for (int i = 0; i < n_spent; i++) close(spent_fds[i]);
  n_spent = -1;
  if (setrlimit(RLIMIT_NOFILE, &nofile) != 0) die("setrlimit");
}

static int impostor_fd = -1;

static void impostor(void)
{
  const char *dir = getenv("MIMALLOC_PROF_CONTROL");
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  if (dir == NULL || dir[0] != '/') die("impostor: MIMALLOC_PROF_CONTROL is not a directory");
  snprintf(a.sun_path, sizeof a.sun_path, "%s/%d.sock", dir, (int)getpid());
  impostor_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (impostor_fd < 0 || unlink(a.sun_path) != 0 || bind(impostor_fd, (struct sockaddr *)&a, sizeof a) != 0 ||
      listen(impostor_fd, 0) != 0)
    die("impostor socket");
}

/* Answers one connection to the impostor's socket with the bytes of file `path`; the request's text. */
static const char *answer(const char *path, char *request, size_t len)
{
  static unsigned char text[1 << 16];
  unsigned char head[4];
  FILE *f = fopen(path, "rb");
  size_t n = f != NULL ? fread(text, 1, sizeof text, f) : 0;
  if (f == NULL || ferror(f) || !feof(f)) die("answer: the reply's file");
  fclose(f);
  int c = accept4(impostor_fd, NULL, NULL, SOCK_CLOEXEC);
  if (c < 0 || recv(c, head, 4, MSG_WAITALL) != 4) die("answer: accept, the request's length");
  size_t want = (size_t)head[0] << 24 | (size_t)head[1] << 16 | (size_t)head[2] << 8 | head[3];
  if (want >= len || recv(c, request, want, MSG_WAITALL) != (ssize_t)want) die("answer: the request");
  request[want] = '\0';
  head[0] = (unsigned char)(n >> 24), head[1] = (unsigned char)(n >> 16), head[2] = (unsigned char)(n >> 8);
  head[3] = (unsigned char)n;
  if (send(c, head, 4, MSG_NOSIGNAL) != 4 || send(c, text, n, MSG_NOSIGNAL) != (ssize_t)n)
    die("answer: send");
  close(c);
  return request;
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
    } else if (strcmp(line, "exhaustfds\n") == 0) {
      exhaust_fds();
      printf("exhausted\n");
    } else if (strcmp(line, "releasefds\n") == 0) {
      release_fds();
      printf("released\n");
    } else if (strcmp(line, "impostor\n") == 0) {
      impostor();
      printf("impostor listening\n");
    } else if (strncmp(line, "answer ", 7) == 0) {
      char request[256];
      line[strcspn(line, "\n")] = '\0';
      printf("answered %s\n", answer(line + 7, request, sizeof request));
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
