/* secure_probe.c - the program the security tests run (test_security.c): linked with the library, made
 * set-user-ID root by a test and started by an unprivileged user, or started with symbolic links planted
 * at the names its dumps could use.  It reports what it sees of itself and makes dumps on request, one
 * line of stdin at a time, so a test knows what happened before each step.
 *
 * It prints "ready" once started (the library's constructor ran: its options were read, its thread,
 * socket and handlers are in place or not), then answers each line of stdin with one line on stdout:
 *   status         "secure S enabled E threads T sigcgt HEX": getauxval(AT_SECURE), mi_prof_is_enabled(),
 *                  and the Threads and SigCgt lines of /proc/self/status (our threads, caught signals)
 *   start RATE     mi_prof_start(RATE): "start 1" or "start 0 ENAME"
 *   alloc N SIZE   N blocks of SIZE bytes, kept live: "allocated N"
 *   dump PATH      mi_prof_dump(PATH), "-" for NULL: "dump 1" or "dump 0 ENAME"
 *   raise SIG      raise(SIG) (a number): "raised SIG"
 * and at the end of stdin frees everything, prints "allocations ok" and returns from main (the exit
 * handlers run: a final profile where one is configured).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

#define PROBE_NAME "secure_probe"
#include "probe_util.h"

#define MAX_BLOCKS 65536

static unsigned char *blocks[MAX_BLOCKS];   /* static: the probe's bookkeeping is never sampled */
static size_t n_blocks;

__attribute__((noinline)) static void alloc_site(size_t n, size_t size)
{
  for (size_t i = 0; i < n && n_blocks < MAX_BLOCKS; i++) {
    unsigned char *p = malloc(size);
    if (p == NULL) die("malloc failed");
    memset(p, 0x5a, size);
    blocks[n_blocks++] = p;
  }
}

/* The value of the line "key:\tvalue" of /proc/self/status, into out. */
static void proc_status(const char *key, char *out, size_t len)
{
  char line[256];
  size_t n = strlen(key);
  FILE *f = fopen("/proc/self/status", "re");
  if (f == NULL) die("/proc/self/status");
  out[0] = '\0';
  while (fgets(line, sizeof line, f) != NULL) {
    if (strncmp(line, key, n) == 0 && line[n] == ':') {
      snprintf(out, len, "%s", line + n + 1 + strspn(line + n + 1, " \t"));
      out[strcspn(out, "\n")] = '\0';
    }
  }
  fclose(f);
  if (out[0] == '\0') die("no such line in /proc/self/status");
}

/* "WORD 1", or "WORD 0 ENAME" (errno's name). */
static void result(const char *word, bool ok)
{
  if (ok) printf("%s 1\n", word);
  else printf("%s 0 %s\n", word, strerrorname_np(errno));
}

int main(void)
{
  char line[4096 + 16], threads[32], sigcgt[32];
  printf("ready\n");
  fflush(stdout);
  while (fgets(line, sizeof line, stdin) != NULL) {
    size_t n, size;
    int sig;
    line[strcspn(line, "\n")] = '\0';
    if (strcmp(line, "status") == 0) {
      proc_status("Threads", threads, sizeof threads);
      proc_status("SigCgt", sigcgt, sizeof sigcgt);
      printf("secure %lu enabled %d threads %s sigcgt %s\n", getauxval(AT_SECURE), mi_prof_is_enabled(),
             threads, sigcgt);
    } else if (sscanf(line, "start %zu", &n) == 1) {
      result("start", mi_prof_start(n));
    } else if (sscanf(line, "alloc %zu %zu", &n, &size) == 2 && size > 0) {
      alloc_site(n, size);
      printf("allocated %zu\n", n);
    } else if (strncmp(line, "dump ", 5) == 0) {
      result("dump", mi_prof_dump(strcmp(line + 5, "-") == 0 ? NULL : line + 5));
    } else if (sscanf(line, "raise %d", &sig) == 1) {
      raise(sig);
      printf("raised %d\n", sig);
    } else {
      die("unknown command");
    }
    fflush(stdout);
  }
  for (size_t i = 0; i < n_blocks; i++) {
    if (blocks[i][0] != 0x5a) die("block contents changed");
    free(blocks[i]);
  }
  printf("allocations ok\n");
  return 0;
}
