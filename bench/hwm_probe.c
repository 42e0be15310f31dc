/* hwm_probe.c - preloaded last, writes the process's peak RSS as /proc/self/status gives it (VmHWM, an
 * exact sum of the kernel's counters) at exit: "pid=N hwm_kib=N" appended to $HWM_PROBE_OUT.  Every
 * process that loads it writes a line (bench/runone.c too, which names its child's pid).  It calls nothing
 * of the library's, so what it adds (its own pages and the reads below) is the same in every
 * configuration.  bench/harness_run.py reads it for every timed run. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

__attribute__((destructor)) static void hwm_probe_report(void)
{
  const char *out = getenv("HWM_PROBE_OUT");
  if (out == NULL) return;
  char buf[4096];
  int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return;
  buf[n] = 0;
  const char *h = strstr(buf, "VmHWM:");
  if (h == NULL) return;
  char line[80];
  int len = snprintf(line, sizeof line, "pid=%ld hwm_kib=%ld\n", (long)getpid(), strtol(h + 6, NULL, 10));
  int o = open(out, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (o < 0) return;
  ssize_t w = write(o, line, (size_t)len);
  (void)w;
  close(o);
}
