/* runtree.c - the profiles of the processes `run` started: the program and every process it started
 * that runs with the library (MIMALLOC_PROF_* and LD_PRELOAD are inherited, across exec too), each
 * writing PREFIX.PID.SEQ.KIND.pb.gz.
 *
 * A profile's program is the file of its first mapping (the library writes the program's segments
 * first, as pprof expects).  With -o, the final profiles of all the processes become one (tree_merge):
 * each sample gets the labels `process` (the program's file name) and `pid`, so that `top --by process`
 * splits them and `--tag process=NAME` keeps one; the header (the peak and the timeline, which describe
 * one process's heap) is that of the only process with samples when there is one, else without them.
 * With -p, every profile of the run is symbolized and renamed PREFIX.PROGRAM.PID.SEQ.KIND.pb.gz
 * (tree_keep).  Only regular files are taken, and names are changed with RENAME_NOREPLACE: a name that
 * exists, whatever it is, is never replaced.
 */
#include "tool.h"

#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sym.h"

/* The pattern of every profile under prefix. */
static bool dumps_pattern(const char *prefix, char *buf, size_t len)
{
  int n = snprintf(buf, len, "%s.*.*.?.pb.gz", prefix);
  return n > 0 && (size_t)n < len;
}

bool tree_before(const char *prefix, tree_t *t)
{
  char pattern[PATH_MAX];
  memset(t, 0, sizeof *t);
  if (!dumps_pattern(prefix, pattern, sizeof pattern)) return false;
  int rc = glob(pattern, 0, NULL, &t->before);
  t->have_before = rc == 0;
  return rc == 0 || rc == GLOB_NOMATCH;
}

static bool was_there(const tree_t *t, const char *path)
{
  for (size_t i = 0; t->have_before && i < t->before.gl_pathc; i++)
    if (strcmp(t->before.gl_pathv[i], path) == 0) return true;
  return false;
}

/* PID, SEQ and KIND of a name PREFIX.PID.SEQ.KIND.pb.gz; false when it is not one. */
static bool parse_name(const char *name, size_t prefix_len, tree_dump_t *d)
{
  const char *p = name + prefix_len;
  char *end;
  if (*p++ != '.' || *p < '0' || *p > '9') return false;
  unsigned long pid = strtoul(p, &end, 10);
  if (*end != '.' || pid == 0 || pid > 0x7fffffff || end[1] < '0' || end[1] > '9') return false;
  strtoul(end + 1, &end, 10);
  if (*end != '.' || strchr("fiuspm", end[1]) == NULL || end[1] == '\0' || strcmp(end + 2, ".pb.gz") != 0)
    return false;
  d->pid = (pid_t)pid;
  d->kind = end[1];
  return true;
}

bool tree_after(const char *prefix, tree_t *t)
{
  char pattern[PATH_MAX];
  glob_t g;
  struct stat st;
  if (!dumps_pattern(prefix, pattern, sizeof pattern)) return false;
  int rc = glob(pattern, 0, NULL, &g);
  if (rc == GLOB_NOMATCH) return true;
  if (rc != 0) return false;
  t->dump = calloc(g.gl_pathc, sizeof *t->dump);
  for (size_t i = 0; t->dump != NULL && i < g.gl_pathc; i++) {
    tree_dump_t *d = &t->dump[t->n];
    const char *path = g.gl_pathv[i];
    if (was_there(t, path) || lstat(path, &st) != 0 || !S_ISREG(st.st_mode) ||
        !parse_name(path, strlen(prefix), d) ||
        snprintf(d->path, sizeof d->path, "%s", path) >= (int)sizeof d->path)
      continue;
    t->n++;
  }
  globfree(&g);
  return t->dump != NULL;
}

void tree_free(tree_t *t)
{
  if (t->have_before) globfree(&t->before);
  free(t->dump);
  memset(t, 0, sizeof *t);
}

size_t tree_finals(const tree_t *t)
{
  size_t n = 0;
  for (size_t i = 0; i < t->n; i++) n += t->dump[i].kind == 'f';
  return n;
}

void tree_program(const profile_t *p, char *buf, size_t len)
{
  const char *file = p->n_mapping > 0 ? pstr(p, p->mapping[0]->filename) : "";
  const char *base = strrchr(file, '/');
  base = base != NULL ? base + 1 : file;
  snprintf(buf, len, "%s", base[0] != '\0' ? base : "unknown");
}

/* ---------------------------------------------------------------------------------------------------
   -o: one profile of the tree
--------------------------------------------------------------------------------------------------- */

int tree_merge(const tree_t *t, pid_t main_pid, const char *out, char *err, size_t err_len)
{
  size_t n = 0, with_samples = 0, header = 0;
  profile_t **p = calloc(t->n + 1, sizeof *p);
  tree_dump_t **d = calloc(t->n + 1, sizeof *d);
  int rc = p != NULL && d != NULL ? 0 : -1;
  if (rc != 0) snprintf(err, err_len, "out of memory");
  for (int pass = 0; rc == 0 && pass < 2; pass++) {   /* the program's own first: its header by default */
    for (size_t i = 0; rc == 0 && i < t->n; i++) {
      if (t->dump[i].kind != 'f' || (t->dump[i].pid == main_pid) != (pass == 0)) continue;
      char why[512];
      profile_t *q = profile_read(t->dump[i].path, why, sizeof why);
      if (q == NULL) {
        tool_note("left out of the profile: %s", why);
        continue;
      }
      if (n > 0 && !profile_compatible(p[0], q, why, sizeof why)) {
        tool_note("left out of the profile: %s (%s)", t->dump[i].path, why);
        profile_free(q);
        continue;
      }
      if (q->n_sample > 0 && with_samples++ == 0) header = n;
      d[n] = &t->dump[i];
      p[n++] = q;
    }
  }
  pbuild_t *b = NULL;
  if (rc == 0 && n == 0) {
    snprintf(err, err_len, "no profile could be read");
    rc = -1;
  }
  if (rc == 0) {
    profile_t h;
    int64_t *kept = NULL;
    b = pbuild_new(with_samples <= 1 ? p[header] : heap_header_alone(p[0], &h, &kept));
    free(kept);
    if (b == NULL) rc = -1;
  }
  for (size_t i = 0; rc == 0 && i < n; i++) {
    char name[256];
    tree_program(p[i], name, sizeof name);
    pb_label_t labels[2] = {{pb_string(b, "process"), pb_string(b, name), 0, 0},
                            {pb_string(b, "pid"), 0, (int64_t)d[i]->pid, 0}};
    if (i != header) pb_keep_max_period(b, p[i]);
    pb_extra_labels(b, labels, 2);
    if (!pb_add_profile(b, p[i], 1)) rc = -1;
  }
  if (rc == 0) {
    char note[96];
    snprintf(note, sizeof note, "mimalloc-prof run: %zu processes, labelled process and pid", n);
    pb_comment(b, note);
    if (pbuild_failed(b)) rc = -1;
  }
  if (rc == 0) rc = profile_write(pbuild_profile(b), out, err, err_len) == 0 ? 0 : -1;
  else if (b == NULL || pbuild_failed(b)) snprintf(err, err_len, "out of memory");
  pbuild_free(b);
  for (size_t i = 0; p != NULL && i < n; i++) profile_free(p[i]);
  free(p);
  free(d);
  return rc;
}

/* ---------------------------------------------------------------------------------------------------
   -p: every profile, symbolized and named after its program
--------------------------------------------------------------------------------------------------- */

/* name with every byte but letters, digits and ._+- as '_' (a file name part of one component). */
static void name_part(const char *name, char *buf, size_t len)
{
  size_t i = 0;
  for (; name[i] != '\0' && i + 1 < len; i++) {
    char c = name[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strchr("._+-", c);
    buf[i] = ok && !(i == 0 && c == '.') ? c : '_';
  }
  buf[i] = '\0';
}

void tree_keep(tree_t *t, const char *prefix, bool rename_them, const sym_opts_t *so)
{
  size_t unsymbolized = 0;
  for (size_t i = 0; i < t->n; i++) {
    tree_dump_t *d = &t->dump[i];
    if (so != NULL) {
      sym_opts_t quiet = *so;
      quiet.quiet = d->kind != 'f';            /* a summary for each process's final profile only */
      if (symbolize_file(d->path, NULL, &quiet) != 0) unsymbolized++;
    }
    char err[512], name[256], part[256], to[PATH_MAX];
    profile_t *p = profile_read(d->path, err, sizeof err);
    if (p == NULL) continue;
    tree_program(p, name, sizeof name);
    d->samples = p->n_sample;
    profile_free(p);
    snprintf(d->program, sizeof d->program, "%s", name);
    if (!rename_them) continue;
    name_part(name, part, sizeof part);
    int n = snprintf(to, sizeof to, "%s.%s%s", prefix, part, d->path + strlen(prefix));
    if (n <= 0 || (size_t)n >= sizeof to) continue;
    if (renameat2(AT_FDCWD, d->path, AT_FDCWD, to, RENAME_NOREPLACE) == 0)
      snprintf(d->path, sizeof d->path, "%s", to);
    else
      tool_note("%s keeps its name: %s cannot be made (%s)", d->path, to, strerror(errno));
  }
  if (unsymbolized > 0)
    tool_note("%zu of %zu profiles keep their raw addresses (see above)", unsymbolized, t->n);
}
