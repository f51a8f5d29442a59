/* nbdrepl: socket helpers.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include "sockets.h"

static int
resolve (const char *host, const char *port, int flags, struct addrinfo **res)
{
  struct addrinfo hints = {
    .ai_family = AF_UNSPEC,
    .ai_socktype = SOCK_STREAM,
    .ai_flags = flags | AI_NUMERICSERV,
  };

  if (getaddrinfo (host, port, &hints, res) != 0) {
    errno = EADDRNOTAVAIL;
    return -1;
  }
  return 0;
}

int
sock_listen_tcp (const char *host, const char *port)
{
  struct addrinfo *res, *ai;
  int fd = -1, saved_errno = EADDRNOTAVAIL;
  const int one = 1;

  if (resolve (host, port, AI_PASSIVE, &res) == -1)
    return -1;
  for (ai = res; ai; ai = ai->ai_next) {
    fd = socket (ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC,
                 ai->ai_protocol);
    if (fd == -1) {
      saved_errno = errno;
      continue;
    }
    setsockopt (fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind (fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
        listen (fd, 16) == 0)
      break;
    saved_errno = errno;
    close (fd);
    fd = -1;
  }
  freeaddrinfo (res);
  if (fd == -1)
    errno = saved_errno;
  return fd;
}

int
sock_tune (int fd, int sndbuf, int rcvbuf)
{
  const int one = 1;

  if (setsockopt (fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) == -1 ||
      setsockopt (fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one) == -1)
    return -1;
  /* Larger buffers let many writes be in flight (best effort: the
   * kernel clamps these to net.core.[rw]mem_max). */
  setsockopt (fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
  setsockopt (fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
  return 0;
}

/* Bind fd to bind_host (any port), in the family of the address it
 * will connect to; nothing for a wildcard address. */
static int
bind_local (int fd, int family, const char *bind_host)
{
  struct addrinfo hints = {
    .ai_family = family,
    .ai_socktype = SOCK_STREAM,
    .ai_flags = AI_NUMERICSERV,
  }, *res;
  int r;

  if (strcmp (bind_host, "0.0.0.0") == 0 || strcmp (bind_host, "::") == 0)
    return 0;
  if (getaddrinfo (bind_host, "0", &hints, &res) != 0) {
    errno = EADDRNOTAVAIL;
    return -1;
  }
  r = bind (fd, res->ai_addr, res->ai_addrlen);
  freeaddrinfo (res);
  return r;
}

/* Non-blocking connect bounded by timeout_ms. */
static int
connect_one (const struct addrinfo *ai, const char *bind_host,
             int timeout_ms, int sndbuf, int rcvbuf)
{
  int fd, flags, err = 0;
  socklen_t errlen = sizeof err;
  struct pollfd pfd;

  fd = socket (ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC,
               ai->ai_protocol);
  if (fd == -1)
    return -1;
  /* Before connect, so that the window scale fits the receive buffer. */
  if (sock_tune (fd, sndbuf, rcvbuf) == -1)
    goto err;
  if (bind_host && bind_local (fd, ai->ai_family, bind_host) == -1)
    goto err;
  flags = fcntl (fd, F_GETFL);
  if (flags == -1 || fcntl (fd, F_SETFL, flags | O_NONBLOCK) == -1)
    goto err;
  if (connect (fd, ai->ai_addr, ai->ai_addrlen) == -1) {
    if (errno != EINPROGRESS)
      goto err;
    pfd.fd = fd;
    pfd.events = POLLOUT;
    switch (poll (&pfd, 1, timeout_ms)) {
    case -1:
      goto err;
    case 0:
      errno = ETIMEDOUT;
      goto err;
    }
    if (getsockopt (fd, SOL_SOCKET, SO_ERROR, &err, &errlen) == -1)
      goto err;
    if (err != 0) {
      errno = err;
      goto err;
    }
  }
  if (fcntl (fd, F_SETFL, flags) == -1)
    goto err;
  return fd;

 err:
  err = errno;
  close (fd);
  errno = err;
  return -1;
}

int
sock_connect_tcp (const char *host, const char *port, const char *bind_host,
                  int timeout_ms, int sndbuf, int rcvbuf)
{
  struct addrinfo *res, *ai;
  int fd = -1, saved_errno = EADDRNOTAVAIL;

  if (resolve (host, port, 0, &res) == -1)
    return -1;
  for (ai = res; ai; ai = ai->ai_next) {
    fd = connect_one (ai, bind_host, timeout_ms, sndbuf, rcvbuf);
    if (fd >= 0)
      break;
    saved_errno = errno;
  }
  freeaddrinfo (res);
  if (fd == -1)
    errno = saved_errno;
  return fd;
}

static int
unix_addr (const char *path, struct sockaddr_un *sun)
{
  memset (sun, 0, sizeof *sun);
  sun->sun_family = AF_UNIX;
  if (strlen (path) >= sizeof sun->sun_path) {
    errno = ENAMETOOLONG;
    return -1;
  }
  strcpy (sun->sun_path, path);
  return 0;
}

int
sock_listen_unix (const char *path, mode_t mode)
{
  struct sockaddr_un sun;
  int fd, saved_errno;

  if (unix_addr (path, &sun) == -1)
    return -1;
  fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd == -1)
    return -1;
  /* The mode is set before listen: until then nobody can connect,
   * whatever the umask made of the file. */
  if (bind (fd, (struct sockaddr *) &sun, sizeof sun) == -1)
    goto err;
  if (chmod (path, mode) == -1 || listen (fd, 16) == -1) {
    saved_errno = errno;
    unlink (path);
    errno = saved_errno;
    goto err;
  }
  return fd;

 err:
  saved_errno = errno;
  close (fd);
  errno = saved_errno;
  return -1;
}

int
sock_connect_unix (const char *path)
{
  struct sockaddr_un sun;
  int fd, saved_errno;

  if (unix_addr (path, &sun) == -1)
    return -1;
  fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd == -1)
    return -1;
  if (connect (fd, (struct sockaddr *) &sun, sizeof sun) == -1) {
    saved_errno = errno;
    close (fd);
    errno = saved_errno;
    return -1;
  }
  return fd;
}

static int
wait_fd (int fd, short events, int timeout_ms)
{
  struct pollfd pfd = { .fd = fd, .events = events };
  int r;

  if (timeout_ms < 0)
    return 0;
  do
    r = poll (&pfd, 1, timeout_ms);
  while (r == -1 && errno == EINTR);
  if (r == -1)
    return -1;
  if (r == 0) {
    errno = ETIMEDOUT;
    return -1;
  }
  return 0;
}

static uint64_t
monotonic_ms (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (uint64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int
sock_read_full (int fd, void *buf, size_t len, int timeout_ms)
{
  return sock_read_full_until (fd, buf, len, timeout_ms, -1);
}

int
sock_read_full_until (int fd, void *buf, size_t len, int timeout_ms,
                      int stop_fd)
{
  uint64_t deadline = timeout_ms < 0 ? 0 : monotonic_ms () + timeout_ms;
  char *p = buf;

  while (len > 0) {
    struct pollfd pfd[2] = {
      { .fd = fd, .events = POLLIN },
      { .fd = stop_fd, .events = POLLIN },
    };
    int wait_ms = -1;
    ssize_t r;

    if (timeout_ms >= 0) {
      uint64_t now = monotonic_ms ();
      if (now >= deadline) {
        errno = ETIMEDOUT;
        return -1;
      }
      wait_ms = deadline - now;
    }
    r = poll (pfd, stop_fd >= 0 ? 2 : 1, wait_ms);
    if (r == -1) {
      if (errno == EINTR)
        continue;
      return -1;
    }
    if (stop_fd >= 0 && pfd[1].revents) {
      errno = ECANCELED;
      return -1;
    }
    if (r == 0)
      continue;                 /* the deadline check says so next */
    r = recv (fd, p, len, MSG_DONTWAIT);
    if (r == -1) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)
        continue;
      return -1;
    }
    if (r == 0) {
      errno = ECONNRESET;
      return -1;
    }
    p += r;
    len -= r;
  }
  return 0;
}

int
sock_write_full (int fd, const void *buf, size_t len, int timeout_ms)
{
  const char *p = buf;

  while (len > 0) {
    ssize_t r;

    if (wait_fd (fd, POLLOUT, timeout_ms) == -1)
      return -1;
    r = send (fd, p, len, MSG_NOSIGNAL);
    if (r == -1) {
      if (errno == EINTR)
        continue;
      return -1;
    }
    p += r;
    len -= r;
  }
  return 0;
}
