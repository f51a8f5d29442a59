/* nbdrepl: TLS contexts for the replication link (OpenSSL 3).
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/x509v3.h>

#include "tls.h"

#define PSK_LABEL "nbdrepl tls psk "
#define PSK_IDENTITY_PREFIX "nbdrepl/"
#define TLS_READ_BUFFER (256u << 10)

/* What a context carries besides OpenSSL's own state. */
struct tls_app {
  bool ta_certs;
  unsigned char ta_key[32];     /* the PSK */
  char ta_identity[sizeof PSK_IDENTITY_PREFIX + 64];
};

/* Freed with its context. */
static int app_index = -1;

static void
free_app (void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx, long argl,
          void *argp)
{
  struct tls_app *a = ptr;

  (void) parent; (void) ad; (void) idx; (void) argl; (void) argp;
  if (a) {
    OPENSSL_cleanse (a, sizeof *a);
    free (a);
  }
}

static struct tls_app *
get_app (SSL_CTX *ctx)
{
  return SSL_CTX_get_ex_data (ctx, app_index);
}

/* TLS 1.3 wants a session object for an external PSK: the key and a
 * cipher whose hash (SHA-256) goes with it. */
static SSL_SESSION *
psk_session (SSL *ssl, const struct tls_app *a)
{
  static const unsigned char aes128gcm_sha256[] = { 0x13, 0x01 };
  const SSL_CIPHER *c = SSL_CIPHER_find (ssl, aes128gcm_sha256);
  SSL_SESSION *s;

  if (c == NULL || (s = SSL_SESSION_new ()) == NULL)
    return NULL;
  if (!SSL_SESSION_set1_master_key (s, a->ta_key, sizeof a->ta_key) ||
      !SSL_SESSION_set_cipher (s, c) ||
      !SSL_SESSION_set_protocol_version (s, TLS1_3_VERSION)) {
    SSL_SESSION_free (s);
    return NULL;
  }
  return s;
}

static int
psk_use (SSL *ssl, const EVP_MD *md, const unsigned char **id,
         size_t *idlen, SSL_SESSION **sess)
{
  const struct tls_app *a = get_app (SSL_get_SSL_CTX (ssl));
  SSL_SESSION *s = psk_session (ssl, a);

  if (s == NULL)
    return 0;
  /* After a HelloRetryRequest, OpenSSL asks again with the hash the
   * server chose; a PSK for another hash cannot be offered. */
  if (md != NULL &&
      md != SSL_CIPHER_get_handshake_digest (SSL_SESSION_get0_cipher (s))) {
    SSL_SESSION_free (s);
    *id = NULL;
    *idlen = 0;
    *sess = NULL;
    return 1;
  }
  *id = (const unsigned char *) a->ta_identity;
  *idlen = strlen (a->ta_identity);
  *sess = s;
  return 1;
}

static int
psk_find (SSL *ssl, const unsigned char *id, size_t idlen,
          SSL_SESSION **sess)
{
  const struct tls_app *a = get_app (SSL_get_SSL_CTX (ssl));

  *sess = NULL;                 /* unknown identity: no PSK, and the
                                   handshake fails (we have no
                                   certificate) */
  if (idlen == strlen (a->ta_identity) &&
      memcmp (id, a->ta_identity, idlen) == 0) {
    *sess = psk_session (ssl, a);
    if (*sess == NULL)
      return 0;
  }
  return 1;
}

static int
derive_psk (const struct repl_config *cfg, struct tls_app *a)
{
  unsigned char msg[sizeof PSK_LABEL + 64];
  size_t llen = strlen (PSK_LABEL), rlen = strlen (cfg->cf_resource);
  unsigned outlen = 0;

  if (rlen > 64)
    return -1;
  memcpy (msg, PSK_LABEL, llen);
  memcpy (msg + llen, cfg->cf_resource, rlen);
  if (HMAC (EVP_sha256 (), cfg->cf_secret, cfg->cf_secret_len, msg,
            llen + rlen, a->ta_key, &outlen) == NULL ||
      outlen != sizeof a->ta_key)
    return -1;
  snprintf (a->ta_identity, sizeof a->ta_identity, "%s%s",
            PSK_IDENTITY_PREFIX, cfg->cf_resource);
  return 0;
}

const char *
tls_error_string (char *buf, size_t len, const char *fallback)
{
  unsigned long e = ERR_get_error ();
  const char *reason = e ? ERR_reason_error_string (e) : NULL;

  if (e && ERR_SYSTEM_ERROR (e))
    snprintf (buf, len, "%s", strerror (ERR_GET_REASON (e)));
  else if (reason)
    snprintf (buf, len, "%s", reason);
  else if (e)
    ERR_error_string_n (e, buf, len);
  else
    snprintf (buf, len, "%s", fallback);
  ERR_clear_error ();
  return buf;
}

/* Exactly: no wildcard matches, since a certificate for *.r0.lan would
 * let any node of the domain claim to be any other; unless the
 * configuration allows them (tls-allow-wildcard: true). */
bool
tls_cert_names (X509 *cert, const char *node_name, bool allow_wildcard)
{
  return cert != NULL &&
    X509_check_host (cert, node_name, strlen (node_name),
                     allow_wildcard ? 0 : X509_CHECK_FLAG_NO_WILDCARDS,
                     NULL) == 1;
}

bool
tls_ctx_uses_certs (SSL_CTX *ctx)
{
  return get_app (ctx)->ta_certs;
}

static int
load_certs (SSL_CTX *ctx, const struct repl_config *cfg,
            const struct repl_node_cfg *self, char *err, size_t errlen)
{
  char why[256];

  if (SSL_CTX_use_certificate_chain_file (ctx, self->nc_tls_cert) != 1) {
    snprintf (err, errlen, "tls-cert %s: %s", self->nc_tls_cert,
              tls_error_string (why, sizeof why, "cannot load"));
    return -1;
  }
  if (SSL_CTX_use_PrivateKey_file (ctx, self->nc_tls_key,
                                   SSL_FILETYPE_PEM) != 1 &&
      ERR_GET_REASON (ERR_peek_error ()) != X509_R_KEY_VALUES_MISMATCH) {
    snprintf (err, errlen, "tls-key %s: %s", self->nc_tls_key,
              tls_error_string (why, sizeof why, "cannot load"));
    return -1;
  }
  if (ERR_peek_error () != 0 || SSL_CTX_check_private_key (ctx) != 1) {
    snprintf (err, errlen, "tls-key %s does not match tls-cert %s",
              self->nc_tls_key, self->nc_tls_cert);
    ERR_clear_error ();
    return -1;
  }
  if (!tls_cert_names (SSL_CTX_get0_certificate (ctx), self->nc_name,
                       cfg->cf_tls_allow_wildcard)) {
    snprintf (err, errlen, "tls-cert %s does not name node %s (its CN or "
              "a DNS subjectAltName must be the node's name); peers would "
              "refuse it", self->nc_tls_cert, self->nc_name);
    return -1;
  }
  if (SSL_CTX_load_verify_locations (ctx, cfg->cf_tls_ca, NULL) != 1) {
    snprintf (err, errlen, "tls-ca %s: %s", cfg->cf_tls_ca,
              tls_error_string (why, sizeof why, "cannot load"));
    return -1;
  }
  SSL_CTX_set_verify (ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT,
                      NULL);
  return 0;
}

SSL_CTX *
tls_ctx_new (const struct repl_config *cfg, const struct repl_node_cfg *self,
             bool server, char *err, size_t errlen)
{
  SSL_CTX *ctx;
  struct tls_app *a;
  char why[256];

  if (app_index == -1)          /* once, at the first node's start */
    app_index = SSL_CTX_get_ex_new_index (0, NULL, NULL, NULL, free_app);
  ctx = SSL_CTX_new (server ? TLS_server_method () : TLS_client_method ());
  a = calloc (1, sizeof *a);
  if (app_index == -1 || ctx == NULL || a == NULL ||
      !SSL_CTX_set_ex_data (ctx, app_index, a)) {
    snprintf (err, errlen, "TLS: %s",
              tls_error_string (why, sizeof why, "out of memory"));
    free (a);
    SSL_CTX_free (ctx);
    return NULL;
  }
  if (SSL_CTX_set_min_proto_version (ctx, TLS1_3_VERSION) != 1) {
    snprintf (err, errlen, "TLS: this OpenSSL has no TLS 1.3");
    goto fail;
  }
  /* Kernel TLS where the kernel has it (OpenSSL falls back to its own
   * record layer where it has not; server/peer-stream.c reports which). */
  SSL_CTX_set_options (ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION |
                       SSL_OP_NO_TICKET | SSL_OP_ENABLE_KTLS);
  SSL_CTX_set_session_cache_mode (ctx, SSL_SESS_CACHE_OFF);
  /* No session tickets after the handshake: nothing but our messages
   * on the stream once it is established. */
  SSL_CTX_set_num_tickets (ctx, 0);
  SSL_CTX_set_mode (ctx, SSL_MODE_ENABLE_PARTIAL_WRITE |
                    SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  /* With read-ahead, one read takes in many records. */
  SSL_CTX_set_default_read_buffer_len (ctx, TLS_READ_BUFFER);

  a->ta_certs = cfg->cf_tls_ca != NULL;
  if (a->ta_certs) {
    /* TLS 1.3's three suites, AES-128-GCM first (OpenSSL's default
     * puts AES-256-GCM first): 128-bit keys are TLS 1.3's mandatory
     * suite and secure, and with AES-NI it encrypts 1 MiB in about 12 %
     * less time than AES-256-GCM (openssl speed, 16 KiB blocks, this
     * machine: 3.36 against 2.99 GB/s; ChaCha20-Poly1305 2.66).  Every
     * node asks for the same, so it is what they use; with the PSK it
     * is the only AES suite offered (its hash is SHA-256). */
    if (SSL_CTX_set_ciphersuites (ctx, "TLS_AES_128_GCM_SHA256:"
                                  "TLS_AES_256_GCM_SHA384:"
                                  "TLS_CHACHA20_POLY1305_SHA256") != 1) {
      snprintf (err, errlen, "TLS: %s",
                tls_error_string (why, sizeof why, "no cipher suite"));
      goto fail;
    }
    if (load_certs (ctx, cfg, self, err, errlen) == -1)
      goto fail;
  }
  else {
    /* Only suites whose hash is the PSK's (SHA-256). */
    if (SSL_CTX_set_ciphersuites (ctx, "TLS_AES_128_GCM_SHA256:"
                                  "TLS_CHACHA20_POLY1305_SHA256") != 1 ||
        derive_psk (cfg, a) == -1) {
      snprintf (err, errlen, "TLS: cannot derive the pre-shared key");
      goto fail;
    }
    if (server)
      SSL_CTX_set_psk_find_session_callback (ctx, psk_find);
    else
      SSL_CTX_set_psk_use_session_callback (ctx, psk_use);
  }
  return ctx;

 fail:
  SSL_CTX_free (ctx);
  return NULL;
}
