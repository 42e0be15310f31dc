/* run.c - `mimalloc-prof run`: run a program under the profiler and keep its final profile.
 *
 * Before anything runs, every value is checked with the library's own parser (lib/options.c, compiled
 * in): the options' values and the MIMALLOC_PROF_* variables the program inherits; the output's
 * directory must exist and be writable.  The program then gets libmimalloc-prof preloaded, sampling on,
 * a final dump at exit, and a final dump on SIGINT, SIGTERM and SIGHUP (MIMALLOC_PROF_FINAL_SIGNALS,
 * unless the environment sets it).  The command forwards those three signals to the program when they
 * were sent to the command alone (kill, timeout); a terminal's ^C or hangup reaches the whole
 * foreground process group, the program included, and is not sent twice.  With -o, the library writes
 * into a private directory beside the output (mkdtemp: 0700, an unpredictable name; same file system, so
 * the final rename cannot fail for that reason), removed afterwards with whatever else was dumped there.
 * Every process the program starts inherits the library and writes its own profiles (runtree.c): with
 * -o, their final profiles become one, each sample labelled with its process; with -p (and by default)
 * every profile of the run is kept and symbolized, and with -p named after its program too.  The final
 * profile is symbolized (--no-symbolize skips that), through the same output rules as -o (outfile.c),
 * and a summary of it printed (peak.c): the peak and how long after the program's start it came, in use
 * at exit, allocated, the sites at the peak.  A set-user-ID program runs in secure mode,
 * where the library reads no MIMALLOC_PROF_* variable: no profile comes, and the command says why.
 */
#include "tool.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <glob.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "options.h"

#ifndef MPROF_LIBDIR
#define MPROF_LIBDIR "/usr/local/lib"
#endif

/* The signals that end a program and that the command forwards; the library dumps on them. */
static const int forwarded[] = {SIGINT, SIGTERM, SIGHUP};
#define FINAL_SIGNALS_DEFAULT "INT,TERM,HUP"

static const char usage[] =
  "usage: mimalloc-prof run [-o FILE|DIR | -p PREFIX] [-r RATE] [--interval BYTES] [--signal SIG]\n"
  "                         [--leak] [--lifetimes] [--no-symbolize] [--debug-dir DIR]\n"
  "                         [--] PROGRAM [ARGS...]\n"
  "Run PROGRAM with heap profiling and write its heap profile when it exits (also on SIGINT, SIGTERM\n"
  "and SIGHUP); then print a summary: the peak, in use at exit, allocated, the sites at the peak.\n"
  "  -o FILE|DIR        the profile's file (in DIR: PROGRAM.pb.gz), of every process the program started\n"
  "                     (labels process and pid); default ./mimalloc-prof.PID.SEQ.f.pb.gz, one per process\n"
  "  -p PREFIX          keep every profile, symbolized, as PREFIX.PROGRAM.PID.SEQ.KIND.pb.gz (child\n"
  "                     processes' too)\n"
  "  -r RATE            sample one allocation per RATE bytes on average (default 524288; k, m, g suffixes)\n"
  "  --interval BYTES   also dump every BYTES allocated;  --signal SIG  also dump on signal SIG\n"
  "  --leak             print what is still in use at exit and the top 10 sites holding it (named, with\n"
  "                     their shares)\n"
  "  --lifetimes        record how long sampled blocks live, for top --temporary (MIMALLOC_PROF_LIFETIMES)\n"
  "  --no-symbolize     leave the profile with addresses (it is symbolized by default)\n"
  "  --debug-dir DIR    also look for debug files in DIR (build-id and debuglink layout)\n"
  "Exit status: PROGRAM's (128+N if signal N ended it, 127 if it could not start); 2 for a usage error.\n"
  "See mimalloc-prof(1).\n";

typedef struct run_opts_s {
  const char *out, *prefix, *rate, *interval, *signal;
  bool        leak, lifetimes, symbolize;
  const char *debug_dirs[16];
  size_t      n_debug_dirs;
} run_opts_t;

/* ---------------------------------------------------------------------------------------------------
   Checks before running
--------------------------------------------------------------------------------------------------- */

/* A value for the environment variable `var`, checked by the library's parser; `what` names where it
 * came from ("-r", or "in the environment").  0, or the usage error's exit status. */
static int check_value(const char *var, const char *value, const char *what)
{
  uint64_t v;
  char why[160];
  int r = mprof_option_parse(var, value, &v, why, sizeof why);
  if (r == 0) {
    if (what[0] == '-') return tool_usage_error("%s '%s' %s", what, value, why);
    return tool_usage_error("%s=\"%s\" %s %s", var, value, what, why);
  }
  return 0;                                 /* valid, or unknown to this library (it ignores those) */
}

/* The MIMALLOC_PROF_* variables the program inherits unchanged. */
static int check_environment(const run_opts_t *o)
{
  extern char **environ;
  static const char *const replaced[] = {"MIMALLOC_PROF", "MIMALLOC_PROF_FINAL", "MIMALLOC_PROF_PREFIX",
                                         "MIMALLOC_PROF_LIB"};
  for (char **e = environ; *e != NULL; e++) {
    if (strncmp(*e, "MIMALLOC_PROF", 13) != 0) continue;
    const char *eq = strchr(*e, '=');
    if (eq == NULL) continue;
    char name[128];
    snprintf(name, sizeof name, "%.*s", (int)(eq - *e), *e);
    bool skip = (o->rate && strcmp(name, "MIMALLOC_PROF_SAMPLE_RATE") == 0) ||
                (o->interval && strcmp(name, "MIMALLOC_PROF_INTERVAL") == 0) ||
                (o->signal && strcmp(name, "MIMALLOC_PROF_SIGNAL") == 0) ||
                (o->leak && strcmp(name, "MIMALLOC_PROF_LEAK") == 0) ||
                (o->lifetimes && strcmp(name, "MIMALLOC_PROF_LIFETIMES") == 0);
    for (size_t i = 0; i < sizeof replaced / sizeof replaced[0]; i++) skip |= strcmp(name, replaced[i]) == 0;
    int rc = skip ? 0 : check_value(name, eq + 1, "in the environment");
    if (rc != 0) return rc;
  }
  return 0;
}

/* A directory we can create files in; else the usage error's status, naming `opt`. */
static int check_dir(const char *dir, const char *opt, const char *arg)
{
  struct stat st;
  if (stat(dir, &st) != 0)
    return tool_usage_error("%s '%s': directory %s: %s", opt, arg, dir, strerror(errno));
  if (!S_ISDIR(st.st_mode)) return tool_usage_error("%s '%s': %s is not a directory", opt, arg, dir);
  if (access(dir, W_OK | X_OK) != 0)
    return tool_usage_error("%s '%s': cannot create files in %s: %s", opt, arg, dir, strerror(errno));
  return 0;
}

/* The directory part of `path` ("." when there is none). */
static void dir_of(const char *path, char *dir, size_t len)
{
  const char *slash = strrchr(path, '/');
  if (slash == NULL) snprintf(dir, len, ".");
  else if (slash == path) snprintf(dir, len, "/");
  else snprintf(dir, len, "%.*s", (int)(slash - path), path);
}

/* Resolves -o: a directory gets PROGRAM.pb.gz inside; an existing file must be a regular one. */
static int resolve_output(const char *out, const char *program, char *buf, size_t len)
{
  struct stat st;
  char dir[PATH_MAX];
  if (stat(out, &st) == 0 && S_ISDIR(st.st_mode)) {
    const char *base = strrchr(program, '/');
    base = base ? base + 1 : program;
    size_t n = strlen(out);
    int w = snprintf(buf, len, "%s%s%s.pb.gz", out, n && out[n - 1] == '/' ? "" : "/", base);
    if (w < 0 || (size_t)w >= len) return tool_usage_error("-o '%s': path too long", out);
  } else if (out[0] == '\0' || out[strlen(out) - 1] == '/') {
    return tool_usage_error("-o '%s': no such directory", out);
  } else {
    if (lstat(out, &st) == 0 && !S_ISREG(st.st_mode))
      return tool_usage_error("-o '%s': exists and is not a regular file", out);
    snprintf(buf, len, "%s", out);
  }
  dir_of(buf, dir, sizeof dir);
  return check_dir(dir, "-o", out);
}

/* ---------------------------------------------------------------------------------------------------
   The library, the private directory, the final profile
--------------------------------------------------------------------------------------------------- */

/* $MIMALLOC_PROF_LIB, else the build tree's library when this program runs from it, else the
 * installed one. */
static const char *library_path(char *buf, size_t len)
{
  const char *env = getenv("MIMALLOC_PROF_LIB");
  if (env != NULL && env[0] != '\0') return env;
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n > 0) {
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    if (slash != NULL) {
      *slash = '\0';
      static const char *const tries[] = {"%s/../lib/.libs/libmimalloc-prof.so.0",
                                          "%s/../../lib/.libs/libmimalloc-prof.so.0"};
      for (size_t i = 0; i < 2; i++) {
        int n2 = snprintf(buf, len, tries[i], self);
        if (n2 > 0 && (size_t)n2 < len && access(buf, R_OK) == 0) return buf;
      }
    }
  }
  snprintf(buf, len, "%s/libmimalloc-prof.so.0", MPROF_LIBDIR);
  return buf;
}

/* A private directory beside `out`, as an absolute path (the program may change its directory). */
static bool make_private_dir(const char *out, char *dir, size_t len)
{
  char parent[PATH_MAX], abs[PATH_MAX];
  dir_of(out, parent, sizeof parent);
  if (realpath(parent, abs) == NULL) return false;
  int n = snprintf(dir, len, "%s%s.mimalloc-prof.XXXXXX", abs, strcmp(abs, "/") == 0 ? "" : "/");
  return n > 0 && (size_t)n < len && mkdtemp(dir) != NULL;
}

/* Removes the private directory and what was dumped into it; returns how many profiles there were.  Only
 * names are removed (unlinkat: a link the program left there is not followed), and only regular files
 * are counted. */
static int remove_private_dir(const char *dir)
{
  int files = 0, fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
  if (d != NULL) {
    struct dirent *e;
    struct stat st;
    while ((e = readdir(d)) != NULL) {
      if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
      if (fstatat(fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || S_ISDIR(st.st_mode)) continue;
      if (unlinkat(fd, e->d_name, 0) == 0 && S_ISREG(st.st_mode)) files++;
    }
    closedir(d);
  } else if (fd >= 0) {
    close(fd);
  }
  rmdir(dir);
  return files;
}

/* Finds the final dump of process `pid` (PREFIX.<pid>.<seq>.f.pb.gz, a regular file: not a link anyone
 * put at such a name) and moves it to `out` (when not NULL).  0 (found names the profile), -1 (none was
 * written), -2 (found names it; it could not be moved: errno). */
static int move_final(const char *prefix, pid_t pid, const char *out, char *found, size_t len)
{
  char pattern[PATH_MAX];
  glob_t g;
  struct stat st;
  int n = snprintf(pattern, sizeof pattern, "%s.%d.*.f.pb.gz", prefix, (int)pid);
  if (n < 0 || (size_t)n >= sizeof pattern || glob(pattern, 0, NULL, &g) != 0) return -1;
  found[0] = '\0';
  for (size_t i = 0; i < g.gl_pathc; i++)
    if (lstat(g.gl_pathv[i], &st) == 0 && S_ISREG(st.st_mode)) snprintf(found, len, "%s", g.gl_pathv[i]);
  globfree(&g);
  if (found[0] == '\0') return -1;
  if (out == NULL) return 0;
  if (rename(found, out) != 0) return -2;
  snprintf(found, len, "%s", out);
  return 0;
}

/* Whether the program execvp(3) would run for `name` is set-user-ID, set-group-ID or has file
 * capabilities: the kernel then starts it in secure mode, where the dynamic loader drops LD_PRELOAD's
 * paths and the library ignores every MIMALLOC_PROF_* variable (mimalloc_prof(3), ENVIRONMENT), so no
 * profile can come. */
static bool runs_secure(const char *name)
{
  char path[PATH_MAX];
  const char *dirs = strchr(name, '/') != NULL ? "" : getenv("PATH");
  if (dirs == NULL) dirs = "/usr/local/bin:/usr/bin:/bin";
  for (const char *d = dirs;; d++) {
    const char *end = strchrnul(d, ':');
    int n = strchr(name, '/') != NULL
      ? snprintf(path, sizeof path, "%s", name)
      : snprintf(path, sizeof path, "%.*s%s%s", (int)(end - d), d, end > d ? "/" : "", name);
    struct stat st;
    if (n > 0 && (size_t)n < sizeof path && stat(path, &st) == 0 && S_ISREG(st.st_mode) &&
        access(path, X_OK) == 0)
      return (st.st_mode & (S_ISUID | S_ISGID)) != 0 || getxattr(path, "security.capability", NULL, 0) > 0;
    if (*end == '\0') return false;
    d = end;
  }
}

/* ---------------------------------------------------------------------------------------------------
   Signals: forwarded to the program while it runs
--------------------------------------------------------------------------------------------------- */

static volatile sig_atomic_t child_pid;

static void forward(int sig, siginfo_t *info, void *ctx)
{
  (void)ctx;
  /* SI_KERNEL: the terminal's ^C, ^\ or hangup, sent to the whole process group: the program has it. */
  if (child_pid > 0 && info->si_code != SI_KERNEL) kill((pid_t)child_pid, sig);
}

static void set_env(const char *name, const char *value)
{
  if (value != NULL) setenv(name, value, 1);
}

static int parse_args(run_opts_t *o, int argc, char **argv)
{
  enum { OPT_INTERVAL = 0x200, OPT_SIGNAL, OPT_LEAK, OPT_NOSYM, OPT_DEBUGDIR, OPT_LIFETIMES };
  static const struct option opts[] = {
    {"output", required_argument, NULL, 'o'}, {"prefix", required_argument, NULL, 'p'},
    {"rate", required_argument, NULL, 'r'}, {"interval", required_argument, NULL, OPT_INTERVAL},
    {"signal", required_argument, NULL, OPT_SIGNAL}, {"leak", no_argument, NULL, OPT_LEAK},
    {"no-symbolize", no_argument, NULL, OPT_NOSYM}, {"debug-dir", required_argument, NULL, OPT_DEBUGDIR},
    {"lifetimes", no_argument, NULL, OPT_LIFETIMES},
    {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
  int c;
  optind = 1;
  while ((c = getopt_long(argc, argv, "+:o:p:r:h", opts, NULL)) != -1) {
    switch (c) {
    case 'o': o->out = optarg; break;
    case 'p': o->prefix = optarg; break;
    case 'r': o->rate = optarg; break;
    case OPT_INTERVAL: o->interval = optarg; break;
    case OPT_SIGNAL: o->signal = optarg; break;
    case OPT_LEAK: o->leak = true; break;
    case OPT_LIFETIMES: o->lifetimes = true; break;
    case OPT_NOSYM: o->symbolize = false; break;
    case OPT_DEBUGDIR:
      if (o->n_debug_dirs == sizeof o->debug_dirs / sizeof o->debug_dirs[0])
        return tool_usage_error("--debug-dir given more than %zu times", o->n_debug_dirs);
      o->debug_dirs[o->n_debug_dirs++] = optarg;
      break;
    case 'h': return -1;
    default: return tool_getopt_error(c, argv);
    }
  }
  if (optind >= argc) return tool_usage_error("no program given (put it after the options, or after --)");
  if (o->out != NULL && o->prefix != NULL) return tool_usage_error("-o and -p exclude each other");
  int rc;
  if ((o->rate && (rc = check_value("MIMALLOC_PROF_SAMPLE_RATE", o->rate, "-r")) != 0) ||
      (o->interval && (rc = check_value("MIMALLOC_PROF_INTERVAL", o->interval, "--interval")) != 0) ||
      (o->signal && (rc = check_value("MIMALLOC_PROF_SIGNAL", o->signal, "--signal")) != 0) ||
      (rc = check_environment(o)) != 0)
    return rc;
  if (o->prefix != NULL) {
    char dir[PATH_MAX];
    dir_of(o->prefix, dir, sizeof dir);
    if (o->prefix[0] == '\0' || o->prefix[strlen(o->prefix) - 1] == '/')
      return tool_usage_error("-p '%s': a prefix needs a file name part", o->prefix);
    if ((rc = check_dir(dir, "-p", o->prefix)) != 0) return rc;
  }
  return 0;
}

/* Starts the program with the forwarded signals blocked until child_pid is set; returns its status. */
static int run_program(char **argv, pid_t *child, int *status)
{
  struct sigaction sa, old[3];
  sigset_t block, saved;
  sigemptyset(&block);
  for (size_t i = 0; i < 3; i++) sigaddset(&block, forwarded[i]);
  sigprocmask(SIG_BLOCK, &block, &saved);
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = forward;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigfillset(&sa.sa_mask);
  for (size_t i = 0; i < 3; i++) {
    sigaction(forwarded[i], NULL, &old[i]);
    if (old[i].sa_handler != SIG_IGN) sigaction(forwarded[i], &sa, NULL);   /* nohup stays nohup */
  }
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    for (size_t i = 0; i < 3; i++) sigaction(forwarded[i], &old[i], NULL);
    sigprocmask(SIG_SETMASK, &saved, NULL);
    execvp(argv[0], argv);
    fprintf(stderr, "mimalloc-prof run: cannot run %s: %s\n", argv[0], strerror(errno));
    _exit(127);
  }
  int err = errno;
  child_pid = pid;
  sigprocmask(SIG_SETMASK, &saved, NULL);
  if (pid < 0) return tool_error("fork: %s", strerror(err));
  while (waitpid(pid, status, 0) < 0) {
    if (errno != EINTR) return tool_error("waitpid: %s", strerror(errno));
  }
  child_pid = 0;
  for (size_t i = 0; i < 3; i++) sigaction(forwarded[i], &old[i], NULL);
  *child = pid;
  return 0;
}

/* -p and the default: the final profile to summarize into found (as tree_keep renamed it): the
 * program's, unless it has no samples and another process's has (then that with the most); the other
 * final profiles are named on stderr.  False when there is none. */
static bool say_kept(const tree_t *t, pid_t pid, char *found, size_t len)
{
  size_t said = 0, best = SIZE_MAX, own = SIZE_MAX;
  for (size_t i = 0; i < t->n; i++) {
    const tree_dump_t *d = &t->dump[i];
    if (d->kind != 'f') continue;
    if (d->pid == pid) own = i;
    if (best == SIZE_MAX || d->samples > t->dump[best].samples) best = i;
  }
  if (best == SIZE_MAX) return false;
  if (own != SIZE_MAX && (t->dump[own].samples > 0 || t->dump[best].samples == 0)) best = own;
  snprintf(found, len, "%s", t->dump[best].path);
  char name[1024];
  for (size_t i = 0; i < t->n; i++) {
    const tree_dump_t *d = &t->dump[i];
    if (d->kind != 'f' || i == best || said++ >= 10) continue;
    tool_note("heap profile of %s (process %d) written to %s", tool_escaped(d->program, name, sizeof name),
              (int)d->pid, d->path);
  }
  if (said > 10) tool_note("and %zu more processes' profiles", said - 10);
  if (best != own)
    tool_note("the summary below is of %s (process %d)",
              tool_escaped(t->dump[best].program, name, sizeof name), (int)t->dump[best].pid);
  return true;
}

int cmd_run(int argc, char **argv)
{
  run_opts_t o = {.symbolize = true};
  int rc = parse_args(&o, argc, argv);
  if (rc != 0) return rc < 0 ? tool_help(usage) : rc;
  char **program = &argv[optind];
  char outbuf[PATH_MAX], libbuf[PATH_MAX], tmpdir[PATH_MAX] = "", prefixbuf[PATH_MAX];
  const char *out = NULL, *prefix = o.prefix;
  if (o.out != NULL) {
    if ((rc = resolve_output(o.out, program[0], outbuf, sizeof outbuf)) != 0) return rc;
    out = outbuf;
  }
  const char *lib = library_path(libbuf, sizeof libbuf);
  if (access(lib, R_OK) != 0) return tool_error("cannot find the library %s (set MIMALLOC_PROF_LIB)", lib);
  if (prefix == NULL) {
    if (out != NULL) {                      /* write under a private name, then rename */
      if (!make_private_dir(out, tmpdir, sizeof tmpdir))
        return tool_error("cannot create a directory beside %s: %s", out, strerror(errno));
      snprintf(prefixbuf, sizeof prefixbuf, "%s/profile", tmpdir);
    } else {
      snprintf(prefixbuf, sizeof prefixbuf, "mimalloc-prof");
    }
    prefix = prefixbuf;
  }
  char preload[2 * PATH_MAX];
  const char *old = getenv("LD_PRELOAD");
  snprintf(preload, sizeof preload, "%s%s%s", lib, old && old[0] ? " " : "", old ? old : "");
  set_env("LD_PRELOAD", preload);
  set_env("MIMALLOC_PROF", "1");
  set_env("MIMALLOC_PROF_FINAL", "1");
  set_env("MIMALLOC_PROF_PREFIX", prefix);
  set_env("MIMALLOC_PROF_SAMPLE_RATE", o.rate);
  set_env("MIMALLOC_PROF_INTERVAL", o.interval);
  set_env("MIMALLOC_PROF_SIGNAL", o.signal);
  if (o.leak) set_env("MIMALLOC_PROF_LEAK", "0");   /* the command reports from the symbolized profile */
  if (o.lifetimes) set_env("MIMALLOC_PROF_LIFETIMES", "1");
  setenv("MIMALLOC_PROF_FINAL_SIGNALS", FINAL_SIGNALS_DEFAULT, 0);

  int status = 0;
  pid_t pid = 0;
  tree_t tree;
  struct timespec start;                    /* the summary says when the peak was, from here */
  if (!tree_before(prefix, &tree))
    tool_note("cannot list the profiles under %s: %s", prefix, strerror(errno));
  clock_gettime(CLOCK_REALTIME, &start);
  if ((rc = run_program(program, &pid, &status)) != 0) {
    if (tmpdir[0] != '\0') remove_private_dir(tmpdir);
    tree_free(&tree);
    return rc;
  }
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (!tree_after(prefix, &tree)) tool_note("cannot list the profiles under %s: %s", prefix, strerror(errno));
  char found[PATH_MAX], err[1024];
  size_t finals = tree_finals(&tree), merged = 0;
  bool own = false;                         /* the program wrote its final profile */
  for (size_t i = 0; i < tree.n; i++) own |= tree.dump[i].pid == pid && tree.dump[i].kind == 'f';
  bool merge = out != NULL && (finals > 1 || (finals == 1 && !own));
  int moved;
  if (merge && tree_merge(&tree, pid, out, err, sizeof err) == 0) {
    snprintf(found, sizeof found, "%s", out);
    moved = 0;
    merged = finals;
  } else {
    if (merge) tool_note("the processes' profiles could not be merged: %s", err);
    moved = move_final(prefix, pid, out, found, sizeof found);
  }
  if (moved == -2) {                        /* keep it, inside the output's directory */
    tool_note("cannot move the profile to %s (%s); it is %s", out, strerror(errno), found);
    tree_free(&tree);
    return code;
  }
  if (tmpdir[0] != '\0') {
    int others = remove_private_dir(tmpdir) - (int)merged;
    if (others > 0)
      tool_note("%d more profile(s) discarded (interval, peak and signal dumps%s; -p PREFIX keeps them)",
                others, merged == 0 ? ", and child processes'" : "");
  } else {
    sym_opts_t so = {.debug_dirs = o.debug_dirs, .n_debug_dirs = o.n_debug_dirs};
    tree_keep(&tree, prefix, o.prefix != NULL, o.symbolize ? &so : NULL);
    if (say_kept(&tree, pid, found, sizeof found)) moved = 0;
  }
  tree_free(&tree);
  if (moved != 0) {
    if (code != 127 && runs_secure(program[0]))
      tool_note("no profile was written: %s is set-user-ID, set-group-ID or has capabilities, and runs in "
                "secure mode, where the library ignores MIMALLOC_PROF_* (see mimalloc_prof(3))", program[0]);
    else if (code != 127)
      tool_note("no profile was written (the program ended by %s before the library could write it)",
                WIFSIGNALED(status) ? "a signal" : "_exit(2) or exec of a program without the library");
    return code;
  }
  if (o.symbolize && tmpdir[0] != '\0') {   /* -p and the default: tree_keep symbolized them */
    sym_opts_t so = {.debug_dirs = o.debug_dirs, .n_debug_dirs = o.n_debug_dirs};
    if (symbolize_file(found, NULL, &so) != 0) tool_note("the profile keeps its raw addresses");
  }
  if (merged > 0)
    tool_note("heap profile of %zu process%s written to %s (labels process and pid: top --by process "
              "splits them)", merged, merged > 1 ? "es" : "", found);
  else
    tool_note("heap profile written to %s", found);
  heap_summary(stderr, found, (int64_t)start.tv_sec * 1000000000 + start.tv_nsec);
  if (o.leak) heap_leaks(stderr, found, 10);
  tool_note("view it with: mimalloc-prof top %s   (or timeline, tree, flame, folded; see mimalloc-prof(1))",
            found);
  return code;
}
