/* test_security.c - no one gets in: secure mode, and the names the library and the command write to
 * (lib/options.c, lib/fsout.c, tools/outfile.c; doc/design/files-and-privileges.md).
 *
 *  - Secure mode, with a real set-user-ID root program (tests/secure_probe, copied into a directory of
 *    its own and made 04755 root) started by nobody through setpriv: every MIMALLOC_PROF_* variable that
 *    could make it write a file, make a socket or directory, catch a signal or start a thread is set, and
 *    nothing of it happens; the same program started by root (no secure mode) does all of it, so the
 *    variables were real.  The program's own calls still profile, and write exactly where it says.
 *    These need root, setpriv, a user nobody and a /tmp that is not mounted nosuid; elsewhere they skip.
 *  - Planted names: a symbolic link at every name a dump of each kind (m, f, i, u, s, p) could be given,
 *    at the old predictable temporary names, at a flood of names of the new temporary form, at the
 *    control socket's directory and path; with getrandom(3) made predictable (tests/dump_shim), at
 *    the very temporary name every attempt gets.  The link's target never changes, the links stay, and
 *    every dump either succeeds elsewhere or fails with one warning line.
 *  - mi_prof_dump(path) never follows a link at path; the command's -o never follows another user's.
 *
 * Every wait is for an event: a line from the program, a profile renamed into place (inotify), the end
 * of a process.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "control_util.h"
#include "mimalloc-prof.h"
#include "pprof_util.h"
#include "suites.h"

#if MPROF_PPROF

#define WATCHDOG_S 120
#define SECURE_LINE                                                                                \
  "mimalloc-prof: warning: secure mode (a set-user-ID, set-group-ID or capability-gaining program): " \
  "the MIMALLOC_PROF variables are ignored\n"
#define PLANTED_SEQS 16                  /* sequence numbers planted for every kind */
#define FLOOD 2000                       /* planted names of the temporary files' form */
#define KINDS "mfiusp"

static const char victim_text[] = "precious: nobody may change this\n";

/* ---------------------------------------------------------------------------------------------------
   Helpers
--------------------------------------------------------------------------------------------------- */

/* A file nobody may change: the victim every planted link points to (mode 0600). */
static void victim_make(const char *path, struct stat *st)
{
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  ck_assert_int_ge(fd, 0);
  ck_assert_int_eq(write(fd, victim_text, sizeof victim_text - 1), (ssize_t)(sizeof victim_text - 1));
  ck_assert_int_eq(close(fd), 0);
  ck_assert_int_eq(stat(path, st), 0);
}

static void victim_unchanged(const char *path, const struct stat *before)
{
  char buf[256];
  struct stat st;
  ck_assert_int_eq(lstat(path, &st), 0);
  ck_assert_msg(S_ISREG(st.st_mode) && st.st_ino == before->st_ino && st.st_mode == before->st_mode &&
                st.st_uid == before->st_uid && st.st_size == before->st_size &&
                st.st_mtim.tv_sec == before->st_mtim.tv_sec && st.st_mtim.tv_nsec == before->st_mtim.tv_nsec,
                "%s was changed (size %lld, mode %o)", path, (long long)st.st_size, (unsigned)st.st_mode);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  ck_assert_int_ge(fd, 0);
  ssize_t n = read(fd, buf, sizeof buf);
  close(fd);
  ck_assert_int_eq(n, (ssize_t)(sizeof victim_text - 1));
  ck_assert(memcmp(buf, victim_text, (size_t)n) == 0);
}

/* dir/name into buf (the test's own paths: too long fails the test) */
static const char *in_dir(char *buf, size_t len, const char *dir, const char *name)
{
  int n = snprintf(buf, len, "%s/%s", dir, name);
  ck_assert(n > 0 && (size_t)n < len);
  return buf;
}
#define IN_DIR(buf, dir, name) in_dir(buf, sizeof buf, dir, name)

/* The entries of dir other than . and .. */
static unsigned dir_entries(const char *dir)
{
  DIR *d = opendir(dir);
  ck_assert_msg(d != NULL, "%s: %s", dir, strerror(errno));
  unsigned n = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;)
    if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) n++;
  closedir(d);
  return n;
}

static void assert_empty(const char *dir)
{
  ck_assert_msg(dir_entries(dir) == 0, "something was created in %s", dir);
}

static void link_at(const char *dir, const char *name, const char *target)
{
  char path[PATH_MAX + 256];
  IN_DIR(path, dir, name);
  ck_assert_msg(symlink(target, path) == 0, "symlink %s: %s", path, strerror(errno));
}

static void assert_link(const char *path, const char *target)
{
  char buf[PATH_MAX];
  struct stat st;
  ck_assert_msg(lstat(path, &st) == 0 && S_ISLNK(st.st_mode), "the link %s is gone", path);
  ssize_t n = readlink(path, buf, sizeof buf - 1);
  ck_assert_int_gt(n, 0);
  buf[n] = '\0';
  ck_assert_str_eq(buf, target);
}

/* A program whose PID is known before it starts: /bin/sh, which execs it once it reads a line ("go"),
 * so names with the PID in them can be planted first. */
static probe_child_t start_parked(const char *program, const char *const *vars)
{
  probe_opts_t o = {.env = vars, .with_stdin = true, .watchdog_s = WATCHDOG_S};
  return probe_start("/bin/sh", (const char *const[]){"-c", "read go && exec \"$0\"", program, NULL}, &o);
}

static void unpark(const probe_child_t *c)
{
  ck_assert_int_eq(write(c->in, "go\n", 3), 3);
  ck_assert_str_eq(control_probe_say(c, NULL), "ready");
}

/* Removes from err the loader's lines about a preloaded object of another ELF class or machine: in a
 * cross build (scripts/cross-test.sh i386 or arm64) a probe is started through its libtool wrapper, a shell
 * script of the build machine, whose loader cannot preload the probe's shim and says so before it runs the
 * probe ("wrong ELF class" for i386; for arm64 the loader skips an object of another machine and finds
 * none: "cannot open shared object file"). */
static void drop_wrapper_lines(char *err)
{
  static const char noise[] = "ERROR: ld.so: object '";
  char *w = err;
  for (const char *l = err; *l != '\0';) {
    const char *nl = strchr(l, '\n');
    size_t n = nl != NULL ? (size_t)(nl - l) + 1 : strlen(l);
    bool drop = strncmp(l, noise, sizeof noise - 1) == 0 &&
                (memmem(l, n, "wrong ELF class", 15) != NULL ||
                 memmem(l, n, "cannot open shared object file", 30) != NULL);
    if (!drop) memmove(w, l, n), w += n;
    l += n;
  }
  *w = '\0';
}

/* Ends the program's stdin and reaps it: it said "allocations ok" last and exited 0. */
static probe_run_t end_probe(probe_child_t *c)
{
  probe_run_t r = probe_finish(c);
  drop_wrapper_lines(r.err);
  probe_assert_exit0(&r, "secure_probe");
  ck_assert_msg(strcmp(r.out, "allocations ok\n") == 0, "stdout after the last command:\n%s", r.out);
  return r;
}

/* Waits until profiles of every kind in `kinds` were renamed into dir (watched by `watch`) by process
 * pid, while it lives. */
static void wait_kinds(int watch, const probe_child_t *c, pid_t pid, const char *kinds)
{
  _Alignas(struct inotify_event) char buf[8192];
  char seen[8] = "";
  for (;;) {
    bool all = true;
    for (const char *k = kinds; *k != '\0'; k++) all &= strchr(seen, *k) != NULL;
    if (all) return;
    struct pollfd pf[2] = {{.fd = watch, .events = POLLIN}, {.fd = c->out, .events = POLLIN}};
    int rc = poll(pf, 2, -1);
    if (rc < 0 && errno == EINTR) continue;
    ck_assert_int_gt(rc, 0);
    ck_assert_msg(pf[1].revents == 0, "the program ended (or spoke) before kinds %s came (saw %s)", kinds,
                  seen);
    ssize_t r = read(watch, buf, sizeof buf);
    ck_assert_int_gt(r, 0);
    for (char *at = buf; at < buf + r;) {
      const struct inotify_event *ev = (const struct inotify_event *)at;
      int p, used = 0;
      unsigned seq;
      char kind;
      if (ev->len > 0 && sscanf(ev->name, "prof.%d.%u.%c.pb.gz%n", &p, &seq, &kind, &used) == 3 && used > 0 &&
          ev->name[used] == '\0' && p == (int)pid && strchr(seen, kind) == NULL && strlen(seen) < 7) {
        size_t n = strlen(seen);
        seen[n] = kind;
        seen[n + 1] = '\0';
      }
      at += sizeof *ev + ev->len;
    }
  }
}

/* ---------------------------------------------------------------------------------------------------
   Secure mode: a set-user-ID root program started by nobody
--------------------------------------------------------------------------------------------------- */

typedef struct status_s {
  unsigned secure, enabled, threads;
  unsigned long long sigcgt;
} status_t;

typedef struct setuid_env_s {
  char base[PATH_MAX];               /* /tmp/mprof-secure-XXXXXX, 0711 */
  char bin[PATH_MAX];                /* the copies: the probe (04755 root), the command, the library */
  char probe[PATH_MAX + 64], tool[PATH_MAX + 64], lib[PATH_MAX + 64];
  char private_dir[PATH_MAX];        /* root's, 0700: MIMALLOC_PROF_PREFIX goes here */
  char ctl[PATH_MAX];                /* root's, 0755: MIMALLOC_PROF_CONTROL=DIR */
  char xdg[PATH_MAX];                /* root's, 0700: XDG_RUNTIME_DIR */
  char cwd[PATH_MAX];                /* root's, 0711: the program's working directory */
  char out[PATH_MAX];                /* nobody's, 0755: where the command run as nobody may write */
  char reuid[32], regid[32];
  uid_t nobody;
  status_t plain;                    /* the probe started by root without variables */
} setuid_env_t;

static void mkdir_mode(char *buf, size_t len, const char *base, const char *name, mode_t mode)
{
  in_dir(buf, len, base, name);
  ck_assert_int_eq(mkdir(buf, mode), 0);
  ck_assert_int_eq(chmod(buf, mode), 0);
}

/* The probe started in e->cwd, by nobody (through setpriv: the kernel then runs it set-user-ID root, in
 * secure mode) or by root (no change of user: not secure). */
static probe_child_t start_setuid(const setuid_env_t *e, bool as_nobody, const char *const *vars)
{
  probe_opts_t o = {.env = vars, .with_stdin = true, .watchdog_s = WATCHDOG_S};
  const char *const nobody[] = {e->reuid, e->regid, "--clear-groups", "/usr/bin/env", "-C", e->cwd, e->probe,
                                NULL};
  probe_child_t c = as_nobody ? probe_start("/usr/bin/setpriv", nobody, &o)
                              : probe_start("/usr/bin/env", nobody + 4, &o);
  ck_assert_str_eq(control_probe_say(&c, NULL), "ready");
  return c;
}

static status_t status_of(const probe_child_t *c)
{
  status_t s;
  const char *line = control_probe_say(c, "status");
  ck_assert_msg(sscanf(line, "secure %u enabled %u threads %u sigcgt %llx", &s.secure, &s.enabled, &s.threads,
                       &s.sigcgt) == 4, "status: %s", line);
  return s;
}

static void remove_tree(const char *dir)
{
  char cmd[PATH_MAX + 16];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  ck_assert_int_eq(system(cmd), 0);
}

/* Sets it all up; false (the test skipped, saying why) where a set-user-ID program cannot be run. */
static bool setuid_setup(setuid_env_t *e, const char *fn)
{
  struct passwd *pw = getpwnam("nobody");
  struct statvfs vfs;
  if (geteuid() != 0) {
    mprof_test_skip(fn, "not root: cannot make a set-user-ID root program");
    return false;
  }
  if (access("/usr/bin/setpriv", X_OK) != 0) {
    mprof_test_skip(fn, "no /usr/bin/setpriv (util-linux) to start it as another user");
    return false;
  }
  if (pw == NULL || pw->pw_uid == 0) {
    mprof_test_skip(fn, "no user nobody");
    return false;
  }
  ck_assert_int_eq(statvfs("/tmp", &vfs), 0);
  if (vfs.f_flag & ST_NOSUID) {
    mprof_test_skip(fn, "/tmp is mounted nosuid: a set-user-ID program would run as its caller");
    return false;
  }
  e->nobody = pw->pw_uid;
  snprintf(e->reuid, sizeof e->reuid, "--reuid=%u", (unsigned)pw->pw_uid);
  snprintf(e->regid, sizeof e->regid, "--regid=%u", (unsigned)pw->pw_gid);
  char tag[32];
  snprintf(tag, sizeof tag, "secure-%d", (int)getppid());   /* Check's runner: the teardown's process */
  passable_dir(e->base, sizeof e->base, tag);
  mkdir_mode(e->bin, sizeof e->bin, e->base, "bin", 0755);
  mkdir_mode(e->private_dir, sizeof e->private_dir, e->base, "private", 0700);
  mkdir_mode(e->ctl, sizeof e->ctl, e->base, "ctl", 0755);
  mkdir_mode(e->xdg, sizeof e->xdg, e->base, "xdg", 0700);
  mkdir_mode(e->cwd, sizeof e->cwd, e->base, "cwd", 0711);
  mkdir_mode(e->out, sizeof e->out, e->base, "out", 0755);
  ck_assert_int_eq(chown(e->out, pw->pw_uid, pw->pw_gid), 0);
  control_copy_into(probe_getenv("MPROF_TEST_SECURE_PROBE"), e->bin, e->probe, sizeof e->probe);
  ck_assert_int_eq(chmod(e->probe, 04755), 0);
  control_copy_into(probe_getenv("MPROF_TEST_TOOL"), e->bin, e->tool, sizeof e->tool);
  control_copy_into(probe_getenv("MPROF_TEST_LIB"), e->bin, e->lib, sizeof e->lib);
  probe_child_t c = start_setuid(e, false, NULL);   /* by root, no variables: what a plain run shows */
  bool emulated = probe_emulated(c.pid);
  e->plain = status_of(&c);
  probe_run_t r = end_probe(&c);
  ck_assert_str_eq(r.err, "");
  probe_run_free(&r);
  if (emulated) {
    remove_tree(e->base);
    mprof_test_skip(fn, "the probe runs under an emulator (qemu-user): whether it runs set-user-ID is "
                        "binfmt_misc's choice, and its /proc/self/status is the emulator's");
    return false;
  }
  ck_assert_uint_eq(e->plain.secure, 0);
  return true;
}

#define SIGBIT(sig) (1ull << ((sig) - 1))

/* Every variable that could make the library create something, catch a signal or start a thread; the
 * control socket in a named directory (control 0) or in $XDG_RUNTIME_DIR (control 1). */
static void hostile_vars(const setuid_env_t *e, int control, char bufs[3][PATH_MAX + 64], const char **vars)
{
  set_var(bufs[0], PATH_MAX + 64, "MIMALLOC_PROF_PREFIX", e->private_dir);
  strcat(bufs[0], "/x");
  set_var(bufs[1], PATH_MAX + 64, "MIMALLOC_PROF_CONTROL", control == 0 ? e->ctl : "1");
  set_var(bufs[2], PATH_MAX + 64, "XDG_RUNTIME_DIR", e->xdg);
  const char *list[] = {"MIMALLOC_PROF=1", "MIMALLOC_PROF_FINAL=1", bufs[0], bufs[1], bufs[2],
                        "MIMALLOC_PROF_FINAL_SIGNALS=TERM", "MIMALLOC_PROF_SIGNAL=USR1",
                        "MIMALLOC_PROF_INTERVAL=64k", "MIMALLOC_PROF_GDUMP=1", "MIMALLOC_PROF_PERIOD=1",
                        "MIMALLOC_PROF_LEAK=1", "MIMALLOC_PROF_SAMPLE_RATE=4096", NULL};
  memcpy(vars, list, sizeof list);
}

/* The default socket directories of root and nobody have no socket of this process. */
static void assert_no_default_socket(const setuid_env_t *e, pid_t pid)
{
  char path[PATH_MAX];
  snprintf(path, sizeof path, "/tmp/mimalloc-prof-0/%d.sock", (int)pid);
  ck_assert_int_eq(access(path, F_OK), -1);
  snprintf(path, sizeof path, "/tmp/mimalloc-prof-%u/%d.sock", (unsigned)e->nobody, (int)pid);
  ck_assert_int_eq(access(path, F_OK), -1);
}

/* Started by nobody with every such variable (the control socket once in a named directory, once in
 * $XDG_RUNTIME_DIR), the set-user-ID program runs in secure mode: sampling off, one thread, the signal
 * dispositions of a run without any variable, mi_prof_dump(NULL) refused (EPERM: it would write in the
 * caller's working directory), and afterwards nothing in the profile prefix's directory, the socket
 * directories, the working directory or the default socket directories; stderr holds the one secure-mode
 * line.  Started by root with the same variables (not secure), it samples, runs the profiler thread,
 * catches TERM and USR1, makes its socket and writes its final profile and leak report: so the same
 * variables were real. */
START_TEST(security_setuid_ignores_environment)
{
  setuid_env_t e;
  if (!setuid_setup(&e, __func__)) return;
  probe_child_t c;
  probe_run_t r;
  const status_t plain = e.plain;

  for (int control = 0; control < 2; control++) {
    char bufs[3][PATH_MAX + 64], sock[PATH_MAX + 64];
    const char *vars[16];
    hostile_vars(&e, control, bufs, vars);
    c = start_setuid(&e, true, vars);
    status_t s = status_of(&c);
    ck_assert_uint_eq(s.secure, 1);
    ck_assert_uint_eq(s.enabled, 0);
    ck_assert_uint_eq(s.threads, 1);
    ck_assert_msg(s.sigcgt == plain.sigcgt, "caught signals %llx, without the library's options %llx",
                  s.sigcgt, plain.sigcgt);
    ck_assert_str_eq(control_probe_say(&c, "alloc 1000 1024"), "allocated 1000");
    ck_assert_str_eq(control_probe_say(&c, "dump -"), "dump 0 EPERM");
    pid_t pid = c.pid;
    r = end_probe(&c);
    ck_assert_str_eq(r.err, SECURE_LINE);
    probe_run_free(&r);
    assert_empty(e.private_dir);
    assert_empty(e.ctl);
    assert_empty(e.xdg);
    assert_empty(e.cwd);
    assert_no_default_socket(&e, pid);

    c = start_setuid(&e, false, vars);
    s = status_of(&c);
    ck_assert_uint_eq(s.secure, 0);
    ck_assert_uint_eq(s.enabled, 1);
    ck_assert_uint_eq(s.threads, 2);
    ck_assert_uint_eq(s.sigcgt & (SIGBIT(SIGTERM) | SIGBIT(SIGUSR1)), SIGBIT(SIGTERM) | SIGBIT(SIGUSR1));
    if (control == 0) snprintf(sock, sizeof sock, "%s/%d.sock", e.ctl, (int)c.pid);
    else snprintf(sock, sizeof sock, "%s/mimalloc-prof/%d.sock", e.xdg, (int)c.pid);
    struct stat st;
    ck_assert_msg(lstat(sock, &st) == 0 && S_ISSOCK(st.st_mode), "no socket %s", sock);
    ck_assert_str_eq(control_probe_say(&c, "alloc 1000 1024"), "allocated 1000");
    pid = c.pid;
    r = end_probe(&c);
    ck_assert_msg(strstr(r.err, "leak report") != NULL, "stderr:\n%s", r.err);
    probe_run_free(&r);
    char final[PATH_MAX + 64];
    snprintf(final, sizeof final, "%s/x.%d.", e.private_dir, (int)pid);
    DIR *d = opendir(e.private_dir);
    bool found = false;
    for (struct dirent *de; d != NULL && (de = readdir(d)) != NULL;) {
      char path[2 * PATH_MAX];
      IN_DIR(path, e.private_dir, de->d_name);
      found |= strncmp(path, final, strlen(final)) == 0 && ends_with(path, ".f.pb.gz");
    }
    closedir(d);
    ck_assert_msg(found, "no final profile %s*.f.pb.gz from the run as root", final);
    remove_tree(e.private_dir);
    ck_assert_int_eq(mkdir(e.private_dir, 0700), 0);
  }
  remove_tree(e.base);
}
END_TEST

/* In secure mode the program's own calls still profile: mi_prof_start works and mi_prof_dump(path)
 * writes exactly path, root's, mode 0600 (a profile holds the process's memory layout), and nothing else
 * anywhere.  The unwinder's variables are ignored too: MIMALLOC_PROF_UNWIND_CHECK=1 read would add the
 * check's report at exit to stderr (and MIMALLOC_PROF_UNWIND=table a warning where there is no table
 * unwinder).  `mimalloc-prof run` of it (as nobody) says why no profile came. */
START_TEST(security_setuid_api_writes_where_asked)
{
  setuid_env_t e;
  if (!setuid_setup(&e, __func__)) return;
  char path[PATH_MAX + 32], cmd[PATH_MAX + 64];
  IN_DIR(path, e.private_dir, "asked.pb.gz");
  snprintf(cmd, sizeof cmd, "dump %s", path);
  probe_child_t c = start_setuid(&e, true, (const char *const[]){"MIMALLOC_PROF_FINAL=1",
                                  "MIMALLOC_PROF_UNWIND=table", "MIMALLOC_PROF_UNWIND_CHECK=1", NULL});
  ck_assert_uint_eq(status_of(&c).secure, 1);
  ck_assert_str_eq(control_probe_say(&c, "start 4096"), "start 1");
  ck_assert_str_eq(control_probe_say(&c, "alloc 1000 1024"), "allocated 1000");
  ck_assert_str_eq(control_probe_say(&c, cmd), "dump 1");
  ck_assert_str_eq(control_probe_say(&c, "dump -"), "dump 0 EPERM");
  probe_run_t r = end_probe(&c);
  ck_assert_str_eq(r.err, SECURE_LINE);
  probe_run_free(&r);
  struct stat st;
  ck_assert_int_eq(lstat(path, &st), 0);
  ck_assert(S_ISREG(st.st_mode));
  ck_assert_uint_eq(st.st_uid, 0);
  ck_assert_uint_eq(st.st_mode & 07777, 0600);
  ck_assert_uint_eq(dir_entries(e.private_dir), 1);
  assert_empty(e.cwd);
  profile_t *p = profile_load(path);
  int64_t sums[N_VALUES];
  profile_sums(p, sums);
  ck_assert_int_gt(sums[V_INUSE_SPACE], 0);
  test_profile_free(p);

  char lib_var[PATH_MAX + 64], out[PATH_MAX + 16];
  set_var(lib_var, sizeof lib_var, "MIMALLOC_PROF_LIB", e.lib);
  IN_DIR(out, e.out, "run.pb.gz");
  probe_opts_t o = {.env = (const char *const[]){lib_var, NULL}, .watchdog_s = WATCHDOG_S};
  const char *const run[] = {e.reuid, e.regid, "--clear-groups", "/usr/bin/env", "-C", e.cwd, e.tool, "run",
                             "--no-symbolize", "-o", out, e.probe, NULL};
  r = probe_run("/usr/bin/setpriv", run, &o);
  probe_assert_exit0(&r, "mimalloc-prof run of a set-user-ID program");
  ck_assert_msg(strstr(r.err, "or has capabilities, and runs in secure mode") != NULL, "stderr:\n%s", r.err);
  probe_run_free(&r);
  assert_empty(e.out);
  remove_tree(e.base);
}
END_TEST

/* ---------------------------------------------------------------------------------------------------
   Links planted at every name
--------------------------------------------------------------------------------------------------- */

/* Links to victim at every name prof.PID.SEQ.KIND.pb.gz for SEQ below PLANTED_SEQS, at the same names
 * plus ".tmp" (where temporary files once were), and at FLOOD names of the temporary files' form
 * prof.PID.KIND.<16 hex digits>.tmp.  Returns how many. */
static unsigned plant_all(const char *dir, pid_t pid, const char *victim)
{
  char name[256];
  unsigned n = 0;
  for (const char *k = KINDS; *k != '\0'; k++) {
    for (unsigned seq = 0; seq < PLANTED_SEQS; seq++) {
      snprintf(name, sizeof name, "prof.%d.%06u.%c.pb.gz", (int)pid, seq, *k);
      link_at(dir, name, victim);
      strcat(name, ".tmp");
      link_at(dir, name, victim);
      n += 2;
    }
  }
  uint64_t x = (uint64_t)time(NULL) * 0x9e3779b97f4a7c15ull ^ (uint64_t)pid;
  for (unsigned i = 0; i < FLOOD; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    snprintf(name, sizeof name, "prof.%d.%c.%016llx.tmp", (int)pid, KINDS[i % 6], (unsigned long long)x);
    link_at(dir, name, victim);
    n++;
  }
  return n;
}

/* Every entry of dir: the links must be the planted ones (count and target), the rest regular profiles
 * of process pid, with sequence numbers past the planted ones, of every kind in `kinds`; `foreign` (or
 * NULL) is one more file, left as it was.  No temporary file is left. */
static void assert_out_dir(const char *dir, pid_t pid, unsigned links, const char *victim, const char *kinds,
                           const char *foreign)
{
  DIR *d = opendir(dir);
  ck_assert_ptr_nonnull(d);
  unsigned seen_links = 0;
  char seen[8] = "";
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    char path[PATH_MAX + 256];
    struct stat st;
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    IN_DIR(path, dir, e->d_name);
    ck_assert_int_eq(lstat(path, &st), 0);
    if (S_ISLNK(st.st_mode)) {
      assert_link(path, victim);
      seen_links++;
      continue;
    }
    if (foreign != NULL && strcmp(path, foreign) == 0) continue;
    int p, used = 0;
    unsigned seq;
    char kind;
    ck_assert_msg(sscanf(e->d_name, "prof.%d.%u.%c.pb.gz%n", &p, &seq, &kind, &used) == 3 && used > 0 &&
                  e->d_name[used] == '\0' && p == (int)pid && S_ISREG(st.st_mode),
                  "unexpected file %s", path);
    ck_assert_msg(seq >= PLANTED_SEQS, "%s took a planted name", path);
    test_profile_free(profile_load(path));
    if (strchr(seen, kind) == NULL && strlen(seen) < 7) seen[strlen(seen)] = kind;
  }
  closedir(d);
  ck_assert_uint_eq(seen_links, links);
  for (const char *k = kinds; *k != '\0'; k++)
    ck_assert_msg(strchr(seen, *k) != NULL, "no profile of kind %c", *k);
}

/* The program writes every kind of automatic profile (m by mi_prof_dump(NULL), f at exit, i, u, s, and p
 * kept to the newest one by MIMALLOC_PROF_KEEP=1) into a directory where links to a file it may not
 * change sit at every name it could use, its control socket directory is a link to another directory,
 * and (as root) another user's regular file sits at a name retention looks at: every profile lands at a
 * name past the planted ones, the victim file and the other directory are unchanged, every link and the
 * other user's file are still there, no temporary file is left, and the one warning is the socket's. */
START_TEST(security_links_at_every_name)
{
  const char *tmp = tmp_dir_make();
  char dir[PATH_MAX], out[PATH_MAX + 8], victim[PATH_MAX + 16], elsewhere[PATH_MAX + 16], ctl[PATH_MAX + 8],
       prefix[PATH_MAX + 32], control[PATH_MAX + 32], foreign[PATH_MAX + 64], want[2 * PATH_MAX];
  snprintf(dir, sizeof dir, "%s", tmp);
  IN_DIR(out, dir, "out");
  IN_DIR(victim, dir, "victim");
  IN_DIR(elsewhere, dir, "elsewhere");
  IN_DIR(ctl, dir, "ctl");
  ck_assert_int_eq(mkdir(out, 0755), 0);
  ck_assert_int_eq(mkdir(elsewhere, 0700), 0);
  ck_assert_int_eq(symlink(elsewhere, ctl), 0);
  struct stat vst;
  victim_make(victim, &vst);
  prefix_var(prefix, sizeof prefix, out);
  set_var(control, sizeof control, "MIMALLOC_PROF_CONTROL", ctl);
  const char *vars[] = {"MIMALLOC_PROF=1", "MIMALLOC_PROF_SAMPLE_RATE=4096", "MIMALLOC_PROF_SEED=7", prefix,
                        "MIMALLOC_PROF_FINAL=1", "MIMALLOC_PROF_INTERVAL=1m", "MIMALLOC_PROF_GDUMP=1",
                        "MIMALLOC_PROF_SIGNAL=USR1", "MIMALLOC_PROF_PERIOD=1", "MIMALLOC_PROF_KEEP=1",
                        control, NULL};
  probe_child_t c = start_parked(probe_getenv("MPROF_TEST_SECURE_PROBE"), vars);
  unsigned links = plant_all(out, c.pid, victim);
  foreign[0] = '\0';
  if (geteuid() == 0) {                   /* another user's file where retention of kind i looks first */
    char name[64];
    snprintf(name, sizeof name, "prof.%d.%06u.i.pb.gz", (int)c.pid, PLANTED_SEQS);
    IN_DIR(foreign, out, name);
    int fd = open(foreign, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(fchown(fd, 65534, 65534), 0);
    close(fd);
  }
  int watch = inotify_init1(IN_CLOEXEC);
  ck_assert_int_ge(inotify_add_watch(watch, out, IN_MOVED_TO), 0);
  unpark(&c);
  ck_assert_str_eq(control_probe_say(&c, "alloc 4000 1024"), "allocated 4000");
  ck_assert_str_eq(control_probe_say(&c, "dump -"), "dump 1");
  ck_assert_str_eq(control_probe_say(&c, "raise 10"), "raised 10");
  wait_kinds(watch, &c, c.pid, "iusp");
  close(watch);
  pid_t pid = c.pid;
  probe_run_t r = end_probe(&c);
  snprintf(want, sizeof want, "mimalloc-prof: warning: MIMALLOC_PROF_CONTROL: %s %s\n", ctl,
           "is not a directory; no control socket");
  ck_assert_str_eq(r.err, want);
  probe_run_free(&r);
  victim_unchanged(victim, &vst);
  assert_empty(elsewhere);
  assert_link(ctl, elsewhere);
  assert_out_dir(out, pid, links, victim, KINDS, foreign[0] != '\0' ? foreign : NULL);
  if (foreign[0] != '\0') {
    struct stat st;
    ck_assert_int_eq(lstat(foreign, &st), 0);
    ck_assert_uint_eq(st.st_uid, 65534);
  }
}
END_TEST

/* With getrandom(3) giving zeros (tests/dump_shim), every temporary name is the same known one:
 * with a link planted there for every kind and for mi_prof_dump(path), every attempt collides; the
 * dumps fail (mi_prof_dump with EEXIST, the final profile with one warning line) and nothing is written
 * or followed.  With getrandom(3) failing (ENOSYS) the library mixes its own names: the same plantings
 * do not stop it. */
START_TEST(security_temporary_names_collide)
{
  for (int mode = 0; mode < 2; mode++) {
    const char *dir = tmp_dir_make();
    char out[PATH_MAX + 8], victim[PATH_MAX + 16], prefix[PATH_MAX + 32], preload[PATH_MAX + 32], name[256],
         exact[PATH_MAX + 32], cmd[PATH_MAX + 48], want[2 * PATH_MAX];
    IN_DIR(out, dir, "out");
    IN_DIR(victim, dir, "victim");
    IN_DIR(exact, out, "exact.pb.gz");
    snprintf(cmd, sizeof cmd, "dump %s", exact);
    ck_assert_int_eq(mkdir(out, 0755), 0);
    struct stat vst;
    victim_make(victim, &vst);
    prefix_var(prefix, sizeof prefix, out);
    set_var(preload, sizeof preload, "LD_PRELOAD", probe_getenv("MPROF_TEST_DUMP_SHIM"));
    const char *shim = mode == 0 ? "MPROF_TEST_GETRANDOM=zero" : "MPROF_TEST_GETRANDOM=fail";
    const char *vars[] = {prefix, preload, shim, "MIMALLOC_PROF=1", "MIMALLOC_PROF_SEED=7",
                          "MIMALLOC_PROF_FINAL=1", NULL};
    probe_child_t c = start_parked(probe_getenv("MPROF_TEST_SECURE_PROBE"), vars);
    unsigned links = 0;
    for (const char *k = KINDS; *k != '\0'; k++, links++) {
      snprintf(name, sizeof name, "prof.%d.%c.0000000000000000.tmp", (int)c.pid, *k);
      link_at(out, name, victim);
    }
    link_at(out, ".exact.pb.gz.0000000000000000.tmp", victim);
    links++;
    unpark(&c);
    ck_assert_str_eq(control_probe_say(&c, "alloc 1000 1024"), "allocated 1000");
    ck_assert_str_eq(control_probe_say(&c, "dump -"), mode == 0 ? "dump 0 EEXIST" : "dump 1");
    ck_assert_str_eq(control_probe_say(&c, cmd), mode == 0 ? "dump 0 EEXIST" : "dump 1");
    pid_t pid = c.pid;
    probe_run_t r = end_probe(&c);
    if (mode == 0) {
      snprintf(want, sizeof want, "mimalloc-prof: warning: cannot write heap profile %s/prof.%d.", out,
               (int)pid);
      ck_assert_msg(probe_count_lines(r.err) == 1 && strncmp(r.err, want, strlen(want)) == 0 &&
                    strstr(r.err, ".f.pb.gz: EEXIST (MIMALLOC_PROF_PREFIX)") != NULL, "stderr:\n%s", r.err);
      ck_assert_uint_eq(dir_entries(out), links);
    } else {
      ck_assert_str_eq(r.err, "");
      ck_assert_uint_eq(dir_entries(out), links + 3);     /* m, f and exact.pb.gz */
      test_profile_free(profile_load(exact));
    }
    probe_run_free(&r);
    victim_unchanged(victim, &vst);
    for (const char *k = KINDS; *k != '\0'; k++) {
      char path[PATH_MAX + 300];
      snprintf(path, sizeof path, "%s/prof.%d.%c.0000000000000000.tmp", out, (int)pid, *k);
      assert_link(path, victim);
    }
  }
}
END_TEST

/* The control socket's names: a link at DIR/PID.sock (to a file it may not change) is neither followed
 * nor removed, and there is no socket (EADDRINUSE); a link at $XDG_RUNTIME_DIR/mimalloc-prof (to a
 * directory of ours, 0700) is not taken for the socket directory; a socket of ours left at DIR/PID.sock
 * (an earlier program of this PID) is replaced, and the new one answers. */
START_TEST(security_socket_names)
{
  const char *tmp = tmp_dir_make();
  char dir[PATH_MAX], sockdir[PATH_MAX + 8], xdg[PATH_MAX + 8], victim[PATH_MAX + 16],
       elsewhere[PATH_MAX + 16], control[PATH_MAX + 32], xdg_var[PATH_MAX + 32], sock[PATH_MAX + 32],
       link_dir[PATH_MAX + 32], want[2 * PATH_MAX + 128];
  snprintf(dir, sizeof dir, "%s", tmp);
  IN_DIR(sockdir, dir, "sock");
  IN_DIR(xdg, dir, "xdg");
  IN_DIR(victim, dir, "victim");
  IN_DIR(elsewhere, dir, "elsewhere");
  IN_DIR(link_dir, xdg, "mimalloc-prof");
  ck_assert_int_eq(mkdir(sockdir, 0700), 0);
  ck_assert_int_eq(mkdir(xdg, 0700), 0);
  ck_assert_int_eq(mkdir(elsewhere, 0700), 0);
  ck_assert_int_eq(symlink(elsewhere, link_dir), 0);
  struct stat vst;
  victim_make(victim, &vst);
  set_var(control, sizeof control, "MIMALLOC_PROF_CONTROL", sockdir);
  set_var(xdg_var, sizeof xdg_var, "XDG_RUNTIME_DIR", xdg);
  const char *probe = probe_getenv("MPROF_TEST_SECURE_PROBE");

  probe_child_t c = start_parked(probe, (const char *const[]){control, NULL});
  snprintf(sock, sizeof sock, "%s/%d.sock", sockdir, (int)c.pid);
  ck_assert_int_eq(symlink(victim, sock), 0);
  unpark(&c);
  probe_run_t r = end_probe(&c);
  snprintf(want, sizeof want, "mimalloc-prof: warning: cannot create the control socket %s: EADDRINUSE\n",
           sock);
  ck_assert_str_eq(r.err, want);
  probe_run_free(&r);
  assert_link(sock, victim);
  victim_unchanged(victim, &vst);
  ck_assert_int_eq(unlink(sock), 0);

  c = start_parked(probe, (const char *const[]){"MIMALLOC_PROF_CONTROL=1", xdg_var, NULL});
  unpark(&c);
  r = end_probe(&c);
  snprintf(want, sizeof want, "mimalloc-prof: warning: MIMALLOC_PROF_CONTROL: %s %s\n", link_dir,
           "is not a directory; no control socket");
  ck_assert_str_eq(r.err, want);
  probe_run_free(&r);
  assert_link(link_dir, elsewhere);
  assert_empty(elsewhere);

  c = start_parked(probe, (const char *const[]){control, NULL});
  snprintf(sock, sizeof sock, "%s/%d.sock", sockdir, (int)c.pid);
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  snprintf(a.sun_path, sizeof a.sun_path, "%s", sock);
  int stale = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ck_assert_int_eq(bind(stale, (struct sockaddr *)&a, sizeof a), 0);
  close(stale);
  unpark(&c);
  control_reply_t reply = control_ask(sock, "stats");
  ck_assert_msg(reply.ok, "%s", reply.frame);
  ck_assert_uint_eq(control_stat(&reply, "pid"), (uint64_t)c.pid);
  control_reply_free(&reply);
  r = end_probe(&c);
  ck_assert_str_eq(r.err, "");
  probe_run_free(&r);
  ck_assert_int_eq(access(sock, F_OK), -1);           /* removed at exit */
}
END_TEST

/* ---------------------------------------------------------------------------------------------------
   Paths the program names; the command's -o
--------------------------------------------------------------------------------------------------- */

/* mi_prof_dump(path): a link at path, to a file or to nothing, is not followed (ELOOP) and stays, and
 * nothing is created where it points; an existing regular file is written in place (the same inode,
 * its mode and its other hard link keep the profile); a new file appears whole, with no temporary file
 * left beside it; a path that names a directory by its form fails with EISDIR, an empty one with
 * ENOENT. */
START_TEST(security_dump_path_not_followed)
{
  const char *tmp = tmp_dir_make();
  char dir[PATH_MAX], victim[PATH_MAX + 16], lnk[PATH_MAX + 16], dangling[PATH_MAX + 16],
       nothing[PATH_MAX + 16], existing[PATH_MAX + 16], other[PATH_MAX + 16], fresh[PATH_MAX + 16],
       slash[PATH_MAX + 16];
  snprintf(dir, sizeof dir, "%s", tmp);
  IN_DIR(victim, dir, "victim");
  IN_DIR(lnk, dir, "link");
  IN_DIR(dangling, dir, "dangling");
  IN_DIR(nothing, dir, "nothing");
  IN_DIR(existing, dir, "existing");
  IN_DIR(other, dir, "other");
  IN_DIR(fresh, dir, "fresh.pb.gz");
  snprintf(slash, sizeof slash, "%s/", dir);
  struct stat vst, est, st;
  victim_make(victim, &vst);
  ck_assert_int_eq(symlink(victim, lnk), 0);
  ck_assert_int_eq(symlink(nothing, dangling), 0);
  int fd = open(existing, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0640);
  ck_assert_int_ge(fd, 0);
  close(fd);
  ck_assert_int_eq(chmod(existing, 0640), 0);
  ck_assert_int_eq(link(existing, other), 0);
  ck_assert_int_eq(stat(existing, &est), 0);

  struct { const char *path; int err; } refused[] = {
    {lnk, ELOOP}, {dangling, ELOOP}, {slash, EISDIR}, {"", ENOENT}};
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
    errno = 0;
    bool ok = mi_prof_dump(refused[i].path);
    ck_assert_msg(!ok && errno == refused[i].err, "mi_prof_dump(\"%s\"): %d, errno %s", refused[i].path, ok,
                  strerrorname_np(errno));
  }
  victim_unchanged(victim, &vst);
  assert_link(lnk, victim);
  assert_link(dangling, nothing);
  ck_assert_int_eq(access(nothing, F_OK), -1);

  ck_assert(mi_prof_dump(existing));
  ck_assert_int_eq(stat(existing, &st), 0);
  ck_assert_uint_eq(st.st_ino, est.st_ino);
  ck_assert_uint_eq(st.st_mode & 07777, 0640);
  ck_assert_uint_eq(st.st_nlink, 2);
  test_profile_free(profile_load(other));
  ck_assert(mi_prof_dump(fresh));
  test_profile_free(profile_load(fresh));
  ck_assert_uint_eq(dir_entries(dir), 6);   /* victim, link, dangling, existing, other, fresh.pb.gz */
}
END_TEST

/* -o: a link of ours to a regular file is replaced by the output, its target left as it was (the
 * existing rule: what is replaced is the name); as root, a link or a FIFO of another user is refused
 * (EPERM) at once, and stays as it was.  The profile to write is one the test process dumps. */
START_TEST(security_cli_output_links)
{
  const char *tmp = tmp_dir_make();
  char dir[PATH_MAX], victim[PATH_MAX + 16], lnk[PATH_MAX + 16], prof[PATH_MAX + 16], foreign[PATH_MAX + 16],
       fifo[PATH_MAX + 16];
  snprintf(dir, sizeof dir, "%s", tmp);
  IN_DIR(victim, dir, "victim");
  IN_DIR(lnk, dir, "link");
  IN_DIR(prof, dir, "p.pb.gz");
  IN_DIR(foreign, dir, "foreign");
  IN_DIR(fifo, dir, "fifo");
  struct stat vst, st;
  victim_make(victim, &vst);
  ck_assert(mi_prof_dump(prof));
  ck_assert_int_eq(symlink(victim, lnk), 0);
  const char *tool = probe_getenv("MPROF_TEST_TOOL");
  probe_opts_t o = {.watchdog_s = WATCHDOG_S};
  probe_run_t r = probe_run(tool, (const char *const[]){"merge", "-o", lnk, prof, prof, NULL}, &o);
  probe_assert_exit0(&r, "mimalloc-prof merge -o LINK");
  probe_run_free(&r);
  ck_assert_int_eq(lstat(lnk, &st), 0);
  ck_assert(S_ISREG(st.st_mode));
  test_profile_free(profile_load(lnk));
  victim_unchanged(victim, &vst);
  if (geteuid() != 0) return;             /* no other user to be */

  ck_assert_int_eq(symlink("/dev/null", foreign), 0);
  ck_assert_int_eq(lchown(foreign, 65534, 65534), 0);
  ck_assert_int_eq(mkfifo(fifo, 0666), 0);
  ck_assert_int_eq(chown(fifo, 65534, 65534), 0);
  const char *outs[] = {foreign, fifo};
  for (size_t i = 0; i < 2; i++) {
    r = probe_run(tool, (const char *const[]){"merge", "-o", outs[i], prof, prof, NULL}, &o);
    ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) != 0 &&
                  strstr(r.err, "Operation not permitted") != NULL,
                  "merge -o %s: status %d, stderr:\n%s", outs[i], r.status, r.err);
    probe_run_free(&r);
  }
  assert_link(foreign, "/dev/null");
  ck_assert(stat("/dev/null", &st) == 0 && S_ISCHR(st.st_mode));
  ck_assert(lstat(fifo, &st) == 0 && S_ISFIFO(st.st_mode));
}
END_TEST

/* The set-user-ID tests' directories of /tmp (passable_dir, named after this process), which a failed
 * test leaves behind; the rest is under run_dir. */
static void setuid_dirs_teardown(void)
{
  char cmd[64];
  snprintf(cmd, sizeof cmd, "rm -rf /tmp/mprof-secure-%d-*", (int)getpid());
  if (system(cmd) != 0) {
    /* nothing to do: a leftover directory in /tmp is harmless */
  }
  run_dir_teardown();
}

Suite *security_suite(void)
{
  Suite *s = suite_create("security");
  TCase *tc = tcase_create("security");
  tcase_set_timeout(tc, 120);
  tcase_add_unchecked_fixture(tc, run_dir_setup, setuid_dirs_teardown);
  tcase_add_test(tc, security_setuid_ignores_environment);
  tcase_add_test(tc, security_setuid_api_writes_where_asked);
  tcase_add_test(tc, security_links_at_every_name);
  tcase_add_test(tc, security_temporary_names_collide);
  tcase_add_test(tc, security_socket_names);
  tcase_add_test(tc, security_dump_path_not_followed);
  tcase_add_test(tc, security_cli_output_links);
  suite_add_tcase(s, tc);
  return s;
}

#endif
