/* runone.c - runs one command for bench/harness.py and reports its wall time, CPU time and peak RSS.
 *
 * Usage: runone RESULT_FILE PROGRAM [ARGS...]
 * Forks, execs PROGRAM with this process's environment, stdin, stdout and stderr, waits for it with
 * wait4() and writes one line to RESULT_FILE:
 *   exit=N wall_ns=N cpu_ns=N maxrss_kib=N minflt=N majflt=N pid=N
 * wall: CLOCK_MONOTONIC from just before fork() to just after wait4(); cpu: the child's user + system
 * time; maxrss: its ru_maxrss; minflt, majflt: its page faults; exit: its exit status, or 128 + the
 * signal that ended it; pid: the child's.
 *
 * Why a program of its own: a child that Python spawns directly (vfork/clone + exec) starts out in
 * Python's address space, and Linux carries that address space's RSS high-water mark over the exec into
 * the child's ru_maxrss, so every workload would report at least Python's peak RSS.  Forked from this
 * small process the floor is this process's (about a megabyte).
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long long ns(const struct timespec *t) { return (long long)t->tv_sec * 1000000000LL + t->tv_nsec; }

int main(int argc, char **argv)
{
  if (argc < 3) {
    fprintf(stderr, "usage: runone RESULT_FILE PROGRAM [ARGS...]\n");
    return 2;
  }
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  pid_t pid = fork();
  if (pid < 0) {
    perror("runone: fork");
    return 2;
  }
  if (pid == 0) {
    execv(argv[2], argv + 2);
    perror("runone: exec");
    _exit(127);
  }
  int status;
  struct rusage ru;
  if (wait4(pid, &status, 0, &ru) != pid) {
    perror("runone: wait4");
    return 2;
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  long long cpu = ((long long)ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000LL +
                  ((long long)ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000LL;
  FILE *f = fopen(argv[1], "w");
  if (f == NULL) {
    perror("runone: result file");
    return 2;
  }
  fprintf(f, "exit=%d wall_ns=%lld cpu_ns=%lld maxrss_kib=%ld minflt=%ld majflt=%ld pid=%ld\n", code,
          ns(&t1) - ns(&t0), cpu, ru.ru_maxrss, ru.ru_minflt, ru.ru_majflt, (long)pid);
  fclose(f);
  return 0;
}
