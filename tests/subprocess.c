/* subprocess.c - running a helper program from a test with a chosen environment and capturing its
 * stdout and stderr; the interface and the child's environment are described in subprocess.h.
 */
#define _GNU_SOURCE                     /* pipe2 */
#include "subprocess.h"

#include <check.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

const char *probe_getenv(const char *var)
{
  const char *value = getenv(var);
  ck_assert_msg(value != NULL, "%s not set (run through make check)", var);
  return value;
}

/* ---------------------------------------------------------------------------------------------------
   The child's argv and environment, built before fork: the child may only make async-signal-safe calls
   (the test process may have threads), which rules out malloc.
--------------------------------------------------------------------------------------------------- */

/* {path, args..., NULL} (caller frees the array; the strings are the caller's). */
static const char **child_argv(const char *path, const char *const *args)
{
  size_t n = 0;
  while (args != NULL && args[n] != NULL) n++;
  const char **argv = calloc(n + 2, sizeof *argv);
  ck_assert_ptr_nonnull(argv);
  argv[0] = path;
  for (size_t i = 0; i < n; i++) argv[i + 1] = args[i];
  return argv;
}

/* Whether the entry "NAME=value" of an environment is the variable `var` ("NAME=value" or "NAME") sets
 * or removes. */
static bool same_name(const char *entry, const char *var)
{
  size_t n = strcspn(var, "=");
  return strncmp(entry, var, n) == 0 && entry[n] == '=';
}

static bool changed_by(const char *entry, const char *const *vars)
{
  for (size_t i = 0; vars != NULL && vars[i] != NULL; i++)
    if (same_name(entry, vars[i])) return true;
  return false;
}

/* Ours minus MIMALLOC_* and minus every variable `vars` names, then the ones `vars` sets: never two
 * entries for one name, whose winner would depend on the libc. */
static char **child_env(const char *const *vars)
{
  size_t n = 0, extra = 0, k = 0;
  while (environ[n] != NULL) n++;
  while (vars != NULL && vars[extra] != NULL) extra++;
  char **env = calloc(n + extra + 1, sizeof *env);
  ck_assert_ptr_nonnull(env);
  for (size_t i = 0; i < n; i++)
    if (strncmp(environ[i], "MIMALLOC_", 9) != 0 && !changed_by(environ[i], vars)) env[k++] = environ[i];
  for (size_t i = 0; i < extra; i++)
    if (strchr(vars[i], '=') != NULL) env[k++] = (char *)vars[i];
  return env;
}

/* ---------------------------------------------------------------------------------------------------
   Starting and finishing
--------------------------------------------------------------------------------------------------- */

/* In the child: stdio onto the pipes (every other descriptor of ours is O_CLOEXEC), limits, exec. */
static _Noreturn void child_exec(const char **argv, char **env, const probe_opts_t *o, int in, int out, int err)
{
  int stdin_fd = in >= 0 ? in : open("/dev/null", O_RDONLY);
  if (stdin_fd < 0 || dup2(stdin_fd, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0) _exit(126);
  struct rlimit as = {o->as_limit, o->as_limit}, stack = {o->stack_limit, o->stack_limit};
  if (o->as_limit != 0 && setrlimit(RLIMIT_AS, &as) != 0) _exit(125);
  if (o->stack_limit != 0 && setrlimit(RLIMIT_STACK, &stack) != 0) _exit(125);
  /* Every signal at its default action and none blocked, whatever the test runner was started with
   * (nohup ignores SIGHUP, and ignored signals stay ignored across execve: the final-signal tests then
   * waited for their watchdog).  A test that wants a signal ignored asks the probe's shell (trap). */
  for (int sig = 1; sig < NSIG; sig++)
    if (sig != SIGKILL && sig != SIGSTOP) signal(sig, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  if (o->watchdog_s != 0) alarm(o->watchdog_s);
  execve(argv[0], (char *const *)argv, env);
  _exit(127);
}

probe_child_t probe_start(const char *path, const char *const *args, const probe_opts_t *opts)
{
  static const probe_opts_t defaults;
  const probe_opts_t *o = opts != NULL ? opts : &defaults;
  int in[2] = {-1, -1}, out[2], err[2];
  ck_assert_int_eq(pipe2(out, O_CLOEXEC), 0);   /* O_CLOEXEC: no other child inherits our ends */
  ck_assert_int_eq(pipe2(err, O_CLOEXEC), 0);
  if (o->with_stdin) ck_assert_int_eq(pipe2(in, O_CLOEXEC), 0);
  const char **argv = child_argv(path, args);
  char **env = child_env(o->env);
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) child_exec(argv, env, o, in[0], out[1], err[1]);
  free(argv);
  free(env);
  close(out[1]);
  close(err[1]);
  if (o->with_stdin) close(in[0]);
  return (probe_child_t){pid, in[1], out[0], err[0]};
}

typedef struct text_s {
  char *data;                           /* always NUL-terminated */
  size_t len, cap;
} text_t;

static void text_add(text_t *t, const char *src, size_t n)
{
  if (t->len + n + 1 > t->cap) {
    t->cap = 2 * (t->len + n + 1);
    t->data = realloc(t->data, t->cap);
    ck_assert_ptr_nonnull(t->data);
  }
  memcpy(t->data + t->len, src, n);
  t->len += n;
  t->data[t->len] = '\0';
}

/* Reads both descriptors until both reach their end (and closes them): poll, since the child may fill
 * either pipe first and block on it while we wait on the other. */
static void read_both(const int fds[2], text_t text[2])
{
  struct pollfd pf[2] = {{.fd = fds[0], .events = POLLIN}, {.fd = fds[1], .events = POLLIN}};
  char chunk[4096];
  for (int open_fds = 2; open_fds > 0;) {
    if (poll(pf, 2, -1) < 0) {
      ck_assert_int_eq(errno, EINTR);
      continue;
    }
    for (int i = 0; i < 2; i++) {
      if (pf[i].fd < 0 || pf[i].revents == 0) continue;
      ssize_t r = read(pf[i].fd, chunk, sizeof chunk);
      if (r > 0) {
        text_add(&text[i], chunk, (size_t)r);
      } else if (r == 0 || errno != EINTR) {
        close(pf[i].fd);
        pf[i].fd = -1;                  /* poll skips negative descriptors */
        open_fds--;
      }
    }
  }
}

probe_run_t probe_finish(probe_child_t *child)
{
  if (child->in >= 0) close(child->in);  /* the child may be reading stdin until its end */
  text_t text[2] = {{0}, {0}};
  text_add(&text[0], "", 0);
  text_add(&text[1], "", 0);
  read_both((const int[2]){child->out, child->err}, text);
  child->in = child->out = child->err = -1;
  probe_run_t run = {text[0].data, text[1].data, 0, child->pid, {0}};
  pid_t w;
  while ((w = wait4(child->pid, &run.status, 0, &run.usage)) < 0 && errno == EINTR) continue;
  ck_assert_int_eq(w, child->pid);
  return run;
}

probe_run_t probe_run(const char *path, const char *const *args, const probe_opts_t *opts)
{
  probe_child_t child = probe_start(path, args, opts);
  return probe_finish(&child);
}

void probe_run_free(probe_run_t *run)
{
  free(run->out);
  free(run->err);
  run->out = run->err = NULL;
}

/* ---------------------------------------------------------------------------------------------------
   Reading the results
--------------------------------------------------------------------------------------------------- */

void probe_assert_exit0(const probe_run_t *run, const char *what)
{
  bool signaled = WIFSIGNALED(run->status);
  ck_assert_msg(WIFEXITED(run->status) && WEXITSTATUS(run->status) == 0,
                "%s: %s %d; stdout:\n%s\nstderr:\n%s", what != NULL ? what : "probe",
                signaled ? "killed by signal" : "exit status",
                signaled ? WTERMSIG(run->status) : WEXITSTATUS(run->status), run->out, run->err);
}

const char *probe_text(const probe_run_t *run, const char *key, size_t *len)
{
  size_t n = strlen(key);
  for (const char *line = run->out; *line != '\0';) {
    const char *end = strchr(line, '\n');
    if (strncmp(line, key, n) == 0 && line[n] == ' ') {
      *len = end != NULL ? (size_t)(end - line) - n - 1 : strlen(line + n + 1);
      return line + n + 1;
    }
    if (end == NULL) break;
    line = end + 1;
  }
  ck_abort_msg("no \"%s\" line; stdout:\n%s\nstderr:\n%s", key, run->out, run->err);
  return NULL;
}

uint64_t probe_value(const probe_run_t *run, const char *key)
{
  size_t len;
  return strtoull(probe_text(run, key, &len), NULL, 10);
}

unsigned probe_count_lines(const char *text)
{
  unsigned n = 0;
  for (; *text != '\0'; text++) n += *text == '\n';
  return n;
}

bool probe_rlimit_as_enforced(void)
{
  unsigned long pages = 0;
  FILE *f = fopen("/proc/self/statm", "r");
  if (f == NULL) return true;
  int n = fscanf(f, "%lu", &pages);
  fclose(f);
  if (n != 1) return true;
  rlim_t limit = (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + ((rlim_t)64 << 20);
  pid_t pid = fork();
  if (pid < 0) return true;
  if (pid == 0) {
    struct rlimit rl = {limit, limit};
    if (setrlimit(RLIMIT_AS, &rl) != 0) _exit(2);
    void *p = mmap(NULL, (size_t)1 << 30, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    _exit(p == MAP_FAILED ? 0 : 1);
  }
  int status;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return true;
  }
  return !(WIFEXITED(status) && WEXITSTATUS(status) == 1);
}

/* e_ident[EI_CLASS] and e_machine (at the same offset in both classes) of an ELF file; 0 if unreadable. */
static unsigned elf_arch(const char *path)
{
  Elf32_Ehdr h;                    /* the fields read lie in the part both classes share */
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = read(fd, &h, sizeof h);
  close(fd);
  if (n != (ssize_t)sizeof h || memcmp(h.e_ident, ELFMAG, SELFMAG) != 0) return 0;
  return (unsigned)h.e_ident[EI_CLASS] << 16 | h.e_machine;
}

bool probe_same_arch(const char *path)
{
  unsigned mine = elf_arch("/proc/self/exe"), theirs = elf_arch(path);
  return mine == 0 || theirs == 0 || mine == theirs;
}

bool probe_emulated(pid_t pid)
{
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/exe", (int)pid);
  unsigned mine = elf_arch("/proc/self/exe"), theirs = elf_arch(path);
  return mine != 0 && theirs != 0 && mine != theirs;
}
