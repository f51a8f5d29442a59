/* nbdrepl: fault injection for the shell tests (LD_PRELOAD).
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * Controlled by the environment of the process it is preloaded into:
 *
 *   FAULT_PWRITE_OFFSET=N     every pwrite, and every splice into a
 *                             file, that covers byte N fails with EIO
 *                             (a bad sector)
 *   FAULT_PWRITE_SLEEP_MS=M   ... after hanging for M ms first (a dying
 *                             disk is slow before it fails)
 *   FAULT_PWRITE_DELAY_MS=M   every pwrite, and every splice into a
 *   FAULT_PWRITE_PATH=SUFFIX  file, whose path ends in SUFFIX sleeps M
 *                             ms first, then succeeds (a slow disk, or a
 *                             starved machine, that still reads its
 *                             sockets between writes)
 *   FAULT_SENDMSG_DELAY_US=U  sleep U µs after every sendmsg of more than
 *                             a header, widening the window between a
 *                             message leaving and its sender finishing
 *   FAULT_SENDMSG_CORRUPT=K   the K-th sendmsg of more than 64 KiB goes
 *                             out with byte 132 flipped (in the payload
 *                             of its first data message): a bit error
 *                             in transit that TCP's checksum missed
 *   FAULT_PREAD_SLEEP_MS=M    every pread of a file whose path ends in
 *   FAULT_PREAD_PATH=SUFFIX   SUFFIX sleeps M ms after reading: the data
 *                             read grows old before it is used (a
 *                             resync source's chunk, while newer writes
 *                             land)
 *   FAULT_CONNECT_REFUSE_PORT=P  every connect to TCP port P fails with
 *                             ECONNREFUSED: this process never reaches
 *                             the node listening there (one link of a
 *                             partition, on loopback)
 */
#include <config.h>

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <netinet/in.h>

extern ssize_t pwrite (int fd, const void *buf, size_t n, off_t off);
extern ssize_t pread (int fd, void *buf, size_t n, off_t off);
extern ssize_t pread64 (int fd, void *buf, size_t n, off_t off);
extern ssize_t pwrite64 (int fd, const void *buf, size_t n, off_t off);
extern ssize_t sendmsg (int fd, const struct msghdr *msg, int flags);
extern int connect (int fd, const struct sockaddr *addr, socklen_t len);
extern ssize_t splice (int fd_in, loff_t *off_in, int fd_out,
                       loff_t *off_out, size_t len, unsigned int flags);

typedef ssize_t (*pwrite_fn) (int, const void *, size_t, off_t);
typedef ssize_t (*pread_fn) (int, void *, size_t, off_t);
typedef ssize_t (*sendmsg_fn) (int, const struct msghdr *, int);
typedef int (*connect_fn) (int, const struct sockaddr *, socklen_t);
typedef ssize_t (*splice_fn) (int, loff_t *, int, loff_t *, size_t,
                              unsigned int);

static long long
env_number (const char *name, long long def)
{
  const char *s = getenv (name);
  return s ? atoll (s) : def;
}

static int fd_path_ends (int fd, const char *suffix);

/* FAULT_PWRITE_DELAY_MS for a write to fd. */
static void
slow_write (int fd)
{
  const char *suffix = getenv ("FAULT_PWRITE_PATH");
  long long ms = env_number ("FAULT_PWRITE_DELAY_MS", 0);

  if (ms > 0 && suffix != NULL && fd_path_ends (fd, suffix))
    usleep (ms * 1000);
}

static ssize_t
faulty_pwrite (const char *symbol, int fd, const void *buf, size_t n,
               off_t off)
{
  pwrite_fn real = (pwrite_fn) dlsym (RTLD_NEXT, symbol);
  long long bad = env_number ("FAULT_PWRITE_OFFSET", -1);

  if (bad >= 0 && off <= bad && bad - off < (long long) n) {
    usleep (env_number ("FAULT_PWRITE_SLEEP_MS", 0) * 1000);
    errno = EIO;
    return -1;
  }
  slow_write (fd);
  return real (fd, buf, n, off);
}

ssize_t
pwrite (int fd, const void *buf, size_t n, off_t off)
{
  return faulty_pwrite ("pwrite", fd, buf, n, off);
}

ssize_t
pwrite64 (int fd, const void *buf, size_t n, off_t off)
{
  return faulty_pwrite ("pwrite64", fd, buf, n, off);
}

ssize_t
splice (int fd_in, loff_t *off_in, int fd_out, loff_t *off_out, size_t len,
        unsigned int flags)
{
  splice_fn real = (splice_fn) dlsym (RTLD_NEXT, "splice");
  long long bad = env_number ("FAULT_PWRITE_OFFSET", -1);

  if (bad >= 0 && off_out != NULL && *off_out <= bad &&
      bad - *off_out < (long long) len) {
    usleep (env_number ("FAULT_PWRITE_SLEEP_MS", 0) * 1000);
    errno = EIO;
    return -1;
  }
  if (off_out != NULL)
    slow_write (fd_out);
  return real (fd_in, off_in, fd_out, off_out, len, flags);
}

/* Send a copy of msg's data with one byte flipped. */
static ssize_t
send_corrupted (sendmsg_fn real, int fd, const struct msghdr *msg, int flags,
                size_t total)
{
  char *copy = malloc (total);
  struct iovec iov;
  struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
  size_t pos = 0, i;
  ssize_t r;

  if (copy == NULL)
    return real (fd, msg, flags);
  for (i = 0; i < msg->msg_iovlen; i++) {
    memcpy (copy + pos, msg->msg_iov[i].iov_base, msg->msg_iov[i].iov_len);
    pos += msg->msg_iov[i].iov_len;
  }
  copy[132] ^= 0x01;
  iov.iov_base = copy;
  iov.iov_len = total;
  r = real (fd, &m, flags);
  free (copy);
  return r;
}

ssize_t
sendmsg (int fd, const struct msghdr *msg, int flags)
{
  sendmsg_fn real = (sendmsg_fn) dlsym (RTLD_NEXT, "sendmsg");
  static int big_sends;
  long long corrupt = env_number ("FAULT_SENDMSG_CORRUPT", 0);
  size_t total = 0, i;
  ssize_t r;

  for (i = 0; i < msg->msg_iovlen; i++)
    total += msg->msg_iov[i].iov_len;
  if (corrupt > 0 && total > (64u << 10) &&
      __atomic_add_fetch (&big_sends, 1, __ATOMIC_SEQ_CST) == corrupt)
    r = send_corrupted (real, fd, msg, flags, total);
  else
    r = real (fd, msg, flags);
  long long delay = env_number ("FAULT_SENDMSG_DELAY_US", 0);

  if (delay > 0 && r > 32)
    usleep (delay);
  return r;
}

/* Does fd name a file whose path ends in suffix? */
static int
fd_path_ends (int fd, const char *suffix)
{
  char link[64], path[4096];
  ssize_t n;
  size_t ls = strlen (suffix);

  snprintf (link, sizeof link, "/proc/self/fd/%d", fd);
  n = readlink (link, path, sizeof path - 1);
  if (n < 0)
    return 0;
  path[n] = '\0';
  return (size_t) n >= ls && strcmp (path + n - ls, suffix) == 0;
}

static ssize_t
slow_pread (const char *symbol, int fd, void *buf, size_t n, off_t off)
{
  pread_fn real = (pread_fn) dlsym (RTLD_NEXT, symbol);
  const char *suffix = getenv ("FAULT_PREAD_PATH");
  ssize_t r = real (fd, buf, n, off);
  int saved = errno;

  if (r > 0 && suffix != NULL && fd_path_ends (fd, suffix))
    usleep (env_number ("FAULT_PREAD_SLEEP_MS", 0) * 1000);
  errno = saved;
  return r;
}

ssize_t
pread (int fd, void *buf, size_t n, off_t off)
{
  return slow_pread ("pread", fd, buf, n, off);
}

ssize_t
pread64 (int fd, void *buf, size_t n, off_t off)
{
  return slow_pread ("pread64", fd, buf, n, off);
}

int
connect (int fd, const struct sockaddr *addr, socklen_t len)
{
  connect_fn real = (connect_fn) dlsym (RTLD_NEXT, "connect");
  long long refuse = env_number ("FAULT_CONNECT_REFUSE_PORT", -1);
  int port = -1;

  if (addr != NULL && addr->sa_family == AF_INET &&
      len >= sizeof (struct sockaddr_in))
    port = ntohs (((const struct sockaddr_in *) addr)->sin_port);
  else if (addr != NULL && addr->sa_family == AF_INET6 &&
           len >= sizeof (struct sockaddr_in6))
    port = ntohs (((const struct sockaddr_in6 *) addr)->sin6_port);
  if (refuse >= 0 && port == refuse) {
    errno = ECONNREFUSED;
    return -1;
  }
  return real (fd, addr, len);
}
