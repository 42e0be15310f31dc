/* pprof.c - writes a snapshot as a gzipped pprof heap profile (profile.proto, see proto/).
 *
 * The profile is assembled as protobuf-c messages in scratch memory (pmem.c), packed through a
 * ProtobufCBuffer that feeds zlib's deflate (gzip wrapper, allocator on the same scratch), and written
 * with write(2).  Nothing here calls malloc.
 *
 * pprof rules, where they apply: string_table[0] is ""; ids are 1..n; four sample types in the order
 * alloc_objects/count, alloc_space/bytes, inuse_objects/count, inuse_space/bytes, default inuse_space;
 * period_type space/bytes with period = the sample rate; every frame is a return address, so a
 * location's address is pc - 1 (it then falls inside the call instruction); one mapping per executable
 * PT_LOAD segment with its real file offset and GNU build ID, and has_functions etc. left false so that
 * pprof symbolizes from the files.
 *
 * Names: Debian's binaries are stripped, so pprof finds no symbols in them.  Each location therefore also
 * gets the name dladdr(3) gives (exported functions only; glibc checks the symbol's size, so an address
 * in an unexported function gets no name rather than a wrong one).  pprof replaces these with its own
 * results where the file has symbols or debug information, and keeps them where it has none.
 */
#include "internal.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "profile.pb-c.h"

typedef Perftools__Profiles__Profile   profile_t;
typedef Perftools__Profiles__ValueType value_type_t;
typedef Perftools__Profiles__Sample    sample_t;
typedef Perftools__Profiles__Mapping   mapping_t;
typedef Perftools__Profiles__Location  location_t;
typedef Perftools__Profiles__Function  function_t;
typedef Perftools__Profiles__Line      line_t;

/* Frames the profile should never show: the allocation entry points (pprof applies this regex to
 * function names after symbolization; they only appear when the library is linked statically). */
#define MPROF_DROP_FRAMES \
  "^(malloc|free|calloc|realloc|reallocarray|reallocf|reallocarr|posix_memalign|__posix_memalign|" \
  "aligned_alloc|memalign|valloc|pvalloc|cfree|vfree|_aligned_malloc|" \
  "__libc_(malloc|calloc|realloc|free|cfree|memalign|valloc|pvalloc)|operator new.*|operator delete.*|mprof_.*)$"

typedef struct writer_s {
  mprof_scratch_t scratch;
  /* strings */
  char          **strings;      /* string_table, n_strings of cap_strings */
  size_t          n_strings, cap_strings;
  uint32_t       *string_index; /* open addressing: string number + 1 */
  size_t          string_index_cap;
  /* mappings in dl_iterate_phdr's order (the program first: pprof takes mapping[0] for the main
   * binary), and the same sorted by start for lookups */
  mapping_t     **mappings;
  size_t          n_mappings, cap_mappings;
  mapping_t     **by_start;
  /* locations: pc -> id */
  uintptr_t      *loc_pc;       /* open addressing over pcs (0 = empty) */
  uint64_t       *loc_id;
  size_t          loc_cap;
  location_t    **locations;
  size_t          n_locations;
  /* functions: string id of the name -> function id */
  uint64_t       *fn_of_string;    /* indexed by string id, cap_fn entries */
  size_t          cap_fn;
  function_t    **functions;
  size_t          n_functions, cap_functions;
  bool            failed;       /* out of profiler memory */
} writer_t;

static void *wmalloc(writer_t *w, size_t bytes)
{
  void *p = mprof_scratch_alloc(&w->scratch, bytes);
  if (p == NULL) w->failed = true;
  return p;
}

/* Makes room for one more element in a scratch array of `elem` bytes each (doubling from `first`);
 * the old array stays behind in the scratch, which is released as a whole. */
static bool grow(writer_t *w, void *array, size_t *cap, size_t n, size_t elem, size_t first)
{
  void **a = array;
  if (n < *cap) return true;
  size_t c = *cap ? *cap * 2 : first;
  void *bigger = wmalloc(w, c * elem);
  if (bigger == NULL) return false;
  if (n != 0) memcpy(bigger, *a, n * elem);
  *a = bigger;
  *cap = c;
  return true;
}

/* ---------------------------------------------------------------------------------------------------
   Strings
--------------------------------------------------------------------------------------------------- */

static uint64_t str_hash(const char *s)
{
  uint64_t h = 1469598103934665603ull;
  while (*s) h = (h ^ (unsigned char)*s++) * 1099511628211ull;
  return h;
}

static bool strings_grow(writer_t *w)
{
  size_t cap = w->cap_strings ? w->cap_strings * 2 : 64;
  char **strings = wmalloc(w, cap * sizeof(char *));
  uint32_t *index = wmalloc(w, cap * 2 * sizeof(uint32_t));
  if (strings == NULL || index == NULL) return false;
  memcpy(strings, w->strings, w->n_strings * sizeof(char *));
  for (size_t n = 0; n < w->n_strings; n++) {
    size_t i = (size_t)str_hash(strings[n]) & (cap * 2 - 1);
    while (index[i] != 0) i = (i + 1) & (cap * 2 - 1);
    index[i] = (uint32_t)n + 1;
  }
  w->strings = strings;
  w->cap_strings = cap;
  w->string_index = index;
  w->string_index_cap = cap * 2;
  return true;
}

/* The string's index in string_table, adding a copy when new (0 = "" also on failure). */
static int64_t str_id(writer_t *w, const char *s)
{
  if (w->n_strings == w->cap_strings && !strings_grow(w)) return 0;
  size_t mask = w->string_index_cap - 1, i = (size_t)str_hash(s) & mask;
  for (; w->string_index[i] != 0; i = (i + 1) & mask) {
    if (strcmp(w->strings[w->string_index[i] - 1], s) == 0) return w->string_index[i] - 1;
  }
  size_t len = strlen(s);
  char *copy = wmalloc(w, len + 1);
  if (copy == NULL) return 0;
  memcpy(copy, s, len + 1);
  w->strings[w->n_strings] = copy;
  w->string_index[i] = (uint32_t)++w->n_strings;
  return (int64_t)w->n_strings - 1;
}

/* ---------------------------------------------------------------------------------------------------
   Mappings: one per executable PT_LOAD segment of every loaded object
--------------------------------------------------------------------------------------------------- */

/* The GNU build ID of an object as lower-case hex, or "" when it has none. */
static void build_id_hex(const struct dl_phdr_info *info, char *out, size_t out_len)
{
  out[0] = '\0';
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_NOTE) continue;
    const char *p = (const char *)(info->dlpi_addr + ph->p_vaddr), *end = p + ph->p_memsz;
    while (p + sizeof(ElfW(Nhdr)) <= end) {
      const ElfW(Nhdr) *n = (const ElfW(Nhdr) *)p;
      const char *name = p + sizeof *n, *desc = name + ((n->n_namesz + 3) & ~3u);
      if (n->n_type == NT_GNU_BUILD_ID && n->n_namesz == 4 && memcmp(name, "GNU", 4) == 0 &&
          desc + n->n_descsz <= end && n->n_descsz * 2 < out_len) {
        static const char hex[] = "0123456789abcdef";
        for (size_t k = 0; k < n->n_descsz; k++) {
          out[2 * k] = hex[(unsigned char)desc[k] >> 4];
          out[2 * k + 1] = hex[(unsigned char)desc[k] & 15];
        }
        out[2 * n->n_descsz] = '\0';
        return;
      }
      p = desc + ((n->n_descsz + 3) & ~3u);
    }
  }
}

static int add_mappings(struct dl_phdr_info *info, size_t size, void *arg)
{
  (void)size;
  writer_t *w = arg;
  const char *name = info->dlpi_name;
  char exe[4096], build_id[128];
  if (name == NULL || name[0] == '\0') {          /* the main program */
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return 0;
    exe[n] = '\0';
    name = exe;
  } else if (name[0] != '/') {
    return 0;                                     /* the vDSO and the like: no file to symbolize from */
  }
  build_id_hex(info, build_id, sizeof build_id);
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X)) continue;
    if (!grow(w, &w->mappings, &w->cap_mappings, w->n_mappings, sizeof(mapping_t *), 64)) return 1;
    mapping_t *m = wmalloc(w, sizeof *m);
    if (m == NULL) return 1;
    perftools__profiles__mapping__init(m);
    m->memory_start = info->dlpi_addr + ph->p_vaddr;
    m->memory_limit = m->memory_start + ph->p_memsz;
    m->file_offset = ph->p_offset;
    m->filename = str_id(w, name);
    m->build_id = str_id(w, build_id);
    w->mappings[w->n_mappings++] = m;
  }
  return 0;
}

/* Ids in dl_iterate_phdr's order, which reports the program first; a copy sorted by start serves the
 * lookups (insertion sort: glibc's qsort may call malloc; a few hundred segments at most). */
static void collect_mappings(writer_t *w)
{
  dl_iterate_phdr(add_mappings, w);
  for (size_t i = 0; i < w->n_mappings; i++) w->mappings[i]->id = i + 1;
  w->by_start = wmalloc(w, (w->n_mappings ? w->n_mappings : 1) * sizeof(mapping_t *));
  if (w->by_start == NULL) return;
  for (size_t i = 0; i < w->n_mappings; i++) {
    mapping_t *m = w->mappings[i];
    size_t j = i;
    for (; j > 0 && w->by_start[j - 1]->memory_start > m->memory_start; j--) w->by_start[j] = w->by_start[j - 1];
    w->by_start[j] = m;
  }
}

static uint64_t mapping_of(const writer_t *w, uintptr_t addr)
{
  size_t lo = 0, hi = w->n_mappings;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    const mapping_t *m = w->by_start[mid];
    if (addr < m->memory_start) hi = mid;
    else if (addr >= m->memory_limit) lo = mid + 1;
    else return m->id;
  }
  return 0;
}

/* ---------------------------------------------------------------------------------------------------
   Locations: one per distinct return address
--------------------------------------------------------------------------------------------------- */

/* The Function for a symbol name, added when new (0 on failure). */
static uint64_t function_id(writer_t *w, const char *name)
{
  int64_t sid = str_id(w, name);
  if (sid <= 0) return 0;
  while ((size_t)sid >= w->cap_fn) {              /* string ids only grow: extend to cover sid */
    if (!grow(w, &w->fn_of_string, &w->cap_fn, w->cap_fn, sizeof(uint64_t), 256)) return 0;
  }
  if (w->fn_of_string[sid] != 0) return w->fn_of_string[sid];
  if (!grow(w, &w->functions, &w->cap_functions, w->n_functions, sizeof(function_t *), 256)) return 0;
  function_t *f = wmalloc(w, sizeof *f);
  if (f == NULL) return 0;
  perftools__profiles__function__init(f);
  f->id = w->n_functions + 1;
  f->name = f->system_name = sid;
  w->functions[w->n_functions++] = f;
  return w->fn_of_string[sid] = f->id;
}

static const char *const drop_name[MI_PROF_DROP_REASONS] = {
  [MI_PROF_DROP_MEMORY] = "memory", [MI_PROF_DROP_TOO_LARGE] = "too_large",
  [MI_PROF_DROP_ALIGNMENT] = "alignment", [MI_PROF_DROP_NO_ARENA] = "no_arena",
  [MI_PROF_DROP_UNWIND] = "unwind", [MI_PROF_DROP_STACKS] = "stacks", [MI_PROF_DROP_FORK] = "fork",
  [MI_PROF_DROP_ARENA_FULL] = "arena_full"};

static bool is_dropped_frame(uintptr_t pc) { return pc != 0 && pc <= MI_PROF_DROP_REASONS; }

/* The name of the code at the location (dladdr's, or a "dropped" frame's), as its one Line. */
static void name_location(writer_t *w, location_t *l, uintptr_t pc)
{
  Dl_info info;
  char dropped[64];
  const char *name;
  if (is_dropped_frame(pc)) {
    snprintf(dropped, sizeof dropped, "[mimalloc-prof: dropped (%s)]", drop_name[pc - 1] ? drop_name[pc - 1] : "?");
    name = dropped;
  } else if (dladdr((void *)(uintptr_t)l->address, &info) != 0 && info.dli_sname != NULL) {
    name = info.dli_sname;
  } else {
    return;
  }
  uint64_t fid = function_id(w, name);
  line_t *line = wmalloc(w, sizeof *line);
  line_t **lines = wmalloc(w, sizeof *lines);
  if (fid == 0 || line == NULL || lines == NULL) return;
  perftools__profiles__line__init(line);
  line->function_id = fid;
  lines[0] = line;
  l->line = lines;
  l->n_line = 1;
}

static size_t loc_slot(const writer_t *w, uintptr_t pc)
{
  size_t mask = w->loc_cap - 1, i = (size_t)((pc >> 2) * 0x9e3779b97f4a7c15ull >> 20) & mask;
  while (w->loc_pc[i] != 0 && w->loc_pc[i] != pc) i = (i + 1) & mask;
  return i;
}

/* The pc -> location index grows with the distinct pcs (stacks share most of their frames, so sizing it
 * by the total number of frames wasted megabytes of the budget). */
static bool loc_reserve(writer_t *w)
{
  if (w->loc_cap != 0 && (w->n_locations + 1) * 2 <= w->loc_cap) return true;
  size_t old_cap = w->loc_cap, cap = old_cap ? old_cap * 2 : 1024;
  uintptr_t *old_pc = w->loc_pc;
  uint64_t *old_id = w->loc_id;
  w->loc_pc = wmalloc(w, cap * sizeof(uintptr_t));
  w->loc_id = wmalloc(w, cap * sizeof(uint64_t));
  if (w->loc_pc == NULL || w->loc_id == NULL) return false;
  w->loc_cap = cap;
  for (size_t k = 0; k < old_cap; k++) {
    if (old_pc[k] == 0) continue;
    size_t i = loc_slot(w, old_pc[k]);
    w->loc_pc[i] = old_pc[k];
    w->loc_id[i] = old_id[k];
  }
  return true;
}

static uint64_t location_id(writer_t *w, uintptr_t pc)
{
  if (!loc_reserve(w)) return 0;
  size_t i = loc_slot(w, pc);
  if (w->loc_pc[i] == pc) return w->loc_id[i];
  location_t *l = wmalloc(w, sizeof *l);
  if (l == NULL) return 0;
  perftools__profiles__location__init(l);
  l->id = w->n_locations + 1;
  if (!is_dropped_frame(pc)) {
    l->address = pc - 1;                          /* inside the call instruction */
    l->mapping_id = mapping_of(w, pc - 1);
  }
  name_location(w, l, pc);
  w->locations[w->n_locations++] = l;
  w->loc_pc[i] = pc;
  w->loc_id[i] = l->id;
  return l->id;
}

/* ---------------------------------------------------------------------------------------------------
   Output: protobuf-c packs into a buffer that deflates (gzip) and writes
--------------------------------------------------------------------------------------------------- */

#define OUT_CHUNK ((size_t)64 << 10)

typedef struct gz_sink_s {
  ProtobufCBuffer base;
  z_stream        z;
  unsigned char  *out;
  int             fd;
  int             err;        /* errno of the first failure, 0 = none */
} gz_sink_t;

static bool write_all(int fd, const unsigned char *p, size_t n, int *err)
{
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      *err = errno;
      return false;
    }
    p += w;
    n -= (size_t)w;
  }
  return true;
}

/* Runs deflate over whatever input is set, writing each full output chunk. */
static void gz_pump(gz_sink_t *g, int flush)
{
  int rc;
  do {
    g->z.next_out = g->out;
    g->z.avail_out = (uInt)OUT_CHUNK;
    rc = deflate(&g->z, flush);
    if (rc == Z_STREAM_ERROR) {
      g->err = EIO;
      return;
    }
    size_t have = OUT_CHUNK - g->z.avail_out;
    if (have != 0 && !write_all(g->fd, g->out, have, &g->err)) return;
  } while (g->z.avail_out == 0 || (flush == Z_FINISH && rc != Z_STREAM_END));
}

static void gz_append(ProtobufCBuffer *buffer, size_t len, const uint8_t *data)
{
  gz_sink_t *g = (gz_sink_t *)buffer;
  while (len > 0 && g->err == 0) {
    uInt n = len > (size_t)UINT32_MAX ? UINT32_MAX : (uInt)len;
    g->z.next_in = (Bytef *)(uintptr_t)data;
    g->z.avail_in = n;
    gz_pump(g, Z_NO_FLUSH);
    data += n;
    len -= n;
  }
}

static voidpf gz_alloc(voidpf opaque, uInt items, uInt size)
{
  return mprof_scratch_alloc(opaque, (size_t)items * size);
}

static void gz_free(voidpf opaque, voidpf p) { (void)opaque, (void)p; }   /* released with the scratch */

/* ---------------------------------------------------------------------------------------------------
   The profile
--------------------------------------------------------------------------------------------------- */

static value_type_t *value_type(writer_t *w, const char *type, const char *unit)
{
  value_type_t *v = wmalloc(w, sizeof *v);
  if (v == NULL) return NULL;
  perftools__profiles__value_type__init(v);
  v->type = str_id(w, type);
  v->unit = str_id(w, unit);
  return v;
}

static void add_comment(writer_t *w, profile_t *p, const char *text)
{
  p->comment[p->n_comment++] = str_id(w, text);
}

/* Comments: what a reader needs to trust the numbers (rate, unwinder, drops, options). */
static void add_comments(writer_t *w, profile_t *p, const mprof_pprof_meta_t *meta)
{
  char line[256];
  p->comment = wmalloc(w, 4 * sizeof(int64_t));
  if (p->comment == NULL) return;
  snprintf(line, sizeof line, "mimalloc-prof %d.%d.%d: sampled heap profile, one sample per %llu bytes on average",
           MI_PROF_VERSION_MAJOR, MI_PROF_VERSION_MINOR, MI_PROF_VERSION_PATCH,
           (unsigned long long)meta->sample_rate);
  add_comment(w, p, line);
  size_t n = (size_t)snprintf(line, sizeof line, "dropped samples:");
  uint64_t total = 0;
  for (int i = 0; i < MI_PROF_DROP_REASONS; i++) {
    if (drop_name[i] == NULL) continue;
    total += meta->dropped[i];
    n += (size_t)snprintf(line + n, sizeof line - n, " %s=%llu", drop_name[i], (unsigned long long)meta->dropped[i]);
  }
  snprintf(line + n, sizeof line - n, " total=%llu", (unsigned long long)total);
  add_comment(w, p, line);
  snprintf(line, sizeof line, "samples=%llu live=%llu untracked_frees=%llu unwinder=%s bt_max=%llu accum=%d",
           (unsigned long long)meta->totals->samples, (unsigned long long)meta->totals->live,
           (unsigned long long)meta->totals->untracked_frees, mprof_unwind_name(mprof_unwind_current()),
           (unsigned long long)mprof_option(MPROF_OPT_BT_MAX), (int)mprof_option(MPROF_OPT_ACCUM));
  add_comment(w, p, line);
}

static sample_t *make_sample(writer_t *w, const mprof_snap_stack_t *st)
{
  sample_t *s = wmalloc(w, sizeof *s);
  int64_t *v = wmalloc(w, 4 * sizeof(int64_t));
  uint64_t *ids = wmalloc(w, (st->depth ? st->depth : 1) * sizeof(uint64_t));
  if (s == NULL || v == NULL || ids == NULL) return NULL;
  perftools__profiles__sample__init(s);
  v[0] = (int64_t)st->counts.alloc_objects;
  v[1] = (int64_t)st->counts.alloc_bytes;
  v[2] = (int64_t)st->counts.inuse_objects;
  v[3] = (int64_t)st->counts.inuse_bytes;
  for (size_t i = 0; i < st->depth; i++) ids[i] = location_id(w, st->frames[i]);
  s->value = v;
  s->n_value = 4;
  s->location_id = ids;
  s->n_location_id = st->depth;
  return s;
}

static bool build_profile(writer_t *w, profile_t *p, const mprof_snapshot_t *snap, const mprof_pprof_meta_t *meta)
{
  perftools__profiles__profile__init(p);
  str_id(w, "");                                  /* string_table[0] */
  static const char *const types[4][2] = {
    {"alloc_objects", "count"}, {"alloc_space", "bytes"}, {"inuse_objects", "count"}, {"inuse_space", "bytes"}};
  p->sample_type = wmalloc(w, 4 * sizeof(value_type_t *));
  if (p->sample_type == NULL) return false;
  for (int i = 0; i < 4; i++) p->sample_type[i] = value_type(w, types[i][0], types[i][1]);
  p->n_sample_type = 4;
  p->period_type = value_type(w, "space", "bytes");
  p->period = (int64_t)meta->sample_rate;
  p->default_sample_type = str_id(w, "inuse_space");
  p->drop_frames = str_id(w, MPROF_DROP_FRAMES);
  p->time_nanos = (int64_t)meta->start_ns;
  p->duration_nanos = (int64_t)(meta->now_ns - meta->start_ns);
  collect_mappings(w);

  size_t frames = 0;
  for (size_t i = 0; i < snap->n; i++) frames += snap->stack[i].depth;
  w->locations = wmalloc(w, (frames ? frames : 1) * sizeof(location_t *));   /* pointers: 8 B a frame */
  p->sample = wmalloc(w, (snap->n ? snap->n : 1) * sizeof(sample_t *));
  if (w->failed) return false;
  for (size_t i = 0; i < snap->n; i++) {
    sample_t *s = make_sample(w, &snap->stack[i]);
    if (s == NULL) return false;
    p->sample[p->n_sample++] = s;
  }
  add_comments(w, p, meta);
  p->mapping = w->mappings;
  p->n_mapping = w->n_mappings;
  p->location = w->locations;
  p->n_location = w->n_locations;
  p->function = w->functions;
  p->n_function = w->n_functions;
  p->string_table = w->strings;
  p->n_string_table = w->n_strings;
  return !w->failed;
}

bool mprof_pprof_write(int fd, const mprof_snapshot_t *snap, const mprof_pprof_meta_t *meta)
{
  writer_t w;
  memset(&w, 0, sizeof w);
  profile_t profile;
  gz_sink_t g = {.base = {.append = gz_append}, .fd = fd};
  int err = ENOMEM;
  if (!build_profile(&w, &profile, snap, meta)) goto done;
  g.out = wmalloc(&w, OUT_CHUNK);
  g.z.zalloc = gz_alloc;
  g.z.zfree = gz_free;
  g.z.opaque = &w.scratch;
  if (g.out == NULL || deflateInit2(&g.z, 6, Z_DEFLATED, 15 + 16 /* gzip */, 8, Z_DEFAULT_STRATEGY) != Z_OK) goto done;
  protobuf_c_message_pack_to_buffer(&profile.base, &g.base);
  if (g.err == 0) gz_pump(&g, Z_FINISH);
  deflateEnd(&g.z);
  err = g.err;
done:
  mprof_scratch_release(&w.scratch);
  if (err != 0) errno = err;
  return err == 0;
}
