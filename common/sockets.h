/* nbdrepl: socket helpers.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * All functions return -1 with errno set on failure and log nothing:
 * the caller knows which peer or path the socket was for and reports it.
 */
#ifndef NBDREPL_SOCKETS_H
#define NBDREPL_SOCKETS_H

#include <stddef.h>
#include <sys/types.h>

/* A bound, listening TCP socket for host:port (SO_REUSEADDR, CLOEXEC).
 * On a getaddrinfo failure errno is EADDRNOTAVAIL. */
extern int sock_listen_tcp (const char *host, const char *port);

/* Connect to host:port from bind_host (any port; NULL or a wildcard
 * address: whatever the routing picks), waiting at most timeout_ms.
 * The returned socket is blocking, CLOEXEC, tuned as sock_tune does. */
extern int sock_connect_tcp (const char *host, const char *port,
                             const char *bind_host, int timeout_ms,
                             int sndbuf, int rcvbuf);

/* TCP_NODELAY, SO_KEEPALIVE, and SO_SNDBUF/SO_RCVBUF of sndbuf/rcvbuf
 * bytes (best effort: the kernel caps them at net.core.[wr]mem_max). */
extern int sock_tune (int fd, int sndbuf, int rcvbuf);

/* A listening unix socket at path with permissions mode, whatever the
 * umask.  Nothing at path is replaced: a file there fails with
 * EADDRINUSE. */
extern int sock_listen_unix (const char *path, mode_t mode);
extern int sock_connect_unix (const char *path);

/* Read exactly len bytes within timeout_ms in all (-1: no limit), so
 * that a peer trickling bytes cannot hold the reader for ever; give up
 * with errno ECANCELED as soon as stop_fd (-1: none) is readable.  End
 * of file fails with errno ECONNRESET, the deadline with ETIMEDOUT. */
extern int sock_read_full_until (int fd, void *buf, size_t len,
                                 int timeout_ms, int stop_fd);
extern int sock_read_full (int fd, void *buf, size_t len, int timeout_ms);

/* Write exactly len bytes, waiting at most timeout_ms for each chunk to
 * leave (-1: forever); a timeout fails with ETIMEDOUT. */
extern int sock_write_full (int fd, const void *buf, size_t len,
                            int timeout_ms);

#endif /* NBDREPL_SOCKETS_H */
