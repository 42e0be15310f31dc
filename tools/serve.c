/* serve.c - `mimalloc-prof serve PID...`: the heap profiles of running processes over HTTP, at the paths
 * Go programs serve them (net/http/pprof), so that continuous profilers (Grafana Alloy's pyroscope.scrape,
 * Parca) and `go tool pprof URL` read them as they read Go's.
 *
 *   /debug/pprof/heap    a heap profile taken now, default sample type inuse_space (the library's own)
 *   /debug/pprof/allocs  the same profile with default sample type alloc_space (as Go serves it)
 *   /, /debug/pprof/     an index of the processes, with links
 * For several processes each has its own tree, /pid/PID/debug/pprof/heap (a path prefix: scrapers take one
 * per target), and ?pid=PID selects one at the root's paths; with one process the root's paths serve it.
 * Only the processes named on the command line are served, and of these only those of our own effective
 * user (all, for root): another user's process is neither listed nor asked.
 *
 * Whom it serves (access.c): a request whose Host is one of the server's names (against DNS rebinding),
 * from a process of our own user on this machine or with the token of --token-file; a client that is
 * not our own user holds SERVE_PER_CLIENT connections at most.
 *
 * libmicrohttpd serves, a thread per connection (so a slow client holds its own thread, never another's),
 * SERVE_CONNECTIONS_MAX at a time, each closed after IDLE_TIMEOUT_S without progress; a profile is taken
 * through the control socket (client.c, bounded by --timeout), symbolized by default (the command's own
 * symbolizer: the binaries are on this machine now, which a scraper far away cannot say), and sent from
 * a file that is already unlinked.  One profile is taken at a time (a mutex: the symbolizer's debuginfod
 * client is shared), which also bounds what a burst of scrapes costs the processes; a request that waits
 * longer than --timeout for its turn gets 503.  The listening socket is made here (errors as the system
 * says them) and handed to the daemon; loopback (127.0.0.1:6060) by default: another address only when
 * --listen names it.
 */
#include "tool.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <microhttpd.h>

#define MAX_PIDS        64
#define DEFAULT_LISTEN  "127.0.0.1:6060"
#define IDLE_TIMEOUT_S  10u            /* a connection that makes no progress for this long is closed */

static const char usage[] =
  "usage: mimalloc-prof serve [--listen ADDR:PORT] [--token-file FILE] [--allow-host HOST]...\n"
  "                           [--timeout SECONDS] [--no-symbolize] PID...\n"
  "Serve heap profiles of running processes (with MIMALLOC_PROF_CONTROL=1) over HTTP, as Go programs do:\n"
  "  /debug/pprof/heap     a heap profile taken now (default sample type inuse_space)\n"
  "  /debug/pprof/allocs   the same with alloc_space as default sample type\n"
  "  /                     an index of the processes\n"
  "With several processes: /pid/PID/debug/pprof/heap (and allocs), or ?pid=PID.\n"
  "  --listen ADDR:PORT  where to listen (default " DEFAULT_LISTEN "; [::1]:PORT for IPv6, "
  "port 0: any free)\n"
  "  --token-file FILE   serve also clients that send \"Authorization: Bearer TOKEN\", TOKEN the line in\n"
  "                      FILE (mode 600); without it, only processes of this user on this machine\n"
  "  --allow-host HOST   answer requests for this name too (Host: localhost, IP addresses and the --listen\n"
  "                      host are answered; any other name is refused against DNS rebinding)\n"
  "  --timeout SECONDS   how long a process may take to answer (default 10)\n"
  "  --no-symbolize      serve the profiles with addresses and the library's names only\n"
  "Prints \"listening on http://ADDR:PORT/\" when ready; runs until SIGINT, SIGTERM or SIGHUP.\n"
  "See mimalloc-prof(1).\n";

static pid_t pids[MAX_PIDS];
static size_t n_pids;
static bool symbolize = true;
static char tmp_dir[4096];
static char listen_host[256];
static pthread_mutex_t fetch_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned fetch_seq;                 /* fetch_lock */

/* Whether process pid is ours to serve: our effective user's, or we are root.  -1 when it is gone. */
static int ours(pid_t pid)
{
  long uid = ctl_process_uid(pid);
  uid_t me = geteuid();
  return uid < 0 ? -1 : me == 0 || (uid_t)uid == me;
}

/* ---------------------------------------------------------------------------------------------------
   Profiles
--------------------------------------------------------------------------------------------------- */

/* Rewrites the profile at path with `type` as its default sample type. */
static bool set_default_type(const char *path, const char *type, char *err, size_t err_len)
{
  profile_t *p = profile_read(path, err, err_len);
  if (p == NULL) return false;
  for (size_t i = 0; i < p->n_sample_type; i++)
    if (strcmp(pstr(p, p->sample_type[i]->type), type) == 0) p->default_sample_type = p->sample_type[i]->type;
  bool ok = profile_write(p, path, err, err_len) == 0;
  profile_free(p);
  return ok;
}

/* The profile of pid, as an open file already unlinked (the response reads it, then closes it); for
 * allocs with alloc_space as default sample type.  -1 with a message in err (*busy when it did not get
 * its turn within the timeout). */
static int fetch(pid_t pid, bool allocs, char *err, size_t err_len, off_t *size, bool *busy)
{
  char path[4200];
  struct stat st;
  struct timespec until;
  int fd = -1;
  int64_t wait_ms = ctl_timeout_ms();
  clock_gettime(CLOCK_REALTIME, &until);
  int64_t ns = until.tv_nsec + wait_ms % 1000 * 1000000;
  until.tv_sec += wait_ms / 1000 + ns / 1000000000;
  until.tv_nsec = ns % 1000000000;
  if (pthread_mutex_timedlock(&fetch_lock, &until) != 0) {
    snprintf(err, err_len, "busy: other profiles were being taken for longer than --timeout; try again");
    *busy = true;
    return -1;
  }
  snprintf(path, sizeof path, "%s/%u.pb.gz", tmp_dir, fetch_seq++);
  bool ok = ctl_dump_file(pid, path, symbolize, err, err_len) == 0;
  if (ok && allocs) ok = set_default_type(path, "alloc_space", err, err_len);
  if (ok && ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0 || fstat(fd, &st) != 0)) {
    snprintf(err, err_len, "cannot read %.900s: %s", path, strerror(errno));
    if (fd >= 0) close(fd);
    fd = -1;
  }
  if (fd >= 0) *size = st.st_size;
  unlink(path);
  pthread_mutex_unlock(&fetch_lock);
  return fd;
}

/* ---------------------------------------------------------------------------------------------------
   HTTP
--------------------------------------------------------------------------------------------------- */

static enum MHD_Result send_text(struct MHD_Connection *conn, unsigned status, const char *type,
                                  const char *text)
{
  struct MHD_Response *r =
    MHD_create_response_from_buffer(strlen(text), (void *)(uintptr_t)text, MHD_RESPMEM_MUST_COPY);
  if (r == NULL) return MHD_NO;
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
  MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
  if (status == MHD_HTTP_UNAUTHORIZED) MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
  if (status == MHD_HTTP_SERVICE_UNAVAILABLE) MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, "1");
  enum MHD_Result rc = MHD_queue_response(conn, status, r);
  MHD_destroy_response(r);
  return rc;
}

static enum MHD_Result send_error(struct MHD_Connection *conn, unsigned status, const char *fmt, ...)
  __attribute__((format(printf, 3, 4)));
static enum MHD_Result send_error(struct MHD_Connection *conn, unsigned status, const char *fmt, ...)
{
  char text[1280];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text - 1, fmt, ap);
  va_end(ap);
  strcat(text, "\n");
  return send_text(conn, status, "text/plain; charset=utf-8", text);
}

static void html_escaped(char *out, size_t len, const char *s)
{
  size_t o = 0;
  for (; *s != '\0' && o + 7 < len; s++) {
    const char *e = *s == '<' ? "&lt;" : *s == '>' ? "&gt;" : *s == '&' ? "&amp;"
                  : *s == '"' ? "&quot;" : NULL;
    if (e != NULL) o += (size_t)snprintf(out + o, len - o, "%s", e);
    else out[o++] = *s;
  }
  out[o] = '\0';
}

static enum MHD_Result send_index(struct MHD_Connection *conn)
{
  size_t cap = 1024 + n_pids * 1536, n = 0;
  char *page = malloc(cap), cmd_html[800];
  if (page == NULL) return MHD_NO;
  n += (size_t)snprintf(page + n, cap - n,
                        "<!DOCTYPE html>\n<html><head><title>mimalloc-prof serve</title></head><body>\n"
                        "<h1>Heap profiles</h1>\n<table>\n"
                        "<tr><th>process</th><th>profiles</th><th>command</th></tr>\n");
  for (size_t i = 0; i < n_pids; i++) {
    int mine = ours(pids[i]);
    if (mine == 0) continue;                               /* another user's: not even its command line */
    char *cmd = mine > 0 ? ctl_command_line(pids[i]) : strdup("");
    html_escaped(cmd_html, sizeof cmd_html, cmd != NULL && cmd[0] != '\0' ? cmd : "(gone)");
    free(cmd);
    n += (size_t)snprintf(page + n, cap - n,
                          "<tr><td>%d</td><td><a href=\"/pid/%d/debug/pprof/heap\">heap</a> "
                          "<a href=\"/pid/%d/debug/pprof/allocs\">allocs</a></td><td>%s</td></tr>\n",
                          (int)pids[i], (int)pids[i], (int)pids[i], cmd_html);
  }
  snprintf(page + n, cap - n, "</table>\n<p>heap: in-use bytes by allocation site; allocs: the same profile, "
           "allocated bytes first. Read them with <code>go tool pprof URL</code>.</p>\n</body></html>\n");
  enum MHD_Result rc = send_text(conn, MHD_HTTP_OK, "text/html; charset=utf-8", page);
  free(page);
  return rc;
}

static bool served(pid_t pid)
{
  for (size_t i = 0; i < n_pids; i++)
    if (pids[i] == pid) return true;
  return false;
}

/* Whether the request may be answered at all (Host, access, method); else the refusal is queued. */
static bool admitted(struct MHD_Connection *conn, const char *method, enum MHD_Result *rc)
{
  const char *host = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST);
  const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  const serve_client_t *client = ci != NULL ? ci->socket_context : NULL;
  char why[256];
  unsigned status;
  if (host == NULL) {
    *rc = send_error(conn, MHD_HTTP_BAD_REQUEST, "no Host header");
  } else if (!serve_host_allowed(host)) {
    *rc = send_error(conn, MHD_HTTP_MISDIRECTED_REQUEST, "Host '%.200s' is not a name of this server "
                     "(localhost, an IP address, the --listen host, or one of --allow-host)", host);
  } else if (client == NULL) {                          /* refused at the start (serve_client_open) */
    *rc = send_error(conn, MHD_HTTP_SERVICE_UNAVAILABLE, "too many connections from this client");
  } else if ((status = serve_request_allowed(client, MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                                     MHD_HTTP_HEADER_AUTHORIZATION), why, sizeof why)) != 0) {
    *rc = send_error(conn, status, "%s", why);
  } else if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0) {
    *rc = send_error(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET and HEAD");
  } else {
    return true;
  }
  return false;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                              const char *version, const char *upload, size_t *upload_size, void **state)
{
  (void)cls, (void)version, (void)upload, (void)upload_size, (void)state;
  enum MHD_Result refused;
  if (!admitted(conn, method, &refused)) return refused;
  pid_t pid = n_pids == 1 ? pids[0] : 0;
  const char *rest = url, *arg = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "pid");
  if (strncmp(url, "/pid/", 5) == 0) {                 /* /pid/PID/debug/pprof/... */
    char digits[16];
    size_t n = strspn(url + 5, "0123456789");
    snprintf(digits, sizeof digits, "%.*s", (int)(n < 15 ? n : 15), url + 5);
    if (n == 0 || n > 10 || !tool_parse_pid(digits, &pid))
      return send_error(conn, MHD_HTTP_NOT_FOUND, "no such path");
    rest = url + 5 + n;
    if (*rest == '\0') rest = "/";
  } else if (arg != NULL && !tool_parse_pid(arg, &pid)) {
    return send_error(conn, MHD_HTTP_BAD_REQUEST, "pid=%.40s is not a process ID", arg);
  }
  if (strcmp(rest, "/") == 0 || strcmp(rest, "/debug/pprof/") == 0 || strcmp(rest, "/debug/pprof") == 0)
    return send_index(conn);
  bool heap = strcmp(rest, "/debug/pprof/heap") == 0, allocs = strcmp(rest, "/debug/pprof/allocs") == 0;
  if (!heap && !allocs) return send_error(conn, MHD_HTTP_NOT_FOUND, "no such path (see /)");
  if (pid == 0)
    return send_error(conn, MHD_HTTP_BAD_REQUEST, "several processes are served: /pid/PID%s or ?pid=PID",
                      rest);
  if (!served(pid)) return send_error(conn, MHD_HTTP_NOT_FOUND, "process %d is not served here", (int)pid);
  if (ours(pid) == 0)
    return send_error(conn, MHD_HTTP_FORBIDDEN, "process %d belongs to another user", (int)pid);
  const char *debug = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "debug");
  if ((debug != NULL && strcmp(debug, "0") != 0) ||
      MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "seconds"))
    return send_error(conn, MHD_HTTP_BAD_REQUEST,
                      "only the binary profile is served (no debug=N, no seconds=N)");
  char err[1024];
  off_t size = 0;
  bool busy = false;
  int fd = fetch(pid, allocs, err, sizeof err, &size, &busy);
  if (fd < 0) return send_error(conn, busy ? MHD_HTTP_SERVICE_UNAVAILABLE : MHD_HTTP_BAD_GATEWAY, "%s", err);
  struct MHD_Response *r = MHD_create_response_from_fd64((uint64_t)size, fd);   /* closes fd */
  if (r == NULL) {
    close(fd);
    return MHD_NO;
  }
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/octet-stream");
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_DISPOSITION, heap ? "attachment; filename=\"heap\""
                                                                       : "attachment; filename=\"allocs\"");
  MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
  enum MHD_Result rc = MHD_queue_response(conn, MHD_HTTP_OK, r);
  MHD_destroy_response(r);
  return rc;
}

/* A connection's start and end: who the client is, counted against its limit (access.c).  One over it
 * is told so and shut down at once; libmicrohttpd then sees the end of the stream and closes it. */
static void on_connection(void *cls, struct MHD_Connection *conn, void **context,
                          enum MHD_ConnectionNotificationCode what)
{
  static const char busy[] = "HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Length: 38\r\n"
                             "Content-Type: text/plain\r\n\r\ntoo many connections from this client\n";
  (void)cls;
  if (what != MHD_CONNECTION_NOTIFY_STARTED) {
    serve_client_close(*context);
    *context = NULL;
    return;
  }
  const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
  if (ci == NULL) return;
  *context = serve_client_open(ci->connect_fd);
  if (*context == NULL) {
    ssize_t w = send(ci->connect_fd, busy, sizeof busy - 1, MSG_DONTWAIT | MSG_NOSIGNAL);
    (void)w;
    shutdown(ci->connect_fd, SHUT_RDWR);
  }
}

/* ---------------------------------------------------------------------------------------------------
   The listening socket, the command
--------------------------------------------------------------------------------------------------- */

/* ADDR:PORT ([V6]:PORT) into a bound, listening socket; its address as a URL's host:port in shown.  -1
 * after a usage error (*rc set) or an error. */
static int listen_on(const char *spec, char *shown, size_t len, bool *loopback, bool *v6, int *rc)
{
  char host[256];
  const char *colon = strrchr(spec, ':');
  long port;
  if (colon == NULL || colon == spec || !tool_parse_count(colon + 1, 0, 65535, &port)) {
    *rc = tool_usage_error("--listen '%s': expected ADDR:PORT (PORT 0 to 65535)", spec);
    return -1;
  }
  size_t hl = (size_t)(colon - spec);
  if (spec[0] == '[' && hl >= 2 && spec[hl - 1] == ']')
    snprintf(host, sizeof host, "%.*s", (int)(hl - 2), spec + 1);
  else snprintf(host, sizeof host, "%.*s", (int)hl, spec);
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
  struct addrinfo *ai;
  int g = getaddrinfo(host, colon + 1, &hints, &ai);
  if (g != 0) {
    *rc = tool_usage_error("--listen '%s': %s", spec, gai_strerror(g));
    return -1;
  }
  int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
  if (fd >= 0) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (fd < 0 || bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 64) != 0) {
    *rc = tool_error("cannot listen on %s: %s", spec, strerror(errno));
    if (fd >= 0) close(fd);
    freeaddrinfo(ai);
    return -1;
  }
  *v6 = ai->ai_family == AF_INET6;
  if (*v6) {
    const struct in6_addr *a = &((const struct sockaddr_in6 *)ai->ai_addr)->sin6_addr;
    *loopback = IN6_IS_ADDR_LOOPBACK(a);
  } else {
    *loopback = (ntohl(((const struct sockaddr_in *)ai->ai_addr)->sin_addr.s_addr) >> 24) == 127;
  }
  freeaddrinfo(ai);
  struct sockaddr_storage ss;
  socklen_t sl = sizeof ss;
  getsockname(fd, (struct sockaddr *)&ss, &sl);
  unsigned bound =
    ntohs(*v6 ? ((struct sockaddr_in6 *)&ss)->sin6_port : ((struct sockaddr_in *)&ss)->sin_port);
  snprintf(shown, len, *v6 ? "[%s]:%u" : "%s:%u", host, bound);
  snprintf(listen_host, sizeof listen_host, "%s", host);
  return fd;
}

int cmd_serve(int argc, char **argv)
{
  enum { OPT_LISTEN = 0x200, OPT_NOSYM, OPT_TOKEN, OPT_ALLOW };
  static const struct option opts[] = {{"listen", required_argument, NULL, OPT_LISTEN},
                                       {"token-file", required_argument, NULL, OPT_TOKEN},
                                       {"allow-host", required_argument, NULL, OPT_ALLOW},
                                       {"no-symbolize", no_argument, NULL, OPT_NOSYM},
                                       CTL_TIMEOUT_LONG_OPTION, {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
  const char *listen_spec = DEFAULT_LISTEN, *token_file = NULL;
  int c, rc = 0;
  optind = 1;
  while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
    switch (c) {
    case OPT_LISTEN: listen_spec = optarg; break;
    case OPT_TOKEN: token_file = optarg; break;
    case OPT_ALLOW:
      if (optarg[0] == '\0' || strchr(optarg, ':') != NULL)
        return tool_usage_error("--allow-host '%s': expected a host name, without a port", optarg);
      if (!serve_allow_host(optarg)) return tool_usage_error("--allow-host: too many names");
      break;
    case OPT_NOSYM: symbolize = false; break;
    default:
      if ((rc = ctl_common_option(c, argv, usage)) >= 0) return rc;
    }
  }
  if (optind == argc) return tool_usage_error("no process ID given");
  for (int i = optind; i < argc; i++) {
    if (n_pids == MAX_PIDS) return tool_usage_error("more than %d processes", MAX_PIDS);
    if (!tool_parse_pid(argv[i], &pids[n_pids])) return tool_usage_error("'%s' is not a process ID", argv[i]);
    if (ours(pids[n_pids]) == 0) tool_note("process %s belongs to another user: it is not served", argv[i]);
    n_pids++;
  }
  if (token_file != NULL && (rc = serve_token_file(token_file)) != 0) return rc;
  char shown[300];
  bool loopback, v6;
  int fd = listen_on(listen_spec, shown, sizeof shown, &loopback, &v6, &rc);
  if (fd < 0) return rc;
  if (!serve_allow_host(listen_host)) {
    close(fd);
    return tool_usage_error("--allow-host: too many names");
  }
  const char *base = getenv("TMPDIR");
  snprintf(tmp_dir, sizeof tmp_dir, "%s/mimalloc-prof-serve.XXXXXX",
           base != NULL && base[0] != '\0' ? base : "/tmp");
  if (mkdtemp(tmp_dir) == NULL) {
    close(fd);
    return tool_error("cannot create a directory in %s: %s", base != NULL ? base : "/tmp", strerror(errno));
  }
  /* The daemon's threads inherit this mask: the stop signals come to sigwait below, SIGPIPE to nobody. */
  sigset_t stop, all;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGHUP);
  all = stop;
  sigaddset(&all, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &all, NULL);
  /* poll(2) in each connection's thread: select(2) would refuse descriptors above FD_SETSIZE. */
  unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL |
                   MHD_USE_ERROR_LOG | (v6 ? MHD_USE_IPv6 : 0);
  struct MHD_Daemon *d = MHD_start_daemon(flags, 0, NULL, NULL, handle, NULL, MHD_OPTION_LISTEN_SOCKET, fd,
                                          MHD_OPTION_CONNECTION_LIMIT, (unsigned)SERVE_CONNECTIONS_MAX,
                                          MHD_OPTION_CONNECTION_TIMEOUT, IDLE_TIMEOUT_S,
                                          MHD_OPTION_NOTIFY_CONNECTION, on_connection, NULL,
                                          MHD_OPTION_STRICT_FOR_CLIENT, 1, MHD_OPTION_END);
  if (d == NULL) {
    close(fd);
    rmdir(tmp_dir);
    return tool_error("cannot start the HTTP server on %s", shown);
  }
  if (!loopback && !serve_token_set())
    tool_note("listening on %s without --token-file: only processes of this user on this machine are served",
              shown);
  printf("listening on http://%s/\n", shown);
  fflush(stdout);
  int sig;
  while (sigwait(&stop, &sig) != 0) {
  }
  MHD_stop_daemon(d);
  rmdir(tmp_dir);
  return EXIT_SUCCESS;
}
