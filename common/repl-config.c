/* nbdrepl: load and check the resource configuration file (libyaml).
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * The file is read whole into memory and parsed twice by libyaml: once
 * as a stream of events, which is where syntax errors, anchors, aliases
 * and extra documents are caught with their exact line, and once with
 * the document API, whose tree is then walked by hand.  libyaml accepts
 * duplicate keys and any scalar anywhere, so every key and every value
 * is checked here before anything is copied into struct repl_config.
 *
 * Every error is one line, "FILE:LINE: WHERE: KEY: PROBLEM 'VALUE'",
 * where WHERE is empty, "net: ", "metadata: ", "resync: " or
 * "nodes[N] (NAME): ".
 */
#include <config.h>

#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <yaml.h>

#include "cleanup.h"
#include "log.h"
#include "metadata.h"           /* the geometry's defaults and ranges */
#include "repl-config.h"

/* A real configuration file is well under a kilobyte; the cap only stops
 * a wrong path (a disk image, say) from being read into memory. */
#define CONFIG_MAX_BYTES  (1024 * 1024)

/* The deepest nesting of mappings and sequences a configuration may
 * have (it needs 4): libyaml's scanner takes time quadratic in the
 * depth, over 120 s for 1 MiB of brackets, so the first pass stops at
 * this depth. */
#define CONFIG_MAX_DEPTH  64

#define NAME_CHARS \
  "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-"
#define HOST_CHARS NAME_CHARS
#define HOST_MAX          253
#define ADDR_KEY_MAX      (HOST_MAX + sizeof "[]:65535")
#define CONTROL_PATH_MAX  (sizeof ((struct sockaddr_un *) 0)->sun_path - 1)

/* State of one config_load call. */
struct loader {
  const char *ld_path;          /* the file as given: prefix of messages */
  char *ld_dir;                 /* absolute directory holding the file */
  yaml_document_t ld_doc;
  bool ld_have_doc;
  char ld_addr_key[REPL_MAX_NODES][ADDR_KEY_MAX]; /* struct address key */
  char ld_metrics_key[REPL_MAX_NODES][ADDR_KEY_MAX]; /* ... of metrics:,
                                   or "" */
  char *ld_err;
  size_t ld_errlen;
  int ld_errno;                 /* errno for the caller on failure */
  unsigned ld_mode;             /* the file's permission bits (0: read
                                   from memory) */
};

/* Write "FILE:LINE: message" ("FILE: message" when line is 0) into the
 * caller's buffer.  Values come from the file, so anything that would
 * break the single line (a newline in a quoted scalar) becomes '?'.
 * errno is kept so that the format may use %m. */
static void __attribute__ ((format (printf, 3, 4)))
load_error (struct loader *ld, int line, const char *fmt, ...)
{
  int saved_errno = errno;
  va_list ap;
  int n;
  size_t i;

  ld->ld_errno = EINVAL;
  if (ld->ld_err == NULL || ld->ld_errlen == 0)
    return;
  if (line > 0)
    n = snprintf (ld->ld_err, ld->ld_errlen, "%s:%d: ", ld->ld_path, line);
  else
    n = snprintf (ld->ld_err, ld->ld_errlen, "%s: ", ld->ld_path);
  if (n >= 0 && (size_t) n < ld->ld_errlen) {
    errno = saved_errno;
    va_start (ap, fmt);
    vsnprintf (ld->ld_err + n, ld->ld_errlen - n, fmt, ap);
    va_end (ap);
  }
  for (i = 0; ld->ld_err[i] != '\0'; i++)
    if ((unsigned char) ld->ld_err[i] < 0x20 || ld->ld_err[i] == 0x7f)
      ld->ld_err[i] = '?';
  errno = saved_errno;
}

static void
load_oom (struct loader *ld)
{
  load_error (ld, 0, "out of memory");
  ld->ld_errno = ENOMEM;
}

static int
node_line (const yaml_node_t *node)
{
  return (int) node->start_mark.line + 1;
}

static const char *
node_kind (const yaml_node_t *node)
{
  switch (node->type) {
  case YAML_SCALAR_NODE: return "a scalar";
  case YAML_SEQUENCE_NODE: return "a sequence";
  case YAML_MAPPING_NODE: return "a mapping";
  default: return "nothing";
  }
}

static const char *
scalar (const yaml_node_t *node)
{
  return (const char *) node->data.scalar.value;
}

/* An empty, ~ or null plain scalar: YAML's spellings of "no value". */
static bool
is_null (const yaml_node_t *node)
{
  const char *s;

  if (node->type != YAML_SCALAR_NODE ||
      node->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
    return false;
  s = scalar (node);
  return strcmp (s, "") == 0 || strcmp (s, "~") == 0 ||
    strcmp (s, "null") == 0 || strcmp (s, "Null") == 0 || strcmp (s, "NULL") == 0;
}

/*----------------------------------------------------------------------
 * Reading and parsing.
 */

/* Read the whole file, so that a read error is reported with its errno
 * (libyaml only says "input error") and the buffer can be parsed twice. */
static int
read_file (struct loader *ld, unsigned char **bufp, size_t *lenp)
{
  CLEANUP_CLOSE int fd = open (ld->ld_path, O_RDONLY | O_CLOEXEC);
  unsigned char *buf = NULL, *p;
  size_t len = 0, size = 0;
  ssize_t r;

  struct stat st;

  if (fd == -1) {
    load_error (ld, 0, "cannot open: %m");
    ld->ld_errno = errno;
    return -1;
  }
  if (fstat (fd, &st) == 0)
    ld->ld_mode = st.st_mode & 07777;
  for (;;) {
    if (len == size) {
      size = size ? size * 2 : 4096;
      p = realloc (buf, size);
      if (p == NULL) {
        free (buf);
        load_oom (ld);
        return -1;
      }
      buf = p;
    }
    r = read (fd, buf + len, size - len);
    if (r == -1 && errno == EINTR)
      continue;
    if (r == -1) {
      load_error (ld, 0, "cannot read: %m");
      ld->ld_errno = errno;
      free (buf);
      return -1;
    }
    if (r == 0)
      break;
    len += r;
    if (len > CONFIG_MAX_BYTES) {
      load_error (ld, 0, "larger than %d bytes, not a configuration file",
                  CONFIG_MAX_BYTES);
      ld->ld_errno = EFBIG;
      free (buf);
      return -1;
    }
  }
  *bufp = buf;
  *lenp = len;
  return 0;
}

/* libyaml's complaint, with the line it happened on.  Reader errors
 * (bad UTF-8, control characters) carry a byte offset instead of a mark. */
static void
parser_error (struct loader *ld, const yaml_parser_t *parser,
              const unsigned char *buf, size_t len)
{
  const char *problem = parser->problem ? parser->problem : "unknown error";
  size_t i;
  int line = 1;

  switch (parser->error) {
  case YAML_MEMORY_ERROR:
    load_oom (ld);
    break;
  case YAML_READER_ERROR:
    for (i = 0; i < parser->problem_offset && i < len; i++)
      line += buf[i] == '\n';
    if (parser->problem_value != -1)
      load_error (ld, line, "not valid YAML text: %s (byte 0x%02x)",
                  problem, (unsigned) parser->problem_value & 0xff);
    else
      load_error (ld, line, "not valid YAML text: %s", problem);
    break;
  default:
    if (parser->context)
      load_error (ld, (int) parser->problem_mark.line + 1,
                  "YAML syntax error: %s %s (line %d)", problem,
                  parser->context, (int) parser->context_mark.line + 1);
    else
      load_error (ld, (int) parser->problem_mark.line + 1,
                  "YAML syntax error: %s", problem);
  }
}

/* First pass, over events.  The document API resolves an alias to the
 * very node its anchor names, so one node could hang under two keys and
 * the line of the alias would be lost; a configuration file has no use
 * for either, so both are refused here where the line is still known.
 * A second document would be silently ignored by the loader: refused. */
static int
scan_events (struct loader *ld, const unsigned char *buf, size_t len)
{
  yaml_parser_t parser;
  yaml_event_t event;
  const yaml_char_t *anchor;
  int ndocs = 0, depth = 0, r = 1;

  if (!yaml_parser_initialize (&parser)) {
    load_oom (ld);
    return -1;
  }
  yaml_parser_set_input_string (&parser, buf, len);
  while (r == 1) {
    if (!yaml_parser_parse (&parser, &event)) {
      parser_error (ld, &parser, buf, len);
      r = -1;
      break;
    }
    anchor = NULL;
    switch (event.type) {
    case YAML_ALIAS_EVENT: anchor = event.data.alias.anchor; break;
    case YAML_SCALAR_EVENT: anchor = event.data.scalar.anchor; break;
    case YAML_SEQUENCE_START_EVENT:
      anchor = event.data.sequence_start.anchor;
      depth++;
      break;
    case YAML_MAPPING_START_EVENT:
      anchor = event.data.mapping_start.anchor;
      depth++;
      break;
    case YAML_SEQUENCE_END_EVENT:
    case YAML_MAPPING_END_EVENT:
      depth--;
      break;
    case YAML_DOCUMENT_START_EVENT:
      if (++ndocs > 1) {
        load_error (ld, (int) event.start_mark.line + 1,
                    "a second YAML document; one file holds one resource");
        r = -1;
      }
      break;
    case YAML_STREAM_END_EVENT: r = 0; break;
    default: break;
    }
    if (depth > CONFIG_MAX_DEPTH) {
      load_error (ld, (int) event.start_mark.line + 1,
                  "mappings and sequences nested more than %d deep; not a "
                  "configuration file", CONFIG_MAX_DEPTH);
      r = -1;
    }
    if (anchor) {
      load_error (ld, (int) event.start_mark.line + 1,
                  "anchors and aliases are not supported: %c%s",
                  event.type == YAML_ALIAS_EVENT ? '*' : '&',
                  (const char *) anchor);
      r = -1;
    }
    yaml_event_delete (&event);
  }
  yaml_parser_delete (&parser);
  return r;
}

/* Second pass: the tree of the (only) document. */
static int
load_document (struct loader *ld, const unsigned char *buf, size_t len)
{
  yaml_parser_t parser;

  if (!yaml_parser_initialize (&parser)) {
    load_oom (ld);
    return -1;
  }
  yaml_parser_set_input_string (&parser, buf, len);
  if (!yaml_parser_load (&parser, &ld->ld_doc)) {
    parser_error (ld, &parser, buf, len);
    yaml_parser_delete (&parser);
    return -1;
  }
  ld->ld_have_doc = true;
  yaml_parser_delete (&parser);
  return 0;
}

/* The absolute directory of the configuration file, which relative disk
 * and control paths are taken against whatever the cwd later becomes. */
static int
find_config_dir (struct loader *ld)
{
  const char *slash = strrchr (ld->ld_path, '/');
  CLEANUP_FREE char *dir = NULL;

  if (slash == NULL)
    dir = strdup (".");
  else
    dir = strndup (ld->ld_path, slash == ld->ld_path ? 1 : slash - ld->ld_path);
  if (dir == NULL) {
    load_oom (ld);
    return -1;
  }
  ld->ld_dir = realpath (dir, NULL);
  if (ld->ld_dir == NULL) {
    load_error (ld, 0, "cannot resolve directory %s: %m", dir);
    ld->ld_errno = errno;
    return -1;
  }
  return 0;
}

/*----------------------------------------------------------------------
 * Values.
 */

/* Check the keys of one mapping against the names the caller knows:
 * each must be a scalar, known, and given once.  vals[i] gets the value
 * node of names[i] (or NULL), keys[i] its key node, for messages. */
static int
collect_keys (struct loader *ld, const yaml_node_t *map, const char *where,
              const char *const *names, size_t nnames,
              yaml_node_t **keys, yaml_node_t **vals)
{
  const yaml_node_pair_t *pair;
  yaml_node_t *key;
  size_t i;

  for (i = 0; i < nnames; i++)
    keys[i] = vals[i] = NULL;
  for (pair = map->data.mapping.pairs.start;
       pair < map->data.mapping.pairs.top; pair++) {
    key = yaml_document_get_node (&ld->ld_doc, pair->key);
    if (key->type != YAML_SCALAR_NODE) {
      load_error (ld, node_line (key), "%skey is %s, expected a name",
                  where, node_kind (key));
      return -1;
    }
    for (i = 0; i < nnames && strcmp (scalar (key), names[i]) != 0; i++)
      ;
    if (i == nnames) {
      load_error (ld, node_line (key), "%sunknown key '%s'",
                  where, scalar (key));
      return -1;
    }
    if (keys[i]) {
      load_error (ld, node_line (key), "%sduplicate key '%s' (first at line %d)",
                  where, names[i], node_line (keys[i]));
      return -1;
    }
    keys[i] = key;
    vals[i] = yaml_document_get_node (&ld->ld_doc, pair->value);
  }
  return 0;
}

/* The text of a scalar value, which must be there, be non-empty and hold
 * no NUL (a double-quoted "\0" would silently cut a path short). */
static int
get_text (struct loader *ld, const char *where, const yaml_node_t *key,
          const yaml_node_t *val, const char **text)
{
  if (is_null (val)) {
    load_error (ld, node_line (key), "%s%s: no value", where, scalar (key));
    return -1;
  }
  if (val->type != YAML_SCALAR_NODE) {
    load_error (ld, node_line (val), "%s%s: expected a scalar, got %s",
                where, scalar (key), node_kind (val));
    return -1;
  }
  if (val->data.scalar.length == 0) {
    load_error (ld, node_line (val), "%s%s: empty value", where, scalar (key));
    return -1;
  }
  if (strlen (scalar (val)) != val->data.scalar.length) {
    load_error (ld, node_line (val), "%s%s: '%s' contains a NUL byte",
                where, scalar (key), scalar (val));
    return -1;
  }
  *text = scalar (val);
  return 0;
}

/* Numbers must be plain scalars: YAML says "5" in quotes is a string. */
static int
get_number_text (struct loader *ld, const char *where, const yaml_node_t *key,
                 const yaml_node_t *val, const char **text)
{
  if (get_text (ld, where, key, val, text) == -1)
    return -1;
  if (val->data.scalar.style != YAML_PLAIN_SCALAR_STYLE) {
    load_error (ld, node_line (val), "%s%s: expected a number, got quoted '%s'",
                where, scalar (key), *text);
    return -1;
  }
  return 0;
}

static bool
is_digit (char c)
{
  return c >= '0' && c <= '9';
}

/* Plain decimal digits only: no sign, no "0x", no leading zero (which
 * YAML 1.1 would read as octal).  Saturates, so that a huge number is
 * reported as out of range rather than wrapped into range. */
static bool
parse_decimal (const char *s, unsigned long *out)
{
  unsigned long v = 0;
  const char *p;

  if (!is_digit (s[0]) || (s[0] == '0' && s[1] != '\0'))
    return false;
  for (p = s; is_digit (*p); p++)
    v = v > 100000000 ? 1000000000 : v * 10 + (*p - '0'); /* fits 32 bits */
  *out = v;
  return *p == '\0';
}

/* Seconds, "1" or "0.25", into milliseconds: at most 3 decimals, since
 * the engine's timers count milliseconds.  Saturates like the above. */
static bool
parse_seconds_ms (const char *s, unsigned long *ms)
{
  unsigned long whole = 0, frac = 0, scale = 100;
  const char *p = s;

  if (!is_digit (*p))
    return false;
  for (; is_digit (*p); p++)
    whole = whole >= 1000000 ? 1000000 : whole * 10 + (*p - '0');
  if (*p == '.') {
    p++;
    if (!is_digit (*p))
      return false;
    for (; is_digit (*p); p++) {
      if (scale == 0)
        return false;
      frac += (*p - '0') * scale;
      scale /= 10;
    }
  }
  *ms = whole * 1000 + frac;
  return *p == '\0';
}

/* A size or a rate: decimal digits (no sign, no leading zero) and an
 * optional binary suffix, K, M, G or T in either case, which may be
 * followed by "iB": 4096, 4K, 4k and 4KiB are all 4096.  "KB" is
 * refused, since it may mean 1000 or 1024.  Saturates at UINT64_MAX,
 * so that a huge value is reported as out of range, never wrapped. */
static bool
parse_size (const char *s, uint64_t *out)
{
  static const char units[] = "KMGT";
  const char *p = s, *u;
  uint64_t v = 0;
  unsigned shift = 0;
  char c;

  if (!is_digit (s[0]) || (s[0] == '0' && is_digit (s[1])))
    return false;
  for (; is_digit (*p); p++)
    v = v > (UINT64_MAX - 9) / 10 ? UINT64_MAX : v * 10 + (*p - '0');
  if (*p != '\0') {
    c = *p >= 'a' && *p <= 'z' ? *p - ('a' - 'A') : *p;
    u = strchr (units, c);      /* c is not NUL: *p was not */
    if (u == NULL)
      return false;
    shift = 10 * (unsigned) (u - units + 1);
    p++;
    if (strcmp (p, "iB") == 0)
      p += 2;
  }
  if (*p != '\0')
    return false;
  *out = v > (UINT64_MAX >> shift) ? UINT64_MAX : v << shift;
  return true;
}

/* A byte count for messages, as short as it is exact: 512, 4K, 1M,
 * 1536.  buf holds at least 24 bytes. */
static const char *
format_size (uint64_t v, char *buf, size_t len)
{
  static const char units[] = "KMGT";
  int i = -1;

  while (v != 0 && v % 1024 == 0 && i < 3) {
    v /= 1024;
    i++;
  }
  if (i < 0)
    snprintf (buf, len, "%" PRIu64, v);
  else
    snprintf (buf, len, "%" PRIu64 "%c", v, units[i]);
  return buf;
}

static bool
is_pow2 (uint64_t v)
{
  return v != 0 && (v & (v - 1)) == 0;
}

static bool
name_ok (const char *s)
{
  size_t n = strlen (s);

  return n >= 1 && n <= REPL_NAME_MAX && strspn (s, NAME_CHARS) == n;
}

static int
get_name (struct loader *ld, const char *where, const yaml_node_t *key,
          const yaml_node_t *val, char **out)
{
  const char *s;

  if (get_text (ld, where, key, val, &s) == -1)
    return -1;
  if (!name_ok (s)) {
    load_error (ld, node_line (val),
                "%s%s: '%s' is not a valid name ([A-Za-z0-9_.-], 1..%d characters)",
                where, scalar (key), s, REPL_NAME_MAX);
    return -1;
  }
  *out = strdup (s);
  if (*out == NULL) {
    load_oom (ld);
    return -1;
  }
  return 0;
}

/* A path made absolute against the configuration file's directory. */
static int
get_path (struct loader *ld, const char *where, const yaml_node_t *key,
          const yaml_node_t *val, char **out)
{
  const char *s;

  if (get_text (ld, where, key, val, &s) == -1)
    return -1;
  if (s[0] == '/')
    *out = strdup (s);
  else {
    while (s[0] == '.' && s[1] == '/')
      s += 2;
    if (asprintf (out, "%s/%s", ld->ld_dir, s) == -1)
      *out = NULL;
  }
  if (*out == NULL) {
    load_oom (ld);
    return -1;
  }
  return 0;
}

/* A size or rate value (parse_size); text gets the value as written,
 * for later messages.  what says what was expected. */
static int
get_size (struct loader *ld, const char *where, const yaml_node_t *key,
          const yaml_node_t *val, const char *what, uint64_t *out,
          const char **text)
{
  if (get_number_text (ld, where, key, val, text) == -1)
    return -1;
  if (!parse_size (*text, out)) {
    load_error (ld, node_line (val),
                "%s%s: '%s' is not %s (a whole number with an optional K, M, G or T)",
                where, scalar (key), *text, what);
    return -1;
  }
  return 0;
}

/* v, written as text, must be in min..max (and a power of 2 if pow2;
 * the range first, so that a huge value, saturated, is "out of range").
 * unit follows the range in the message: "" or " bytes/s". */
static int
check_size (struct loader *ld, const char *where, const yaml_node_t *key,
            const yaml_node_t *val, const char *text, uint64_t v,
            bool pow2, uint64_t min, uint64_t max, const char *unit)
{
  char lo[24], hi[24];

  if (v < min || v > max) {
    load_error (ld, node_line (val), "%s%s: %s out of range %s..%s%s",
                where, scalar (key), text, format_size (min, lo, sizeof lo),
                format_size (max, hi, sizeof hi), unit);
    return -1;
  }
  if (pow2 && !is_pow2 (v)) {
    load_error (ld, node_line (val), "%s%s: %s is not a power of 2",
                where, scalar (key), text);
    return -1;
  }
  return 0;
}

/* true or false, plain; YAML 1.1's yes, no, on and off are refused
 * rather than guessed at. */
static int
get_bool (struct loader *ld, const char *where, const yaml_node_t *key,
          const yaml_node_t *val, bool *out)
{
  const char *s;

  if (get_text (ld, where, key, val, &s) == -1)
    return -1;
  if (val->data.scalar.style != YAML_PLAIN_SCALAR_STYLE) {
    load_error (ld, node_line (val), "%s%s: expected true or false, got quoted '%s'",
                where, scalar (key), s);
    return -1;
  }
  if (strcmp (s, "true") == 0 || strcmp (s, "True") == 0 || strcmp (s, "TRUE") == 0)
    *out = true;
  else if (strcmp (s, "false") == 0 || strcmp (s, "False") == 0 ||
           strcmp (s, "FALSE") == 0)
    *out = false;
  else {
    load_error (ld, node_line (val), "%s%s: '%s' is not true or false",
                where, scalar (key), s);
    return -1;
  }
  return 0;
}

/* An address taken apart by split_address.  host and port point into
 * the value; key is the form two nodes are compared by: host name in
 * lower case, IPv6 address in canonical text, port without zeros, so
 * that "[::1]:7789" and "[0::1]:7789" are seen to be the same place. */
struct address {
  const char *host;             /* without brackets, hostlen bytes */
  size_t hostlen;
  const char *port;
  char key[ADDR_KEY_MAX];
};

/* Check "host:port" or "[v6addr]:port".  Returns the reason the address
 * is refused, or NULL. */
static const char *
split_address (const char *s, struct address *a)
{
  const char *end, *zone = NULL;
  size_t i, iplen;
  unsigned long port;
  char ip[INET6_ADDRSTRLEN + 1], canon[INET6_ADDRSTRLEN + 1];
  unsigned char bin[sizeof (struct in6_addr)];

  if (s[0] == '[') {
    a->host = s + 1;
    end = strchr (a->host, ']');
    if (end == NULL || end[1] != ':')
      return "expected [v6addr]:port";
    a->hostlen = end - a->host;
    a->port = end + 2;
    /* An optional zone, "fe80::1%eth0", for link-local addresses. */
    zone = memchr (a->host, '%', a->hostlen);
    iplen = zone ? (size_t) (zone - a->host) : a->hostlen;
    if (iplen >= sizeof ip)
      return "not an IPv6 address in the brackets";
    memcpy (ip, a->host, iplen);
    ip[iplen] = '\0';
    if (inet_pton (AF_INET6, ip, bin) != 1 ||
        inet_ntop (AF_INET6, bin, canon, sizeof canon) == NULL)
      return "not an IPv6 address in the brackets";
    if (zone && (a->hostlen - iplen < 2 || a->hostlen > HOST_MAX ||
                 strspn (zone + 1, HOST_CHARS) != a->hostlen - iplen - 1))
      return "bad IPv6 zone after '%'";
  }
  else {
    end = strchr (s, ':');
    if (end == NULL)
      return "no port, expected host:port";
    if (strchr (end + 1, ':'))
      return "an IPv6 address needs brackets, '[v6addr]:port'";
    a->host = s;
    a->hostlen = end - s;
    a->port = end + 1;
    if (a->hostlen == 0)
      return "empty host, expected host:port";
    if (a->hostlen > HOST_MAX || strspn (s, HOST_CHARS) < a->hostlen)
      return "not a host name or IPv4 address";
    /* All digits and dots is meant as IPv4: "10.0.0.256" is an error,
     * not a host name for the resolver to puzzle over later. */
    if (strspn (s, "0123456789.") == a->hostlen) {
      if (a->hostlen >= sizeof ip)
        return "not a valid IPv4 address";
      memcpy (ip, s, a->hostlen);
      ip[a->hostlen] = '\0';
      if (inet_pton (AF_INET, ip, bin) != 1)
        return "not a valid IPv4 address";
    }
  }
  if (!parse_decimal (a->port, &port))
    return "port is not a decimal number";
  if (port < 1 || port > 65535)
    return "port out of range 1..65535";

  if (s[0] == '[')
    snprintf (a->key, sizeof a->key, "[%s%.*s]:%lu", canon,
              zone ? (int) (a->hostlen - iplen) : 0, zone ? zone : "", port);
  else
    snprintf (a->key, sizeof a->key, "%.*s:%lu", (int) a->hostlen, s, port);
  for (i = 0; a->key[i] != '\0'; i++)
    if (a->key[i] >= 'A' && a->key[i] <= 'Z')
      a->key[i] += 'a' - 'A';
  return NULL;
}

/*----------------------------------------------------------------------
 * Sections.
 */

enum { NET_PING_INTERVAL, NET_PING_TIMEOUT, NET_TIMEOUT, NET_CONNECT_RETRY_MAX,
       NET_CORK, NET_SNDBUF_SIZE, NET_RCVBUF_SIZE, NET_NKEYS };

static const char *const net_keys[NET_NKEYS] = {
  [NET_PING_INTERVAL] = "ping-interval",
  [NET_PING_TIMEOUT] = "ping-timeout",
  [NET_TIMEOUT] = "timeout",
  [NET_CONNECT_RETRY_MAX] = "connect-retry-max",
  [NET_CORK] = "cork",
  [NET_SNDBUF_SIZE] = "sndbuf-size",
  [NET_RCVBUF_SIZE] = "rcvbuf-size",
};

/* The range of each net value, in milliseconds (see repl-config.h). */
static const struct {
  unsigned min_ms, max_ms;
} net_ranges[NET_NKEYS] = {
  [NET_PING_INTERVAL] = { 100, 60000 },
  [NET_PING_TIMEOUT] = { 200, 600000 },
  [NET_TIMEOUT] = { 200, 600000 },
  [NET_CONNECT_RETRY_MAX] = { 100, 60000 },
};

static int
parse_net (struct loader *ld, const yaml_node_t *netkey, const yaml_node_t *map,
           struct repl_config *cfg)
{
  yaml_node_t *keys[NET_NKEYS], *vals[NET_NKEYS];
  unsigned *dest[NET_NKEYS] = {
    [NET_PING_INTERVAL] = &cfg->cf_ping_interval_ms,
    [NET_PING_TIMEOUT] = &cfg->cf_ping_timeout_ms,
    [NET_TIMEOUT] = &cfg->cf_timeout_ms,
    [NET_CONNECT_RETRY_MAX] = &cfg->cf_connect_retry_max_ms,
  };
  const char *s;
  unsigned long ms;
  size_t i;
  int line;

  if (is_null (map))            /* "net:" with every entry commented out */
    return 0;
  if (map->type != YAML_MAPPING_NODE) {
    load_error (ld, node_line (map), "net: expected a mapping, got %s",
                node_kind (map));
    return -1;
  }
  if (collect_keys (ld, map, "net: ", net_keys, NET_NKEYS, keys, vals) == -1)
    return -1;
  if (vals[NET_CORK] != NULL &&
      get_bool (ld, "net: ", keys[NET_CORK], vals[NET_CORK], &cfg->cf_cork) == -1)
    return -1;
  for (i = NET_SNDBUF_SIZE; i <= NET_RCVBUF_SIZE; i++) {
    uint64_t v;

    if (vals[i] == NULL)
      continue;
    if (get_size (ld, "net: ", keys[i], vals[i], "a size in bytes", &v, &s) == -1 ||
        check_size (ld, "net: ", keys[i], vals[i], s, v, false,
                    REPL_MIN_SOCKBUF, REPL_MAX_SOCKBUF, "") == -1)
      return -1;
    *(i == NET_SNDBUF_SIZE ? &cfg->cf_sndbuf_size : &cfg->cf_rcvbuf_size) = v;
  }
  for (i = 0; i < NET_NKEYS; i++) {
    if (vals[i] == NULL || i == NET_CORK || i == NET_SNDBUF_SIZE ||
        i == NET_RCVBUF_SIZE)
      continue;
    if (get_number_text (ld, "net: ", keys[i], vals[i], &s) == -1)
      return -1;
    if (!parse_seconds_ms (s, &ms)) {
      load_error (ld, node_line (vals[i]),
                  "net: %s: '%s' is not a number of seconds (like 2 or 0.25, at most 3 decimals)",
                  net_keys[i], s);
      return -1;
    }
    if (ms < net_ranges[i].min_ms || ms > net_ranges[i].max_ms) {
      load_error (ld, node_line (vals[i]),
                  "net: %s: %s out of range %g..%g seconds", net_keys[i], s,
                  net_ranges[i].min_ms / 1000.0, net_ranges[i].max_ms / 1000.0);
      return -1;
    }
    *dest[i] = ms;
  }

  /* Pings that come less often than the silence that declares the peer
   * dead would kill every connection. */
  if (cfg->cf_ping_timeout_ms <= cfg->cf_ping_interval_ms) {
    line = node_line (keys[NET_PING_TIMEOUT] ? keys[NET_PING_TIMEOUT]
                      : keys[NET_PING_INTERVAL] ? keys[NET_PING_INTERVAL] : netkey);
    load_error (ld, line, "net: ping-timeout: %g must be greater than ping-interval %g",
                cfg->cf_ping_timeout_ms / 1000.0, cfg->cf_ping_interval_ms / 1000.0);
    return -1;
  }
  return 0;
}

enum { MDK_BITMAP_GRANULARITY, MDK_AL_EXTENT_SIZE, MDK_AL_EXTENTS,
       MDK_AL_UPDATES, MDK_NKEYS };

static const char *const metadata_keys[MDK_NKEYS] = {
  [MDK_BITMAP_GRANULARITY] = "bitmap-granularity",
  [MDK_AL_EXTENT_SIZE] = "al-extent-size",
  [MDK_AL_EXTENTS] = "al-extents",
  [MDK_AL_UPDATES] = "al-updates",
};

/* The geometry of new metadata, held to md_layout's ranges so that
 * creating the area never refuses what the loader accepted.  (Whether
 * the volume fits in MD_AL_EMPTY - 1 extents depends on its size, which
 * only the engine knows.) */
static int
parse_metadata (struct loader *ld, const yaml_node_t *map,
                struct repl_config *cfg)
{
  static const char where[] = "metadata: ";
  yaml_node_t *keys[MDK_NKEYS], *vals[MDK_NKEYS];
  const char *s;
  unsigned long n;
  uint64_t v;
  char a[24], b[24];
  int line;

  if (is_null (map))            /* every entry commented out */
    return 0;
  if (map->type != YAML_MAPPING_NODE) {
    load_error (ld, node_line (map), "metadata: expected a mapping, got %s",
                node_kind (map));
    return -1;
  }
  if (collect_keys (ld, map, where, metadata_keys, MDK_NKEYS, keys, vals) == -1)
    return -1;

  if (vals[MDK_BITMAP_GRANULARITY]) {
    if (get_size (ld, where, keys[MDK_BITMAP_GRANULARITY],
                  vals[MDK_BITMAP_GRANULARITY], "a size in bytes", &v, &s) == -1 ||
        check_size (ld, where, keys[MDK_BITMAP_GRANULARITY],
                    vals[MDK_BITMAP_GRANULARITY], s, v, true,
                    MD_MIN_GRANULARITY, MD_MAX_GRANULARITY, "") == -1)
      return -1;
    cfg->cf_bitmap_granularity = v;
  }
  if (vals[MDK_AL_EXTENT_SIZE]) {
    if (get_size (ld, where, keys[MDK_AL_EXTENT_SIZE],
                  vals[MDK_AL_EXTENT_SIZE], "a size in bytes", &v, &s) == -1 ||
        check_size (ld, where, keys[MDK_AL_EXTENT_SIZE],
                    vals[MDK_AL_EXTENT_SIZE], s, v, true,
                    MD_MIN_AL_EXTENT_SIZE, MD_MAX_AL_EXTENT_SIZE, "") == -1)
      return -1;
    cfg->cf_al_extent_size = v;
  }
  if (vals[MDK_AL_EXTENTS]) {
    if (get_number_text (ld, where, keys[MDK_AL_EXTENTS],
                         vals[MDK_AL_EXTENTS], &s) == -1)
      return -1;
    if (!parse_decimal (s, &n)) {
      load_error (ld, node_line (vals[MDK_AL_EXTENTS]),
                  "metadata: al-extents: '%s' is not a decimal integer", s);
      return -1;
    }
    if (n < 1 || n > MD_MAX_AL_EXTENTS) {
      load_error (ld, node_line (vals[MDK_AL_EXTENTS]),
                  "metadata: al-extents: %s out of range 1..%d", s,
                  MD_MAX_AL_EXTENTS);
      return -1;
    }
    cfg->cf_al_extents = n;
  }
  if (vals[MDK_AL_UPDATES] &&
      get_bool (ld, where, keys[MDK_AL_UPDATES], vals[MDK_AL_UPDATES],
                &cfg->cf_al_updates) == -1)
    return -1;

  /* A bitmap bit may not span two extents.  The defaults agree, so at
   * least one of the two was given. */
  if (cfg->cf_al_extent_size < cfg->cf_bitmap_granularity) {
    line = node_line (vals[MDK_AL_EXTENT_SIZE] ? vals[MDK_AL_EXTENT_SIZE]
                      : vals[MDK_BITMAP_GRANULARITY] ? vals[MDK_BITMAP_GRANULARITY]
                      : map);
    load_error (ld, line,
                "metadata: al-extent-size: %s is smaller than bitmap-granularity %s",
                format_size (cfg->cf_al_extent_size, a, sizeof a),
                format_size (cfg->cf_bitmap_granularity, b, sizeof b));
    return -1;
  }
  return 0;
}

enum { RS_RESYNC_RATE, RS_C_MIN_RATE, RS_C_MAX_RATE, RS_CSUMS, RS_NKEYS };

static const char *const resync_keys[RS_NKEYS] = {
  [RS_RESYNC_RATE] = "resync-rate",
  [RS_C_MIN_RATE] = "c-min-rate",
  [RS_C_MAX_RATE] = "c-max-rate",
  [RS_CSUMS] = "csums",
};

/* DRBD's rates are KiB/s: "c-max-rate 102400" there is 100 MiB/s, and
 * here 100 KiB/s, a resync of days.  A plain number below 1 MiB/s is
 * said to be bytes (it may be meant: not an error). */
static void
warn_plain_rate (struct loader *ld, const yaml_node_t *key,
                 const char *text, uint64_t v)
{
  if (v == 0 || v >= 1024 * 1024 || text[strspn (text, "0123456789")] != '\0')
    return;
  log_warning ("%s:%d: resync: %s: %s is bytes/s (%.1f KiB/s), not KiB/s "
               "as in DRBD; write %sK for %s KiB/s",
               ld->ld_path, node_line (key), (const char *) key->data.scalar.value,
               text, v / 1024.0, text, text);
}

/* The pace of resync: a fixed rate, or the dynamic controller's two
 * rates, or (neither) as fast as it goes; see struct repl_config. */
static int
parse_resync (struct loader *ld, const yaml_node_t *map,
              struct repl_config *cfg)
{
  static const char where[] = "resync: ";
  yaml_node_t *keys[RS_NKEYS], *vals[RS_NKEYS];
  uint64_t *dest[RS_CSUMS] = {
    [RS_RESYNC_RATE] = &cfg->cf_resync_rate,
    [RS_C_MIN_RATE] = &cfg->cf_c_min_rate,
    [RS_C_MAX_RATE] = &cfg->cf_c_max_rate,
  };
  const char *text[RS_CSUMS] = { NULL };
  size_t i, c, given, missing;
  uint64_t v;
  int line;

  if (is_null (map))            /* every entry commented out */
    return 0;
  if (map->type != YAML_MAPPING_NODE) {
    load_error (ld, node_line (map), "resync: expected a mapping, got %s",
                node_kind (map));
    return -1;
  }
  if (collect_keys (ld, map, where, resync_keys, RS_NKEYS, keys, vals) == -1)
    return -1;

  for (i = 0; i < RS_CSUMS; i++) {
    if (vals[i] == NULL)
      continue;
    /* 0 is "no fixed rate" for resync-rate; for the controller's rates
     * it would mean a stalled resync, or (in DRBD) no throttling at all:
     * refused rather than guessed at. */
    if (get_size (ld, where, keys[i], vals[i], "a rate in bytes per second",
                  &v, &text[i]) == -1 ||
        check_size (ld, where, keys[i], vals[i], text[i], v, false,
                    i == RS_RESYNC_RATE ? 0 : 1, REPL_MAX_RATE, " bytes/s") == -1)
      return -1;
    *dest[i] = v;
    warn_plain_rate (ld, keys[i], text[i], v);
  }
  if (vals[RS_CSUMS] &&
      get_bool (ld, where, keys[RS_CSUMS], vals[RS_CSUMS], &cfg->cf_csums) == -1)
    return -1;

  /* Two ways of setting the pace cannot both be obeyed: the message is on
   * the line of whichever comes second. */
  if (vals[RS_RESYNC_RATE] && (vals[RS_C_MIN_RATE] || vals[RS_C_MAX_RATE])) {
    c = vals[RS_C_MIN_RATE] ? RS_C_MIN_RATE : RS_C_MAX_RATE;
    line = node_line (keys[c]);
    if (node_line (keys[RS_RESYNC_RATE]) > line)
      line = node_line (keys[RS_RESYNC_RATE]);
    load_error (ld, line,
                "resync: resync-rate %s and %s %s are both set: use a fixed rate "
                "or the dynamic controller (c-min-rate, c-max-rate), not both",
                text[RS_RESYNC_RATE], resync_keys[c], text[c]);
    return -1;
  }
  if ((vals[RS_C_MIN_RATE] == NULL) != (vals[RS_C_MAX_RATE] == NULL)) {
    given = vals[RS_C_MIN_RATE] ? RS_C_MIN_RATE : RS_C_MAX_RATE;
    missing = given == RS_C_MIN_RATE ? RS_C_MAX_RATE : RS_C_MIN_RATE;
    load_error (ld, node_line (keys[given]),
                "resync: %s: %s given without %s; the dynamic controller needs both",
                resync_keys[given], text[given], resync_keys[missing]);
    return -1;
  }
  if (cfg->cf_c_min_rate > cfg->cf_c_max_rate) {
    load_error (ld, node_line (vals[RS_C_MIN_RATE]),
                "resync: c-min-rate: %s is greater than c-max-rate %s",
                text[RS_C_MIN_RATE], text[RS_C_MAX_RATE]);
    return -1;
  }
  return 0;
}

/* Required keys first: parse_node checks those before NODE_CONTROL. */
enum { NODE_NAME, NODE_ID, NODE_ADDRESS, NODE_DISK, NODE_CONTROL, NODE_META,
       NODE_TLS_CERT, NODE_TLS_KEY, NODE_METRICS, NODE_NKEYS };

static const char *const node_keys[NODE_NKEYS] = {
  [NODE_NAME] = "name",
  [NODE_ID] = "id",
  [NODE_ADDRESS] = "address",
  [NODE_DISK] = "disk",
  [NODE_CONTROL] = "control",
  [NODE_META] = "meta",
  [NODE_TLS_CERT] = "tls-cert",
  [NODE_TLS_KEY] = "tls-key",
  [NODE_METRICS] = "metrics",
};

/* The node's name, if it has a usable one, so that every message about
 * the node (even "unknown key") can say "nodes[1] (beta)". */
static const char *
peek_name (struct loader *ld, const yaml_node_t *map)
{
  const yaml_node_pair_t *pair;
  const yaml_node_t *key, *val;

  for (pair = map->data.mapping.pairs.start;
       pair < map->data.mapping.pairs.top; pair++) {
    key = yaml_document_get_node (&ld->ld_doc, pair->key);
    val = yaml_document_get_node (&ld->ld_doc, pair->value);
    if (key->type == YAML_SCALAR_NODE && strcmp (scalar (key), "name") == 0 &&
        val->type == YAML_SCALAR_NODE && name_ok (scalar (val)))
      return scalar (val);
  }
  return NULL;
}

/* Node i against the nodes before it: name, id and address must each
 * be unique, or two engines would answer to one name or port. */
static int
check_unique (struct loader *ld, const struct repl_config *cfg, size_t i,
              const char *where, yaml_node_t *const *vals)
{
  const struct repl_node_cfg *nc = &cfg->cf_nodes[i], *other;
  size_t j;

  for (j = 0; j < i; j++) {
    other = &cfg->cf_nodes[j];
    if (strcmp (other->nc_name, nc->nc_name) == 0) {
      load_error (ld, node_line (vals[NODE_NAME]),
                  "%sname: duplicate %s, also used by nodes[%zu]",
                  where, nc->nc_name, j);
      return -1;
    }
    if (other->nc_id == nc->nc_id) {
      load_error (ld, node_line (vals[NODE_ID]),
                  "%sid: duplicate %u, also used by %s",
                  where, nc->nc_id, other->nc_name);
      return -1;
    }
    if (strcmp (ld->ld_addr_key[j], ld->ld_addr_key[i]) == 0) {
      load_error (ld, node_line (vals[NODE_ADDRESS]),
                  "%saddress: duplicate %s, also used by %s",
                  where, nc->nc_address, other->nc_name);
      return -1;
    }
    if (strcmp (ld->ld_metrics_key[j], ld->ld_addr_key[i]) == 0) {
      load_error (ld, node_line (vals[NODE_ADDRESS]),
                  "%saddress: %s is the metrics address of %s",
                  where, nc->nc_address, other->nc_name);
      return -1;
    }
  }
  return 0;
}

/* Node i's metadata path against the disks and metadata paths of nodes
 * 0..i.  The loader cannot tell which nodes share a machine (on one
 * machine, in tests and demos, they all do), so it refuses what would
 * be a disaster there: metadata written over a disk, or two nodes'
 * metadata in one file.  Nodes with the same disk path are the
 * exception: they cannot share a machine, since they would share the
 * disk, so they may have the same metadata path too, as with DRBD's
 * usual "the same paths on every host". */
static int
check_meta (struct loader *ld, const struct repl_config *cfg, size_t i,
            const char *where, yaml_node_t *const *vals)
{
  const struct repl_node_cfg *nc = &cfg->cf_nodes[i], *other;
  const char *deflt = nc->nc_meta_default ? "default " : "";
  int line = vals[NODE_META] ? node_line (vals[NODE_META]) : nc->nc_line;
  size_t j;

  for (j = 0; j <= i; j++) {
    other = &cfg->cf_nodes[j];
    if (other->nc_diskless)
      continue;
    if (nc->nc_meta && strcmp (nc->nc_meta, other->nc_disk) == 0) {
      if (j == i)
        load_error (ld, line, "%smeta: '%s' is the node's own disk",
                    where, nc->nc_meta);
      else
        load_error (ld, line, "%smeta: %s'%s' is the disk of %s",
                    where, deflt, nc->nc_meta, other->nc_name);
      return -1;
    }
    if (j == i)
      break;
    if (other->nc_meta && strcmp (other->nc_meta, nc->nc_disk) == 0) {
      load_error (ld, node_line (vals[NODE_DISK]),
                  "%sdisk: '%s' is the %smetadata of %s", where, nc->nc_disk,
                  other->nc_meta_default ? "default " : "", other->nc_name);
      return -1;
    }
    if (nc->nc_meta && other->nc_meta &&
        strcmp (nc->nc_meta, other->nc_meta) == 0 &&
        strcmp (nc->nc_disk, other->nc_disk) != 0) {
      load_error (ld, line,
                  "%smeta: %sduplicate %s, also used by %s, whose disk is "
                  "different (only nodes with the same disk path may share "
                  "a metadata path)", where, deflt, nc->nc_meta, other->nc_name);
      return -1;
    }
  }
  return 0;
}

/* metrics: host:port of the node's Prometheus endpoint (server/
 * metrics.c), in the syntax of address.  It may not be any node's
 * replication address: on the machine that has that address both
 * would bind the same port. */
static int
parse_metrics (struct loader *ld, struct repl_config *cfg, size_t i,
               const char *where, yaml_node_t *const *keys,
               yaml_node_t *const *vals)
{
  struct repl_node_cfg *nc = &cfg->cf_nodes[i];
  int line = node_line (vals[NODE_METRICS]);
  struct address addr;
  const char *s, *why;
  size_t j;

  if (get_text (ld, where, keys[NODE_METRICS], vals[NODE_METRICS], &s) == -1)
    return -1;
  why = split_address (s, &addr);
  if (why) {
    load_error (ld, line, "%smetrics: '%s': %s", where, s, why);
    return -1;
  }
  for (j = 0; j <= i; j++) {
    if (strcmp (addr.key, ld->ld_addr_key[j]) == 0) {
      load_error (ld, line, "%smetrics: %s is the replication address of %s",
                  where, s, cfg->cf_nodes[j].nc_name);
      return -1;
    }
  }
  nc->nc_metrics = strdup (s);
  nc->nc_metrics_host = strndup (addr.host, addr.hostlen);
  nc->nc_metrics_port = strdup (addr.port);
  if (nc->nc_metrics == NULL || nc->nc_metrics_host == NULL ||
      nc->nc_metrics_port == NULL) {
    load_oom (ld);
    return -1;
  }
  strcpy (ld->ld_metrics_key[i], addr.key);
  return 0;
}

static int
parse_node (struct loader *ld, struct repl_config *cfg, size_t i,
            const yaml_node_t *map)
{
  struct repl_node_cfg *nc = &cfg->cf_nodes[i];
  yaml_node_t *keys[NODE_NKEYS], *vals[NODE_NKEYS];
  char where[REPL_NAME_MAX + sizeof "nodes[18446744073709551615] (): "];
  const char *name, *s, *why;
  struct address addr;
  unsigned long id;
  size_t k;

  if (map->type != YAML_MAPPING_NODE) {
    load_error (ld, node_line (map),
                "nodes[%zu]: expected a mapping (name, id, address, disk), got %s",
                i, node_kind (map));
    return -1;
  }
  nc->nc_line = node_line (map);
  name = peek_name (ld, map);
  if (name)
    snprintf (where, sizeof where, "nodes[%zu] (%s): ", i, name);
  else
    snprintf (where, sizeof where, "nodes[%zu]: ", i);

  if (collect_keys (ld, map, where, node_keys, NODE_NKEYS, keys, vals) == -1)
    return -1;
  for (k = 0; k < NODE_CONTROL; k++) {
    if (vals[k] == NULL) {
      load_error (ld, nc->nc_line, "%smissing required key '%s'",
                  where, node_keys[k]);
      return -1;
    }
  }

  if (get_name (ld, where, keys[NODE_NAME], vals[NODE_NAME], &nc->nc_name) == -1)
    return -1;

  if (get_number_text (ld, where, keys[NODE_ID], vals[NODE_ID], &s) == -1)
    return -1;
  if (!parse_decimal (s, &id)) {
    load_error (ld, node_line (vals[NODE_ID]),
                "%sid: '%s' is not a decimal integer", where, s);
    return -1;
  }
  if (id > REPL_MAX_NODE_ID) {
    load_error (ld, node_line (vals[NODE_ID]), "%sid: %s out of range 0..%d",
                where, s, REPL_MAX_NODE_ID);
    return -1;
  }
  nc->nc_id = id;

  if (get_text (ld, where, keys[NODE_ADDRESS], vals[NODE_ADDRESS], &s) == -1)
    return -1;
  why = split_address (s, &addr);
  if (why) {
    load_error (ld, node_line (vals[NODE_ADDRESS]), "%saddress: '%s': %s",
                where, s, why);
    return -1;
  }
  nc->nc_address = strdup (s);
  nc->nc_host = strndup (addr.host, addr.hostlen);
  nc->nc_port = strdup (addr.port);
  if (nc->nc_address == NULL || nc->nc_host == NULL || nc->nc_port == NULL) {
    load_oom (ld);
    return -1;
  }
  strcpy (ld->ld_addr_key[i], addr.key);
  if (check_unique (ld, cfg, i, where, vals) == -1)
    return -1;

  /* "none" is a word, not a file name (a file called so is "./none"):
   * a diskless node, which keeps no data and no metadata. */
  if (vals[NODE_DISK] && vals[NODE_DISK]->type == YAML_SCALAR_NODE &&
      strcmp ((const char *) vals[NODE_DISK]->data.scalar.value, "none") == 0) {
    nc->nc_diskless = true;
    if (vals[NODE_META]) {
      load_error (ld, node_line (vals[NODE_META]),
                  "%smeta: a diskless node (disk: none) has no metadata",
                  where);
      return -1;
    }
  }
  else if (get_path (ld, where, keys[NODE_DISK], vals[NODE_DISK],
                     &nc->nc_disk) == -1)
    return -1;

  /* "internal" is a word, not a file name: a file called so is
   * "./internal". */
  if (nc->nc_diskless)
    ;
  else if (vals[NODE_META]) {
    if (get_text (ld, where, keys[NODE_META], vals[NODE_META], &s) == -1)
      return -1;
    if (strcmp (s, "internal") == 0)
      nc->nc_meta_internal = true;
    else if (get_path (ld, where, keys[NODE_META], vals[NODE_META],
                       &nc->nc_meta) == -1)
      return -1;
  }
  else {
    nc->nc_meta_default = true;
    if (asprintf (&nc->nc_meta, "%s" REPL_META_SUFFIX, nc->nc_disk) == -1) {
      nc->nc_meta = NULL;
      load_oom (ld);
      return -1;
    }
  }
  if (!nc->nc_diskless && check_meta (ld, cfg, i, where, vals) == -1)
    return -1;

  if (vals[NODE_CONTROL]) {
    if (get_path (ld, where, keys[NODE_CONTROL], vals[NODE_CONTROL],
                  &nc->nc_control) == -1)
      return -1;
  }
  else if (asprintf (&nc->nc_control, REPL_CONTROL_DIR "/%s-%s.sock",
                     cfg->cf_resource, nc->nc_name) == -1) {
    nc->nc_control = NULL;
    load_oom (ld);
    return -1;
  }
  if (vals[NODE_TLS_CERT] &&
      get_path (ld, where, keys[NODE_TLS_CERT], vals[NODE_TLS_CERT],
                &nc->nc_tls_cert) == -1)
    return -1;
  if (vals[NODE_TLS_KEY] &&
      get_path (ld, where, keys[NODE_TLS_KEY], vals[NODE_TLS_KEY],
                &nc->nc_tls_key) == -1)
    return -1;
  if (vals[NODE_METRICS] && parse_metrics (ld, cfg, i, where, keys, vals) == -1)
    return -1;
  /* Better now than as a bind() failure on one node at start-up. */
  if (strlen (nc->nc_control) > CONTROL_PATH_MAX) {
    load_error (ld, vals[NODE_CONTROL] ? node_line (vals[NODE_CONTROL]) : nc->nc_line,
                "%scontrol: %s'%s' is longer than a unix socket path (%zu bytes)",
                where, vals[NODE_CONTROL] ? "" : "default ", nc->nc_control,
                CONTROL_PATH_MAX);
    return -1;
  }
  return 0;
}

static int
parse_nodes (struct loader *ld, const yaml_node_t *key, const yaml_node_t *seq,
             struct repl_config *cfg)
{
  size_t i, n;

  if (is_null (seq)) {
    load_error (ld, node_line (key), "nodes: no value, expected a list of nodes");
    return -1;
  }
  if (seq->type != YAML_SEQUENCE_NODE) {
    load_error (ld, node_line (seq), "nodes: expected a sequence, got %s",
                node_kind (seq));
    return -1;
  }
  n = seq->data.sequence.items.top - seq->data.sequence.items.start;
  if (n == 0) {
    load_error (ld, node_line (seq), "nodes: empty, expected 1..%d nodes",
                REPL_MAX_NODES);
    return -1;
  }
  if (n > REPL_MAX_NODES) {
    load_error (ld, node_line (yaml_document_get_node (&ld->ld_doc,
                                 seq->data.sequence.items.start[REPL_MAX_NODES])),
                "nodes: %zu entries, at most %d", n, REPL_MAX_NODES);
    return -1;
  }
  for (i = 0; i < n; i++) {
    if (parse_node (ld, cfg, i, yaml_document_get_node (&ld->ld_doc,
                                  seq->data.sequence.items.start[i])) == -1)
      return -1;
    cfg->cf_nnodes = i + 1;
  }
  return 0;
}

static const char *const handler_keys[REPL_HANDLER_NKEYS] = {
  [REPL_HANDLER_SPLIT_BRAIN] = "split-brain",
  [REPL_HANDLER_BEFORE_RESYNC_TARGET] = "before-resync-target",
  [REPL_HANDLER_AFTER_RESYNC_TARGET] = "after-resync-target",
  [REPL_HANDLER_FENCE_PEER] = "fence-peer",
  [REPL_HANDLER_ROLE_CHANGE] = "role-change",
};

const char *
config_handler_name (enum repl_handler h)
{
  return handler_keys[h];
}

/* handlers: a mapping of event to a command (handler.c runs it). */
static int
parse_handlers (struct loader *ld, const yaml_node_t *map,
                struct repl_config *cfg)
{
  static const char where[] = "handlers: ";
  yaml_node_t *keys[REPL_HANDLER_NKEYS], *vals[REPL_HANDLER_NKEYS];
  const char *s;
  size_t i;

  if (is_null (map))
    return 0;
  if (map->type != YAML_MAPPING_NODE) {
    load_error (ld, node_line (map), "handlers: expected a mapping, got %s",
                node_kind (map));
    return -1;
  }
  if (collect_keys (ld, map, where, handler_keys, REPL_HANDLER_NKEYS,
                    keys, vals) == -1)
    return -1;
  for (i = 0; i < REPL_HANDLER_NKEYS; i++) {
    if (vals[i] == NULL)
      continue;
    if (get_text (ld, where, keys[i], vals[i], &s) == -1)
      return -1;
    if (s[0] == '\0') {
      load_error (ld, node_line (vals[i]), "handlers: %s: empty command",
                  handler_keys[i]);
      return -1;
    }
    cfg->cf_handlers[i] = strdup (s);
    if (cfg->cf_handlers[i] == NULL) {
      load_oom (ld);
      return -1;
    }
  }
  return 0;
}

static const char *const sb_policy_names[] = {
  [REPL_SB_DISCONNECT] = "disconnect",
  [REPL_SB_DISCARD_ZERO_CHANGES] = "discard-zero-changes",
  [REPL_SB_DISCARD_LEAST_CHANGES] = "discard-least-changes",
  [REPL_SB_DISCARD_SECONDARY] = "discard-secondary",
  [REPL_SB_DISCARD_YOUNGER_PRIMARY] = "discard-younger-primary",
};

const char *
config_sb_policy_name (enum repl_sb_policy p)
{
  return sb_policy_names[p];
}

/* after-sb-0pri / after-sb-1pri. */
static int
get_sb_policy (struct loader *ld, const yaml_node_t *key,
               const yaml_node_t *val, bool one_primary,
               enum repl_sb_policy *out)
{
  const char *s;
  size_t i;

  if (get_text (ld, "", key, val, &s) == -1)
    return -1;
  for (i = 0; i < sizeof sb_policy_names / sizeof sb_policy_names[0]; i++)
    if (strcmp (s, sb_policy_names[i]) == 0 &&
        (one_primary ? i != REPL_SB_DISCARD_YOUNGER_PRIMARY
                     : i != REPL_SB_DISCARD_SECONDARY)) {
      *out = i;
      return 0;
    }
  load_error (ld, node_line (val), "%s: '%s' is not disconnect, "
              "discard-zero-changes, discard-least-changes or %s",
              (const char *) key->data.scalar.value, s,
              one_primary ? "discard-secondary" : "discard-younger-primary");
  return -1;
}

enum { TOP_RESOURCE, TOP_PROTOCOL, TOP_AUTO_PROMOTE, TOP_QUORUM,
       TOP_ON_NO_QUORUM, TOP_AFTER_SB_0PRI, TOP_AFTER_SB_1PRI, TOP_NET,
       TOP_METADATA, TOP_RESYNC, TOP_HANDLERS, TOP_READ_BALANCING,
       TOP_SECRET, TOP_SECRET_FILE, TOP_DATA_INTEGRITY, TOP_TLS, TOP_TLS_CA,
       TOP_TLS_CERT, TOP_TLS_KEY, TOP_NODES, TOP_FENCING, TOP_FENCING_TIMEOUT,
       TOP_TLS_ALLOW_WILDCARD, TOP_CONTROL_GROUP, TOP_ALLOW_TWO_PRIMARIES,
       TOP_NKEYS };

static const char *const top_keys[TOP_NKEYS] = {
  [TOP_RESOURCE] = "resource",
  [TOP_PROTOCOL] = "protocol",
  [TOP_AUTO_PROMOTE] = "auto-promote",
  [TOP_QUORUM] = "quorum",
  [TOP_ON_NO_QUORUM] = "on-no-quorum",
  [TOP_AFTER_SB_0PRI] = "after-sb-0pri",
  [TOP_AFTER_SB_1PRI] = "after-sb-1pri",
  [TOP_NET] = "net",
  [TOP_METADATA] = "metadata",
  [TOP_RESYNC] = "resync",
  [TOP_HANDLERS] = "handlers",
  [TOP_READ_BALANCING] = "read-balancing",
  [TOP_SECRET] = "secret",
  [TOP_SECRET_FILE] = "secret-file",
  [TOP_DATA_INTEGRITY] = "data-integrity",
  [TOP_TLS] = "tls",
  [TOP_TLS_CA] = "tls-ca",
  [TOP_TLS_CERT] = "tls-cert",
  [TOP_TLS_KEY] = "tls-key",
  [TOP_NODES] = "nodes",
  [TOP_FENCING] = "fencing",
  [TOP_FENCING_TIMEOUT] = "fencing-timeout",
  [TOP_TLS_ALLOW_WILDCARD] = "tls-allow-wildcard",
  [TOP_CONTROL_GROUP] = "control-group",
  [TOP_ALLOW_TWO_PRIMARIES] = "allow-two-primaries",
};

/* secret: the shared secret of the resource, as written (at least
 * REPL_SECRET_MIN bytes).  Never echoed in a message. */
static int
get_secret (struct loader *ld, const yaml_node_t *key, const yaml_node_t *val,
            struct repl_config *cfg)
{
  const char *s;
  size_t n;

  if (get_text (ld, "", key, val, &s) == -1)
    return -1;
  n = strlen (s);
  if (n < REPL_SECRET_MIN || n > REPL_SECRET_MAX) {
    load_error (ld, node_line (val), "secret: %zu bytes; it must have %d to "
                "%d", n, REPL_SECRET_MIN, REPL_SECRET_MAX);
    return -1;
  }
  memcpy (cfg->cf_secret, s, n);
  cfg->cf_secret_len = n;
  cfg->cf_secret_mode = ld->ld_mode;
  return 0;
}

/* secret-file: PATH, the secret in a file of its own (trailing newlines
 * dropped), which should be readable by root only. */
static int
read_secret_file (struct loader *ld, const yaml_node_t *key,
                  const yaml_node_t *val, struct repl_config *cfg)
{
  CLEANUP_FREE char *path = NULL;
  char buf[REPL_SECRET_MAX + 2];
  struct stat st;
  ssize_t n;
  int fd;

  if (get_path (ld, "", key, val, &path) == -1)
    return -1;
  fd = open (path, O_RDONLY | O_CLOEXEC);
  if (fd == -1) {
    load_error (ld, node_line (val), "secret-file: %s: %s", path,
                strerror (errno));
    return -1;
  }
  if (fstat (fd, &st) == 0)
    cfg->cf_secret_mode = st.st_mode & 07777;
  n = read (fd, buf, sizeof buf);
  close (fd);
  while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
    n--;
  if (n < REPL_SECRET_MIN || n > REPL_SECRET_MAX) {
    load_error (ld, node_line (val), "secret-file: %s: %s; the secret must "
                "have %d to %d bytes", path,
                n < 0 ? strerror (errno) : "wrong length",
                REPL_SECRET_MIN, REPL_SECRET_MAX);
    return -1;
  }
  memcpy (cfg->cf_secret, buf, n);
  cfg->cf_secret_len = n;
  cfg->cf_secret_path = strdup (path);
  explicit_bzero (buf, sizeof buf);
  if (cfg->cf_secret_path == NULL) {
    load_oom (ld);
    return -1;
  }
  return 0;
}

/* tls, tls-ca, tls-cert, tls-key (the nodes' own tls-cert and tls-key
 * are already parsed).  With tls-ca: certificates, and every node needs
 * a certificate and a key, its own or the file-wide one.  Without: a
 * pre-shared key derived from the secret, so a secret is needed. */
static int
parse_tls (struct loader *ld, yaml_node_t *const *keys,
           yaml_node_t *const *vals, struct repl_config *cfg)
{
  static const int path_keys[] = { TOP_TLS_CA, TOP_TLS_CERT, TOP_TLS_KEY };
  char *cert = NULL, *key = NULL;
  size_t i;
  int r = -1;

  if (vals[TOP_TLS_ALLOW_WILDCARD] &&
      get_bool (ld, "", keys[TOP_TLS_ALLOW_WILDCARD],
                vals[TOP_TLS_ALLOW_WILDCARD],
                &cfg->cf_tls_allow_wildcard) == -1)
    return -1;
  if (vals[TOP_CONTROL_GROUP]) {
    const char *s;

    if (get_text (ld, "", keys[TOP_CONTROL_GROUP], vals[TOP_CONTROL_GROUP],
                  &s) == -1)
      return -1;
    if ((cfg->cf_control_group = strdup (s)) == NULL) {
      load_error (ld, node_line (vals[TOP_CONTROL_GROUP]), "strdup: %m");
      return -1;
    }
  }
  if (vals[TOP_TLS] &&
      get_bool (ld, "", keys[TOP_TLS], vals[TOP_TLS], &cfg->cf_tls) == -1)
    return -1;
  for (i = 0; i < sizeof path_keys / sizeof path_keys[0]; i++) {
    int k = path_keys[i];
    if (vals[k] && !cfg->cf_tls) {
      load_error (ld, node_line (vals[k]), "%s: given, but tls is not true",
                  top_keys[k]);
      return -1;
    }
  }
  for (i = 0; i < cfg->cf_nnodes; i++) {
    const struct repl_node_cfg *nc = &cfg->cf_nodes[i];
    if ((nc->nc_tls_cert || nc->nc_tls_key) && !cfg->cf_tls) {
      load_error (ld, nc->nc_line, "nodes[%zu] (%s): tls-cert/tls-key: "
                  "given, but tls is not true", i, nc->nc_name);
      return -1;
    }
  }
  if (!cfg->cf_tls)
    return 0;

  if (vals[TOP_TLS_CA] == NULL) {
    if (vals[TOP_TLS_CERT] || vals[TOP_TLS_KEY]) {
      load_error (ld, node_line (vals[TOP_TLS_CERT] ? vals[TOP_TLS_CERT]
                                 : vals[TOP_TLS_KEY]),
                  "tls-cert/tls-key: certificates need tls-ca too");
      return -1;
    }
    for (i = 0; i < cfg->cf_nnodes; i++) {
      const struct repl_node_cfg *nc = &cfg->cf_nodes[i];
      if (nc->nc_tls_cert || nc->nc_tls_key) {
        load_error (ld, nc->nc_line, "nodes[%zu] (%s): tls-cert/tls-key: "
                    "certificates need tls-ca too", i, nc->nc_name);
        return -1;
      }
    }
    if (cfg->cf_secret_len == 0) {
      load_error (ld, node_line (vals[TOP_TLS]), "tls: true needs either "
                  "tls-ca with certificates (tls-cert, tls-key) or a secret "
                  "(secret or secret-file) to derive a pre-shared key from");
      return -1;
    }
    return 0;                   /* TLS with a pre-shared key */
  }

  if (get_path (ld, "", keys[TOP_TLS_CA], vals[TOP_TLS_CA],
                &cfg->cf_tls_ca) == -1)
    return -1;
  if (vals[TOP_TLS_CERT] &&
      get_path (ld, "", keys[TOP_TLS_CERT], vals[TOP_TLS_CERT], &cert) == -1)
    goto out;
  if (vals[TOP_TLS_KEY] &&
      get_path (ld, "", keys[TOP_TLS_KEY], vals[TOP_TLS_KEY], &key) == -1)
    goto out;
  for (i = 0; i < cfg->cf_nnodes; i++) {
    struct repl_node_cfg *nc = &cfg->cf_nodes[i];
    if (nc->nc_tls_cert == NULL && cert != NULL &&
        (nc->nc_tls_cert = strdup (cert)) == NULL) {
      load_oom (ld);
      goto out;
    }
    if (nc->nc_tls_key == NULL && key != NULL &&
        (nc->nc_tls_key = strdup (key)) == NULL) {
      load_oom (ld);
      goto out;
    }
    if (nc->nc_tls_cert == NULL || nc->nc_tls_key == NULL) {
      load_error (ld, nc->nc_line, "nodes[%zu] (%s): no %s: with tls-ca, "
                  "every node needs tls-cert and tls-key (its own, or "
                  "tls-cert and tls-key at the top of the file)", i,
                  nc->nc_name, nc->nc_tls_cert == NULL ? "tls-cert"
                  : "tls-key");
      goto out;
    }
  }
  r = 0;
 out:
  free (cert);
  free (key);
  return r;
}

/* Diskless nodes: at least one storage node; any number of storage and
 * diskless nodes up to the resource's REPL_MAX_NODES (a diskless
 * primary writes to every storage node, and a storage node that is to
 * be resynced by a peer leaves its targets first: the sync fence,
 * server/forward.c).  One Primary at a time, as for any resource. */
static int
check_diskless (struct loader *ld, struct repl_config *cfg,
                const yaml_node_t *root)
{
  size_t i, storage = 0, diskless = 0;

  for (i = 0; i < cfg->cf_nnodes; i++) {
    if (cfg->cf_nodes[i].nc_diskless)
      diskless++;
    else
      storage++;
  }
  cfg->cf_has_diskless = diskless > 0;
  if (diskless > 0 && storage == 0) {
    load_error (ld, node_line (root), "nodes: every node is diskless "
                "(disk: none); at least one must store the data");
    return -1;
  }
  return 0;
}

/* allow-two-primaries: true (live migration: the disk open read-write
 * on two hosts at once).  Concurrent writes are ordered between the two
 * primaries when each waits for the other's disk (protocol C).  Two
 * storage Primaries order their writes between themselves only: they
 * must be the only two nodes (a third storage node would receive their
 * writes on two connections in no agreed order; server/two-primaries.c).
 * With diskless nodes, the two Primaries are one storage node and one
 * diskless node, and the diskless one writes through the storage one,
 * which orders both with its interval lock (server/diskless.c): any
 * number of storage nodes then (role.c refuses two storage Primaries,
 * and two diskless ones, at run time). */
static int
check_two_primaries (struct loader *ld, struct repl_config *cfg,
                     const yaml_node_t *key, const yaml_node_t *val)
{
  if (get_bool (ld, "", key, val, &cfg->cf_two_primaries) == -1)
    return -1;
  if (!cfg->cf_two_primaries)
    return 0;
  if (cfg->cf_protocol != 'C') {
    load_error (ld, node_line (val), "allow-two-primaries: true needs "
                "protocol: C (protocol is %c): two primaries order their "
                "overlapping writes only once each is on both disks",
                cfg->cf_protocol);
    return -1;
  }
  if (cfg->cf_nnodes != 2 && !cfg->cf_has_diskless) {
    load_error (ld, node_line (val), "allow-two-primaries: true needs "
                "exactly two nodes, both with a disk, or diskless nodes "
                "beside the storage nodes (this file has %zu storage "
                "node(s) and no diskless one)", cfg->cf_nnodes);
    return -1;
  }
  return 0;
}

static int
parse_top (struct loader *ld, struct repl_config *cfg)
{
  yaml_node_t *root = yaml_document_get_root_node (&ld->ld_doc);
  yaml_node_t *keys[TOP_NKEYS], *vals[TOP_NKEYS];
  const char *s;

  if (root == NULL) {
    load_error (ld, 0, "empty, expected a mapping with resource and nodes");
    return -1;
  }
  if (root->type != YAML_MAPPING_NODE) {
    load_error (ld, node_line (root), "top level is %s, expected a mapping",
                node_kind (root));
    return -1;
  }
  if (collect_keys (ld, root, "", top_keys, TOP_NKEYS, keys, vals) == -1)
    return -1;
  if (vals[TOP_RESOURCE] == NULL || vals[TOP_NODES] == NULL) {
    load_error (ld, node_line (root), "missing required key '%s'",
                vals[TOP_RESOURCE] == NULL ? "resource" : "nodes");
    return -1;
  }

  if (get_name (ld, "", keys[TOP_RESOURCE], vals[TOP_RESOURCE],
                &cfg->cf_resource) == -1)
    return -1;

  if (vals[TOP_PROTOCOL]) {
    if (get_text (ld, "", keys[TOP_PROTOCOL], vals[TOP_PROTOCOL], &s) == -1)
      return -1;
    if (strlen (s) != 1 || strchr ("ABCabc", s[0]) == NULL) {
      load_error (ld, node_line (vals[TOP_PROTOCOL]),
                  "protocol: '%s' is not A, B or C", s);
      return -1;
    }
    cfg->cf_protocol = s[0] >= 'a' ? s[0] - ('a' - 'A') : s[0];
  }

  if (vals[TOP_AUTO_PROMOTE] &&
      get_bool (ld, "", keys[TOP_AUTO_PROMOTE], vals[TOP_AUTO_PROMOTE],
                &cfg->cf_auto_promote) == -1)
    return -1;
  if (vals[TOP_QUORUM]) {
    if (get_text (ld, "", keys[TOP_QUORUM], vals[TOP_QUORUM], &s) == -1)
      return -1;
    if (strcmp (s, "majority") == 0)
      cfg->cf_quorum = REPL_QUORUM_MAJORITY;
    else if (strcmp (s, "all") == 0)
      cfg->cf_quorum = REPL_QUORUM_ALL;
    else if (strcmp (s, "off") == 0)
      cfg->cf_quorum = REPL_QUORUM_OFF;
    else {
      load_error (ld, node_line (vals[TOP_QUORUM]),
                  "quorum: '%s' is not majority, all or off", s);
      return -1;
    }
  }
  if (vals[TOP_ON_NO_QUORUM]) {
    if (get_text (ld, "", keys[TOP_ON_NO_QUORUM], vals[TOP_ON_NO_QUORUM],
                  &s) == -1)
      return -1;
    if (strcmp (s, "suspend-io") == 0)
      cfg->cf_on_no_quorum_suspend = true;
    else if (strcmp (s, "io-error") == 0)
      cfg->cf_on_no_quorum_suspend = false;
    else {
      load_error (ld, node_line (vals[TOP_ON_NO_QUORUM]),
                  "on-no-quorum: '%s' is not suspend-io or io-error", s);
      return -1;
    }
  }
  if (vals[TOP_AFTER_SB_0PRI] &&
      get_sb_policy (ld, keys[TOP_AFTER_SB_0PRI], vals[TOP_AFTER_SB_0PRI],
                     false, &cfg->cf_after_sb_0pri) == -1)
    return -1;
  if (vals[TOP_AFTER_SB_1PRI] &&
      get_sb_policy (ld, keys[TOP_AFTER_SB_1PRI], vals[TOP_AFTER_SB_1PRI],
                     true, &cfg->cf_after_sb_1pri) == -1)
    return -1;
  if (vals[TOP_NET] &&
      parse_net (ld, keys[TOP_NET], vals[TOP_NET], cfg) == -1)
    return -1;
  if (vals[TOP_METADATA] && parse_metadata (ld, vals[TOP_METADATA], cfg) == -1)
    return -1;
  if (vals[TOP_RESYNC] && parse_resync (ld, vals[TOP_RESYNC], cfg) == -1)
    return -1;
  if (vals[TOP_FENCING]) {
    if (get_text (ld, "", keys[TOP_FENCING], vals[TOP_FENCING], &s) == -1)
      return -1;
    if (strcmp (s, "dont-care") == 0)
      cfg->cf_fencing = REPL_FENCING_DONT_CARE;
    else if (strcmp (s, "resource-only") == 0)
      cfg->cf_fencing = REPL_FENCING_RESOURCE_ONLY;
    else if (strcmp (s, "resource-and-stonith") == 0)
      cfg->cf_fencing = REPL_FENCING_RESOURCE_AND_STONITH;
    else {
      load_error (ld, node_line (vals[TOP_FENCING]), "fencing: '%s' is not "
                  "dont-care, resource-only or resource-and-stonith", s);
      return -1;
    }
  }
  cfg->cf_fencing_timeout_ms = 60000;
  if (vals[TOP_FENCING_TIMEOUT]) {
    unsigned long ms;

    if (get_number_text (ld, "", keys[TOP_FENCING_TIMEOUT],
                         vals[TOP_FENCING_TIMEOUT], &s) == -1)
      return -1;
    if (!parse_seconds_ms (s, &ms) || ms < 1000 || ms > 3600000) {
      load_error (ld, node_line (vals[TOP_FENCING_TIMEOUT]),
                  "fencing-timeout: '%s' is not a number of seconds from 1 "
                  "to 3600", s);
      return -1;
    }
    cfg->cf_fencing_timeout_ms = ms;
  }
  if (vals[TOP_HANDLERS] &&
      parse_handlers (ld, vals[TOP_HANDLERS], cfg) == -1)
    return -1;
  if (cfg->cf_fencing != REPL_FENCING_DONT_CARE &&
      cfg->cf_handlers[REPL_HANDLER_FENCE_PEER] == NULL) {
    load_error (ld, node_line (vals[TOP_FENCING]), "fencing: %s needs a "
                "fence-peer handler (handlers: fence-peer: COMMAND), which "
                "tells whether the peer was fenced",
                cfg->cf_fencing == REPL_FENCING_RESOURCE_ONLY
                ? "resource-only" : "resource-and-stonith");
    return -1;
  }

  if (vals[TOP_DATA_INTEGRITY]) {
    if (get_text (ld, "", keys[TOP_DATA_INTEGRITY], vals[TOP_DATA_INTEGRITY],
                  &s) == -1)
      return -1;
    if (strcmp (s, "crc32c") == 0)
      cfg->cf_data_integrity = true;
    else if (strcmp (s, "none") != 0) {
      load_error (ld, node_line (vals[TOP_DATA_INTEGRITY]),
                  "data-integrity: '%s' is not crc32c or none", s);
      return -1;
    }
  }
  if (vals[TOP_SECRET] && vals[TOP_SECRET_FILE]) {
    load_error (ld, node_line (vals[TOP_SECRET_FILE]), "secret-file: "
                "give secret or secret-file, not both");
    return -1;
  }
  if (vals[TOP_SECRET] &&
      get_secret (ld, keys[TOP_SECRET], vals[TOP_SECRET], cfg) == -1)
    return -1;
  if (vals[TOP_SECRET_FILE] &&
      read_secret_file (ld, keys[TOP_SECRET_FILE], vals[TOP_SECRET_FILE],
                        cfg) == -1)
    return -1;

  if (parse_nodes (ld, keys[TOP_NODES], vals[TOP_NODES], cfg) == -1)
    return -1;
  if (check_diskless (ld, cfg, root) == -1)
    return -1;
  if (vals[TOP_ALLOW_TWO_PRIMARIES] &&
      check_two_primaries (ld, cfg, keys[TOP_ALLOW_TWO_PRIMARIES],
                           vals[TOP_ALLOW_TWO_PRIMARIES]) == -1)
    return -1;
  if (parse_tls (ld, keys, vals, cfg) == -1)
    return -1;
  if (vals[TOP_READ_BALANCING]) {
    const struct repl_node_cfg *nc;

    if (get_text (ld, "", keys[TOP_READ_BALANCING],
                  vals[TOP_READ_BALANCING], &s) == -1)
      return -1;
    if (strcmp (s, "round-robin") == 0)
      cfg->cf_read_balancing = REPL_READ_ROUND_ROBIN;
    else if (strcmp (s, "least-pending") == 0)
      cfg->cf_read_balancing = REPL_READ_LEAST_PENDING;
    else if (strncmp (s, "prefer-", 7) == 0 &&
             (nc = config_find_node (cfg, s + 7)) != NULL &&
             !nc->nc_diskless) {
      cfg->cf_read_balancing = REPL_READ_PREFER;
      cfg->cf_read_prefer_id = nc->nc_id;
    }
    else {
      load_error (ld, node_line (vals[TOP_READ_BALANCING]),
                  "read-balancing: '%s' is not round-robin, least-pending "
                  "or prefer-NODE with NODE a storage node of this file", s);
      return -1;
    }
  }
  /* Default: majority with 3 or more nodes (2 nodes have no majority
   * once one is gone), off with fewer. */
  if (cfg->cf_quorum == REPL_QUORUM_DEFAULT)
    cfg->cf_quorum = cfg->cf_nnodes >= 3 ? REPL_QUORUM_MAJORITY
                                         : REPL_QUORUM_OFF;
  return 0;
}

/*----------------------------------------------------------------------
 * Public functions.
 */

/* Both entry points: buf is the file's content, or NULL to read it. */
static int
config_load_common (const char *path, const void *data, size_t datalen,
                    struct repl_config *cfg, char *err, size_t errlen)
{
  struct loader ld = {
    .ld_path = path, .ld_err = err, .ld_errlen = errlen, .ld_errno = EINVAL,
  };
  CLEANUP_FREE unsigned char *copy = NULL;
  const unsigned char *buf;
  size_t len;
  int r = -1;

  assert (path != NULL);
  assert (cfg != NULL);
  memset (cfg, 0, sizeof *cfg);
  if (err && errlen > 0)
    err[0] = '\0';
  cfg->cf_protocol = 'C';
  cfg->cf_auto_promote = true;
  cfg->cf_al_updates = true;
  cfg->cf_ping_interval_ms = 1000;
  cfg->cf_ping_timeout_ms = 5000;
  cfg->cf_timeout_ms = 6000;
  cfg->cf_connect_retry_max_ms = 2000;
  cfg->cf_cork = true;
  cfg->cf_sndbuf_size = cfg->cf_rcvbuf_size = REPL_DEFAULT_SOCKBUF;
  cfg->cf_bitmap_granularity = MD_DEFAULT_GRANULARITY;
  cfg->cf_al_extent_size = MD_DEFAULT_AL_EXTENT_SIZE;
  cfg->cf_al_extents = MD_DEFAULT_AL_EXTENTS;
  /* resync-rate, c-min-rate, c-max-rate 0: unthrottled; csums false. */

  if (data == NULL) {
    if (read_file (&ld, &copy, &len) == -1)
      goto out;
    buf = copy;
  }
  else if (datalen > CONFIG_MAX_BYTES) {
    load_error (&ld, 0, "larger than %d bytes, not a configuration file",
                CONFIG_MAX_BYTES);
    ld.ld_errno = EFBIG;
    goto out;
  }
  else {
    buf = data;
    len = datalen;
  }
  if (scan_events (&ld, buf, len) == -1 ||
      load_document (&ld, buf, len) == -1 ||
      find_config_dir (&ld) == -1)
    goto out;
  cfg->cf_path = strdup (path);
  if (cfg->cf_path == NULL) {
    load_oom (&ld);
    goto out;
  }
  r = parse_top (&ld, cfg);

 out:
  if (ld.ld_have_doc)
    yaml_document_delete (&ld.ld_doc);
  free (ld.ld_dir);
  if (r == -1) {
    config_free (cfg);
    errno = ld.ld_errno;
  }
  return r;
}

int
config_load (const char *path, struct repl_config *cfg, char *err, size_t errlen)
{
  return config_load_common (path, NULL, 0, cfg, err, errlen);
}

int
config_load_buffer (const char *path, const void *buf, size_t len,
                    struct repl_config *cfg, char *err, size_t errlen)
{
  assert (buf != NULL || len == 0);
  return config_load_common (path, buf != NULL ? buf : "", len, cfg,
                             err, errlen);
}

/* Safe on a zeroed struct and when called twice: it zeroes what it frees. */
void
config_free (struct repl_config *cfg)
{
  size_t i;

  if (cfg == NULL)
    return;
  explicit_bzero (cfg->cf_secret, sizeof cfg->cf_secret);
  free (cfg->cf_path);
  free (cfg->cf_control_group);
  free (cfg->cf_resource);
  for (i = 0; i < REPL_MAX_NODES; i++) {
    free (cfg->cf_nodes[i].nc_name);
    free (cfg->cf_nodes[i].nc_address);
    free (cfg->cf_nodes[i].nc_host);
    free (cfg->cf_nodes[i].nc_port);
    free (cfg->cf_nodes[i].nc_disk);
    free (cfg->cf_nodes[i].nc_control);
    free (cfg->cf_nodes[i].nc_meta);
    free (cfg->cf_nodes[i].nc_tls_cert);
    free (cfg->cf_nodes[i].nc_tls_key);
    free (cfg->cf_nodes[i].nc_metrics);
    free (cfg->cf_nodes[i].nc_metrics_host);
    free (cfg->cf_nodes[i].nc_metrics_port);
  }
  free (cfg->cf_tls_ca);
  free (cfg->cf_secret_path);
  for (i = 0; i < REPL_HANDLER_NKEYS; i++)
    free (cfg->cf_handlers[i]);
  memset (cfg, 0, sizeof *cfg);
}

const struct repl_node_cfg *
config_find_node (const struct repl_config *cfg, const char *name)
{
  size_t i;

  if (name == NULL)
    return NULL;
  for (i = 0; i < cfg->cf_nnodes; i++)
    if (strcmp (cfg->cf_nodes[i].nc_name, name) == 0)
      return &cfg->cf_nodes[i];
  return NULL;
}

const struct repl_node_cfg *
config_find_node_id (const struct repl_config *cfg, unsigned id)
{
  size_t i;

  for (i = 0; i < cfg->cf_nnodes; i++)
    if (cfg->cf_nodes[i].nc_id == id)
      return &cfg->cf_nodes[i];
  return NULL;
}
