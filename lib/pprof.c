/* pprof.c - writes a snapshot as a gzipped pprof heap profile (profile.proto, see proto/), streaming.
 *
 * Nothing is assembled in memory: each element of the Profile message (a string, a mapping, a function, a
 * location, a sample) is packed on its own by protobuf-c, as a Profile holding just that element, and
 * appended to the output.  A protobuf message is the concatenation of its fields and a repeated field may
 * be split anywhere, so the concatenation decodes as one Profile, its repeated fields in the order written
 * (a string's index in string_table is the order in which it was emitted).  The bytes go through a
 * staging buffer into zlib's deflate (gzip wrapper) and out with write(2).
 *
 * Memory: zlib's state and two buffers (fixed), plus two words per frame of the snapshot, nothing per
 * sample: the sorted distinct return addresses (location id = index + 1) and their names.  pmem.c keeps
 * that much free for one dump whatever the tables take (pmem.h derives the numbers), so a full
 * MIMALLOC_PROF_MAX_BYTES never prevents a profile.  Nothing here calls malloc and no loader lock is
 * taken (the names come from objects.c), so it runs under dump_lock.
 *
 * pprof rules, where they apply: string_table[0] is ""; ids are 1..n; six sample types in the order
 * alloc_objects/count, alloc_space/bytes, inuse_objects/count, inuse_space/bytes, peak_objects/count,
 * peak_space/bytes, and with MIMALLOC_PROF_LIFETIMES two more, freed_objects/count, freed_space/bytes;
 * default inuse_space;
 * period_type space/bytes with period = the sample rate; every frame is a return address, so a
 * location's address is pc - 1 (it then falls inside the call instruction); one mapping per executable
 * PT_LOAD segment with its real file offset and GNU build ID, the program's first, and has_functions etc.
 * left false so that pprof symbolizes from the files.
 *
 * Names: Debian's binaries are stripped, so pprof finds no symbols in them.  Each location therefore also
 * gets the name of the exported function holding it (objects.c, dladdr's rule).  pprof replaces these
 * with its own where the file has symbols or debug information, and keeps them where it has none.  A
 * dropped sample's stack, whose one frame is MI_PROF_FRAME_DROPPED(reason), becomes a location with no
 * mapping and no address and one line naming the function "[mimalloc-prof: dropped (reason)]" (with an
 * empty system name).
 *
 * A sample is a label set of a stack (or a lifetime bucket of one: a freed sample, with values in the
 * freed types only), with the labels thread (a string), bytes (a number in bytes) and lifetime (a number
 * in nanoseconds).  The peak is a comment, "mimalloc-prof peak: BYTES bytes at TIME_NS", and so is a stop
 * ("mimalloc-prof stopped: sampling stopped at TIME_NS; ...": mi_prof_stop keeps the data); the timeline is
 * a field of our own (proto/profile.proto's Timeline), not comments: pprof prints every comment above
 * its reports, and a thousand points would bury them.
 */
#include "pprof.h"
#include "lazyload.h"
#include "objects.h"
#include "options.h"
#include "peak.h"
#include "pmem.h"
#include "snapshot.h"
#include "stacktab.h"
#include "unwind.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "profile.pb-c.h"
#include "lazylib.h"

typedef Perftools__Profiles__Profile   profile_t;
typedef Perftools__Profiles__ValueType value_type_t;
typedef Perftools__Profiles__Sample    sample_t;
typedef Perftools__Profiles__Mapping   mapping_t;
typedef Perftools__Profiles__Location  location_t;
typedef Perftools__Profiles__Function  function_t;
typedef Perftools__Profiles__Line      line_t;
typedef Perftools__Profiles__Label     label_t;
typedef Perftools__Profiles__Timeline  timeline_t;

/* Frames the profile should never show: the allocation entry points (pprof applies this regex to
 * function names after symbolization; they only appear when the library is linked statically). */
#define MPROF_DROP_FRAMES \
  "^(malloc|free|calloc|realloc|reallocarray|reallocf|reallocarr|posix_memalign|__posix_memalign|" \
  "aligned_alloc|memalign|valloc|pvalloc|cfree|vfree|_aligned_malloc|" \
  "__libc_(malloc|calloc|realloc|free|cfree|memalign|valloc|pvalloc)|" \
  "operator new.*|operator delete.*|mprof_.*)$"

#define STAGE_BYTES ((size_t)8 << 10)        /* protobuf-c's small appends collect here before deflate */
#define OUT_BYTES   ((size_t)8 << 10)        /* deflate's output, written when full */
_Static_assert(STAGE_BYTES + OUT_BYTES <= MPROF_DUMP_IO_BYTES, "MPROF_DUMP_IO_BYTES");
_Static_assert(MPROF_DUMP_FRAME_BYTES >=
                   sizeof(uintptr_t) /* snapshot */ + sizeof(uintptr_t) + sizeof(uint64_t),
               "MPROF_DUMP_FRAME_BYTES");

/* A dropped frame's name key: above every object's (objects.c). */
#define DROPPED_KEY(reason) (((uint64_t)UINT32_MAX << 32) | (uint32_t)(reason))

static const char *const drop_names[MI_PROF_DROP_REASONS] = {
  [MI_PROF_DROP_MEMORY] = "memory", [MI_PROF_DROP_TOO_LARGE] = "too_large",
  [MI_PROF_DROP_ALIGNMENT] = "alignment", [MI_PROF_DROP_NO_ARENA] = "no_arena",
  [MI_PROF_DROP_UNWIND] = "unwind", [MI_PROF_DROP_STACKS] = "stacks", [MI_PROF_DROP_FORK] = "fork",
  [MI_PROF_DROP_ARENA_FULL] = "arena_full"};

const char *mprof_drop_name(mi_prof_drop_reason_t why)
{
  return (unsigned)why < MI_PROF_DROP_REASONS && drop_names[why] != NULL ? drop_names[why] : "unknown";
}

typedef struct writer_s {
  ProtobufCBuffer base;           /* protobuf-c appends here */
  z_stream        z;
  unsigned char  *stage, *out;    /* STAGE_BYTES and OUT_BYTES */
  size_t          staged;
  unsigned char  *zmem;           /* zlib's memory, handed out in order */
  size_t          zleft;
  int             fd;
  int             err;            /* errno of the first failure, 0 = none */
  int64_t         strings;        /* strings emitted: the next one's index */
  int64_t         s_count, s_bytes, s_thread, s_lifetime, s_nanoseconds;   /* their indices */
} writer_t;

/* ---------------------------------------------------------------------------------------------------
   Output: staging buffer -> deflate (gzip) -> write(2)
--------------------------------------------------------------------------------------------------- */

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

/* Deflates what is staged (and with Z_FINISH, ends the stream), writing each full output buffer.  Without
 * Z_FINISH, deflate returns with room left in the output only once it has taken all the input. */
static void pump(writer_t *w, int flush)
{
  w->z.next_in = w->stage;
  w->z.avail_in = (uInt)w->staged;
  int rc;
  do {
    w->z.next_out = w->out;
    w->z.avail_out = (uInt)OUT_BYTES;
    rc = deflate(&w->z, flush);
    if (rc == Z_STREAM_ERROR) {
      w->err = EIO;
      return;
    }
    size_t have = OUT_BYTES - w->z.avail_out;
    if (have != 0 && !write_all(w->fd, w->out, have, &w->err)) return;
  } while (w->z.avail_out == 0 || (flush == Z_FINISH && rc != Z_STREAM_END));
  w->staged = 0;
}

static void append(ProtobufCBuffer *buffer, size_t len, const uint8_t *data)
{
  writer_t *w = (writer_t *)buffer;
  while (len > 0 && w->err == 0) {
    size_t n = STAGE_BYTES - w->staged < len ? STAGE_BYTES - w->staged : len;
    memcpy(w->stage + w->staged, data, n);
    w->staged += n;
    data += n;
    len -= n;
    if (w->staged == STAGE_BYTES) pump(w, Z_NO_FLUSH);
  }
}

static voidpf zalloc(voidpf opaque, uInt items, uInt size)
{
  writer_t *w = opaque;
  size_t bytes = ((size_t)items * size + 15) & ~(size_t)15;
  if (bytes > w->zleft) return Z_NULL;
  void *p = w->zmem;
  w->zmem += bytes;
  w->zleft -= bytes;
  return p;
}

static void zfree(voidpf opaque, voidpf p) { (void)opaque, (void)p; }   /* the region goes as a whole */

/* ---------------------------------------------------------------------------------------------------
   Elements: each packed as a Profile holding only it
--------------------------------------------------------------------------------------------------- */

static void emit(writer_t *w, const profile_t *one)
{
  if (w->err == 0) protobuf_c_message_pack_to_buffer(&one->base, &w->base);
}

/* One element of a repeated field of Profile (string_table, mapping, function, location, sample), emitted
 * as a Profile holding only it: concatenated, such messages decode as one with every element. */
#define EMIT_ONE(w, field, elem)                                                                          \
  do {                                                                                                    \
    profile_t one_ = PERFTOOLS__PROFILES__PROFILE__INIT;                                                  \
    one_.n_##field = 1;                                                                                   \
    one_.field = (elem);                                                                                  \
    emit((w), &one_);                                                                                     \
  } while (0)

/* Emits s as the next string of string_table; its index. */
static int64_t emit_string(writer_t *w, const char *s)
{
  char *str = (char *)(uintptr_t)s;
  EMIT_ONE(w, string_table, &str);
  return w->strings++;
}

#define MAX_COMMENTS 5

/* Comments: what a reader needs to trust the numbers (rate, drops, unwinder, options) and the peak.
 * Their indices into ids; how many. */
static size_t comments(writer_t *w, const mprof_pprof_meta_t *meta, int64_t ids[MAX_COMMENTS])
{
  char line[320];
  size_t k = 0;
  snprintf(line, sizeof line,
           "mimalloc-prof %d.%d.%d: sampled heap profile, one sample per %llu bytes on average",
           MI_PROF_VERSION_MAJOR, MI_PROF_VERSION_MINOR, MI_PROF_VERSION_PATCH,
           (unsigned long long)meta->sample_rate);
  ids[k++] = emit_string(w, line);
  size_t n = (size_t)snprintf(line, sizeof line, "dropped samples:");
  uint64_t total = 0;
  for (int i = 0; i < MI_PROF_DROP_REASONS; i++) {
    total += meta->dropped[i];
    n += (size_t)snprintf(line + n, sizeof line - n, " %s=%llu", mprof_drop_name((mi_prof_drop_reason_t)i),
                          (unsigned long long)meta->dropped[i]);
  }
  snprintf(line + n, sizeof line - n, " total=%llu", (unsigned long long)total);
  ids[k++] = emit_string(w, line);
  snprintf(line, sizeof line, "samples=%llu live=%llu untracked_frees=%llu unwinder=%s bt_max=%llu accum=%d "
           "lifetimes=%d", (unsigned long long)meta->totals->samples, (unsigned long long)meta->totals->live,
           (unsigned long long)meta->totals->untracked_frees, mprof_unwind_name(mprof_unwind_current()),
           (unsigned long long)mprof_option(MPROF_OPT_BT_MAX), (int)mprof_option(MPROF_OPT_ACCUM),
           (int)mprof_lifetimes);
  ids[k++] = emit_string(w, line);
  if (meta->stopped_ns != 0) {
    snprintf(line, sizeof line, "mimalloc-prof stopped: sampling stopped at %llu; in use counts the blocks "
             "sampled until then that are still live", (unsigned long long)meta->stopped_ns);
    ids[k++] = emit_string(w, line);
  }
  if (meta->totals->peak_ns == 0) return k;       /* no session yet */
  snprintf(line, sizeof line, "mimalloc-prof peak: %llu bytes at %llu",
           (unsigned long long)meta->totals->peak_bytes, (unsigned long long)meta->totals->peak_ns);
  ids[k++] = emit_string(w, line);
  return k;
}

/* The timeline (snapshot.c's points), into `arrays` (3 * n_points words). */
static void emit_timeline(writer_t *w, const mprof_snapshot_t *snap, int64_t *arrays)
{
  size_t n = snap->n_points;
  if (n == 0) return;
  timeline_t tl = PERFTOOLS__PROFILES__TIMELINE__INIT;
  const mprof_point_t *pt = snap->timeline;
  tl.start_nanos = (int64_t)(pt[0].t_ns + snap->realtime_offset_ns);
  tl.offset_nanos = arrays;
  tl.inuse_bytes = arrays + n;
  tl.alloc_bytes = arrays + 2 * n;
  tl.n_offset_nanos = tl.n_inuse_bytes = tl.n_alloc_bytes = n;
  for (size_t i = 0; i < n; i++) {
    tl.offset_nanos[i] = (int64_t)(pt[i].t_ns - pt[0].t_ns);
    tl.inuse_bytes[i] = (int64_t)pt[i].inuse_bytes;
    tl.alloc_bytes[i] = (int64_t)pt[i].alloc_bytes;
  }
  profile_t one = PERFTOOLS__PROFILES__PROFILE__INIT;
  one.mimalloc_prof_timeline = &tl;
  emit(w, &one);
}

static void emit_header(writer_t *w, const mprof_pprof_meta_t *meta)
{
  static const char *const type_names[8] = {"alloc_objects", "alloc_space", "inuse_objects", "inuse_space",
                                            "peak_objects",  "peak_space",  "freed_objects", "freed_space"};
  size_t n_types = mprof_lifetimes ? 8 : 6;
  emit_string(w, "");                             /* string_table[0] */
  w->s_count = emit_string(w, "count");
  w->s_bytes = emit_string(w, "bytes");
  value_type_t types[8], period_type = PERFTOOLS__PROFILES__VALUE_TYPE__INIT;
  value_type_t *type_ptr[8];
  for (size_t i = 0; i < n_types; i++) {
    perftools__profiles__value_type__init(&types[i]);
    types[i].type = emit_string(w, type_names[i]);
    types[i].unit = i % 2 == 0 ? w->s_count : w->s_bytes;
    type_ptr[i] = &types[i];
  }
  period_type.type = emit_string(w, "space");
  period_type.unit = w->s_bytes;
  w->s_thread = emit_string(w, "thread");
  w->s_lifetime = emit_string(w, "lifetime");
  w->s_nanoseconds = emit_string(w, "nanoseconds");
  int64_t comment[MAX_COMMENTS];
  size_t n_comments = comments(w, meta, comment);
  profile_t one = PERFTOOLS__PROFILES__PROFILE__INIT;
  one.n_sample_type = n_types;
  one.sample_type = type_ptr;
  one.period_type = &period_type;
  one.period = (int64_t)meta->sample_rate;
  one.default_sample_type = types[3].type;
  one.drop_frames = emit_string(w, MPROF_DROP_FRAMES);
  one.time_nanos = (int64_t)meta->time_ns;
  one.duration_nanos = (int64_t)meta->duration_ns;
  one.n_comment = n_comments;
  one.comment = comment;
  emit(w, &one);
}

/* One mapping per executable segment, in the loader's order (pprof takes mapping[0] for the program). */
static void emit_mappings(writer_t *w, const mprof_objects_t *objs)
{
  int64_t path = 0, build_id = 0;
  size_t last = SIZE_MAX;
  for (size_t i = 0; i < objs->n_segments; i++) {
    const mprof_segment_t *seg = &objs->segment[i];
    if (seg->object != last) {                    /* an object's segments are consecutive */
      last = seg->object;
      path = emit_string(w, objs->object[last].path);
      build_id = emit_string(w, objs->object[last].build_id);
    }
    mapping_t m = PERFTOOLS__PROFILES__MAPPING__INIT, *mp = &m;
    m.id = i + 1;
    m.memory_start = seg->start;
    m.memory_limit = seg->limit;
    m.file_offset = seg->file_offset;
    m.filename = path;
    m.build_id = build_id;
    EMIT_ONE(w, mapping, &mp);
  }
}

/* The function name a key stands for. */
static bool key_name(const mprof_objects_t *objs, uint64_t key, char *buf, size_t len)
{
  if (key >> 32 == UINT32_MAX) {
    snprintf(buf, len, "[mimalloc-prof: dropped (%s)]",
             mprof_drop_name((mi_prof_drop_reason_t)(uint32_t)key));
    return true;
  }
  return mprof_objects_key_name(objs, key, buf, len);
}

/* Locations, one per distinct pc (id = index + 1), and before each the Function its name starts, if new.
 * The pcs are sorted and a function's code is one range, so a function's pcs are consecutive: a new
 * name key starts a new Function. */
static void emit_locations(writer_t *w, const mprof_objects_t *objs, const uintptr_t *pcs,
                           const uint64_t *names, size_t n)
{
  uint64_t function_id = 0, function_key = 0;
  char name[4096];
  for (size_t j = 0; j < n; j++) {
    uint64_t key = names[j];
    if (key != 0 && key != function_key) {
      if (!key_name(objs, key, name, sizeof name)) {
        key = 0;                                  /* unreadable (an object unloaded since): no name */
      } else {
        function_t f = PERFTOOLS__PROFILES__FUNCTION__INIT, *fp = &f;
        f.id = ++function_id;
        f.name = emit_string(w, name);
        /* A dropped frame has no system name: pprof then shows the name as it is (with system_name equal
         * to it, pprof's C++ heuristics take the brackets for C++ and cut the parenthesised reason). */
        if (key >> 32 != UINT32_MAX) f.system_name = f.name;
        EMIT_ONE(w, function, &fp);
        function_key = key;
      }
    }
    location_t l = PERFTOOLS__PROFILES__LOCATION__INIT, *lp = &l;
    line_t line = PERFTOOLS__PROFILES__LINE__INIT, *linep = &line;
    l.id = j + 1;
    if (!MPROF_FRAME_IS_DROPPED(pcs[j])) {
      l.address = pcs[j] - 1;                     /* inside the call instruction */
      l.mapping_id = mprof_objects_find(objs, pcs[j] - 1);
    }
    if (key != 0) {
      line.function_id = function_id;
      l.n_line = 1;
      l.line = &linep;
    }
    EMIT_ONE(w, location, &lp);
  }
}

/* The thread labels' strings, each emitted once: strs[i] is sample i's (0 when it has none).  `slots`
 * (2n, a power of two at least) is a hash set of the distinct ones, by the first sample that has each. */
static void emit_threads(writer_t *w, const mprof_snapshot_t *snap, int64_t *strs, uint32_t *slots,
                         size_t n_slots)
{
  memset(slots, 0, n_slots * sizeof *slots);
  for (size_t i = 0; i < snap->n; i++) {
    const char *t = snap->stack[i].labels.thread;
    strs[i] = 0;
    if (t[0] == '\0') continue;
    uint64_t h[2];
    memcpy(h, t, sizeof h);
    size_t k = (size_t)(((h[0] ^ (h[1] * 0x9e3779b97f4a7c15ull)) * 0xff51afd7ed558ccdull) >> 20);
    k &= n_slots - 1;
    for (; slots[k] != 0; k = (k + 1) & (n_slots - 1)) {
      if (memcmp(snap->stack[slots[k] - 1].labels.thread, t, MPROF_THREAD_LABEL) == 0) break;
    }
    if (slots[k] == 0) {
      slots[k] = (uint32_t)i + 1;
      char name[MPROF_THREAD_LABEL + 1] = {0};
      memcpy(name, t, MPROF_THREAD_LABEL);
      strs[i] = emit_string(w, name);
    } else {
      strs[i] = strs[slots[k] - 1];
    }
  }
}

static void emit_samples(writer_t *w, const mprof_snapshot_t *snap, const uintptr_t *pcs, size_t n,
                         const int64_t *thread_strs)
{
  uint64_t ids[MPROF_BT_MAX_CAP];
  for (size_t i = 0; i < snap->n && w->err == 0; i++) {
    const mprof_snap_stack_t *st = &snap->stack[i];
    size_t depth = st->depth < MPROF_BT_MAX_CAP ? st->depth : MPROF_BT_MAX_CAP;
    for (size_t k = 0; k < depth; k++) ids[k] = mprof_lower_bound(pcs, n, st->frames[k]) + 1;
    int64_t v[8] = {(int64_t)st->counts.alloc_objects, (int64_t)st->counts.alloc_bytes,
                    (int64_t)st->counts.inuse_objects, (int64_t)st->counts.inuse_bytes,
                    (int64_t)st->counts.peak_objects,  (int64_t)st->counts.peak_bytes,
                    (int64_t)st->freed_objects,        (int64_t)st->freed_bytes};
    label_t labels[3], *label_ptr[3];
    size_t n_labels = 0;
    if (thread_strs[i] != 0) {
      perftools__profiles__label__init(&labels[n_labels]);
      labels[n_labels].key = w->s_thread;
      labels[n_labels++].str = thread_strs[i];
    }
    if (st->labels.bytes != 0) {
      perftools__profiles__label__init(&labels[n_labels]);
      labels[n_labels].key = w->s_bytes;
      labels[n_labels].num = (int64_t)st->labels.bytes;
      labels[n_labels++].num_unit = w->s_bytes;
    }
    if (st->lifetime != 0) {
      perftools__profiles__label__init(&labels[n_labels]);
      labels[n_labels].key = w->s_lifetime;
      labels[n_labels].num = (int64_t)mprof_lifetime_floor((unsigned)st->lifetime - 1);
      labels[n_labels++].num_unit = w->s_nanoseconds;
    }
    for (size_t k = 0; k < n_labels; k++) label_ptr[k] = &labels[k];
    sample_t s = PERFTOOLS__PROFILES__SAMPLE__INIT, *sp = &s;
    s.n_location_id = depth;
    s.location_id = ids;
    s.n_value = mprof_lifetimes ? 8 : 6;
    s.value = v;
    s.n_label = n_labels;
    s.label = label_ptr;
    EMIT_ONE(w, sample, &sp);
  }
}

/* ---------------------------------------------------------------------------------------------------
   The distinct return addresses
--------------------------------------------------------------------------------------------------- */

static void sift_down(uintptr_t *a, size_t root, size_t n)
{
  for (size_t child; (child = 2 * root + 1) < n; root = child) {
    if (child + 1 < n && a[child + 1] > a[child]) child++;
    if (a[root] >= a[child]) return;
    uintptr_t t = a[root];
    a[root] = a[child];
    a[child] = t;
  }
}

/* Heapsort, ascending: no malloc (glibc's qsort may call it), no recursion, O(n log n) at worst. */
static void sort_words(uintptr_t *a, size_t n)
{
  for (size_t i = n / 2; i-- > 0;) sift_down(a, i, n);
  for (size_t end = n; end-- > 1;) {
    uintptr_t t = a[0];
    a[0] = a[end];
    a[end] = t;
    sift_down(a, 0, end);
  }
}

/* Every frame of the snapshot into pcs, sorted, duplicates removed; the number left. */
static size_t distinct_pcs(const mprof_snapshot_t *snap, uintptr_t *pcs)
{
  size_t n = 0;
  for (size_t i = 0; i < snap->n; i++) {
    memcpy(pcs + n, snap->stack[i].frames, snap->stack[i].depth * sizeof(uintptr_t));
    n += snap->stack[i].depth;
  }
  sort_words(pcs, n);
  size_t u = 0;
  for (size_t i = 0; i < n; i++)
    if (u == 0 || pcs[i] != pcs[u - 1]) pcs[u++] = pcs[i];
  return u;
}

bool mprof_pprof_write(int fd, const mprof_snapshot_t *snap, const mprof_objects_t *objs,
                       const mprof_pprof_meta_t *meta)
{
  if (!mprof_lazy_loaded(MPROF_LAZY_PPROF)) {        /* loaded before dump_lock (dump.c), or never */
    errno = ELIBACC;
    return false;
  }
  size_t frames = 0;
  for (size_t i = 0; i < snap->n; i++) frames += snap->stack[i].depth;
  size_t words = frames != 0 ? frames : 1, n = 0, region = STAGE_BYTES + OUT_BYTES + MPROF_DUMP_ZLIB_BYTES;
  size_t n_slots = 2;
  while (n_slots < 2 * snap->n) n_slots *= 2;
  size_t threads_bytes = snap->n * sizeof(int64_t) + n_slots * sizeof(uint32_t);
  size_t timeline_bytes = 3 * (snap->n_points != 0 ? snap->n_points : 1) * sizeof(int64_t);
  writer_t w = {.base = {.append = append}, .fd = fd};
  uintptr_t *pcs = mprof_pmem_map_temp(words * sizeof(uintptr_t));
  unsigned char *mem = mprof_pmem_map_temp(region);
  int64_t *thread_strs = mprof_pmem_map_temp(threads_bytes);
  int64_t *timeline = mprof_pmem_map_temp(timeline_bytes);
  uint64_t *names = NULL;
  bool zlib = false;
  int err = ENOMEM;
  if (pcs == NULL || mem == NULL || thread_strs == NULL || timeline == NULL) goto done;
  n = distinct_pcs(snap, pcs);
  names = mprof_pmem_map_temp((n != 0 ? n : 1) * sizeof(uint64_t));
  if (names == NULL) goto done;
  mprof_objects_name(objs, pcs, n, names, NULL);
  for (size_t j = 0; j < n && MPROF_FRAME_IS_DROPPED(pcs[j]); j++) names[j] = DROPPED_KEY(pcs[j] - 1);

  w.stage = mem;
  w.out = mem + STAGE_BYTES;
  w.zmem = mem + STAGE_BYTES + OUT_BYTES;
  w.zleft = MPROF_DUMP_ZLIB_BYTES;
  w.z.zalloc = zalloc;
  w.z.zfree = zfree;
  w.z.opaque = &w;
  if (deflateInit2(&w.z, 6, Z_DEFLATED, MPROF_DUMP_ZLIB_WBITS + 16 /* gzip */, MPROF_DUMP_ZLIB_MEMLEVEL,
                   Z_DEFAULT_STRATEGY) != Z_OK)
    goto done;
  zlib = true;
  emit_header(&w, meta);
  emit_timeline(&w, snap, timeline);
  emit_mappings(&w, objs);
  emit_locations(&w, objs, pcs, names, n);
  emit_threads(&w, snap, thread_strs, (uint32_t *)(thread_strs + snap->n), n_slots);
  emit_samples(&w, snap, pcs, n, thread_strs);
  if (w.err == 0) pump(&w, Z_FINISH);
  err = w.err;
done:
  if (zlib) deflateEnd(&w.z);
  mprof_pmem_unmap_temp(names, (n != 0 ? n : 1) * sizeof(uint64_t));
  mprof_pmem_unmap_temp(mem, region);
  mprof_pmem_unmap_temp(thread_strs, threads_bytes);
  mprof_pmem_unmap_temp(timeline, timeline_bytes);
  mprof_pmem_unmap_temp(pcs, words * sizeof(uintptr_t));
  if (err != 0) errno = err;
  return err == 0;
}
