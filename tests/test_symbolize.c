/* test_symbolize.c - symbolization by mimalloc-prof: our own C++ program
 * (tests/sym_prog: -g -O2, PIE, templates, inlined functions, a shared library of its own) must come out
 * with every frame of its own code named, demangled, with file:line and its inlined frames
 *   - unstripped, symbolized by `run` itself;
 *   - stripped, with its debug files in a private build-ID directory (--debug-dir), also after the file
 *     at the profile's path was replaced (build-ID mismatch, said as such);
 *   - stripped and deleted (a profile from another machine), its debug files served by a real local
 *     debuginfod started on a free loopback port;
 * and `go tool pprof` must read the result with the same names and no binary present.  Debian's python3
 * with python3.11-dbg must come out with at least 90% of its bytes at named functions.
 *
 * Every allocation is sampled (-r 1), so the profile holds every allocating stack of the program.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cxx_names.h"
#include "pprof_util.h"
#include "suites.h"
#include "tool_util.h"

#if MPROF_PPROF

/* Runs a command that must succeed (cp, objcopy, strip: the host's, MPROF_TEST_OBJCOPY and _STRIP). */
static void sh(const char *const *args)
{
  probe_run_t r = probe_run(args[0], args + 1, NULL);
  probe_assert_exit0(&r, args[0]);
  probe_run_free(&r);
}

static const char *base_name(const char *path)
{
  const char *s = strrchr(path, '/');
  return s ? s + 1 : path;
}

/* The program's own locations: in the mappings of sym_prog and libsym_lib.so. */
static bool own_mapping(const profile_t *p, const mapping_t *m)
{
  const char *b = base_name(pstr(p, m->filename));
  return strcmp(b, "sym_prog") == 0 || strcmp(b, "libsym_lib.so") == 0;
}

/* Whether some location has `inner` as a line directly followed by `outer` (inner inlined into outer). */
static bool inlined(const profile_t *p, const pindex_t *ix, const char *inner, const char *outer)
{
  for (size_t i = 0; i < p->n_location; i++) {
    const location_t *l = p->location[i];
    for (size_t k = 0; k + 1 < l->n_line; k++) {
      if (strcmp(tool_line_name(p, ix, l, k), inner) == 0 && strcmp(tool_line_name(p, ix, l, k + 1), outer) == 0)
        return true;
    }
  }
  return false;
}

static bool has_function(const profile_t *p, const char *name, const char *system_prefix)
{
  for (size_t i = 0; i < p->n_function; i++) {
    if (strcmp(pstr(p, p->function[i]->name), name) == 0 &&
        strncmp(pstr(p, p->function[i]->system_name), system_prefix, strlen(system_prefix)) == 0)
      return true;
  }
  return false;
}

/* Every frame of the program's own code named, demangled, with file:line (_start, from the C runtime's
 * start file, has no debug information: named only); the inlined frames and the library's method. */
static void assert_named(const char *path)
{
  profile_t *p = tool_profile(path);
  pindex_t ix;
  pindex_init(&ix, p);
  size_t own = 0, maps = 0;
  for (size_t i = 0; i < p->n_mapping; i++) {
    const mapping_t *m = p->mapping[i];
    if (!own_mapping(p, m)) continue;
    maps++;
    ck_assert_msg(m->has_functions && m->has_filenames && m->has_line_numbers && m->has_inline_frames,
                  "%s: mapping flags not set", pstr(p, m->filename));
  }
  ck_assert_uint_eq(maps, 2);
  for (size_t i = 0; i < p->n_location; i++) {
    const location_t *l = p->location[i];
    const mapping_t *m = pindex_mapping(&ix, l->mapping_id);
    if (m == NULL || !own_mapping(p, m)) continue;
    own++;
    ck_assert_msg(l->n_line >= 1, "%s+0x%llx: no name", pstr(p, m->filename),
                  (unsigned long long)(l->address - m->memory_start + m->file_offset));
    for (size_t k = 0; k < l->n_line; k++) {
      const function_t *f = pindex_function(&ix, l->line[k]->function_id);
      ck_assert_ptr_nonnull(f);
      const char *name = pstr(p, f->name);
      ck_assert_msg(name[0] != '\0' && strncmp(name, "_Z", 2) != 0, "not named or not demangled: '%s'", name);
      if (strcmp(name, "_start") == 0) continue;
      ck_assert_msg(pstr(p, f->filename)[0] != '\0' && l->line[k]->line > 0, "%s: no file:line (%s:%lld)", name,
                    pstr(p, f->filename), (long long)l->line[k]->line);
    }
  }
  ck_assert_uint_ge(own, 4);
  ck_assert_msg(inlined(p, &ix, "shapes::Pool<double>::make(" MPROF_SIZE_T_NAME ")",
                        "shapes::Pool<double>::fill(" MPROF_SIZE_T_NAME ", " MPROF_SIZE_T_NAME ")"),
                "Pool::make not inlined in fill");
  ck_assert_msg(inlined(p, &ix, "grab", "build_buffer"), "grab not inlined");
  ck_assert_msg(has_function(p, "symlib::Store::add_many(" MPROF_SIZE_T_NAME ", " MPROF_SIZE_T_NAME ")", "_ZN6symlib5Store8add_many"),
                "the shared library's method is missing or not demangled");
  ck_assert_msg(has_function(p, "shapes::Pool<double>::make(" MPROF_SIZE_T_NAME ")", "_ZN6shapes4PoolIdE4make"),
                "the template's mangled name is not kept as system_name");
  ck_assert(has_function(p, "main", "main"));
  pindex_free(&ix);
  profile_free(p);
}

START_TEST(symbolize_unstripped)
{
  char dir[PATH_MAX], out[PATH_MAX + 16];
  tool_tmpdir(dir, sizeof dir);
  snprintf(out, sizeof out, "%s/p.pb.gz", dir);
  probe_run_t r = tool_run((const char *const[]){"run", "-r", "1", "-o", out, probe_getenv("MPROF_TEST_SYM_PROG"), NULL},
                           NULL);
  probe_assert_exit0(&r, "mimalloc-prof run");
  ck_assert_msg(strstr(r.err, "locations named") != NULL, "run did not symbolize:\n%s", r.err);
  assert_named(out);
  probe_run_free(&r);
}
END_TEST

/* dir/bin: stripped copies of the program and its library; dir/raw.pb.gz: their profile, raw; the
 * debug files as dir/debug/NAME.debug.  Returns the build IDs (program, library) from the profile. */
static void stripped_profile(const char *dir, char ids[2][128])
{
  char bin[PATH_MAX], prog[PATH_MAX], lib[PATH_MAX], dbg[PATH_MAX], pd[PATH_MAX], ld[PATH_MAX], raw[PATH_MAX],
       env[PATH_MAX + 32];
  snprintf(bin, sizeof bin, "%s/bin", dir);
  snprintf(dbg, sizeof dbg, "%s/debug", dir);
  mkdir(bin, 0755);
  mkdir(dbg, 0755);
  snprintf(prog, sizeof prog, "%s/sym_prog", bin);
  snprintf(lib, sizeof lib, "%s/libsym_lib.so", bin);
  snprintf(pd, sizeof pd, "%s/sym_prog.debug", dbg);
  snprintf(ld, sizeof ld, "%s/libsym_lib.so.debug", dbg);
  sh((const char *const[]){"/bin/cp", probe_getenv("MPROF_TEST_SYM_PROG"), prog, NULL});
  sh((const char *const[]){"/bin/cp", probe_getenv("MPROF_TEST_SYM_LIB"), lib, NULL});
  const char *objcopy = probe_getenv("MPROF_TEST_OBJCOPY"), *strip = probe_getenv("MPROF_TEST_STRIP");
  sh((const char *const[]){objcopy, "--only-keep-debug", prog, pd, NULL});
  sh((const char *const[]){objcopy, "--only-keep-debug", lib, ld, NULL});
  sh((const char *const[]){strip, "--strip-all", prog, NULL});
  sh((const char *const[]){strip, "--strip-all", lib, NULL});
  snprintf(raw, sizeof raw, "%s/raw.pb.gz", dir);
  snprintf(env, sizeof env, "LD_LIBRARY_PATH=%s", bin);
  probe_run_t r = tool_run((const char *const[]){"run", "--no-symbolize", "-r", "1", "-o", raw, prog, NULL},
                           (const char *const[]){env, NULL});
  probe_assert_exit0(&r, "mimalloc-prof run (stripped)");
  probe_run_free(&r);
  profile_t *p = tool_profile(raw);
  ids[0][0] = ids[1][0] = '\0';
  for (size_t i = 0; i < p->n_mapping; i++) {
    const char *file = pstr(p, p->mapping[i]->filename);
    int k = strcmp(file, prog) == 0 ? 0 : strcmp(file, lib) == 0 ? 1 : -1;
    if (k >= 0) snprintf(ids[k], sizeof ids[k], "%s", pstr(p, p->mapping[i]->build_id));
  }
  profile_free(p);
  ck_assert_msg(strlen(ids[0]) > 8 && strlen(ids[1]) > 8, "no build IDs for the stripped files");
}

START_TEST(symbolize_stripped_debug_dir)
{
  char dir[PATH_MAX], ids[2][128], path[PATH_MAX * 2], priv[PATH_MAX + 8], raw[PATH_MAX + 16], out[PATH_MAX + 16];
  tool_tmpdir(dir, sizeof dir);
  stripped_profile(dir, ids);
  snprintf(priv, sizeof priv, "%s/priv", dir);
  static const char *const names[2] = {"sym_prog", "libsym_lib.so"};
  for (int k = 0; k < 2; k++) {                   /* priv/.build-id/xx/rest.debug */
    snprintf(path, sizeof path, "%s/.build-id/%.2s", priv, ids[k]);
    sh((const char *const[]){"/bin/mkdir", "-p", path, NULL});
    char from[PATH_MAX], to[PATH_MAX * 2];
    snprintf(from, sizeof from, "%s/debug/%s.debug", dir, names[k]);
    snprintf(to, sizeof to, "%s/%s.debug", path, ids[k] + 2);
    sh((const char *const[]){"/bin/cp", from, to, NULL});
  }
  /* The program at the profile's path is replaced by another file: without the debug directory, that
   * is said; with it, the build ID finds the debug file anyway. */
  snprintf(path, sizeof path, "%s/bin/sym_prog", dir);
  sh((const char *const[]){"/bin/cp", "/bin/true", path, NULL});
  snprintf(raw, sizeof raw, "%s/raw.pb.gz", dir);
  snprintf(out, sizeof out, "%s/mismatch.pb.gz", dir);
  probe_run_t r = tool_run((const char *const[]){"symbolize", "-o", out, raw, NULL}, NULL);
  probe_assert_exit0(&r, "symbolize (mismatch)");
  ck_assert_msg(strstr(r.err, "sym_prog: build-ID mismatch") != NULL && strstr(r.err, ids[0]) != NULL, "%s", r.err);
  probe_run_free(&r);
  snprintf(out, sizeof out, "%s/named.pb.gz", dir);
  r = tool_run((const char *const[]){"symbolize", "--debug-dir", priv, "-o", out, raw, NULL}, NULL);
  probe_assert_exit0(&r, "symbolize --debug-dir");
  probe_run_free(&r);
  assert_named(out);
}
END_TEST

/* A profile from elsewhere may name anything as a mapping's file: a FIFO there must not block the
 * command (its open() would wait for a writer for ever), a device is not opened.  Both mappings stay
 * unnamed, said as such, and the profile keeps its samples.  (The watchdog ends a hung command.) */
START_TEST(symbolize_fifo_mapping)
{
  char dir[PATH_MAX], fifo[PATH_MAX + 8], raw[PATH_MAX + 16], out[PATH_MAX + 16], want[PATH_MAX + 64];
  tool_tmpdir(dir, sizeof dir);
  snprintf(fifo, sizeof fifo, "%s/fifo", dir);
  ck_assert_int_eq(mkfifo(fifo, 0600), 0);
  pbuild_t *b = pbuild_new_heap(524288);
  ck_assert_ptr_nonnull(b);
  char *strings[] = {"", fifo, "/dev/zero", "00112233445566778899aabbccddeeff00112233"};
  profile_t mp = PERFTOOLS__PROFILES__PROFILE__INIT;
  mp.string_table = strings;
  mp.n_string_table = 4;
  for (int k = 0; k < 2; k++) {
    mapping_t m = PERFTOOLS__PROFILES__MAPPING__INIT;
    int64_t delta;
    m.memory_start = 0x400000 + 0x200000 * (uint64_t)k;
    m.memory_limit = m.memory_start + 0x100000;
    m.filename = 1 + k;
    m.build_id = k == 0 ? 3 : 0;            /* pb_mapping merges mappings of one build ID */
    uint64_t loc = pb_location(b, pb_mapping(b, &mp, &m, &delta), m.memory_start + 0x1234, NULL, 0);
    pb_sample(b, &loc, 1, (int64_t[]){1, 100 + k, 1, 100 + k}, 1);
  }
  snprintf(raw, sizeof raw, "%s/raw.pb.gz", dir);
  snprintf(out, sizeof out, "%s/out.pb.gz", dir);
  char err[512];
  ck_assert_msg(profile_write(pbuild_profile(b), raw, err, sizeof err) == 0, "%s", err);
  pbuild_free(b);
  probe_opts_t o = {.env = (const char *const[]){"DEBUGINFOD_URLS", NULL}, .watchdog_s = 60};
  probe_run_t r = probe_run(probe_getenv("MPROF_TEST_TOOL"), (const char *const[]){"symbolize", "-o", out, raw, NULL}, &o);
  probe_assert_exit0(&r, "symbolize (a FIFO as a mapping's file)");
  snprintf(want, sizeof want, "1 in %s: not a regular file (a FIFO", fifo);
  ck_assert_msg(strstr(r.err, want) != NULL, "no '%s' in:\n%s", want, r.err);
  ck_assert_msg(strstr(r.err, "1 in /dev/zero: not a regular file (a device") != NULL, "%s", r.err);
  ck_assert_msg(strstr(r.err, "0 of 2 locations named") != NULL, "%s", r.err);
  probe_run_free(&r);
  profile_t *p = tool_profile(out);
  ck_assert_uint_eq(p->n_sample, 2);
  ck_assert_uint_eq(p->n_location, 2);
  int64_t sum = 0;
  for (size_t i = 0; i < p->n_sample; i++) sum += p->sample[i]->value[3];
  ck_assert_int_eq(sum, 201);
  for (size_t i = 0; i < p->n_location; i++) ck_assert_uint_eq(p->location[i]->n_line, 0);
  profile_free(p);
}
END_TEST

/* Debug files found by .gnu_debuglink: the search path's first entry is the file's own directory, where
 * a FIFO of that name is skipped without blocking; the next, .debug, has the real ones. */
START_TEST(symbolize_debuglink_fifo)
{
  char dir[PATH_MAX], ids[2][128], path[PATH_MAX + 64], link[PATH_MAX + 64], raw[PATH_MAX + 16], out[PATH_MAX + 16];
  tool_tmpdir(dir, sizeof dir);
  stripped_profile(dir, ids);
  snprintf(path, sizeof path, "%s/bin/.debug", dir);
  ck_assert_int_eq(mkdir(path, 0755), 0);
  static const char *const names[2] = {"sym_prog", "libsym_lib.so"};
  for (int k = 0; k < 2; k++) {
    char bin[PATH_MAX + 32], dbg[PATH_MAX + 32], to[PATH_MAX + 64];
    snprintf(bin, sizeof bin, "%s/bin/%s", dir, names[k]);
    snprintf(dbg, sizeof dbg, "%s/debug/%s.debug", dir, names[k]);
    snprintf(link, sizeof link, "--add-gnu-debuglink=%s", dbg);
    sh((const char *const[]){probe_getenv("MPROF_TEST_OBJCOPY"), link, bin, NULL});   /* the host's */
    snprintf(to, sizeof to, "%s/bin/.debug/%s.debug", dir, names[k]);
    sh((const char *const[]){"/bin/cp", dbg, to, NULL});
    snprintf(to, sizeof to, "%s/bin/%s.debug", dir, names[k]);
    ck_assert_int_eq(mkfifo(to, 0600), 0);
  }
  snprintf(raw, sizeof raw, "%s/raw.pb.gz", dir);
  snprintf(out, sizeof out, "%s/named.pb.gz", dir);
  probe_opts_t o = {.env = (const char *const[]){"DEBUGINFOD_URLS", NULL}, .watchdog_s = 60};
  probe_run_t r = probe_run(probe_getenv("MPROF_TEST_TOOL"), (const char *const[]){"symbolize", "-o", out, raw, NULL}, &o);
  probe_assert_exit0(&r, "symbolize (debuglink)");
  probe_run_free(&r);
  assert_named(out);
}
END_TEST

/* A free TCP port on the loopback interface (the kernel picks it). */
static int free_port(void)
{
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof a;
  ck_assert_int_ge(fd, 0);
  ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
  ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
  close(fd);
  return ntohs(a.sin_port);
}

/* Reads debuginfod's log until it has recorded the debug files of both build IDs. */
static void wait_indexed(int fd, char ids[2][128])
{
  size_t cap = 1 << 16, n = 0;
  char *log = malloc(cap);
  ck_assert_ptr_nonnull(log);
  bool seen[2] = {false, false};
  while (!(seen[0] && seen[1])) {
    if (n + 4096 > cap) log = realloc(log, cap *= 2);
    ck_assert_ptr_nonnull(log);
    ssize_t r = read(fd, log + n, 4096);
    if (r < 0 && errno == EINTR) continue;
    ck_assert_msg(r > 0, "debuginfod ended:\n%.*s", (int)n, log);
    n += (size_t)r;
    log[n] = '\0';
    for (int k = 0; k < 2; k++) {
      char want[200];
      snprintf(want, sizeof want, "recorded buildid=%s file=", ids[k]);
      for (const char *s = strstr(log, want); s != NULL && !seen[k]; s = strstr(s + 1, want)) {
        const char *nl = strchr(s, '\n');
        seen[k] = nl != NULL && memmem(s, (size_t)(nl - s), "atype=D", 7) != NULL;
      }
    }
  }
  free(log);
}

START_TEST(symbolize_debuginfod)
{
  char dir[PATH_MAX], ids[2][128], bin[PATH_MAX + 8], db[PATH_MAX + 16], served[PATH_MAX + 8], port[16],
       urls[64], cache[PATH_MAX + 32], raw[PATH_MAX + 16];
  tool_tmpdir(dir, sizeof dir);
  stripped_profile(dir, ids);
  snprintf(bin, sizeof bin, "%s/bin", dir);
  sh((const char *const[]){"/bin/rm", "-r", bin, NULL});           /* as on another machine */
  snprintf(served, sizeof served, "%s/debug", dir);
  snprintf(db, sizeof db, "%s/debuginfod.sqlite", dir);
  snprintf(port, sizeof port, "%d", free_port());
  probe_opts_t o = {.watchdog_s = 120};
  probe_child_t d = probe_start("/usr/bin/debuginfod",
                                (const char *const[]){"-vvv", "-F", "--disable-source-scan", "-p", port, "-d", db, "-t",
                                                      "0", "-g", "0", served, NULL}, &o);
  wait_indexed(d.err, ids);
  snprintf(urls, sizeof urls, "DEBUGINFOD_URLS=http://127.0.0.1:%s", port);
  snprintf(cache, sizeof cache, "DEBUGINFOD_CACHE_PATH=%s/cache", dir);
  snprintf(raw, sizeof raw, "%s/raw.pb.gz", dir);
  probe_run_t r = tool_run((const char *const[]){"symbolize", raw, NULL},
                           (const char *const[]){urls, cache, "DEBUGINFOD_TIMEOUT=30", NULL});
  kill(d.pid, SIGTERM);
  probe_run_t dr = probe_finish(&d);
  probe_assert_exit0(&r, "symbolize through debuginfod");
  probe_run_free(&r);
  probe_run_free(&dr);
  assert_named(raw);

  /* pprof reads the names from the profile alone (the binaries are gone). */
  const char *go = "/usr/bin/go";
  if (access(go, X_OK) != 0) return;
  char home[PATH_MAX + 16];
  snprintf(home, sizeof home, "HOME=%s", dir);
  const char *const env[] = {home, "PPROF_BINARY_PATH=/nonexistent", "GOFLAGS=-mod=mod", NULL};
  probe_opts_t go_o = {.env = env, .watchdog_s = 120};
  r = probe_run(go, (const char *const[]){"tool", "pprof", "-raw", raw, NULL}, &go_o);
  probe_assert_exit0(&r, "go tool pprof -raw");
  ck_assert_msg(strstr(r.out, "shapes::Pool<double>::make") != NULL, "go tool pprof -raw:\n%s", r.out);
  probe_run_free(&r);
  r = probe_run(go, (const char *const[]){"tool", "pprof", "-top", "-sample_index=inuse_space", raw, NULL}, &go_o);
  probe_assert_exit0(&r, "go tool pprof -top");
  static const char *const names[] = {"build_buffer", "main", "symlib::Store::add_many", "Pool<double>::fill"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    ck_assert_msg(strstr(r.out, names[i]) != NULL, "go tool pprof -top lacks %s:\n%s", names[i], r.out);
  probe_run_free(&r);
}
END_TEST

/* Debian's python3 with python3.11-dbg (the CI check of a distribution binary): at least 90% of the
 * bytes allocated, and of those in use at exit when any are, are at named functions (the innermost
 * frame of their stack has a name). */
START_TEST(symbolize_python3_dbg)
{
  ck_assert_msg(access("/usr/lib/debug/.build-id", R_OK) == 0 && access("/usr/bin/python3.11", X_OK) == 0,
                "needs python3 and python3.11-dbg (scripts/install-deps.sh installs them)");
  if (!probe_same_arch("/usr/bin/python3.11"))
    MPROF_TEST_SKIP("/usr/bin/python3.11 is of another architecture (a cross build): the library built here "
                    "cannot be preloaded into it");
  char dir[PATH_MAX], out[PATH_MAX + 16];
  tool_tmpdir(dir, sizeof dir);
  snprintf(out, sizeof out, "%s/py.pb.gz", dir);
  probe_run_t r = tool_run((const char *const[]){"run", "-r", "64k", "-o", out, "/usr/bin/python3.11", "-c",
                                                 "k = [str(i) * 10 for i in range(200000)]\n"
                                                 "d = {i: [i] for i in range(50000)}\n", NULL},
                           (const char *const[]){"PYTHONMALLOC=malloc", NULL});
  probe_assert_exit0(&r, "mimalloc-prof run python3");
  probe_run_free(&r);
  profile_t *p = tool_profile(out);
  pindex_t ix;
  pindex_init(&ix, p);
  size_t ai = profile_sample_type(p, "alloc_space"), ii = profile_sample_type(p, "inuse_space");
  int64_t all[2] = {0, 0}, named[2] = {0, 0};
  bool obmalloc = false;
  for (size_t s = 0; s < p->n_sample; s++) {
    const sample_t *smp = p->sample[s];
    const location_t *leaf = smp->n_location_id ? pindex_location(&ix, smp->location_id[0]) : NULL;
    bool is_named = leaf != NULL && tool_line_name(p, &ix, leaf, 0)[0] != '\0';
    for (int k = 0; k < 2; k++) {
      int64_t v = smp->value[k ? ii : ai];
      all[k] += v;
      if (is_named) named[k] += v;
    }
    if (leaf != NULL && leaf->n_line > 0) {
      const function_t *f = pindex_function(&ix, leaf->line[0]->function_id);
      obmalloc |= f && strstr(pstr(p, f->filename), "obmalloc.c") != NULL && leaf->line[0]->line > 0;
    }
  }
  ck_assert_msg(all[0] > 0, "nothing sampled");
  ck_assert_msg(named[0] * 10 >= all[0] * 9, "alloc_space named %lld of %lld", (long long)named[0], (long long)all[0]);
  ck_assert_msg(named[1] * 10 >= all[1] * 9, "inuse_space named %lld of %lld", (long long)named[1], (long long)all[1]);
  ck_assert_msg(obmalloc, "no allocation site in Objects/obmalloc.c with a line: python3.11-dbg not used?");
  pindex_free(&ix);
  profile_free(p);
}
END_TEST

/* The line of `err` that contains `text` (into buf; the test fails when there is none). */
static const char *line_with(const char *err, const char *text, char *buf, size_t len)
{
  const char *at = strstr(err, text);
  ck_assert_msg(at != NULL, "no '%s' in:\n%s", text, err);
  const char *start = at, *end = strchr(at, '\n');
  while (start > err && start[-1] != '\n') start--;
  snprintf(buf, len, "%.*s", (int)(end != NULL ? end - start : (ptrdiff_t)strlen(start)), start);
  return buf;
}

/* How many of p's comments start with `prefix`. */
static size_t comments_with(const char *path, const char *prefix)
{
  profile_t *p = tool_profile(path);
  size_t n = 0;
  for (size_t i = 0; i < p->n_comment; i++) n += strncmp(pstr(p, p->comment[i]), prefix, strlen(prefix)) == 0;
  profile_free(p);
  return n;
}

/* Why a location is unnamed stays in the profile and is said again by every later run: the program
 * stripped of every symbol but main has a symbol table (the mapping is symbolized: has_functions), and
 * its other functions' locations are covered by no symbol.  The first run says so and records it as a
 * comment; a second and third run, which keep the symbolized mapping as it is, say the same line again
 * (they said "N of N named" and nothing else), and the profile keeps one such comment, which go tool
 * pprof -raw reads and shows. */
START_TEST(symbolize_reasons_kept)
{
  char dir[PATH_MAX], bin[PATH_MAX + 8], prog[PATH_MAX + 16], raw[PATH_MAX + 16], s1[PATH_MAX + 16],
       s2[PATH_MAX + 16], env[PATH_MAX + 32], prefix[PATH_MAX + 64], want[PATH_MAX + 64], l1[1024], l2[1024];
  tool_tmpdir(dir, sizeof dir);
  snprintf(bin, sizeof bin, "%s/bin", dir);
  mkdir(bin, 0755);
  snprintf(prog, sizeof prog, "%s/sym_prog", bin);
  sh((const char *const[]){"/bin/cp", probe_getenv("MPROF_TEST_SYM_PROG"), prog, NULL});
  sh((const char *const[]){"/bin/cp", probe_getenv("MPROF_TEST_SYM_LIB"), bin, NULL});
  sh((const char *const[]){probe_getenv("MPROF_TEST_STRIP"), "--strip-all", "-K", "main", prog, NULL});
  snprintf(raw, sizeof raw, "%s/raw.pb.gz", dir);
  snprintf(s1, sizeof s1, "%s/s1.pb.gz", dir);
  snprintf(s2, sizeof s2, "%s/s2.pb.gz", dir);
  snprintf(env, sizeof env, "LD_LIBRARY_PATH=%s", bin);
  probe_run_t r = tool_run((const char *const[]){"run", "--no-symbolize", "-r", "1", "-o", raw, prog, NULL},
                           (const char *const[]){env, NULL});
  probe_assert_exit0(&r, "mimalloc-prof run");
  probe_run_free(&r);
  snprintf(want, sizeof want, "in %s: no symbol covers the address", prog);
  r = tool_run((const char *const[]){"symbolize", "-o", s1, raw, NULL}, NULL);
  probe_assert_exit0(&r, "symbolize");
  line_with(r.err, want, l1, sizeof l1);
  probe_run_free(&r);
  snprintf(prefix, sizeof prefix, "mimalloc-prof symbolize: unnamed in %s (build ID ", prog);
  ck_assert_uint_eq(comments_with(s1, prefix), 1);
  r = tool_run((const char *const[]){"symbolize", "-o", s2, s1, NULL}, NULL);
  probe_assert_exit0(&r, "symbolize (again)");
  ck_assert_str_eq(line_with(r.err, want, l2, sizeof l2), l1);
  ck_assert_msg(strstr(r.err, "; unnamed:") != NULL, "%s", r.err);
  probe_run_free(&r);
  r = tool_run((const char *const[]){"symbolize", s2, NULL}, NULL);
  probe_assert_exit0(&r, "symbolize (in place)");
  ck_assert_str_eq(line_with(r.err, want, l2, sizeof l2), l1);
  probe_run_free(&r);
  ck_assert_uint_eq(comments_with(s2, prefix), 1);
  char go[PATH_MAX];
  if (go_find(go, sizeof go)) {
    probe_run_t raw_out = go_pprof(go, (const char *const[]){"-raw", s2, NULL});
    probe_assert_exit0(&raw_out, "go tool pprof -raw");
    ck_assert_msg(strstr(raw_out.out, "Comment: mimalloc-prof symbolize: unnamed in ") != NULL, "%s",
                  raw_out.out);
    probe_run_free(&raw_out);
  }
}
END_TEST

Suite *symbolize_suite(void)
{
  Suite *s = suite_create("symbolize");
  TCase *tc = tcase_create("symbolize");
  tcase_add_unchecked_fixture(tc, tool_dirs_setup, tool_dirs_teardown);
  tcase_set_timeout(tc, 240);
  tcase_add_test(tc, symbolize_unstripped);
  tcase_add_test(tc, symbolize_stripped_debug_dir);
  tcase_add_test(tc, symbolize_reasons_kept);
  tcase_add_test(tc, symbolize_fifo_mapping);
  tcase_add_test(tc, symbolize_debuglink_fifo);
  tcase_add_test(tc, symbolize_debuginfod);
  tcase_add_test(tc, symbolize_python3_dbg);
  suite_add_tcase(s, tc);
  return s;
}

#endif
