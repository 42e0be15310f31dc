/* control.c - the control socket (MIMALLOC_PROF_CONTROL): a Unix stream socket per process through which
 * the process's owner (or root) starts, stops and resets sampling, reads the statistics and takes a heap
 * profile, with a small length-prefixed protocol (mimalloc_prof(3), CONTROL SOCKET; control.h).
 *
 * At load (mprof_control_init, from the constructor): the private directory (ctldir.c), the socket
 * DIR/PID.sock, and a socket pair whose one end wakes the profiler thread (mprof_control_wake, from
 * profiler.c's request(): async-signal-safe).  Everything else runs on the profiler thread
 * (mprof_control_wait), which polls the wake end, the listening socket and the connections:
 *   - peers are checked with SO_PEERCRED: the same effective user ID as the process, or root; anyone else
 *     gets one "error EACCES" line and is closed, and counted;
 *   - at most MAX_CONNS connections are served at a time; more wait in the listen backlog;
 *   - all I/O is non-blocking; a request must arrive whole within MPROF_CONTROL_IO_TIMEOUT_S seconds of the
 *     connection (or of the previous reply), and a reply must make progress within as long, else the
 *     connection is closed; a malformed frame gets an error reply (and a close when the stream cannot be
 *     resynchronised: a bad length);
 *   - a dump is written to a memfd first (mi_prof_dump_fd, the dump machinery as it is: dump_lock, the
 *     snapshot, no malloc) and only then streamed: no profiler lock is ever held while a client is slow.
 * Connection state is static and nothing here calls malloc (tests/nomalloc_shim.c runs with the socket on).
 *
 * Descriptors the program closes.  A daemon that closes every descriptor it did not open (at start-up,
 * after this constructor ran) closes ours, and may get the same numbers back for its own files.  So no
 * descriptor is used without checking that it is still ours (fstat: the same device and inode, which are
 * distinct for every socket and memfd): the wake end is checked before each wake, the others after each
 * wait.  When the listening socket or the wake pair is gone they are opened again (and the path bound
 * again); a connection that is gone is forgotten, never closed.  Closing the wake pair's writing end
 * wakes the thread (the reading end sees a hang-up), so this happens at once.
 *
 * The directory and the socket are made by fsout.c: the directory is ours and closed to others (checked
 * without following a link, at start-up and at each reopen), the socket is bound inside the directory
 * that was checked.  The socket is removed at exit (by the process that made it; a fork child has none:
 * its copies of the descriptors are closed, as it has no profiler thread) and replaced at start-up when
 * a socket of ours of the same name is left (an earlier program of the same PID, which exec'ed or was
 * killed); anything else at that name is left alone, and there is no socket.
 */
#include "control.h"
#include "api.h"
#include "ctldir.h"
#include "fsout.h"
#include "options.h"
#include "pprof.h"
#include "record.h"
#include "warn.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define MAX_CONNS      16
#define LISTEN_BACKLOG 128
#define IO_TIMEOUT_NS  ((uint64_t)MPROF_CONTROL_IO_TIMEOUT_S * 1000000000u)
#define ACCEPT_PAUSE_NS ((uint64_t)100 * 1000000u)   /* after accept fails for lack of descriptors */
#define REPLY_BYTES    2048                          /* a reply's length word, status line and text */
#define STREAM_BYTES   ((size_t)16 << 10)            /* a dump is sent in pieces of this size */
#define NO_WAKE        UINT64_MAX

typedef struct fd_id_s {
  int   fd;                         /* -1: none */
  dev_t dev;
  ino_t ino;
} fd_id_t;

typedef struct conn_s {
  fd_id_t  id;                      /* id.fd -1: a free slot */
  bool     writing;                 /* sending a reply; else reading a request */
  bool     close_after;             /* close once the reply is out */
  uint64_t deadline;                /* CLOCK_MONOTONIC ns: reading, the whole request; writing, progress */
  uint32_t have;                    /* bytes of in[] received */
  unsigned char in[4 + MPROF_CONTROL_MAX_REQUEST];
  unsigned char out[REPLY_BYTES];   /* the length word, then the status line and text */
  uint32_t out_len, out_off;
  fd_id_t  dump;                    /* the profile that follows out[] (a memfd) */
  uint64_t dump_len, dump_off;
} conn_t;

static bool enabled;                /* served (the thread's; false in a fork child) */
static pid_t owner;                 /* the process that made the socket: it removes it at exit */
static char sock_path[MPROF_CONTROL_PATH_MAX];   /* DIR/PID.sock */
static char sock_dir[MPROF_CONTROL_PATH_MAX];    /* DIR */
static const char *sock_name;                    /* PID.sock, in sock_path */
static bool sock_dir_named;                      /* DIR is MIMALLOC_PROF_CONTROL's */
static fd_id_t listener = {-1, 0, 0}, wake_r = {-1, 0, 0}, wake_w = {-1, 0, 0};
static uint64_t wake_word = NO_WAKE;  /* wake_w as (low 32 bits of its inode << 32) | fd (atomic) */
static uint64_t accept_paused_until;
static conn_t conns[MAX_CONNS];
static unsigned char stream_buf[STREAM_BYTES];
static uint64_t n_requests, n_refused, n_malformed, n_timeouts;   /* the thread's */
static int reopen_said;
/* The thread looks at its descriptors before every wait, and waits RECHECK_IDLE_MS at most: a program
 * that closes every descriptor and reuses the numbers while the thread is in poll(2) is not always seen
 * there (poll looks the numbers up again when it wakes, finds the program's idle pipe where the wake
 * pair was, and sleeps on: the socket stayed dead for good in 4 of 5 adversarial runs).  After a
 * reopen it looks again after RECHECK_FIRST_MS, then twice as long each time up to the idle bound, for a
 * program that is still closing descriptors can close the new ones too. */
#define RECHECK_FIRST_MS 10
#define RECHECK_IDLE_MS 1000
static int recheck_ms = RECHECK_IDLE_MS;   /* the longest wait now */

static uint64_t mono_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---------------------------------------------------------------------------------------------------
   Descriptors that stay ours
--------------------------------------------------------------------------------------------------- */

static bool remember(fd_id_t *id, int fd)
{
  struct stat st;
  if (fstat(fd, &st) != 0) return false;
  *id = (fd_id_t){fd, st.st_dev, st.st_ino};
  return true;
}

static bool still_ours(const fd_id_t *id)
{
  struct stat st;
  return id->fd >= 0 && fstat(id->fd, &st) == 0 && st.st_dev == id->dev && st.st_ino == id->ino;
}

/* Closes the descriptor if it is still ours; forgets it either way. */
static void forget(fd_id_t *id)
{
  if (still_ours(id)) close(id->fd);
  id->fd = -1;
}

/* ---------------------------------------------------------------------------------------------------
   The socket and the wake pair
--------------------------------------------------------------------------------------------------- */

/* The listening socket, bound in the checked directory (fsout.c: replacing only a socket of ours left
 * there), and the wake pair. */
static bool open_all(void)
{
  int sv[2], fd = -1, dir = -1;
  const char *why;
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0) return false;
  if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)) < 0) goto fail;
  if ((dir = mprof_fsout_private_dir(sock_dir, sock_dir_named, &why)) < 0) goto fail;
  if (!mprof_fsout_bind(fd, dir, sock_dir, sock_name)) goto fail;
  if (listen(fd, LISTEN_BACKLOG) != 0) {
    int err = errno;
    mprof_fsout_remove_own(dir, sock_name, S_IFSOCK);
    errno = err;
    goto fail;
  }
  close(dir);
  dir = -1;
  if (!remember(&listener, fd) || !remember(&wake_r, sv[0]) || !remember(&wake_w, sv[1])) goto fail;
  __atomic_store_n(&wake_word, ((uint64_t)(uint32_t)wake_w.ino << 32) | (uint32_t)wake_w.fd,
                   __ATOMIC_RELEASE);
  return true;
fail:;
  int err = errno;
  if (dir >= 0) close(dir);
  if (fd >= 0) close(fd);
  close(sv[0]);
  close(sv[1]);
  listener.fd = wake_r.fd = wake_w.fd = -1;
  errno = err;
  return false;
}

/* The socket goes at exit (only ours, only a socket: fsout.c). */
static void at_exit(void)
{
  if (owner == getpid()) mprof_fsout_unbind(sock_dir, sock_name);
}

MPROF_COLD MPROF_LOAD_TEXT bool mprof_control_init(void)
{
  uint64_t v = mprof_option(MPROF_OPT_CONTROL);
  if (v == 0) return false;
  const char *named = v > 1 ? (const char *)(uintptr_t)v : NULL;   /* else 1: the default directory */
  const char *why;
  const char *xdg = secure_getenv("XDG_RUNTIME_DIR");
  if (!mprof_control_dir(named, xdg, (unsigned)geteuid(), sock_dir, sizeof sock_dir) ||
      !mprof_control_socket(sock_dir, (int)getpid(), sock_path, sizeof sock_path)) {
    mprof_warn("MIMALLOC_PROF_CONTROL: the socket's path would be longer than %d bytes; no control socket",
               MPROF_CONTROL_PATH_MAX - 1);
    return false;
  }
  sock_dir_named = named != NULL;
  sock_name = strrchr(sock_path, '/') + 1;
  int dir = mprof_fsout_private_dir(sock_dir, sock_dir_named, &why);
  if (dir < 0) {
    if (errno == EPERM)
      mprof_warn("MIMALLOC_PROF_CONTROL: %s %s; no control socket", sock_dir, why);
    else
      mprof_warn("MIMALLOC_PROF_CONTROL: cannot create %s: %s; no control socket", sock_dir,
                 strerrorname_np(errno));
    return false;
  }
  close(dir);
  for (size_t i = 0; i < MAX_CONNS; i++) conns[i].id.fd = conns[i].dump.fd = -1;
  if (!open_all()) {
    mprof_warn("cannot create the control socket %s: %s", sock_path, strerrorname_np(errno));
    return false;
  }
  owner = getpid();
  enabled = true;
  atexit(at_exit);
  return true;
}

bool mprof_control_active(void) { return enabled; }

/* Async-signal-safe (fstat, send): one byte to the wake pair, if its end is still ours. */
void mprof_control_wake(void)
{
  uint64_t w = __atomic_load_n(&wake_word, __ATOMIC_ACQUIRE);
  struct stat st;
  if (w == NO_WAKE) return;
  int fd = (int)(uint32_t)w;
  if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode) || (uint32_t)st.st_ino != (uint32_t)(w >> 32)) return;
  ssize_t r = send(fd, "w", 1, MSG_DONTWAIT | MSG_NOSIGNAL);   /* EAGAIN: a wake is pending already */
  (void)r;
}

/* The listening socket or the wake pair was closed by the program: open them again. */
static void reopen(void)
{
  __atomic_store_n(&wake_word, NO_WAKE, __ATOMIC_RELEASE);
  forget(&listener);
  forget(&wake_r);
  forget(&wake_w);
  bool ok = open_all();
  if (mprof_warn_once_claim(&reopen_said))
    mprof_warn("the program closed the control socket's descriptors; %s %s",
               ok ? "opened again:" : "it is off:", ok ? sock_path : strerrorname_np(errno));
  if (!ok) enabled = false;
  recheck_ms = RECHECK_FIRST_MS;
}

/* ---------------------------------------------------------------------------------------------------
   Replies
--------------------------------------------------------------------------------------------------- */

static void put_be32(unsigned char *p, uint32_t v)
{
  p[0] = (unsigned char)(v >> 24), p[1] = (unsigned char)(v >> 16), p[2] = (unsigned char)(v >> 8);
  p[3] = (unsigned char)v;
}

/* Sets the reply's text (truncated to what fits); `extra` bytes (a profile) follow it. */
static void reply(conn_t *c, uint64_t extra, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void reply(conn_t *c, uint64_t extra, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf((char *)c->out + 4, REPLY_BYTES - 4, fmt, ap);
  va_end(ap);
  if (n < 0) n = 0;
  if ((size_t)n > REPLY_BYTES - 5) n = REPLY_BYTES - 5;
  put_be32(c->out, (uint32_t)((uint64_t)n + extra));
  c->out_len = 4 + (uint32_t)n;
  c->out_off = 0;
  c->writing = true;
}

static void reply_errno(conn_t *c, int err, const char *what)
{
  reply(c, 0, "error %s: %s\n", strerrorname_np(err), what);
}

/* ---------------------------------------------------------------------------------------------------
   Requests
--------------------------------------------------------------------------------------------------- */

/* "ok", `first` (a "key value" line or ""), then what a start or reset discarded, one "key value" each. */
static void reply_discarded(conn_t *c, const char *first, const mprof_discarded_t *g)
{
  reply(c, 0, "ok\n%sdiscarded_live_samples %llu\ndiscarded_inuse_bytes %llu\ndiscarded_samples %llu\n"
        "discarded_alloc_bytes %llu\ndiscarded_peak_bytes %llu\ndiscarded_stacks %llu\n", first,
        (unsigned long long)g->live, (unsigned long long)g->inuse_bytes, (unsigned long long)g->samples,
        (unsigned long long)g->alloc_bytes, (unsigned long long)g->peak_bytes, (unsigned long long)g->stacks);
}

static void serve_start(conn_t *c, const char *arg)
{
  uint64_t rate = 0;
  char why[96];
  mprof_discarded_t gone;
  if (arg != NULL && mprof_option_parse("MIMALLOC_PROF_SAMPLE_RATE", arg, &rate, why, sizeof why) != 1) {
    reply(c, 0, "error EINVAL: rate '%s' %s\n", arg, why);
    return;
  }
  if (!mprof_api_control_start((size_t)rate, &gone)) {
    int err = errno;
    reply_errno(c, err, err == EALREADY ? "sampling is on already" : "sampling could not start");
    return;
  }
  mi_prof_stats_t st;
  mi_prof_stats(&st, sizeof st);
  char line[64];
  snprintf(line, sizeof line, "sample_rate %llu\n", (unsigned long long)st.sample_rate);
  reply_discarded(c, line, &gone);
}

/* The stop keeps what the session recorded: the reply says how much. */
static void serve_stop(conn_t *c)
{
  if (!mprof_api_control_stop()) {
    reply_errno(c, errno, "sampling is off");
    return;
  }
  mi_prof_stats_t st;
  mi_prof_stats(&st, sizeof st);
  reply(c, 0, "ok\nkept_live_samples %llu\nkept_inuse_bytes %llu\nkept_samples %llu\nkept_alloc_bytes %llu\n",
        (unsigned long long)st.live_samples, (unsigned long long)st.inuse_bytes,
        (unsigned long long)st.samples, (unsigned long long)st.alloc_bytes);
}

static void serve_reset(conn_t *c)
{
  mprof_discarded_t gone;
  if (!mprof_api_control_reset(&gone)) reply_errno(c, errno, "sampling is off and nothing is kept");
  else reply_discarded(c, mi_prof_is_enabled() ? "state sampling\n" : "state stopped\n", &gone);
}

static void serve_stats(conn_t *c)
{
  mi_prof_stats_t st;
  mi_prof_stats(&st, sizeof st);
  char *p = (char *)c->out + 4;
  size_t room = REPLY_BYTES - 5, n = 0;
#define LINE(...) n += (size_t)snprintf(p + n, n < room ? room - n : 0, __VA_ARGS__)
  LINE("ok\nprotocol %d\npid %d\nstate %s\n", MPROF_CONTROL_PROTOCOL, (int)getpid(),
       mi_prof_is_enabled() ? "sampling" : "stopped");
  const struct { const char *key; uint64_t value; } rows[] = {
    {"sample_rate", st.sample_rate}, {"samples", st.samples}, {"live_samples", st.live_samples},
    {"inuse_objects", st.inuse_objects}, {"inuse_bytes", st.inuse_bytes}, {"alloc_objects", st.alloc_objects},
    {"alloc_bytes", st.alloc_bytes}, {"untracked_frees", st.untracked_frees},
    {"profiler_bytes", st.profiler_bytes}, {"profiler_bytes_max", st.profiler_bytes_max},
    {"arena_bytes", st.arena_bytes}, {"arena_resident_bytes", st.arena_resident_bytes},
    {"sampled_bytes", st.sampled_bytes}, {"slow_path_calls", st.slow_path_calls},
    {"control_requests", n_requests}, {"control_refused", n_refused}, {"control_malformed", n_malformed},
    {"control_timeouts", n_timeouts}};
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
    LINE("%s %llu\n", rows[i].key, (unsigned long long)rows[i].value);
  for (int r = 0; r < MI_PROF_DROP_REASONS; r++)
    LINE("dropped_%s %llu\n", mprof_drop_name((mi_prof_drop_reason_t)r), (unsigned long long)st.dropped[r]);
#undef LINE
  if (n > room) n = room;
  put_be32(c->out, (uint32_t)n);
  c->out_len = 4 + (uint32_t)n;
  c->out_off = 0;
  c->writing = true;
}

/* The profile, written to a memfd now (this thread waits for the dump, never for the client), sent after
 * the status line. */
static void serve_dump(conn_t *c)
{
  int fd = memfd_create("mimalloc-prof-dump", MFD_CLOEXEC);
  struct stat st;
  if (fd < 0 || !remember(&c->dump, fd)) {
    int err = errno;
    if (fd >= 0) close(fd);
    reply_errno(c, err, "no memory file for the profile");
    return;
  }
  bool ok = mi_prof_dump_fd(fd) && fstat(fd, &st) == 0;
  int err = ok ? ((uint64_t)st.st_size > UINT32_MAX - 3 ? EFBIG : 0) : errno;
  if (err != 0) {
    forget(&c->dump);
    reply_errno(c, err,
                err == ENOMEM ? "cannot write the profile (MIMALLOC_PROF_MAX_BYTES)"
                              : "cannot write the profile");
    return;
  }
  c->dump_len = (uint64_t)st.st_size;
  c->dump_off = 0;
  reply(c, c->dump_len, "ok\n");
}

/* A whole request in c->in: printable text, "WORD" or "WORD ARG" (one trailing newline is allowed). */
static void serve_request(conn_t *c)
{
  uint32_t len = c->have - 4;
  char text[MPROF_CONTROL_MAX_REQUEST + 1];
  memcpy(text, c->in + 4, len);
  if (len > 0 && text[len - 1] == '\n') len--;
  text[len] = '\0';
  c->have = 0;
  n_requests++;
  for (uint32_t i = 0; i < len; i++) {
    if (text[i] < 0x20 || text[i] > 0x7e) {
      n_malformed++;
      reply(c, 0, "error EINVAL: a request is printable text\n");
      return;
    }
  }
  char *arg = strchr(text, ' ');
  if (arg != NULL) *arg++ = '\0';
  if (strcmp(text, "start") == 0) {
    serve_start(c, arg);
  } else if (arg != NULL) {
    n_malformed++;
    reply(c, 0, "error EINVAL: '%s' takes no argument\n", text);
  } else if (strcmp(text, "stop") == 0) {
    serve_stop(c);
  } else if (strcmp(text, "reset") == 0) {
    serve_reset(c);
  } else if (strcmp(text, "stats") == 0) {
    serve_stats(c);
  } else if (strcmp(text, "dump") == 0) {
    serve_dump(c);
  } else {
    n_malformed++;
    reply(c, 0, "error EINVAL: unknown request '%s' (start [RATE], stop, reset, stats, dump)\n", text);
  }
}

/* ---------------------------------------------------------------------------------------------------
   Connections
--------------------------------------------------------------------------------------------------- */

static void conn_close(conn_t *c)
{
  forget(&c->dump);
  forget(&c->id);
  c->writing = c->close_after = false;
  c->have = 0;
}

/* Back to reading: the next request has the whole timeout again. */
static void conn_idle(conn_t *c, uint64_t now)
{
  forget(&c->dump);
  c->writing = false;
  c->have = 0;
  c->deadline = now + IO_TIMEOUT_NS;
}

/* Sends what the socket takes: the text, then the profile (read back from the memfd piece by piece). */
static void conn_write(conn_t *c, uint64_t now)
{
  for (;;) {
    const unsigned char *p;
    size_t n;
    if (c->out_off < c->out_len) {
      p = c->out + c->out_off;
      n = c->out_len - c->out_off;
    } else if (c->dump.fd >= 0 && c->dump_off < c->dump_len) {
      size_t want =
          c->dump_len - c->dump_off < STREAM_BYTES ? (size_t)(c->dump_len - c->dump_off) : STREAM_BYTES;
      ssize_t r = still_ours(&c->dump) ? pread(c->dump.fd, stream_buf, want, (off_t)c->dump_off) : -1;
      if (r <= 0) {
        conn_close(c);
        return;
      }
      p = stream_buf;
      n = (size_t)r;
    } else {
      if (c->close_after) conn_close(c);
      else conn_idle(c, now);
      return;
    }
    ssize_t w = send(c->id.fd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (w <= 0) {
      conn_close(c);
      return;
    }
    if (c->out_off < c->out_len) c->out_off += (uint32_t)w;
    else c->dump_off += (uint64_t)w;
    c->deadline = now + IO_TIMEOUT_NS;
  }
}

/* Reads exactly the frame's bytes (a pipelined next request stays in the socket), then serves it. */
static void conn_read(conn_t *c, uint64_t now)
{
  for (;;) {
    uint32_t len = 0, want = 4;
    if (c->have >= 4) {
      len = (uint32_t)c->in[0] << 24 | (uint32_t)c->in[1] << 16 | (uint32_t)c->in[2] << 8 | c->in[3];
      want = 4 + len;
    }
    ssize_t r = recv(c->id.fd, c->in + c->have, want - c->have, MSG_DONTWAIT);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (r <= 0) {                                  /* the peer's end (mid-frame: truncated), or an error */
      if (c->have != 0) n_malformed++;
      conn_close(c);
      return;
    }
    c->have += (uint32_t)r;
    if (c->have == 4) {
      len = (uint32_t)c->in[0] << 24 | (uint32_t)c->in[1] << 16 | (uint32_t)c->in[2] << 8 | c->in[3];
      if (len == 0 || len > MPROF_CONTROL_MAX_REQUEST) {   /* no way to find the next frame: close after */
        n_malformed++;
        reply(c, 0, "error EMSGSIZE: a request is 1 to %d bytes of text\n", MPROF_CONTROL_MAX_REQUEST);
        c->close_after = true;
        break;
      }
    } else if (c->have == want) {
      serve_request(c);
      break;
    }
  }
  c->deadline = now + IO_TIMEOUT_NS;
  conn_write(c, now);
}

static void accept_some(uint64_t now)
{
  for (;;) {
    conn_t *c = NULL;
    for (size_t i = 0; i < MAX_CONNS && c == NULL; i++)
      if (conns[i].id.fd < 0) c = &conns[i];
    if (c == NULL) return;
    int fd = accept4(listener.fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
        accept_paused_until = now + ACCEPT_PAUSE_NS;   /* the connection waits; poll would spin meanwhile */
      return;
    }
    struct ucred cred;
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 ||
        (cred.uid != geteuid() && cred.uid != 0)) {
      static const char refused[] = "error EACCES: only the process's own user and root may ask\n";
      unsigned char frame[4 + sizeof refused - 1];
      put_be32(frame, sizeof refused - 1);
      memcpy(frame + 4, refused, sizeof refused - 1);
      n_refused++;
      ssize_t w = send(fd, frame, sizeof frame, MSG_DONTWAIT | MSG_NOSIGNAL);
      (void)w;
      close(fd);
      continue;
    }
    if (!remember(&c->id, fd)) {
      close(fd);
      continue;
    }
    c->dump.fd = -1;
    conn_idle(c, now);
  }
}

/* ---------------------------------------------------------------------------------------------------
   The wait
--------------------------------------------------------------------------------------------------- */

static void drain_wake(void)
{
  char buf[64];
  while (recv(wake_r.fd, buf, sizeof buf, MSG_DONTWAIT) > 0) {
  }
}

void mprof_control_wait(uint64_t until)
{
  struct pollfd fds[2 + MAX_CONNS];
  conn_t *of[2 + MAX_CONNS];
  if (!still_ours(&listener) || !still_ours(&wake_r) || !still_ours(&wake_w)) reopen();
  if (!enabled) return;
  uint64_t now = mono_ns();
  nfds_t n = 0, live = 0;
  fds[n] = (struct pollfd){.fd = wake_r.fd, .events = POLLIN};
  of[n++] = NULL;
  for (size_t i = 0; i < MAX_CONNS; i++) {
    conn_t *c = &conns[i];
    if (c->id.fd < 0) continue;
    live++;
    fds[n] = (struct pollfd){.fd = c->id.fd, .events = c->writing ? POLLOUT : POLLIN};
    of[n++] = c;
    if (c->deadline < until) until = c->deadline;
  }
  nfds_t listen_at = n;
  if (live < MAX_CONNS) {
    if (accept_paused_until <= now) {
      fds[n] = (struct pollfd){.fd = listener.fd, .events = POLLIN};
      of[n++] = NULL;
    } else if (accept_paused_until < until) {
      until = accept_paused_until;
    }
  }
  int timeout = -1;
  if (until != UINT64_MAX) {
    uint64_t ms = until <= now ? 0 : (until - now + 999999) / 1000000;
    timeout = ms > INT32_MAX ? INT32_MAX : (int)ms;
  }
  if (timeout < 0 || timeout > recheck_ms) timeout = recheck_ms;
  recheck_ms = recheck_ms >= RECHECK_IDLE_MS / 2 ? RECHECK_IDLE_MS : 2 * recheck_ms;
  if (poll(fds, n, timeout) < 0) return;          /* EINTR: every signal is blocked here; ENOMEM: retry */
  now = mono_ns();
  if (fds[0].revents != 0 && still_ours(&wake_r)) drain_wake();   /* a hang-up: reopen() next round */
  for (nfds_t k = 1; k < n; k++) {
    conn_t *c = of[k];
    if (c == NULL || fds[k].revents == 0) continue;
    if (!still_ours(&c->id)) {                     /* closed by the program: not ours to close */
      c->id.fd = -1;
      forget(&c->dump);
      continue;
    }
    if (c->writing) conn_write(c, now);
    else conn_read(c, now);
  }
  if (listen_at < n && fds[listen_at].revents != 0 && still_ours(&listener)) accept_some(now);
  for (size_t i = 0; i < MAX_CONNS; i++) {
    conn_t *c = &conns[i];
    if (c->id.fd >= 0 && c->deadline <= now) {
      n_timeouts++;
      conn_close(c);
    }
  }
}

/* No thread serves the socket: in a fork child (its copies of the descriptors are closed; the socket stays
 * the parent's), or when the thread could not start.  Descriptors are closed where still ours, nothing
 * wakes any more.  Async-signal-safe (fstat, close). */
void mprof_control_shutdown(void)
{
  if (!enabled) return;
  enabled = false;
  __atomic_store_n(&wake_word, NO_WAKE, __ATOMIC_RELAXED);
  forget(&listener);
  forget(&wake_r);
  forget(&wake_w);
  for (size_t i = 0; i < MAX_CONNS; i++) {
    forget(&conns[i].dump);
    forget(&conns[i].id);
  }
}
