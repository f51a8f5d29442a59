/* nbdrepl: TLS contexts for the replication link (OpenSSL 3).
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * TLS 1.3 only: no older version, no renegotiation, no compression, no
 * session tickets.  Two ways to prove who is at the other end:
 *
 *  - certificates (tls-ca, tls-cert, tls-key): both sides present a
 *    certificate signed by the CA and must name the node they are (CN
 *    or a DNS subjectAltName equal to the node's name in the YAML);
 *  - a pre-shared key (tls: true with a secret and no tls-ca):
 *    HMAC-SHA256 (secret, "nbdrepl tls psk " || resource), identity
 *    "nbdrepl/RESOURCE", with an (EC)DHE exchange on top, so that a
 *    recorded session stays secret even if the secret leaks later.
 *
 * Thread-free: the caller makes the contexts once and hands out SSL
 * objects (peer-tls.c).
 */
#ifndef NBDREPL_TLS_H
#define NBDREPL_TLS_H

#include <stdbool.h>
#include <stddef.h>

#include <openssl/ssl.h>

#include "repl-config.h"

/* A context for this node (self) in the client role (it dials) or the
 * server role (it accepts).  Reads the certificate, key and CA files
 * now, so a bad path or a key that does not match its certificate is
 * an error at start.  Returns NULL with one line in err. */
extern SSL_CTX *tls_ctx_new (const struct repl_config *cfg,
                             const struct repl_node_cfg *self, bool server,
                             char *err, size_t errlen);

/* The context's mode: true with certificates, false with a PSK. */
extern bool tls_ctx_uses_certs (SSL_CTX *ctx);

/* Does cert name this node (CN or DNS subjectAltName), exactly, with
 * no wildcard match? */
extern bool tls_cert_names (X509 *cert, const char *node_name,
                            bool allow_wildcard);

/* The oldest error on this thread's OpenSSL error queue as a short
 * phrase, or fallback; clears the queue. */
extern const char *tls_error_string (char *buf, size_t len,
                                     const char *fallback);

#endif /* NBDREPL_TLS_H */
