/* access.c - whom `serve` serves: the Host header a request may carry, the clients it may come from, and
 * how many connections each client may hold.
 *
 * Host.  A web page can make the user's browser send requests to 127.0.0.1:6060 under a name of the
 * page's own that it re-points there (DNS rebinding), and then read the answers as its own; the request
 * carries that name in Host.  So a request is refused (421) unless its Host is localhost, an IP address
 * (which no DNS answer can change: a page can only reach an address literal from that origin itself),
 * the host named in --listen, or a name given with --allow-host; a request without Host is refused
 * (400).  Vite and webpack-dev-server accept the same set by default.
 *
 * Access.  A request is served when it shows the token of --token-file (Authorization: Bearer TOKEN,
 * compared in time that depends on the token's length only), or when it comes from a process of our
 * own effective user on this machine: the kernel's socket table (NETLINK_SOCK_DIAG, the exact lookup of
 * ss(8), or /proc/net/tcp where netlink is refused) gives the owner of the connection's other end when
 * that end is a socket here, in this network namespace; for a client elsewhere it has none.  Root is no
 * exception: a proxy or port forwarder that root runs makes every client behind it root's.  A token file
 * must be ours (or root's), a regular file, and closed to group and others: a token others can read is no
 * access rule.
 *
 * Connections.  libmicrohttpd keeps at most SERVE_CONNECTIONS_MAX; of these a client other than our own
 * user may hold SERVE_PER_CLIENT (a client: a user of this machine, else an IPv4 address or an IPv6 /64,
 * since a host usually has a whole /64), so that one that opens connections and sends nothing cannot
 * take them all.  libmicrohttpd's own per-IP limit would count every local user as 127.0.0.1.  The count
 * is kept from the connection's start to its end (serve.c's notification callback); a connection over
 * the limit is closed at once.
 */
#include "tool.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#define TOKEN_MIN     16
#define TOKEN_MAX     1024
#define MAX_ALLOWED   16              /* --allow-host names, and the --listen host */

struct serve_client_s {
  bool          local;                /* the other end is a socket on this machine */
  uid_t         uid;                  /* its owner, when local */
  int           lookup_errno;         /* why the socket table could not be asked (0: it answered) */
  bool          counted;              /* against its key's SERVE_PER_CLIENT */
  unsigned char key[17];              /* 'u' + uid, '4' + address, '6' + /64 prefix */
};

static char token[TOKEN_MAX + 1];
static size_t token_len;              /* 0: no --token-file */
static const char *allowed[MAX_ALLOWED];
static size_t n_allowed;

static pthread_mutex_t count_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
  unsigned char key[17];
  unsigned      n;                    /* 0: a free slot */
} counts[SERVE_CONNECTIONS_MAX];

/* ---------------------------------------------------------------------------------------------------
   Configuration
--------------------------------------------------------------------------------------------------- */

int serve_token_file(const char *path)
{
  struct stat st;
  char buf[TOKEN_MAX + 2];
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0 || fstat(fd, &st) != 0) {
    int e = errno;
    if (fd >= 0) close(fd);
    return tool_error("--token-file %s: %s", path, strerror(e));
  }
  ssize_t n = S_ISREG(st.st_mode) ? read(fd, buf, sizeof buf) : 0;
  int e = errno;
  close(fd);
  if (!S_ISREG(st.st_mode)) return tool_error("--token-file %s: not a regular file", path);
  if (st.st_uid != geteuid() && st.st_uid != 0)
    return tool_error("--token-file %s: belongs to user %u (it must be ours or root's)", path,
                      (unsigned)st.st_uid);
  if ((st.st_mode & 077) != 0)
    return tool_error("--token-file %s: mode %03o lets others read or change it (chmod 600 it)", path,
                      (unsigned)(st.st_mode & 0777));
  if (n < 0) return tool_error("--token-file %s: %s", path, strerror(e));
  while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' ' || buf[n - 1] == '\t')) n--;
  for (ssize_t i = 0; i < n; i++)
    if (buf[i] <= ' ' || buf[i] > '~')
      return tool_error("--token-file %s: the token is one line of visible ASCII characters", path);
  if (n < TOKEN_MIN || n > TOKEN_MAX)
    return tool_error("--token-file %s: the token has %zd characters (from %d to %d)", path, n, TOKEN_MIN,
                      TOKEN_MAX);
  memcpy(token, buf, (size_t)n);
  token_len = (size_t)n;
  return 0;
}

bool serve_token_set(void) { return token_len != 0; }

bool serve_allow_host(const char *host)
{
  if (n_allowed == MAX_ALLOWED) return false;
  allowed[n_allowed++] = host;
  return true;
}

/* ---------------------------------------------------------------------------------------------------
   Requests
--------------------------------------------------------------------------------------------------- */

bool serve_host_allowed(const char *host)
{
  char name[256], addr[sizeof(struct in6_addr)];
  const char *port;
  if (host == NULL) return false;
  if (host[0] == '[') {                                /* [IPv6]:PORT */
    const char *end = strchr(host, ']');
    if (end == NULL || (size_t)(end - host) >= sizeof name) return false;
    snprintf(name, sizeof name, "%.*s", (int)(end - host - 1), host + 1);
    port = end[1] == ':' ? end + 2 : end[1] == '\0' ? NULL : "";
    if (inet_pton(AF_INET6, name, addr) != 1) return false;
  } else {
    size_t n = strcspn(host, ":");
    if (n >= sizeof name) return false;
    snprintf(name, sizeof name, "%.*s", (int)n, host);
    port = host[n] == ':' ? host + n + 1 : NULL;
  }
  if (port != NULL && (port[0] == '\0' || strlen(port) > 5 || strspn(port, "0123456789") != strlen(port)))
    return false;
  if (host[0] == '[' || inet_pton(AF_INET, name, addr) == 1 || strcasecmp(name, "localhost") == 0)
    return true;
  for (size_t i = 0; i < n_allowed; i++)
    if (strcasecmp(name, allowed[i]) == 0) return true;
  return false;
}

/* Whether the Authorization header's value is "Bearer TOKEN" with our token. */
static bool shows_token(const char *authorization)
{
  if (authorization == NULL || strncasecmp(authorization, "Bearer ", 7) != 0) return false;
  const char *given = authorization + 7;
  given += strspn(given, " ");
  size_t n = strlen(given);
  unsigned char diff = n != token_len;
  for (size_t i = 0; i < token_len; i++) diff |= (unsigned char)(token[i] ^ (i < n ? given[i] : 0));
  return diff == 0;
}

unsigned serve_request_allowed(const serve_client_t *c, const char *authorization, char *why, size_t len)
{
  uid_t me = geteuid();
  if (token_len != 0 && shows_token(authorization)) return 0;
  if (c->local && c->uid == me) return 0;
  if (token_len != 0) {
    snprintf(why, len, "a bearer token is required (Authorization: Bearer TOKEN, the token of --token-file)");
    return 401;
  }
  if (c->lookup_errno != 0)
    snprintf(why, len, "only processes of user %u on this machine are served, and the kernel's socket table "
             "cannot tell whose this connection is (NETLINK_SOCK_DIAG: %s): start serve with --token-file",
             (unsigned)me, strerror(c->lookup_errno));
  else
    snprintf(why, len, "only processes of user %u on this machine are served (no --token-file)",
             (unsigned)me);
  return 403;
}

/* ---------------------------------------------------------------------------------------------------
   Clients and their connections
--------------------------------------------------------------------------------------------------- */

/* "ADDR:PORT" as /proc/net/tcp and tcp6 print a socket's address: each 32-bit word of the address (one,
 * or four for IPv6) as the hexadecimal of its value in memory, then the port in host order. */
static void proc_address(char *out, size_t len, const unsigned char *addr, size_t words, uint16_t port_be)
{
  size_t at = 0;
  for (size_t w = 0; w < words; w++) {
    uint32_t v;
    memcpy(&v, addr + 4 * w, 4);
    at += (size_t)snprintf(out + at, len - at, "%08X", (unsigned)v);
  }
  snprintf(out + at, len - at, ":%04X", (unsigned)ntohs(port_be));
}

/* The kernel's socket table as text, where NETLINK_SOCK_DIAG is not to be had (qemu-user does not emulate
 * it; some sandboxes refuse netlink): the owner of the TCP socket whose own end is src:sport and other end
 * dst:dport, or -1.  The same exact lookup in the same network namespace, linear in the sockets there. */
static long proc_peer_uid(int family, const unsigned char *src, uint16_t sport, const unsigned char *dst,
                          uint16_t dport, int *err)
{
  FILE *f = fopen(family == AF_INET ? "/proc/net/tcp" : "/proc/net/tcp6", "re");
  *err = f == NULL ? errno : 0;
  if (f == NULL) return -1;
  size_t words = family == AF_INET ? 1 : 4;
  char want_local[48], want_remote[48], local[48], remote[48], line[512];
  proc_address(want_local, sizeof want_local, src, words, sport);
  proc_address(want_remote, sizeof want_remote, dst, words, dport);
  long uid = -1;
  unsigned long u;
  while (uid < 0 && fgets(line, sizeof line, f) != NULL) {
    if (sscanf(line, " %*u: %47s %47s %*x %*s %*s %*x %lu", local, remote, &u) == 3 &&
        strcmp(local, want_local) == 0 && strcmp(remote, want_remote) == 0)
      uid = (long)u;
  }
  fclose(f);
  return uid;
}

/* proc_peer_uid for the socket a NETLINK_SOCK_DIAG request names; *err keeps netlink's error when the
 * table cannot be read either. */
static long proc_fallback(const struct inet_diag_req_v2 *r, int *err)
{
  int e;
  long uid = proc_peer_uid(r->sdiag_family, (const unsigned char *)r->id.idiag_src, r->id.idiag_sport,
                           (const unsigned char *)r->id.idiag_dst, r->id.idiag_dport, &e);
  if (e == 0) *err = 0;
  return uid;
}

/* The owner of the socket at the other end of TCP connection fd when it is on this machine (in this
 * network namespace), else -1: NETLINK_SOCK_DIAG looked up by the connection's addresses and ports seen
 * from the other end, or /proc/net/tcp where netlink is not available.  *err: 0 when the kernel answered
 * (ENOENT: no such socket here), else why not. */
static long local_peer_uid(int fd, int *err)
{
  *err = 0;
  struct sockaddr_storage me, peer;
  socklen_t ml = sizeof me, pl = sizeof peer;
  if (getsockname(fd, (struct sockaddr *)&me, &ml) != 0 ||
      getpeername(fd, (struct sockaddr *)&peer, &pl) != 0 || me.ss_family != peer.ss_family)
    return -1;                                         /* gone already, or not TCP/IP */
  struct {
    struct nlmsghdr         h;
    struct inet_diag_req_v2 r;
  } q = {.h = {.nlmsg_len = sizeof q, .nlmsg_type = SOCK_DIAG_BY_FAMILY, .nlmsg_flags = NLM_F_REQUEST},
         .r = {.sdiag_protocol = IPPROTO_TCP, .idiag_states = ~0u,
               .id = {.idiag_cookie = {INET_DIAG_NOCOOKIE, INET_DIAG_NOCOOKIE}}}};
  if (peer.ss_family == AF_INET) {
    const struct sockaddr_in *m = (const void *)&me, *p = (const void *)&peer;
    q.r.sdiag_family = AF_INET;
    q.r.id.idiag_sport = p->sin_port, q.r.id.idiag_dport = m->sin_port;
    memcpy(q.r.id.idiag_src, &p->sin_addr, 4);
    memcpy(q.r.id.idiag_dst, &m->sin_addr, 4);
  } else if (peer.ss_family == AF_INET6) {
    const struct sockaddr_in6 *m = (const void *)&me, *p = (const void *)&peer;
    bool mapped = IN6_IS_ADDR_V4MAPPED(&p->sin6_addr);      /* an IPv4 client of a dual-stack socket */
    size_t at = mapped ? 12 : 0, n = mapped ? 4 : 16;
    q.r.sdiag_family = mapped ? AF_INET : AF_INET6;
    q.r.id.idiag_sport = p->sin6_port, q.r.id.idiag_dport = m->sin6_port;
    memcpy(q.r.id.idiag_src, p->sin6_addr.s6_addr + at, n);
    memcpy(q.r.id.idiag_dst, m->sin6_addr.s6_addr + at, n);
  } else {
    return -1;
  }
  int nl = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  if (nl < 0) {
    *err = errno;
    return proc_fallback(&q.r, err);
  }
  struct timeval tv = {.tv_sec = 1};
  struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
  union {
    struct nlmsghdr h;
    char            bytes[1024];
  } reply;
  long uid = -1;
  ssize_t n = -1;
  if (setsockopt(nl, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) == 0 &&
      sendto(nl, &q, sizeof q, 0, (struct sockaddr *)&kernel, sizeof kernel) == (ssize_t)sizeof q)
    n = recv(nl, &reply, sizeof reply, 0);
  *err = n < 0 ? errno : 0;
  close(nl);
  if (n >= (ssize_t)NLMSG_LENGTH(sizeof(struct inet_diag_msg)) && NLMSG_OK(&reply.h, (size_t)n) &&
      reply.h.nlmsg_type == SOCK_DIAG_BY_FAMILY) {
    const struct inet_diag_msg *m = NLMSG_DATA(&reply.h);
    if (m->id.idiag_sport == q.r.id.idiag_sport && m->id.idiag_dport == q.r.id.idiag_dport)
      uid = m->idiag_uid;
  } else if (n >= (ssize_t)NLMSG_LENGTH(sizeof(struct nlmsgerr)) && reply.h.nlmsg_type == NLMSG_ERROR) {
    int e = -((const struct nlmsgerr *)NLMSG_DATA(&reply.h))->error;
    *err = e == ENOENT ? 0 : e;                        /* ENOENT: not a socket here, a remote client */
  }
  return *err != 0 ? proc_fallback(&q.r, err) : uid;
}

/* The client's key: its user when local, else its IPv4 address or IPv6 /64. */
static void client_key(serve_client_t *c, int fd)
{
  struct sockaddr_storage peer = {.ss_family = AF_UNSPEC};
  socklen_t pl = sizeof peer;
  memset(c->key, 0, sizeof c->key);
  if (c->local) {
    c->key[0] = 'u';
    memcpy(c->key + 1, &c->uid, sizeof c->uid);
    return;
  }
  if (getpeername(fd, (struct sockaddr *)&peer, &pl) != 0) return;   /* all such clients share one key */
  if (peer.ss_family == AF_INET) {
    c->key[0] = '4';
    memcpy(c->key + 1, &((const struct sockaddr_in *)&peer)->sin_addr, 4);
  } else if (peer.ss_family == AF_INET6) {
    const struct in6_addr *a = &((const struct sockaddr_in6 *)&peer)->sin6_addr;
    bool mapped = IN6_IS_ADDR_V4MAPPED(a);
    c->key[0] = mapped ? '4' : '6';
    memcpy(c->key + 1, a->s6_addr + (mapped ? 12 : 0), mapped ? 4 : 8);
  }
}

serve_client_t *serve_client_open(int fd)
{
  serve_client_t *c = calloc(1, sizeof *c);
  if (c == NULL) return NULL;
  long uid = local_peer_uid(fd, &c->lookup_errno);
  c->local = uid >= 0;
  c->uid = c->local ? (uid_t)uid : (uid_t)-1;
  if (c->local && c->uid == geteuid()) return c;                     /* our own: the total limit only */
  client_key(c, fd);
  pthread_mutex_lock(&count_lock);
  size_t at = SERVE_CONNECTIONS_MAX, free_at = SERVE_CONNECTIONS_MAX;
  for (size_t i = 0; i < SERVE_CONNECTIONS_MAX && at == SERVE_CONNECTIONS_MAX; i++) {
    if (counts[i].n != 0 && memcmp(counts[i].key, c->key, sizeof c->key) == 0) at = i;
    else if (counts[i].n == 0 && free_at == SERVE_CONNECTIONS_MAX) free_at = i;
  }
  if (at == SERVE_CONNECTIONS_MAX && free_at < SERVE_CONNECTIONS_MAX) {
    at = free_at;
    memcpy(counts[at].key, c->key, sizeof c->key);
  }
  c->counted = at < SERVE_CONNECTIONS_MAX && counts[at].n < SERVE_PER_CLIENT;
  if (c->counted) counts[at].n++;
  pthread_mutex_unlock(&count_lock);
  if (!c->counted) {
    free(c);
    return NULL;
  }
  return c;
}

void serve_client_close(serve_client_t *c)
{
  if (c == NULL) return;
  if (c->counted) {
    pthread_mutex_lock(&count_lock);
    for (size_t i = 0; i < SERVE_CONNECTIONS_MAX; i++)
      if (counts[i].n != 0 && memcmp(counts[i].key, c->key, sizeof c->key) == 0) {
        counts[i].n--;
        break;
      }
    pthread_mutex_unlock(&count_lock);
  }
  free(c);
}
