/* mimalloc-prof - run a program under the heap profiler, and read the profiles it writes.
 *
 *   mimalloc-prof run [-o FILE | -p PREFIX] [-r RATE] [--interval BYTES] [--signal SIG] [--leak]
 *                     -- PROGRAM [ARGS...]
 *   mimalloc-prof top [-n N] [--sample-index TYPE] FILE
 *
 * `run` preloads libmimalloc-prof into PROGRAM with sampling on and a final dump at exit, passes the
 * program's exit status through, and says where the profile is.  `top` decodes a profile (zlib +
 * protobuf-c) and prints its top allocation sites: the function names the profile carries, else
 * module+offset.  Exit status: the program's for `run`; 0 for `top`; 2 for bad usage; 1 for other
 * errors (unreadable file, library not found, program not started).
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <glob.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "profile.pb-c.h"

#ifndef MPROF_LIBDIR
#define MPROF_LIBDIR "/usr/local/lib"
#endif

#define EXIT_USAGE 2

static const char *prog = "mimalloc-prof";

static void usage(FILE *f)
{
  fprintf(f,
          "usage: %s run [-o FILE | -p PREFIX] [-r RATE] [--interval BYTES] [--signal SIG] [--leak]\n"
          "                     -- PROGRAM [ARGS...]\n"
          "       %s top [-n N] [--sample-index TYPE] FILE\n"
          "       %s --help | --version\n"
          "\n"
          "run   profile PROGRAM (sampling one allocation per RATE bytes on average, default 524288)\n"
          "      and write its heap profile at exit to FILE, or to PREFIX.<pid>.<seq>.f.pb.gz\n"
          "top   print the top allocation sites of a profile (TYPE: alloc_space, alloc_objects,\n"
          "      inuse_space or inuse_objects; default alloc_space)\n"
          "See mimalloc-prof(1).\n",
          prog, prog, prog);
}

static int fail(const char *fmt, const char *arg)
{
  fprintf(stderr, "%s: ", prog);
  fprintf(stderr, fmt, arg);
  fputc('\n', stderr);
  return EXIT_FAILURE;
}

/* ---------------------------------------------------------------------------------------------------
   run
--------------------------------------------------------------------------------------------------- */

/* The library to preload: $MIMALLOC_PROF_LIB, else the build tree's when this program runs from it,
 * else the installed one. */
static const char *library_path(const char *argv0, char *buf, size_t len)
{
  const char *env = getenv("MIMALLOC_PROF_LIB");
  if (env != NULL && env[0] != '\0') return env;
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  (void)argv0;
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

static void set_env(const char *name, const char *value)
{
  if (value != NULL) setenv(name, value, 1);
}

/* Finds the final dump of process `pid` (PREFIX.<pid>.<seq>.f.pb.gz) and moves it to `out`.  Returns 0
 * (found names the profile), -1 (none was written) or -2 (found names the profile, which could not be
 * moved). */
static int move_final(const char *prefix, pid_t pid, const char *out, char *found, size_t len)
{
  char pattern[PATH_MAX];
  glob_t g;
  int n = snprintf(pattern, sizeof pattern, "%s.%d.*.f.pb.gz", prefix, (int)pid);
  if (n < 0 || (size_t)n >= sizeof pattern || glob(pattern, 0, NULL, &g) != 0 || g.gl_pathc == 0) return -1;
  snprintf(found, len, "%s", g.gl_pathv[g.gl_pathc - 1]);
  globfree(&g);
  if (out == NULL) return 0;
  if (rename(found, out) != 0) return -2;
  snprintf(found, len, "%s", out);
  return 0;
}

/* A private directory beside `out` (same filesystem, so the final rename works), for -o; an absolute
 * path, since the program may change its working directory before it exits. */
static bool make_private_dir(const char *out, char *dir, size_t len)
{
  char cwd[PATH_MAX] = "";
  if (out[0] != '/' && getcwd(cwd, sizeof cwd) == NULL) return false;
  const char *slash = strrchr(out, '/');
  int n = slash == NULL ? snprintf(dir, len, "%s/.mimalloc-prof.XXXXXX", cwd)
                        : snprintf(dir, len, "%s%s%.*s/.mimalloc-prof.XXXXXX", cwd, cwd[0] ? "/" : "",
                                   (int)(slash - out), out);
  return n > 0 && (size_t)n < len && mkdtemp(dir) != NULL;
}

/* Removes the private directory and what the program's child processes dumped into it; returns how
 * many such profiles there were. */
static int remove_private_dir(const char *dir)
{
  int files = 0;
  DIR *d = opendir(dir);
  if (d != NULL) {
    struct dirent *e;
    char path[PATH_MAX];
    while ((e = readdir(d)) != NULL) {
      if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
      int n = snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
      if (n > 0 && (size_t)n < sizeof path && unlink(path) == 0) files++;
    }
    closedir(d);
  }
  rmdir(dir);
  return files;
}

static int cmd_run(int argc, char **argv)
{
  static const struct option opts[] = {
    {"output", required_argument, NULL, 'o'}, {"prefix", required_argument, NULL, 'p'},
    {"rate", required_argument, NULL, 'r'}, {"interval", required_argument, NULL, 'I'},
    {"signal", required_argument, NULL, 'S'}, {"leak", no_argument, NULL, 'L'},
    {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
  const char *out = NULL, *prefix = NULL, *rate = NULL, *interval = NULL, *sig = NULL;
  bool leak = false;
  int c;
  optind = 1;
  while ((c = getopt_long(argc, argv, "+o:p:r:h", opts, NULL)) != -1) {
    switch (c) {
    case 'o': out = optarg; break;
    case 'p': prefix = optarg; break;
    case 'r': rate = optarg; break;
    case 'I': interval = optarg; break;
    case 'S': sig = optarg; break;
    case 'L': leak = true; break;
    case 'h': usage(stdout); return EXIT_SUCCESS;
    default: usage(stderr); return EXIT_USAGE;
    }
  }
  if (optind >= argc) {
    fprintf(stderr, "%s run: no program given (put it after --)\n", prog);
    return EXIT_USAGE;
  }
  if (out != NULL && prefix != NULL) {
    fprintf(stderr, "%s run: -o and -p exclude each other\n", prog);
    return EXIT_USAGE;
  }
  char libbuf[PATH_MAX], tmpdir[PATH_MAX] = "", prefixbuf[PATH_MAX];
  const char *lib = library_path(argv[0], libbuf, sizeof libbuf);
  if (access(lib, R_OK) != 0) return fail("cannot find the library %s (set MIMALLOC_PROF_LIB)", lib);
  if (prefix == NULL) {
    if (out != NULL) {                      /* write under a private name, then rename */
      if (!make_private_dir(out, tmpdir, sizeof tmpdir))
        return fail("cannot create a directory beside the output file: %s", strerror(errno));
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
  set_env("MIMALLOC_PROF_SAMPLE_RATE", rate);
  set_env("MIMALLOC_PROF_INTERVAL", interval);
  set_env("MIMALLOC_PROF_SIGNAL", sig);
  if (leak) set_env("MIMALLOC_PROF_LEAK", "1");

  pid_t pid = fork();
  if (pid < 0) return fail("fork: %s", strerror(errno));
  if (pid == 0) {
    execvp(argv[optind], &argv[optind]);
    fprintf(stderr, "%s: cannot run %s: %s\n", prog, argv[optind], strerror(errno));
    _exit(127);
  }
  signal(SIGINT, SIG_IGN);                  /* the program gets ^C; we wait for it */
  int status;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return fail("waitpid: %s", strerror(errno));
  }
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  char found[PATH_MAX];
  int moved = move_final(prefix, pid, out, found, sizeof found);
  if (moved == 0) {
    fprintf(stderr, "%s: heap profile written to %s\n", prog, found);
    fprintf(stderr, "%s: view it with: %s top %s   or   go tool pprof -top -sample_index=alloc_space %s\n", prog,
            prog, found, found);
  } else if (moved == -2) {                 /* keep it where it is: the private directory stays */
    fprintf(stderr, "%s: cannot move the profile to %s (%s); it is %s\n", prog, out, strerror(errno), found);
    return code;
  } else if (code != 127) {
    fprintf(stderr, "%s: no profile was written (did the program exit through exit(3)?)\n", prog);
  }
  if (tmpdir[0] != '\0') {
    int others = remove_private_dir(tmpdir);
    if (others > 0)
      fprintf(stderr, "%s: %d more profile(s) discarded (the program's interval, peak and signal dumps, and "
              "its child processes'; -p PREFIX keeps them)\n", prog, others);
  }
  return code;
}

/* ---------------------------------------------------------------------------------------------------
   top
--------------------------------------------------------------------------------------------------- */

typedef Perftools__Profiles__Profile profile_t;

static profile_t *load(const char *path)
{
  gzFile f = gzopen(path, "rb");
  if (f == NULL) return NULL;
  size_t cap = 1 << 20, len = 0;
  unsigned char *buf = malloc(cap);
  int n;
  while (buf != NULL && (n = gzread(f, buf + len, (unsigned)(cap - len))) > 0) {
    len += (size_t)n;
    if (len == cap) {
      unsigned char *bigger = realloc(buf, cap *= 2);
      if (bigger == NULL) free(buf);
      buf = bigger;
    }
  }
  gzclose(f);
  if (buf == NULL) return NULL;
  profile_t *p = perftools__profiles__profile__unpack(NULL, len, buf);
  free(buf);
  return p;
}

typedef struct site_s {
  char   *name;
  int64_t flat, cum;
  size_t  last_sample;                      /* last sample that added to cum, + 1 */
} site_t;

static const char *string_at(const profile_t *p, int64_t i)
{
  return i >= 0 && (size_t)i < p->n_string_table ? p->string_table[i] : "";
}

/* A location's display name: its innermost function's name, else module+offset. */
static void location_name(const profile_t *p, const Perftools__Profiles__Location *l, char *buf, size_t len)
{
  if (l->n_line > 0) {
    uint64_t fid = l->line[0]->function_id;
    const Perftools__Profiles__Function *f = fid >= 1 && fid <= p->n_function ? p->function[fid - 1] : NULL;
    for (size_t i = 0; f == NULL || f->id != fid; i++) {   /* ids need not be positional */
      if (i == p->n_function) break;
      f = p->function[i];
    }
    if (f != NULL && f->id == fid) {
      snprintf(buf, len, "%s", string_at(p, f->name));
      return;
    }
  }
  for (size_t i = 0; i < p->n_mapping; i++) {
    const Perftools__Profiles__Mapping *m = p->mapping[i];
    if (m->id != l->mapping_id) continue;
    const char *file = string_at(p, m->filename), *base = strrchr(file, '/');
    snprintf(buf, len, "%s+0x%llx", base ? base + 1 : file,
             (unsigned long long)(l->address - m->memory_start + m->file_offset));
    return;
  }
  snprintf(buf, len, "0x%llx", (unsigned long long)l->address);
}

/* Sites: one per distinct name; every location is mapped to its site once. */
typedef struct sites_s {
  site_t *site;
  size_t  n, cap;
  size_t *of_location;                      /* site index by location position */
} sites_t;

static size_t site_index(sites_t *s, const char *name)
{
  for (size_t i = 0; i < s->n; i++) {
    if (strcmp(s->site[i].name, name) == 0) return i;
  }
  if (s->n == s->cap) {
    s->cap = s->cap ? s->cap * 2 : 64;
    site_t *bigger = realloc(s->site, s->cap * sizeof *s->site);
    if (bigger == NULL) exit(fail("%s", strerror(ENOMEM)));
    s->site = bigger;
  }
  s->site[s->n] = (site_t){.name = strdup(name)};
  return s->n++;
}

/* Position of location `id` in p->location (ids are usually positional). */
static size_t location_pos(const profile_t *p, uint64_t id)
{
  if (id >= 1 && id <= p->n_location && p->location[id - 1]->id == id) return (size_t)id - 1;
  for (size_t i = 0; i < p->n_location; i++) {
    if (p->location[i]->id == id) return i;
  }
  return SIZE_MAX;
}

static int by_flat(const void *a, const void *b)
{
  int64_t x = ((const site_t *)a)->flat, y = ((const site_t *)b)->flat;
  return x < y ? 1 : x > y ? -1 : 0;
}

static int cmd_top(int argc, char **argv)
{
  static const struct option opts[] = {
    {"sample-index", required_argument, NULL, 's'}, {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
  long top = 20;
  const char *index = "alloc_space";
  int c;
  optind = 1;
  while ((c = getopt_long(argc, argv, "n:s:h", opts, NULL)) != -1) {
    switch (c) {
    case 'n': top = strtol(optarg, NULL, 10); break;
    case 's': index = optarg; break;
    case 'h': usage(stdout); return EXIT_SUCCESS;
    default: usage(stderr); return EXIT_USAGE;
    }
  }
  if (optind != argc - 1 || top <= 0) {
    usage(stderr);
    return EXIT_USAGE;
  }
  const char *path = argv[optind];
  profile_t *p = load(path);
  if (p == NULL) return fail("%s is not a readable gzipped pprof profile", path);
  size_t vi = SIZE_MAX;
  for (size_t i = 0; i < p->n_sample_type; i++) {
    if (strcmp(string_at(p, p->sample_type[i]->type), index) == 0) vi = i;
  }
  if (vi == SIZE_MAX) return fail("the profile has no sample type %s", index);

  sites_t st = {0};
  st.of_location = calloc(p->n_location ? p->n_location : 1, sizeof *st.of_location);
  size_t unnamed = 0;
  char name[1024];
  for (size_t i = 0; i < p->n_location; i++) {
    location_name(p, p->location[i], name, sizeof name);
    st.of_location[i] = site_index(&st, name);
  }
  int64_t total = 0;
  for (size_t s = 0; s < p->n_sample; s++) {
    const Perftools__Profiles__Sample *smp = p->sample[s];
    if (vi >= smp->n_value || smp->value[vi] == 0) continue;
    int64_t v = smp->value[vi];
    total += v;
    for (size_t k = 0; k < smp->n_location_id; k++) {
      size_t pos = location_pos(p, smp->location_id[k]);
      if (pos == SIZE_MAX) continue;
      site_t *site = &st.site[st.of_location[pos]];
      if (k == 0) {
        site->flat += v;
        if (p->location[pos]->n_line == 0) unnamed++;
      }
      if (site->last_sample != s + 1) {     /* a recursive function counts once per sample */
        site->cum += v;
        site->last_sample = s + 1;
      }
    }
  }
  site_t *sites = st.site;
  size_t n = st.n;
  qsort(sites, n, sizeof *sites, by_flat);
  const char *unit = string_at(p, p->sample_type[vi]->unit);
  printf("%s: %s, %lld %s over %zu stacks (period %lld)\n", path, index, (long long)total, unit, p->n_sample,
         (long long)p->period);
  printf("%14s %6s %14s %6s  %s\n", "flat", "flat%", "cum", "cum%", "site");
  for (size_t i = 0; i < n && (long)i < top; i++) {
    if (sites[i].flat == 0) break;
    printf("%14lld %5.1f%% %14lld %5.1f%%  %s\n", (long long)sites[i].flat,
           total ? 100.0 * (double)sites[i].flat / (double)total : 0.0, (long long)sites[i].cum,
           total ? 100.0 * (double)sites[i].cum / (double)total : 0.0, sites[i].name);
  }
  if (unnamed != 0)
    printf("(sites shown as module+offset have no symbol in the profile: `go tool pprof -top %s` can\n"
           " name them from the program's files when they have symbols or debug information)\n", path);
  for (size_t i = 0; i < n; i++) free(sites[i].name);
  free(sites);
  free(st.of_location);
  perftools__profiles__profile__free_unpacked(p, NULL);
  return EXIT_SUCCESS;
}

int main(int argc, char **argv)
{
  if (argc < 2) {
    usage(stderr);
    return EXIT_USAGE;
  }
  if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
    usage(stdout);
    return EXIT_SUCCESS;
  }
  if (strcmp(argv[1], "--version") == 0) {
    printf("mimalloc-prof %s\n", PACKAGE_VERSION);
    return EXIT_SUCCESS;
  }
  if (strcmp(argv[1], "run") == 0) return cmd_run(argc - 1, argv + 1);
  if (strcmp(argv[1], "top") == 0) return cmd_top(argc - 1, argv + 1);
  fprintf(stderr, "%s: unknown command '%s'\n", prog, argv[1]);
  usage(stderr);
  return EXIT_USAGE;
}
