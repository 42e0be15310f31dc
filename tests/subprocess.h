/* subprocess.h - running a helper program (a probe, or `go tool pprof`) from a test and reading what it
 * printed.  The library reads its MIMALLOC_PROF_* options once, when it loads, and LD_PRELOAD acts only
 * at start-up, so many tests can only look at a fresh process with an environment of their choosing.
 *
 * The child gets our environment without any MIMALLOC_* variable (a stray one in the caller's
 * environment would change what the child sees, or make mimalloc itself print), changed by the
 * caller's list; stdin from /dev/null (or a pipe, when asked for); stdout and stderr through pipes,
 * read with poll until both close, since the child may fill either one first.
 *
 * Every function asserts (ck_assert) on a failure of the test's own side: these run inside a Check test.
 */
#ifndef MPROF_TEST_SUBPROCESS_H
#define MPROF_TEST_SUBPROCESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>

/* How to start the child; {0} (or a NULL pointer) means: environment as described above, nothing more. */
typedef struct probe_opts_s {
  const char *const *env;   /* NULL-terminated: "NAME=value" sets NAME, a bare "NAME" removes it */
  bool with_stdin;          /* stdin is a pipe whose write end is probe_child_t.in (else /dev/null) */
  rlim_t as_limit;          /* RLIMIT_AS set in the child before exec; 0: inherited */
  rlim_t stack_limit;       /* RLIMIT_STACK likewise; it decides the kernel's memory layout at exec */
  unsigned watchdog_s;      /* alarm(2), which survives exec: a hung child dies of SIGALRM; 0: none */
} probe_opts_t;

/* A running child.  The caller may read out or write in while it runs (probe_finish reads the rest). */
typedef struct probe_child_s {
  pid_t pid;
  int in, out, err;         /* our ends of its stdin (-1 without with_stdin), stdout and stderr */
} probe_child_t;

/* A finished child.  The child's exit codes of its own: 125 setrlimit failed, 126 redirecting stdio
 * failed, 127 exec failed. */
typedef struct probe_run_s {
  char *out, *err;          /* all of stdout and stderr, NUL-terminated (free with probe_run_free) */
  int status;               /* from waitpid */
  pid_t pid;                /* its process id (names of files it wrote may contain it) */
  struct rusage usage;      /* what it used (wait4): CPU time, ru_maxrss in KiB */
} probe_run_t;

/* The value of `var`, a path that make check puts in the environment (AM_TESTS_ENVIRONMENT); fails the
 * test when it is unset, since the test is then not running under make check. */
const char *probe_getenv(const char *var);

/* Starts `path` with `args` (the arguments after the program name, NULL-terminated; NULL: none). */
probe_child_t probe_start(const char *path, const char *const *args, const probe_opts_t *opts);

/* Closes the child's stdin (if it has one), reads stdout and stderr to their end and reaps it. */
probe_run_t probe_finish(probe_child_t *child);

/* probe_start, then probe_finish. */
probe_run_t probe_run(const char *path, const char *const *args, const probe_opts_t *opts);

void probe_run_free(probe_run_t *run);

/* Asserts that the child exited with status 0; else fails with how it ended, `what` (NULL: "probe")
 * and all it printed. */
void probe_assert_exit0(const probe_run_t *run, const char *what);

/* Probes print "key value" lines on stdout.  The text after "key " on the first such line (*len: its
 * length, without the newline); fails the test when there is no such line. */
const char *probe_text(const probe_run_t *run, const char *key, size_t *len);

/* That text as a decimal number. */
uint64_t probe_value(const probe_run_t *run, const char *key);

/* The number of lines (newlines) in `text`. */
unsigned probe_count_lines(const char *text);

/* Whether this machine enforces RLIMIT_AS (ulimit -v): a child limits itself to what it uses plus 64 MiB
 * and maps 1 GiB.  qemu-user does not enforce it (it would limit the emulator, not the program). */
bool probe_rlimit_as_enforced(void);

/* Whether the program at `path` is of this test's architecture (ELF class and machine, read from its
 * header and /proc/self/exe's): false for the build machine's own programs (/usr/bin/python3, /bin/true)
 * in a cross build (scripts/cross-test.sh), into which the library built here cannot be preloaded.  A
 * file that cannot be read counts as the same (the test then says what is wrong with it). */
bool probe_same_arch(const char *path);

/* Whether the running child `pid` is run by an emulator (qemu-user through binfmt_misc, as
 * scripts/cross-test.sh arm64 does): /proc/PID/exe is then the emulator, of another architecture than
 * this test (whose own /proc/self/exe the emulator shows as the program), and /proc/PID shows the
 * emulator's threads and signal dispositions rather than the program's. */
bool probe_emulated(pid_t pid);

#endif
