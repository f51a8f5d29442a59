/* nbdrepl: unit tests of common/repl-config.c.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * Each test writes a YAML file into a fresh directory made with mkdtemp
 * (under $TMPDIR or /tmp), loads it and checks either the fields or the
 * one-line error: its "FILE:LINE: " prefix, the key path and the value.
 */
#include <config.h>

#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <check.h>

#include "repl-config.h"

static char topdir[PATH_MAX];           /* holds every test's directory */
static char tmpdir[PATH_MAX];           /* realpath of this test's directory */
static char cfgpath[PATH_MAX + 64];     /* tmpdir/r0.yaml */
static char err[512];

/* Run once in the parent, so that the directories of tests that failed
 * (in fork mode a failed test never reaches teardown) are removed too. */
static void
suite_setup (void)
{
  const char *t = getenv ("TMPDIR");

  snprintf (topdir, sizeof topdir, "%s/test-config.XXXXXX", t && *t ? t : "/tmp");
  if (mkdtemp (topdir) == NULL) {
    perror (topdir);
    exit (EXIT_FAILURE);
  }
}

static int
remove_one (const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
  return remove (path) == 0 ? 0 : -1;
}

static void
suite_teardown (void)
{
  if (nftw (topdir, remove_one, 16, FTW_DEPTH | FTW_PHYS) == -1)
    perror (topdir);
}

static void
setup (void)
{
  char tmpl[PATH_MAX + 16];

  snprintf (tmpl, sizeof tmpl, "%s/t.XXXXXX", topdir);
  ck_assert_msg (mkdtemp (tmpl) != NULL, "mkdtemp: %s: %m", tmpl);
  /* realpath, since the loader resolves the directory (/tmp may be a
   * symlink) and the tests compare absolute paths with it. */
  ck_assert (realpath (tmpl, tmpdir) != NULL);
  snprintf (cfgpath, sizeof cfgpath, "%s/r0.yaml", tmpdir);
  err[0] = '\0';
}

static void
teardown (void)
{
  char sub[PATH_MAX + 64];

  snprintf (sub, sizeof sub, "%s/etc/r0.yaml", tmpdir);
  unlink (sub);
  snprintf (sub, sizeof sub, "%s/etc", tmpdir);
  rmdir (sub);
  unlink (cfgpath);
  ck_assert_msg (rmdir (tmpdir) == 0, "rmdir: %s: %m", tmpdir);
}

static void
write_file (const char *path, const char *text)
{
  FILE *fp = fopen (path, "w");

  ck_assert_msg (fp != NULL, "fopen: %s: %m", path);
  ck_assert (fputs (text, fp) >= 0);
  ck_assert (fclose (fp) == 0);
}

static int
load (const char *text, struct repl_config *cfg)
{
  write_file (cfgpath, text);
  return config_load (cfgpath, cfg, err, sizeof err);
}

/* The file must be refused: -1, errno EINVAL, nothing left in cfg, one
 * line starting "PATH:LINE: " (or "PATH: " for line 0) and holding
 * every one of the NULL-terminated needles. */
static void
expect_error_at (int caller, int line, const char *text, ...)
{
  struct repl_config cfg, zero;
  char prefix[sizeof cfgpath + 32];
  const char *needle;
  va_list ap;
  int r, e;

  memset (&cfg, 0x55, sizeof cfg);      /* config_load must not trust it */
  memset (&zero, 0, sizeof zero);
  r = load (text, &cfg);
  e = errno;
  ck_assert_msg (r == -1, "test line %d: accepted:\n%s", caller, text);
  ck_assert_msg (e == EINVAL, "test line %d: errno %d", caller, e);
  ck_assert_msg (memcmp (&cfg, &zero, sizeof cfg) == 0,
                 "test line %d: cfg not zeroed on failure", caller);
  ck_assert_msg (strchr (err, '\n') == NULL, "test line %d: two lines: %s",
                 caller, err);
  if (line > 0)
    snprintf (prefix, sizeof prefix, "%s:%d: ", cfgpath, line);
  else
    snprintf (prefix, sizeof prefix, "%s: ", cfgpath);
  ck_assert_msg (strncmp (err, prefix, strlen (prefix)) == 0,
                 "test line %d: error '%s' does not start '%s'",
                 caller, err, prefix);
  va_start (ap, text);
  while ((needle = va_arg (ap, const char *)) != NULL)
    ck_assert_msg (strstr (err, needle) != NULL,
                   "test line %d: error '%s' lacks '%s'", caller, err, needle);
  va_end (ap);
}
#define expect_error(line, text, ...) \
  expect_error_at (__LINE__, (line), (text), __VA_ARGS__, (const char *) NULL)

/* A two-node file used by the success tests: 11 lines. */
#define TWO_NODES                                               \
  "resource: r0\n"                                  /* 1 */     \
  "nodes:\n"                                        /* 2 */     \
  "  - name: alpha\n"                               /* 3 */     \
  "    id: 0\n"                                     /* 4 */     \
  "    address: 10.0.0.1:7789\n"                    /* 5 */     \
  "    disk: /dev/vg/r0\n"                          /* 6 */     \
  "  - name: beta\n"                                /* 7 */     \
  "    id: 1\n"                                     /* 8 */     \
  "    address: 10.0.0.2:7789\n"                    /* 9 */     \
  "    disk: r0-beta.img\n"                         /* 10 */

/* One node; the id goes on line 4 and the address on line 5. */
#define ONE_NODE(id, address)                                   \
  "resource: r0\n"                                  /* 1 */     \
  "nodes:\n"                                        /* 2 */     \
  "  - name: alpha\n"                               /* 3 */     \
  "    id: " id "\n"                                /* 4 */     \
  "    address: " address "\n"                      /* 5 */     \
  "    disk: /dev/vg/r0\n"                          /* 6 */

/* A net entry on line 3. */
#define WITH_NET(entry)                                         \
  "resource: r0\n"                                  /* 1 */     \
  "net:\n"                                          /* 2 */     \
  "  " entry "\n"                                   /* 3 */     \
  "nodes:\n"                                        /* 4 */     \
  "  - {name: alpha, id: 0, address: 'h:1', disk: d}\n" /* 5 */

/*----------------------------------------------------------------------
 * Accepted files.
 */

START_TEST (test_minimal_defaults)
{
  struct repl_config cfg;
  char want[PATH_MAX + 64];

  ck_assert_msg (load (TWO_NODES, &cfg) == 0, "%s", err);
  ck_assert_str_eq (cfg.cf_path, cfgpath);
  ck_assert_str_eq (cfg.cf_resource, "r0");
  ck_assert_int_eq (cfg.cf_protocol, 'C');
  ck_assert_uint_eq (cfg.cf_ping_interval_ms, 1000);
  ck_assert_uint_eq (cfg.cf_ping_timeout_ms, 5000);
  ck_assert_uint_eq (cfg.cf_timeout_ms, 6000);
  ck_assert_uint_eq (cfg.cf_connect_retry_max_ms, 2000);
  ck_assert_uint_eq (cfg.cf_nnodes, 2);

  ck_assert_str_eq (cfg.cf_nodes[0].nc_name, "alpha");
  ck_assert_uint_eq (cfg.cf_nodes[0].nc_id, 0);
  ck_assert_str_eq (cfg.cf_nodes[0].nc_address, "10.0.0.1:7789");
  ck_assert_str_eq (cfg.cf_nodes[0].nc_host, "10.0.0.1");
  ck_assert_str_eq (cfg.cf_nodes[0].nc_port, "7789");
  ck_assert_str_eq (cfg.cf_nodes[0].nc_disk, "/dev/vg/r0");
  ck_assert_str_eq (cfg.cf_nodes[0].nc_control, REPL_CONTROL_DIR "/r0-alpha.sock");
  ck_assert_int_eq (cfg.cf_nodes[0].nc_line, 3);

  ck_assert_str_eq (cfg.cf_nodes[1].nc_name, "beta");
  ck_assert_uint_eq (cfg.cf_nodes[1].nc_id, 1);
  snprintf (want, sizeof want, "%s/r0-beta.img", tmpdir);
  ck_assert_str_eq (cfg.cf_nodes[1].nc_disk, want);
  ck_assert_str_eq (cfg.cf_nodes[1].nc_control, REPL_CONTROL_DIR "/r0-beta.sock");
  ck_assert_int_eq (cfg.cf_nodes[1].nc_line, 7);
  config_free (&cfg);
}
END_TEST

START_TEST (test_full)
{
  struct repl_config cfg;
  char want[PATH_MAX + 64];

  ck_assert_msg (load ("# a comment\n"
                       "resource: web.data_1\n"
                       "protocol: b\n"
                       "net:\n"
                       "  ping-interval: 0.5\n"
                       "  ping-timeout: 2.25\n"
                       "  timeout: 600\n"
                       "  connect-retry-max: 0.1\n"
                       "nodes:\n"
                       "  - name: alpha\n"
                       "    id: 31\n"
                       "    address: '[2001:db8::1]:7789'\n"
                       "    disk: ./disks/alpha.img\n"
                       "    control: alpha.sock\n"
                       "  - name: beta\n"
                       "    id: 7\n"
                       "    address: Beta.Example.COM:65535\n"
                       "    disk: /dev/sdb\n"
                       "    control: /run/x/beta.sock\n"
                       "  - name: gamma\n"
                       "    id: 2\n"
                       "    address: '[fe80::1%eth0]:1'\n"
                       "    disk: ../gamma.img\n", &cfg) == 0, "%s", err);
  ck_assert_str_eq (cfg.cf_resource, "web.data_1");
  ck_assert_int_eq (cfg.cf_protocol, 'B');
  ck_assert_uint_eq (cfg.cf_ping_interval_ms, 500);
  ck_assert_uint_eq (cfg.cf_ping_timeout_ms, 2250);
  ck_assert_uint_eq (cfg.cf_timeout_ms, 600000);
  ck_assert_uint_eq (cfg.cf_connect_retry_max_ms, 100);
  ck_assert_uint_eq (cfg.cf_nnodes, 3);

  ck_assert_uint_eq (cfg.cf_nodes[0].nc_id, 31);
  ck_assert_str_eq (cfg.cf_nodes[0].nc_address, "[2001:db8::1]:7789");
  ck_assert_str_eq (cfg.cf_nodes[0].nc_host, "2001:db8::1");
  ck_assert_str_eq (cfg.cf_nodes[0].nc_port, "7789");
  snprintf (want, sizeof want, "%s/disks/alpha.img", tmpdir);
  ck_assert_str_eq (cfg.cf_nodes[0].nc_disk, want);
  snprintf (want, sizeof want, "%s/alpha.sock", tmpdir);
  ck_assert_str_eq (cfg.cf_nodes[0].nc_control, want);
  ck_assert_int_eq (cfg.cf_nodes[0].nc_line, 10);

  ck_assert_str_eq (cfg.cf_nodes[1].nc_host, "Beta.Example.COM");
  ck_assert_str_eq (cfg.cf_nodes[1].nc_port, "65535");
  ck_assert_str_eq (cfg.cf_nodes[1].nc_disk, "/dev/sdb");
  ck_assert_str_eq (cfg.cf_nodes[1].nc_control, "/run/x/beta.sock");

  ck_assert_str_eq (cfg.cf_nodes[2].nc_host, "fe80::1%eth0");
  ck_assert_str_eq (cfg.cf_nodes[2].nc_port, "1");
  snprintf (want, sizeof want, "%s/../gamma.img", tmpdir);
  ck_assert_str_eq (cfg.cf_nodes[2].nc_disk, want);
  ck_assert_str_eq (cfg.cf_nodes[2].nc_control,
                    REPL_CONTROL_DIR "/web.data_1-gamma.sock");
  config_free (&cfg);
}
END_TEST

/* Flow style, quoted strings, the most nodes and the highest ids. */
START_TEST (test_flow_max_nodes)
{
  struct repl_config cfg;
  size_t i;

  ck_assert_msg (load ("{resource: \"r0\", protocol: 'a', nodes: [\n"
                       " {name: n0, id: 24, address: 'h0:1', disk: d0},\n"
                       " {name: n1, id: 25, address: 'h1:1', disk: d1},\n"
                       " {name: n2, id: 26, address: 'h2:1', disk: d2},\n"
                       " {name: n3, id: 27, address: 'h3:1', disk: d3},\n"
                       " {name: n4, id: 28, address: 'h4:1', disk: d4},\n"
                       " {name: n5, id: 29, address: 'h5:1', disk: d5},\n"
                       " {name: n6, id: 30, address: 'h6:1', disk: d6},\n"
                       " {name: \"n7\", id: 31, address: \"h0:2\", disk: d7}]}\n",
                       &cfg) == 0, "%s", err);
  ck_assert_int_eq (cfg.cf_protocol, 'A');
  ck_assert_uint_eq (cfg.cf_nnodes, REPL_MAX_NODES);
  for (i = 0; i < REPL_MAX_NODES; i++) {
    ck_assert_uint_eq (cfg.cf_nodes[i].nc_id, 24 + i);
    ck_assert_int_eq (cfg.cf_nodes[i].nc_line, (int) i + 2);
  }
  ck_assert_str_eq (cfg.cf_nodes[7].nc_host, "h0");
  ck_assert_str_eq (cfg.cf_nodes[7].nc_port, "2");
  config_free (&cfg);
}
END_TEST

/* A relative config path: paths are resolved against its directory,
 * not against the cwd. */
START_TEST (test_relative_config_path)
{
  struct repl_config cfg;
  char cwd[PATH_MAX], sub[PATH_MAX + 64], want[PATH_MAX + 64];

  ck_assert (getcwd (cwd, sizeof cwd) != NULL);
  snprintf (sub, sizeof sub, "%s/etc", tmpdir);
  ck_assert (mkdir (sub, 0700) == 0);
  snprintf (sub, sizeof sub, "%s/etc/r0.yaml", tmpdir);
  write_file (sub, TWO_NODES);
  ck_assert (chdir (tmpdir) == 0);
  ck_assert_msg (config_load ("etc/r0.yaml", &cfg, err, sizeof err) == 0, "%s", err);
  ck_assert (chdir (cwd) == 0);
  ck_assert_str_eq (cfg.cf_path, "etc/r0.yaml");
  snprintf (want, sizeof want, "%s/etc/r0-beta.img", tmpdir);
  ck_assert_str_eq (cfg.cf_nodes[1].nc_disk, want);
  config_free (&cfg);

  /* A bare file name: the directory is the cwd. */
  write_file (cfgpath, TWO_NODES);
  ck_assert (chdir (tmpdir) == 0);
  ck_assert_msg (config_load ("r0.yaml", &cfg, err, sizeof err) == 0, "%s", err);
  ck_assert (chdir (cwd) == 0);
  snprintf (want, sizeof want, "%s/r0-beta.img", tmpdir);
  ck_assert_str_eq (cfg.cf_nodes[1].nc_disk, want);
  config_free (&cfg);
}
END_TEST

START_TEST (test_find_and_free)
{
  struct repl_config cfg;

  memset (&cfg, 0, sizeof cfg);
  config_free (&cfg);                   /* zeroed: a no-op */
  ck_assert_ptr_null (config_find_node (&cfg, "alpha"));
  ck_assert_ptr_null (config_find_node_id (&cfg, 0));

  ck_assert_msg (load (TWO_NODES, &cfg) == 0, "%s", err);
  ck_assert_ptr_eq (config_find_node (&cfg, "beta"), &cfg.cf_nodes[1]);
  ck_assert_ptr_eq (config_find_node (&cfg, "alpha"), &cfg.cf_nodes[0]);
  ck_assert_ptr_null (config_find_node (&cfg, "gamma"));
  ck_assert_ptr_null (config_find_node (&cfg, "Alpha"));
  ck_assert_ptr_null (config_find_node (&cfg, NULL));
  ck_assert_ptr_eq (config_find_node_id (&cfg, 1), &cfg.cf_nodes[1]);
  ck_assert_ptr_null (config_find_node_id (&cfg, 2));
  config_free (&cfg);
  ck_assert_ptr_null (cfg.cf_resource);
  ck_assert_uint_eq (cfg.cf_nnodes, 0);
  config_free (&cfg);                   /* twice: still safe */
  config_free (NULL);
}
END_TEST

/* "net:" with every entry commented out is no net section at all. */
START_TEST (test_net_empty)
{
  struct repl_config cfg;

  ck_assert_msg (load (WITH_NET ("# ping-interval: 3"), &cfg) == 0, "%s", err);
  ck_assert_uint_eq (cfg.cf_ping_interval_ms, 1000);
  ck_assert_uint_eq (cfg.cf_ping_timeout_ms, 5000);
  config_free (&cfg);
}
END_TEST

/*----------------------------------------------------------------------
 * Files that cannot be read or parsed.
 */

START_TEST (test_open_missing)
{
  struct repl_config cfg;
  char path[sizeof cfgpath + 16], want[sizeof path + 64];

  int r, e;

  snprintf (path, sizeof path, "%s/absent.yaml", tmpdir);
  r = config_load (path, &cfg, err, sizeof err);
  e = errno;
  ck_assert_int_eq (r, -1);
  ck_assert_int_eq (e, ENOENT);
  snprintf (want, sizeof want, "%s: cannot open: No such file or directory", path);
  ck_assert_str_eq (err, want);
  ck_assert_ptr_null (cfg.cf_path);
}
END_TEST

START_TEST (test_open_directory)
{
  struct repl_config cfg;
  char want[sizeof tmpdir + 64];
  int r, e;

  r = config_load (tmpdir, &cfg, err, sizeof err);
  e = errno;
  ck_assert_int_eq (r, -1);
  ck_assert_int_eq (e, EISDIR);
  snprintf (want, sizeof want, "%s: cannot read: Is a directory", tmpdir);
  ck_assert_str_eq (err, want);
}
END_TEST

START_TEST (test_syntax_error)
{
  expect_error (3, "resource: r0\n"
                "nodes:\n"
                "  - name: alpha: beta\n", "YAML syntax error",
                "mapping values are not allowed");
  /* Found missing at the end of the file; the context names line 2. */
  expect_error (3, "resource: r0\n"
                "nodes: [a, b\n", "YAML syntax error",
                "while parsing a flow sequence (line 2)");
  /* Tab indentation, the classic. */
  expect_error (3, "resource: r0\n"
                "nodes:\n"
                "\t- name: alpha\n", "YAML syntax error");
}
END_TEST

START_TEST (test_bad_utf8)
{
  expect_error (2, "resource: r0\n"
                "nodes: \xff\n", "not valid YAML text", "UTF-8", "0xff");
}
END_TEST

START_TEST (test_empty_and_not_mapping)
{
  expect_error (0, "", "empty");
  expect_error (0, "# only a comment\n", "empty");
  expect_error (1, "- resource: r0\n", "top level is a sequence");
  expect_error (1, "r0\n", "top level is a scalar");
}
END_TEST

START_TEST (test_two_documents)
{
  expect_error (11, TWO_NODES "---\nresource: r1\n", "second YAML document");
}
END_TEST

/*----------------------------------------------------------------------
 * Keys.
 */

START_TEST (test_unknown_keys)
{
  expect_error (2, "resource: r0\n"
                "protocl: C\n", "unknown key 'protocl'");
  expect_error (3, WITH_NET ("pingtimeout: 3"), "net: unknown key 'pingtimeout'");
  expect_error (5, "resource: r0\n"
                "nodes:\n"
                "  - id: 0\n"
                "    address: h:1\n"
                "    adress: h:1\n"
                "    name: beta\n"
                "    disk: d\n", "nodes[0] (beta): unknown key 'adress'");
  expect_error (4, "resource: r0\n"
                "nodes:\n"
                "  - name: 'not a name'\n"
                "    mode: x\n", "nodes[0]: unknown key 'mode'");
  /* A key that is not a scalar. */
  expect_error (2, "resource: r0\n"
                "? [a, b]\n"
                ": c\n", "key is a sequence");
}
END_TEST

START_TEST (test_duplicate_keys)
{
  expect_error (3, "resource: r0\n"
                "nodes: []\n"
                "resource: r1\n", "duplicate key 'resource'", "line 1");
  expect_error (4, "resource: r0\n"
                "net:\n"
                "  timeout: 1\n"
                "  timeout: 2\n"
                "nodes: []\n", "net: duplicate key 'timeout'", "line 3");
  expect_error (11, TWO_NODES "    id: 2\n", "nodes[1] (beta): duplicate key 'id'",
                "line 8");
}
END_TEST

START_TEST (test_missing_keys)
{
  static const char *const node_keys[] = { "name", "id", "address", "disk" };
  static const char *const lines[] = {
    "    name: alpha\n", "    id: 0\n", "    address: h:1\n", "    disk: d\n",
  };
  char text[256], needle[64];
  size_t skip, i;

  expect_error (1, "nodes: []\n", "missing required key 'resource'");
  expect_error (1, "resource: r0\n"
                "protocol: A\n", "missing required key 'nodes'");

  /* Each required node key left out in turn. */
  for (skip = 0; skip < 4; skip++) {
    snprintf (text, sizeof text, "resource: r0\nnodes:\n  - control: /c\n");
    for (i = 0; i < 4; i++)
      if (i != skip)
        strcat (text, lines[i]);
    snprintf (needle, sizeof needle, "missing required key '%s'", node_keys[skip]);
    expect_error (3, text, skip == 0 ? "nodes[0]: " : "nodes[0] (alpha): ", needle);
  }
}
END_TEST

START_TEST (test_null_and_empty_values)
{
  expect_error (1, "resource:\n"
                "nodes: []\n", "resource: no value");
  expect_error (1, "resource: ~\n"
                "nodes: []\n", "resource: no value");
  expect_error (1, "resource: ''\n"
                "nodes: []\n", "resource: empty value");
  expect_error (7, ONE_NODE ("0", "h:1") "    control: null\n",
                "nodes[0] (alpha): control: no value");
  expect_error (7, ONE_NODE ("0", "h:1") "    control: \"\"\n",
                "nodes[0] (alpha): control: empty value");
  expect_error (2, "resource: r0\n"
                "nodes:\n", "nodes: no value");
  expect_error (2, "resource: r0\n"
                "protocol: [C]\n"
                "nodes: []\n", "protocol: expected a scalar, got a sequence");
}
END_TEST

START_TEST (test_nul_byte)
{
  expect_error (6, "resource: r0\n"
                "nodes:\n"
                "  - name: alpha\n"
                "    id: 0\n"
                "    address: h:1\n"
                "    disk: \"/dev/sda\\0/etc/passwd\"\n",
                "nodes[0] (alpha): disk:", "NUL", "/dev/sda");
}
END_TEST

/* Whatever the file holds, the message stays on one line. */
START_TEST (test_message_one_line)
{
  expect_error (1, "resource: \"r\\n0\"\n"
                "nodes: []\n", "resource: 'r?0' is not a valid name");
  expect_error (1, "resource: |\n  a\n  b\nnodes: []\n", "resource: 'a?b?'");
}
END_TEST

/* A short buffer gets a truncated but terminated message; none at all
 * is allowed too. */
START_TEST (test_small_buffer)
{
  struct repl_config cfg;
  char small[8];
  int r, e;

  write_file (cfgpath, "resource: r0\n");
  memset (small, 'x', sizeof small);
  ck_assert_int_eq (config_load (cfgpath, &cfg, small, sizeof small), -1);
  ck_assert_int_eq (small[sizeof small - 1], '\0');
  ck_assert (strncmp (small, cfgpath, sizeof small - 1) == 0);
  r = config_load (cfgpath, &cfg, NULL, 0);
  e = errno;
  ck_assert_int_eq (r, -1);
  ck_assert_int_eq (e, EINVAL);
}
END_TEST

/*----------------------------------------------------------------------
 * Values.
 */

/* A string of n copies of c, for the 63 and 64 character limits. */
static const char *
repeat (char c, size_t n)
{
  static char buf[2][128];
  static int which;

  ck_assert (n < sizeof buf[0]);
  which = !which;
  memset (buf[which], c, n);
  buf[which][n] = '\0';
  return buf[which];
}

START_TEST (test_names)
{
  const char *bad[] = {
    "'r 0'", "r/0", "r0!", "\"r\\u00e9\"", "'r:0'", repeat ('a', REPL_NAME_MAX + 1),
  };
  struct repl_config cfg;
  char text[512];
  size_t i;

  for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    snprintf (text, sizeof text, "resource: %s\nnodes: []\n", bad[i]);
    expect_error (1, text, "resource: '", "is not a valid name", "1..63");
    snprintf (text, sizeof text, "resource: r0\nnodes:\n"
              "  - {name: %s, id: 0, address: 'h:1', disk: d}\n", bad[i]);
    expect_error (3, text, "nodes[0]: name: '", "is not a valid name");
  }
  expect_error (1, "resource: r/0\nnodes: []\n", "'r/0'");
  expect_error (1, "resource: 'r:0'\nnodes: []\n", "'r:0'");

  /* 63 characters is fine, in the resource and in a node name. */
  snprintf (text, sizeof text, "resource: %s\n"
            "nodes: [{name: %s, id: 0, address: 'h:1', disk: d, control: c}]\n",
            repeat ('a', REPL_NAME_MAX), repeat ('b', REPL_NAME_MAX));
  ck_assert_msg (load (text, &cfg) == 0, "%s", err);
  ck_assert_uint_eq (strlen (cfg.cf_resource), REPL_NAME_MAX);
  ck_assert_uint_eq (strlen (cfg.cf_nodes[0].nc_name), REPL_NAME_MAX);
  config_free (&cfg);
}
END_TEST

START_TEST (test_protocol)
{
  expect_error (2, "resource: r0\nprotocol: D\nnodes: []\n",
                "protocol: 'D' is not A, B or C");
  expect_error (2, "resource: r0\nprotocol: AB\nnodes: []\n", "protocol: 'AB'");
  expect_error (2, "resource: r0\nprotocol: 3\nnodes: []\n", "protocol: '3'");
}
END_TEST

START_TEST (test_ids)
{
  static const char *const bad[] = {
    "one", "1.5", "-1", "+1", "0x1", "07", "1e1", "1 2", "true",
  };
  char text[256];
  size_t i;

  for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    snprintf (text, sizeof text, ONE_NODE ("%s", "h:1"), bad[i]);
    expect_error (4, text, "nodes[0] (alpha): id: '", bad[i], "not a decimal integer");
  }
  expect_error (4, ONE_NODE ("32", "h:1"), "nodes[0] (alpha): id: 32 out of range 0..31");
  expect_error (4, ONE_NODE ("99999999999999999999999", "h:1"),
                "id: 99999999999999999999999 out of range");
  expect_error (4, ONE_NODE ("4294967296", "h:1"), "id: 4294967296 out of range");
  expect_error (4, ONE_NODE ("'1'", "h:1"), "id: expected a number, got quoted '1'");
  expect_error (4, ONE_NODE ("[1]", "h:1"), "id: expected a scalar, got a sequence");
}
END_TEST

START_TEST (test_net_values)
{
  static const struct { const char *entry, *needle; } bad[] = {
    { "ping-interval: 0.05", "net: ping-interval: 0.05 out of range 0.1..60 seconds" },
    { "ping-interval: 60.001", "net: ping-interval: 60.001 out of range" },
    { "ping-timeout: 0.1", "net: ping-timeout: 0.1 out of range 0.2..600 seconds" },
    { "timeout: 601", "net: timeout: 601 out of range 0.2..600 seconds" },
    { "timeout: 0", "net: timeout: 0 out of range" },
    { "connect-retry-max: 61", "net: connect-retry-max: 61 out of range 0.1..60" },
    { "connect-retry-max: 99999999999999999999", "connect-retry-max: 99999999999999999999 out of range" },
    { "timeout: 0.0005", "net: timeout: '0.0005' is not a number of seconds" },
    { "timeout: 1e3", "net: timeout: '1e3' is not a number" },
    { "timeout: -1", "net: timeout: '-1' is not a number" },
    { "timeout: 5s", "net: timeout: '5s' is not a number" },
    { "timeout: .5", "net: timeout: '.5' is not a number" },
    { "timeout: 5.", "net: timeout: '5.' is not a number" },
    { "timeout: '5'", "net: timeout: expected a number, got quoted '5'" },
    { "timeout: [5]", "net: timeout: expected a scalar, got a sequence" },
  };
  size_t i;

  for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char text[256];
    snprintf (text, sizeof text, WITH_NET ("%s"), bad[i].entry);
    expect_error (3, text, bad[i].needle);
  }
  expect_error (2, "resource: r0\nnet: 5\nnodes: []\n",
                "net: expected a mapping, got a scalar");
}
END_TEST

/* Pings must come more often than the silence that kills the peer. */
START_TEST (test_net_ping_order)
{
  struct repl_config cfg;

  expect_error (3, WITH_NET ("ping-timeout: 1"),
                "net: ping-timeout: 1 must be greater than ping-interval 1");
  expect_error (3, WITH_NET ("ping-interval: 10"),
                "net: ping-timeout: 5 must be greater than ping-interval 10");
  ck_assert_msg (load (WITH_NET ("ping-timeout: 1.001"), &cfg) == 0, "%s", err);
  ck_assert_uint_eq (cfg.cf_ping_timeout_ms, 1001);
  config_free (&cfg);
}
END_TEST

START_TEST (test_nodes_shape)
{
#define NODE_FMT "  - {name: n%d, id: %d, address: 'h%d:1', disk: d}\n"
  char text[1024];
  size_t len;
  int i;

  expect_error (2, "resource: r0\nnodes: alpha\n", "nodes: expected a sequence, got a scalar");
  expect_error (3, "resource: r0\nnodes:\n  name: alpha\n",
                "nodes: expected a sequence, got a mapping");
  expect_error (2, "resource: r0\nnodes: []\n", "nodes: empty, expected 1..8 nodes");
  expect_error (4, "resource: r0\n"
                "nodes:\n"
                "  - {name: alpha, id: 0, address: 'h:1', disk: d}\n"
                "  - beta\n", "nodes[1]: expected a mapping", "got a scalar");

  /* One node too many: the error is on the ninth. */
  len = snprintf (text, sizeof text, "resource: r0\nnodes:\n");
  for (i = 0; i <= REPL_MAX_NODES; i++)
    len += snprintf (text + len, sizeof text - len, NODE_FMT, i, i, i);
  expect_error (REPL_MAX_NODES + 3, text, "nodes: 9 entries, at most 8");
}
END_TEST

START_TEST (test_duplicates)
{
  expect_error (7, "resource: r0\n"
                "nodes:\n"
                "  - name: alpha\n"
                "    id: 0\n"
                "    address: h:1\n"
                "    disk: d\n"
                "  - name: alpha\n"
                "    id: 1\n"
                "    address: h:2\n"
                "    disk: d\n",
                "nodes[1] (alpha): name: duplicate alpha, also used by nodes[0]");
  expect_error (8, "resource: r0\n"
                "nodes:\n"
                "  - name: alpha\n"
                "    id: 3\n"
                "    address: h:1\n"
                "    disk: d\n"
                "  - name: beta\n"
                "    id: 3\n"
                "    address: h:2\n"
                "    disk: d\n",
                "nodes[1] (beta): id: duplicate 3, also used by alpha");
  /* The example of repl-config.h, word for word. */
  expect_error (9, "resource: r0\n"
                "nodes:\n"
                "  - name: alpha\n"
                "    id: 0\n"
                "    address: 127.0.0.1:7789\n"
                "    disk: d\n"
                "  - name: beta\n"
                "    id: 1\n"
                "    address: 127.0.0.1:7789\n"
                "    disk: d\n",
                "r0.yaml:9: nodes[1] (beta): address: duplicate 127.0.0.1:7789, also used by alpha");
}
END_TEST

/* The same place written two ways is still a duplicate. */
START_TEST (test_duplicate_address_normalised)
{
  static const struct { const char *a, *b; } same[] = {
    { "'[::1]:7789'", "'[0:0:0:0:0:0:0:1]:7789'" },
    { "'[2001:DB8::1]:7789'", "'[2001:db8:0::1]:7789'" },
    { "Alpha.example:7789", "alpha.EXAMPLE:7789" },
  };
  char text[512];
  size_t i;

  for (i = 0; i < sizeof same / sizeof same[0]; i++) {
    snprintf (text, sizeof text,
              "resource: r0\n"
              "nodes:\n"
              "  - {name: alpha, id: 0, address: %s, disk: d}\n"
              "  - {name: beta, id: 1, address: %s, disk: d}\n", same[i].a, same[i].b);
    expect_error (4, text, "nodes[1] (beta): address: duplicate", "also used by alpha");
  }
}
END_TEST

START_TEST (test_addresses)
{
  static const struct { const char *addr, *shown, *why; } bad[] = {
    { "10.0.0.1", "'10.0.0.1'", "no port" },
    { "':7789'", "':7789'", "empty host" },
    { "h:0", "'h:0'", "port out of range 1..65535" },
    { "h:65536", "'h:65536'", "port out of range" },
    { "h:99999999999", "'h:99999999999'", "port out of range" },
    { "h:x", "'h:x'", "port is not a decimal number" },
    { "'h:'", "'h:'", "port is not a decimal number" },
    { "h:-1", "'h:-1'", "port is not a decimal number" },
    { "h:07789", "'h:07789'", "port is not a decimal number" },
    { "h:77 89", "'h:77 89'", "port is not a decimal number" },
    { "'::1:7789'", "'::1:7789'", "needs brackets" },
    { "'[::1]7789'", "'[::1]7789'", "expected [v6addr]:port" },
    { "'[::1:7789'", "'[::1:7789'", "expected [v6addr]:port" },
    { "'[::1]:'", "'[::1]:'", "port is not a decimal number" },
    { "'[zz::1]:7789'", "'[zz::1]:7789'", "not an IPv6 address" },
    { "'[10.0.0.1]:7789'", "'[10.0.0.1]:7789'", "not an IPv6 address" },
    { "'[]:7789'", "'[]:7789'", "not an IPv6 address" },
    { "'[fe80::1%]:7789'", "'[fe80::1%]:7789'", "bad IPv6 zone" },
    { "'[fe80::1%a/b]:7789'", "'[fe80::1%a/b]:7789'", "bad IPv6 zone" },
    { "10.0.0.256:7789", "'10.0.0.256:7789'", "not a valid IPv4 address" },
    { "1.2.3:7789", "'1.2.3:7789'", "not a valid IPv4 address" },
    { "'ho st:7789'", "'ho st:7789'", "not a host name" },
    { "h/x:7789", "'h/x:7789'", "not a host name" },
  };
  char text[256];
  size_t i;

  for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    snprintf (text, sizeof text, ONE_NODE ("0", "%s"), bad[i].addr);
    expect_error (5, text, "nodes[0] (alpha): address: ", bad[i].shown, bad[i].why);
  }
}
END_TEST

START_TEST (test_control_too_long)
{
  char n63[REPL_NAME_MAX + 1];
  char text[1024];

  strcpy (n63, repeat ('n', REPL_NAME_MAX));

  snprintf (text, sizeof text, ONE_NODE ("0", "h:1") "    control: /%s/%s.sock\n",
            n63, n63);
  expect_error (7, text, "nodes[0] (alpha): control: '/nnn",
                "longer than a unix socket path (107 bytes)");
  /* Long names make the default too long: say so, with the entry's line. */
  snprintf (text, sizeof text,
            "resource: %s\n"
            "nodes:\n"
            "  - name: %s\n"
            "    id: 0\n"
            "    address: h:1\n"
            "    disk: d\n", n63, n63);
  expect_error (3, text, "control: default '" REPL_CONTROL_DIR "/nnn",
                "longer than a unix socket path");
}
END_TEST

START_TEST (test_anchors_refused)
{
  expect_error (6, "resource: r0\n"
                "nodes:\n"
                "  - name: alpha\n"
                "    id: 0\n"
                "    address: h:1\n"
                "    disk: &d /dev/sda\n"
                "  - name: beta\n"
                "    id: 1\n"
                "    address: h:2\n"
                "    disk: *d\n", "anchors and aliases are not supported", "&d");
  expect_error (2, "resource: r0\n"
                "nodes: *n\n", "anchors and aliases", "*n"); /* undefined too */
}
END_TEST

static Suite *
config_suite (void)
{
  Suite *s = suite_create ("config");
  TCase *tc = tcase_create ("config");

  tcase_add_unchecked_fixture (tc, suite_setup, suite_teardown);
  tcase_add_checked_fixture (tc, setup, teardown);
  tcase_set_timeout (tc, 30);
  tcase_add_test (tc, test_minimal_defaults);
  tcase_add_test (tc, test_full);
  tcase_add_test (tc, test_flow_max_nodes);
  tcase_add_test (tc, test_relative_config_path);
  tcase_add_test (tc, test_find_and_free);
  tcase_add_test (tc, test_net_empty);
  tcase_add_test (tc, test_open_missing);
  tcase_add_test (tc, test_open_directory);
  tcase_add_test (tc, test_syntax_error);
  tcase_add_test (tc, test_bad_utf8);
  tcase_add_test (tc, test_empty_and_not_mapping);
  tcase_add_test (tc, test_two_documents);
  tcase_add_test (tc, test_unknown_keys);
  tcase_add_test (tc, test_duplicate_keys);
  tcase_add_test (tc, test_missing_keys);
  tcase_add_test (tc, test_null_and_empty_values);
  tcase_add_test (tc, test_nul_byte);
  tcase_add_test (tc, test_message_one_line);
  tcase_add_test (tc, test_small_buffer);
  tcase_add_test (tc, test_names);
  tcase_add_test (tc, test_protocol);
  tcase_add_test (tc, test_ids);
  tcase_add_test (tc, test_net_values);
  tcase_add_test (tc, test_net_ping_order);
  tcase_add_test (tc, test_nodes_shape);
  tcase_add_test (tc, test_duplicates);
  tcase_add_test (tc, test_duplicate_address_normalised);
  tcase_add_test (tc, test_addresses);
  tcase_add_test (tc, test_control_too_long);
  tcase_add_test (tc, test_anchors_refused);
  suite_add_tcase (s, tc);
  return s;
}

int
main (void)
{
  SRunner *sr = srunner_create (config_suite ());
  int failed;

  srunner_run_all (sr, CK_NORMAL);
  failed = srunner_ntests_failed (sr);
  srunner_free (sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
