/* probe_util.h - what the probe programs (tests/prof_probe.c, tests/stack_probe.c, tests/pprof_probe.c)
 * share: how they fail, how they read numeric arguments and the stats.  Each probe defines PROBE_NAME
 * (its name, for its error lines) before including this.  static inline: each probe is one source file
 * and uses only some of these.
 */
#ifndef MPROF_TEST_PROBE_UTIL_H
#define MPROF_TEST_PROBE_UTIL_H

#ifndef PROBE_NAME
#error "define PROBE_NAME before including probe_util.h"
#endif

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "mimalloc-prof.h"

/* Something the test cannot see went wrong: one line "PROBE_NAME: what (errno E)" on stderr and exit
 * status 1.  A probe writes nothing else to stderr: it belongs to the library's warnings, which the
 * tests read. */
static inline _Noreturn void die(const char *what)
{
  fprintf(stderr, PROBE_NAME ": %s (errno %d)\n", what, errno);
  exit(1);
}

/* A decimal argument; anything else is the test's mistake, so it ends the probe. */
static inline size_t arg_size(const char *s)
{
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno != 0 || *end != '\0') die("bad numeric argument");
  return (size_t)v;
}

static inline mi_prof_stats_t stats_now(void)
{
  mi_prof_stats_t st;
  if (!mi_prof_stats(&st, sizeof st)) die("mi_prof_stats failed");
  return st;
}

/* Installs a seccomp filter that fails process_vm_readv(2) with `err` (EPERM: a container's policy, such
 * as Docker's default; ENOSYS: qemu-user, which does not implement it); false where seccomp filters are
 * not available (a kernel without them, or qemu-user, which does not emulate them). */
#if defined(__x86_64__)
#define PROBE_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define PROBE_AUDIT_ARCH AUDIT_ARCH_AARCH64
#elif defined(__i386__)
#define PROBE_AUDIT_ARCH AUDIT_ARCH_I386
#endif

static inline bool probe_refuse_vm_readv(int err)
{
#ifdef PROBE_AUDIT_ARCH
  struct sock_filter filter[] = {
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, PROBE_AUDIT_ARCH, 1, 0),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_process_vm_readv, 0, 1),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ((unsigned)err & SECCOMP_RET_DATA)),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = {.len = sizeof filter / sizeof filter[0], .filter = filter};
  return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 && prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0;
#else
  (void)err;
  return false;
#endif
}

/* The probes' "refuse" step: errno_name "EPERM" or "ENOSYS" to refuse process_vm_readv with; prints
 * "skipped 1" and returns false where no filter can be installed, else prints "refused 1" when the call
 * now fails with that errno ("refused 0" otherwise) and returns true. */
static inline bool probe_refuse_vm_readv_said(const char *errno_name)
{
  int err = strcmp(errno_name, "EPERM") == 0 ? EPERM : ENOSYS;
  if (!probe_refuse_vm_readv(err)) {
    printf("skipped 1\n");
    return false;
  }
  long word = 0, copy = 1;
  struct iovec local = {&copy, sizeof copy}, remote = {&word, sizeof word};
  errno = 0;
  ssize_t got = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
  printf("refused %d\n", got < 0 && errno == err);
  return true;
}

#endif
