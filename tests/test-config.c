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

/* A section (metadata, resync) with one entry on line 3. */
#define WITH_SECTION(section, entry)                            \
  "resource: r0\n"                                  /* 1 */     \
  section ":\n"                                     /* 2 */     \
  "  " entry "\n"                                   /* 3 */     \
  "nodes:\n"                                        /* 4 */     \
  "  - {name: alpha, id: 0, address: 'h:1', disk: d}\n" /* 5 */

/* The same with two entries, on lines 3 and 4. */
#define WITH_SECTION2(section, entry1, entry2)                  \
  "resource: r0\n"                                  /* 1 */     \
  section ":\n"                                     /* 2 */     \
  "  " entry1 "\n"                                  /* 3 */     \
  "  " entry2 "\n"                                  /* 4 */     \
  "nodes:\n"                                        /* 5 */     \
  "  - {name: alpha, id: 0, address: 'h:1', disk: d}\n" /* 6 */

/* Two nodes; the lines in extra0 go after alpha's disk (line 6), those
 * in extra1 after beta's. */
#define TWO_DISKS(disk0, extra0, disk1, extra1)                 \
  "resource: r0\n"                                  /* 1 */     \
  "nodes:\n"                                        /* 2 */     \
  "  - name: alpha\n"                               /* 3 */     \
  "    id: 0\n"                                     /* 4 */     \
  "    address: h:1\n"                              /* 5 */     \
  "    disk: " disk0 "\n"                           /* 6 */     \
  extra0                                                        \
  "  - name: beta\n"                                            \
  "    id: 1\n"                                                 \
  "    address: h:2\n"                                          \
  "    disk: " disk1 "\n"                                       \
  extra1

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
  ck_assert (cfg.cf_cork);
  ck_assert_uint_eq (cfg.cf_sndbuf_size, 4 << 20);
  ck_assert_uint_eq (cfg.cf_rcvbuf_size, 4 << 20);
  ck_assert_uint_eq (cfg.cf_bitmap_granularity, 4096);
  ck_assert_uint_eq (cfg.cf_al_extent_size, 4 << 20);
  ck_assert_uint_eq (cfg.cf_al_extents, 1024);
  ck_assert_uint_eq (cfg.cf_resync_rate, 0);
  ck_assert_uint_eq (cfg.cf_c_min_rate, 0);
  ck_assert_uint_eq (cfg.cf_c_max_rate, 0);
  ck_assert (!cfg.cf_csums);
  ck_assert (!cfg.cf_two_primaries);
  ck_assert_uint_eq (cfg.cf_nnodes, 2);

  ck_assert_str_eq (cfg.cf_nodes[0].nc_name, "alpha");
  ck_assert_uint_eq (cfg.cf_nodes[0].nc_id, 0);
  ck_assert_str_eq (cfg.cf_nodes[0].nc_address, "10.0.0.1:7789");
  ck_assert_str_eq (cfg.cf_nodes[0].nc_host, "10.0.0.1");
  ck_assert_str_eq (cfg.cf_nodes[0].nc_port, "7789");
  ck_assert_str_eq (cfg.cf_nodes[0].nc_disk, "/dev/vg/r0");
  ck_assert_str_eq (cfg.cf_nodes[0].nc_control, REPL_CONTROL_DIR "/r0-alpha.sock");
  ck_assert_str_eq (cfg.cf_nodes[0].nc_meta, "/dev/vg/r0.meta");
  ck_assert (cfg.cf_nodes[0].nc_meta_default);
  ck_assert (!cfg.cf_nodes[0].nc_meta_internal);
  ck_assert_int_eq (cfg.cf_nodes[0].nc_line, 3);

  ck_assert_str_eq (cfg.cf_nodes[1].nc_name, "beta");
  ck_assert_uint_eq (cfg.cf_nodes[1].nc_id, 1);
  snprintf (want, sizeof want, "%s/r0-beta.img", tmpdir);
  ck_assert_str_eq (cfg.cf_nodes[1].nc_disk, want);
  ck_assert_str_eq (cfg.cf_nodes[1].nc_control, REPL_CONTROL_DIR "/r0-beta.sock");
  snprintf (want, sizeof want, "%s/r0-beta.img.meta", tmpdir);
  ck_assert_str_eq (cfg.cf_nodes[1].nc_meta, want);
  ck_assert (cfg.cf_nodes[1].nc_meta_default);
  ck_assert (!cfg.cf_nodes[1].nc_meta_internal);
  ck_assert_int_eq (cfg.cf_nodes[1].nc_line, 7);
  config_free (&cfg);
}
END_TEST

/* allow-two-primaries: protocol C; exactly two storage nodes, or
 * diskless nodes beside the storage nodes (a storage and a diskless
 * Primary). */
START_TEST (test_two_primaries)
{
  struct repl_config cfg;

  ck_assert_msg (load ("allow-two-primaries: true\n" TWO_NODES, &cfg) == 0,
                 "%s", err);
  ck_assert (cfg.cf_two_primaries);
  config_free (&cfg);
  expect_error (1, "allow-two-primaries: true\nprotocol: B\n" TWO_NODES,
                "allow-two-primaries: true needs protocol: C (protocol "
                "is B)");
  expect_error (1, "allow-two-primaries: true\n" TWO_NODES
                "  - {name: gamma, id: 2, address: '10.0.0.3:7789', "
                "disk: d}\n",
                "allow-two-primaries: true needs exactly two nodes, both "
                "with a disk, or diskless nodes beside the storage nodes "
                "(this file has 3 storage node(s) and no diskless one)");
  ck_assert_msg (load ("allow-two-primaries: true\n" TWO_NODES
                       "  - {name: client, id: 2, address: '10.0.0.3:7789', "
                       "disk: none}\n", &cfg) == 0, "%s", err);
  ck_assert (cfg.cf_two_primaries && cfg.cf_has_diskless);
  config_free (&cfg);
  expect_error (1, "allow-two-primaries: true\nprotocol: A\n" TWO_NODES
                "  - {name: client, id: 2, address: '10.0.0.3:7789', "
                "disk: none}\n",
                "allow-two-primaries: true needs protocol: C (protocol "
                "is A)");
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
                       "metadata:\n"
                       "  bitmap-granularity: 64K\n"
                       "  al-extent-size: 1GiB\n"
                       "  al-extents: 65536\n"
                       "resync:\n"
                       "  c-min-rate: 250k\n"
                       "  c-max-rate: 1T\n"
                       "  csums: true\n"
                       "nodes:\n"
                       "  - name: alpha\n"
                       "    id: 31\n"
                       "    address: '[2001:db8::1]:7789'\n"
                       "    disk: ./disks/alpha.img\n"
                       "    meta: ./md/alpha.meta\n"
                       "    control: alpha.sock\n"
                       "  - name: beta\n"
                       "    id: 7\n"
                       "    address: Beta.Example.COM:65535\n"
                       "    disk: /dev/sdb\n"
                       "    control: /run/x/beta.sock\n"
                       "    meta: internal\n"
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
  ck_assert_uint_eq (cfg.cf_bitmap_granularity, 64 << 10);
  ck_assert_uint_eq (cfg.cf_al_extent_size, 1 << 30);
  ck_assert_uint_eq (cfg.cf_al_extents, 65536);
  ck_assert_uint_eq (cfg.cf_resync_rate, 0);
  ck_assert_uint_eq (cfg.cf_c_min_rate, 250 << 10);
  ck_assert_uint_eq (cfg.cf_c_max_rate, UINT64_C (1) << 40);
  ck_assert (cfg.cf_csums);
  ck_assert_uint_eq (cfg.cf_nnodes, 3);

  ck_assert_uint_eq (cfg.cf_nodes[0].nc_id, 31);
  ck_assert_str_eq (cfg.cf_nodes[0].nc_address, "[2001:db8::1]:7789");
  ck_assert_str_eq (cfg.cf_nodes[0].nc_host, "2001:db8::1");
  ck_assert_str_eq (cfg.cf_nodes[0].nc_port, "7789");
  snprintf (want, sizeof want, "%s/disks/alpha.img", tmpdir);
  ck_assert_str_eq (cfg.cf_nodes[0].nc_disk, want);
  snprintf (want, sizeof want, "%s/alpha.sock", tmpdir);
  ck_assert_str_eq (cfg.cf_nodes[0].nc_control, want);
  snprintf (want, sizeof want, "%s/md/alpha.meta", tmpdir);
  ck_assert_str_eq (cfg.cf_nodes[0].nc_meta, want);
  ck_assert (!cfg.cf_nodes[0].nc_meta_default);
  ck_assert (!cfg.cf_nodes[0].nc_meta_internal);
  ck_assert_int_eq (cfg.cf_nodes[0].nc_line, 18);

  ck_assert_str_eq (cfg.cf_nodes[1].nc_host, "Beta.Example.COM");
  ck_assert_str_eq (cfg.cf_nodes[1].nc_port, "65535");
  ck_assert_str_eq (cfg.cf_nodes[1].nc_disk, "/dev/sdb");
  ck_assert_str_eq (cfg.cf_nodes[1].nc_control, "/run/x/beta.sock");
  ck_assert_ptr_null (cfg.cf_nodes[1].nc_meta);
  ck_assert (cfg.cf_nodes[1].nc_meta_internal);
  ck_assert (!cfg.cf_nodes[1].nc_meta_default);

  ck_assert_str_eq (cfg.cf_nodes[2].nc_host, "fe80::1%eth0");
  ck_assert_str_eq (cfg.cf_nodes[2].nc_port, "1");
  snprintf (want, sizeof want, "%s/../gamma.img", tmpdir);
  ck_assert_str_eq (cfg.cf_nodes[2].nc_disk, want);
  ck_assert_str_eq (cfg.cf_nodes[2].nc_control,
                    REPL_CONTROL_DIR "/web.data_1-gamma.sock");
  snprintf (want, sizeof want, "%s/../gamma.img.meta", tmpdir);
  ck_assert_str_eq (cfg.cf_nodes[2].nc_meta, want);
  ck_assert (cfg.cf_nodes[2].nc_meta_default);
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
  /* The resync and metadata keys live in their sections only. */
  expect_error (2, "resource: r0\n"
                "resync-rate: 100M\n", "unknown key 'resync-rate'");
  expect_error (2, "resource: r0\n"
                "al-extents: 7\n", "unknown key 'al-extents'");
  expect_error (3, WITH_NET ("csums: true"), "net: unknown key 'csums'");
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

/* config_load_buffer: the same checks on bytes in memory; the path is
 * only named (it need not exist) and its directory anchors relative
 * paths.  Bytes need not end in a NUL. */
START_TEST (test_load_buffer)
{
  static const char text[] = TWO_NODES;
  char path[sizeof tmpdir + 32], want[sizeof tmpdir + 32];
  struct repl_config cfg;

  snprintf (path, sizeof path, "%s/not-there.yaml", tmpdir);
  ck_assert_int_eq (config_load_buffer (path, text, strlen (text), &cfg,
                                        err, sizeof err), 0);
  ck_assert_str_eq (cfg.cf_resource, "r0");
  ck_assert_int_eq (cfg.cf_nnodes, 2);
  snprintf (want, sizeof want, "%s/r0-beta.img", tmpdir);
  ck_assert_str_eq (cfg.cf_nodes[1].nc_disk, want);
  config_free (&cfg);

  /* Cut short in the middle of a key: refused with the path named. */
  ck_assert_int_eq (config_load_buffer (path, text, 3, &cfg,
                                        err, sizeof err), -1);
  ck_assert_int_eq (errno, EINVAL);
  ck_assert_msg (strncmp (err, path, strlen (path)) == 0, "%s", err);
  ck_assert_int_eq (config_load_buffer (path, NULL, 0, &cfg,
                                        err, sizeof err), -1);
  ck_assert_int_eq (errno, EINVAL);
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

/* net: cork is a plain boolean. */
START_TEST (test_net_cork)
{
  struct repl_config cfg;

  ck_assert_msg (load (WITH_NET ("cork: false"), &cfg) == 0, "%s", err);
  ck_assert (!cfg.cf_cork);
  config_free (&cfg);
  ck_assert_msg (load (WITH_NET ("cork: true"), &cfg) == 0, "%s", err);
  ck_assert (cfg.cf_cork);
  config_free (&cfg);
  expect_error (3, WITH_NET ("cork: yes"), "net: cork: 'yes' is not true or false");
  expect_error (3, WITH_NET ("cork: 'false'"), "net: cork: expected true or false, got quoted 'false'");
  expect_error (3, WITH_NET ("cork: 1"), "net: cork: '1' is not true or false");
}
END_TEST

/* net: sndbuf-size and rcvbuf-size are sizes, 16K..64M. */
START_TEST (test_net_sockbuf)
{
  struct repl_config cfg;

  ck_assert_msg (load (WITH_NET ("sndbuf-size: 64K"), &cfg) == 0, "%s", err);
  ck_assert_uint_eq (cfg.cf_sndbuf_size, 65536);
  ck_assert_uint_eq (cfg.cf_rcvbuf_size, 4 << 20);
  config_free (&cfg);
  ck_assert_msg (load (WITH_NET ("rcvbuf-size: 16M"), &cfg) == 0, "%s", err);
  ck_assert_uint_eq (cfg.cf_rcvbuf_size, 16 << 20);
  config_free (&cfg);
  expect_error (3, WITH_NET ("sndbuf-size: 8K"), "net: sndbuf-size: 8K out of range");
  expect_error (3, WITH_NET ("rcvbuf-size: 65M"), "net: rcvbuf-size: 65M out of range");
  expect_error (3, WITH_NET ("rcvbuf-size: big"), "net: rcvbuf-size: 'big' is not a size in bytes");
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

/* Every spelling of a size: plain bytes, K/M/G/T in either case, with
 * or without "iB". */
START_TEST (test_metadata_values)
{
  static const struct { const char *g, *a, *n; uint32_t gv, av, nv; } ok[] = {
    { "512", "64K", "1", 512, 64 << 10, 1 },
    { "4096", "4M", "1024", 4096, 4 << 20, 1024 },
    { "4K", "4194304", "7", 4096, 4 << 20, 7 },
    { "4k", "4m", "65536", 4096, 4 << 20, 65536 },
    { "8KiB", "1GiB", "3", 8192, 1 << 30, 3 },
    { "1M", "1M", "2", 1 << 20, 1 << 20, 2 },  /* equal is fine */
    { "1m", "1g", "9", 1 << 20, 1 << 30, 9 },
  };
  struct repl_config cfg;
  char text[512];
  size_t i;

  for (i = 0; i < sizeof ok / sizeof ok[0]; i++) {
    snprintf (text, sizeof text,
              "resource: r0\n"
              "metadata:\n"
              "  bitmap-granularity: %s\n"
              "  al-extent-size: %s\n"
              "  al-extents: %s\n"
              "nodes: [{name: alpha, id: 0, address: 'h:1', disk: d}]\n",
              ok[i].g, ok[i].a, ok[i].n);
    ck_assert_msg (load (text, &cfg) == 0, "%s: %s", text, err);
    ck_assert_uint_eq (cfg.cf_bitmap_granularity, ok[i].gv);
    ck_assert_uint_eq (cfg.cf_al_extent_size, ok[i].av);
    ck_assert_uint_eq (cfg.cf_al_extents, ok[i].nv);
    config_free (&cfg);
  }

  /* One key alone leaves the others at their defaults. */
  ck_assert_msg (load (WITH_SECTION ("metadata", "al-extents: 67"), &cfg) == 0,
                 "%s", err);
  ck_assert_uint_eq (cfg.cf_bitmap_granularity, 4096);
  ck_assert_uint_eq (cfg.cf_al_extent_size, 4 << 20);
  ck_assert_uint_eq (cfg.cf_al_extents, 67);
  config_free (&cfg);
}
END_TEST

START_TEST (test_metadata_bad)
{
  static const struct { const char *entry, *needle; } bad[] = {
    /* Not powers of 2. */
    { "bitmap-granularity: 3000", "metadata: bitmap-granularity: 3000 is not a power of 2" },
    { "bitmap-granularity: 4097", "bitmap-granularity: 4097 is not a power of 2" },
    { "bitmap-granularity: 3K", "bitmap-granularity: 3K is not a power of 2" },
    { "bitmap-granularity: 0", "bitmap-granularity: 0 out of range 512..1M" },
    { "al-extent-size: 3M", "metadata: al-extent-size: 3M is not a power of 2" },
    { "al-extent-size: 65537", "al-extent-size: 65537 is not a power of 2" },
    /* Out of md_layout's ranges. */
    { "bitmap-granularity: 256", "metadata: bitmap-granularity: 256 out of range 512..1M" },
    { "bitmap-granularity: 2M", "bitmap-granularity: 2M out of range 512..1M" },
    { "bitmap-granularity: 1T", "bitmap-granularity: 1T out of range" },
    { "al-extent-size: 32K", "metadata: al-extent-size: 32K out of range 64K..1G" },
    { "al-extent-size: 2G", "al-extent-size: 2G out of range 64K..1G" },
    { "al-extents: 0", "metadata: al-extents: 0 out of range 1..65536" },
    { "al-extents: 65537", "al-extents: 65537 out of range 1..65536" },
    { "al-extents: 99999999999999999999", "al-extents: 99999999999999999999 out of range" },
    /* Huge values saturate and are out of range, never wrapped. */
    { "bitmap-granularity: 18446744073709551616", "18446744073709551616 out of range" },
    { "al-extent-size: 17179869184G", "17179869184G out of range" },
    { "al-extent-size: 16777216T", "16777216T out of range" },
    /* Not sizes. */
    { "bitmap-granularity: 4X", "metadata: bitmap-granularity: '4X' is not a size in bytes" },
    { "bitmap-granularity: 4KB", "bitmap-granularity: '4KB' is not a size" },
    { "bitmap-granularity: 4Ki", "bitmap-granularity: '4Ki' is not a size" },
    { "bitmap-granularity: 4KiBs", "'4KiBs' is not a size" },
    { "bitmap-granularity: 4 K", "'4 K' is not a size" },
    { "bitmap-granularity: K", "'K' is not a size" },
    { "bitmap-granularity: -4K", "'-4K' is not a size" },
    { "bitmap-granularity: 0x1000", "'0x1000' is not a size" },
    { "bitmap-granularity: 04K", "'04K' is not a size" },
    { "bitmap-granularity: 1.5K", "'1.5K' is not a size" },
    { "bitmap-granularity: 4e3", "'4e3' is not a size" },
    { "bitmap-granularity: '4K'", "bitmap-granularity: expected a number, got quoted '4K'" },
    { "al-extent-size: [4M]", "al-extent-size: expected a scalar, got a sequence" },
    { "al-extents: 1K", "metadata: al-extents: '1K' is not a decimal integer" },
    { "al-extents: 01", "al-extents: '01' is not a decimal integer" },
    { "al-extents: '7'", "al-extents: expected a number, got quoted '7'" },
    { "al-extents:", "metadata: al-extents: no value" },
    { "al-extent: 7", "metadata: unknown key 'al-extent'" },
    { "resync-rate: 7", "metadata: unknown key 'resync-rate'" },
  };
  char text[256];
  size_t i;

  for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    snprintf (text, sizeof text, WITH_SECTION ("metadata", "%s"), bad[i].entry);
    expect_error (3, text, bad[i].needle);
  }
  expect_error (2, "resource: r0\nmetadata: 4K\nnodes: []\n",
                "metadata: expected a mapping, got a scalar");
  expect_error (4, WITH_SECTION2 ("metadata", "al-extents: 1", "al-extents: 2"),
                "metadata: duplicate key 'al-extents' (first at line 3)");

  /* A bitmap bit may not be larger than an extent: on the line of
   * al-extent-size, whichever comes first. */
  expect_error (4, WITH_SECTION2 ("metadata", "bitmap-granularity: 1M",
                                  "al-extent-size: 512K"),
                "metadata: al-extent-size: 512K is smaller than bitmap-granularity 1M");
  expect_error (3, WITH_SECTION2 ("metadata", "al-extent-size: 64K",
                                  "bitmap-granularity: 128K"),
                "al-extent-size: 64K is smaller than bitmap-granularity 128K");
}
END_TEST

START_TEST (test_resync_values)
{
  struct repl_config cfg;

  ck_assert_msg (load (WITH_SECTION2 ("resync", "resync-rate: 100M", "csums: true"),
                       &cfg) == 0, "%s", err);
  ck_assert_uint_eq (cfg.cf_resync_rate, 100 << 20);
  ck_assert_uint_eq (cfg.cf_c_min_rate, 0);
  ck_assert_uint_eq (cfg.cf_c_max_rate, 0);
  ck_assert (cfg.cf_csums);
  config_free (&cfg);

  ck_assert_msg (load (WITH_SECTION2 ("resync", "c-max-rate: 1G", "c-min-rate: 10MiB"),
                       &cfg) == 0, "%s", err);
  ck_assert_uint_eq (cfg.cf_resync_rate, 0);
  ck_assert_uint_eq (cfg.cf_c_min_rate, 10 << 20);
  ck_assert_uint_eq (cfg.cf_c_max_rate, 1 << 30);
  ck_assert (!cfg.cf_csums);
  config_free (&cfg);

  /* Equal rates, the extremes, a rate in plain bytes. */
  ck_assert_msg (load (WITH_SECTION2 ("resync", "c-min-rate: 1", "c-max-rate: 1"),
                       &cfg) == 0, "%s", err);
  ck_assert_uint_eq (cfg.cf_c_min_rate, 1);
  ck_assert_uint_eq (cfg.cf_c_max_rate, 1);
  config_free (&cfg);
  ck_assert_msg (load (WITH_SECTION2 ("resync", "c-min-rate: 1TiB", "c-max-rate: 1t"),
                       &cfg) == 0, "%s", err);
  ck_assert_uint_eq (cfg.cf_c_min_rate, UINT64_C (1) << 40);
  config_free (&cfg);
  ck_assert_msg (load (WITH_SECTION ("resync", "resync-rate: 1099511627776"),
                       &cfg) == 0, "%s", err);
  ck_assert_uint_eq (cfg.cf_resync_rate, UINT64_C (1) << 40);
  config_free (&cfg);

  /* resync-rate 0 is "unthrottled", the same as leaving it out. */
  ck_assert_msg (load (WITH_SECTION2 ("resync", "resync-rate: 0", "csums: False"),
                       &cfg) == 0, "%s", err);
  ck_assert_uint_eq (cfg.cf_resync_rate, 0);
  ck_assert (!cfg.cf_csums);
  config_free (&cfg);
  ck_assert_msg (load (WITH_SECTION ("resync", "csums: TRUE"), &cfg) == 0, "%s", err);
  ck_assert (cfg.cf_csums);
  config_free (&cfg);
}
END_TEST

START_TEST (test_resync_bad)
{
  static const struct { const char *entry, *needle; } bad[] = {
    { "resync-rate: 100X", "resync: resync-rate: '100X' is not a rate in bytes per second" },
    { "resync-rate: 100MB", "resync-rate: '100MB' is not a rate" },
    { "resync-rate: 100M/s", "resync-rate: '100M/s' is not a rate" },
    { "resync-rate: 100 M", "resync-rate: '100 M' is not a rate" },
    { "resync-rate: 1.5M", "resync-rate: '1.5M' is not a rate" },
    { "resync-rate: -1", "resync-rate: '-1' is not a rate" },
    { "resync-rate: 0100", "resync-rate: '0100' is not a rate" },
    { "resync-rate: fast", "resync-rate: 'fast' is not a rate" },
    { "c-min-rate: 10Q", "resync: c-min-rate: '10Q' is not a rate" },
    { "c-max-rate: 10P", "resync: c-max-rate: '10P' is not a rate" },
    { "resync-rate: '100M'", "resync-rate: expected a number, got quoted '100M'" },
    { "resync-rate: 1025G", "resync: resync-rate: 1025G out of range 0..1T bytes/s" },
    { "resync-rate: 2T", "resync-rate: 2T out of range 0..1T bytes/s" },
    { "resync-rate: 99999999999999999999999", "99999999999999999999999 out of range" },
    { "c-min-rate: 0", "resync: c-min-rate: 0 out of range 1..1T bytes/s" },
    { "c-max-rate: 0", "resync: c-max-rate: 0 out of range 1..1T bytes/s" },
    { "c-max-rate: 1099511627777", "c-max-rate: 1099511627777 out of range" },
    { "csums: yes", "resync: csums: 'yes' is not true or false" },
    { "csums: on", "csums: 'on' is not true or false" },
    { "csums: 1", "csums: '1' is not true or false" },
    { "csums: tRUE", "csums: 'tRUE' is not true or false" },
    { "csums: 'true'", "csums: expected true or false, got quoted 'true'" },
    { "csums: ~", "resync: csums: no value" },
    { "csums-alg: crc32c", "resync: unknown key 'csums-alg'" },
    { "rate: 100M", "resync: unknown key 'rate'" },
  };
  char text[256];
  size_t i;

  for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    snprintf (text, sizeof text, WITH_SECTION ("resync", "%s"), bad[i].entry);
    expect_error (3, text, bad[i].needle);
  }
  expect_error (2, "resource: r0\nresync: [1]\nnodes: []\n",
                "resync: expected a mapping, got a sequence");

  /* A fixed rate and the controller: both named, on the second line. */
  expect_error (4, WITH_SECTION2 ("resync", "resync-rate: 100M", "c-max-rate: 200M"),
                "resync: resync-rate 100M and c-max-rate 200M are both set",
                "not both");
  expect_error (4, WITH_SECTION2 ("resync", "c-min-rate: 1M", "resync-rate: 100M"),
                "resync-rate 100M and c-min-rate 1M are both set");
  expect_error (4, WITH_SECTION2 ("resync", "resync-rate: 0", "c-min-rate: 1M"),
                "resync-rate 0 and c-min-rate 1M are both set");
  /* The controller needs both of its rates. */
  expect_error (3, WITH_SECTION ("resync", "c-max-rate: 100M"),
                "resync: c-max-rate: 100M given without c-min-rate");
  expect_error (4, WITH_SECTION2 ("resync", "csums: true", "c-min-rate: 1M"),
                "resync: c-min-rate: 1M given without c-max-rate");
  /* c-min-rate <= c-max-rate, on c-min-rate's line. */
  expect_error (4, WITH_SECTION2 ("resync", "c-max-rate: 100M", "c-min-rate: 200M"),
                "resync: c-min-rate: 200M is greater than c-max-rate 100M");
  expect_error (3, WITH_SECTION2 ("resync", "c-min-rate: 1048577", "c-max-rate: 1M"),
                "c-min-rate: 1048577 is greater than c-max-rate 1M");
}
END_TEST

/* "metadata:" and "resync:" with every entry commented out are no
 * section at all. */
START_TEST (test_sections_empty)
{
  struct repl_config cfg;

  ck_assert_msg (load ("resource: r0\n"
                       "metadata:\n"
                       "  # al-extents: 7\n"
                       "resync: ~\n"
                       "nodes: [{name: alpha, id: 0, address: 'h:1', disk: d}]\n",
                       &cfg) == 0, "%s", err);
  ck_assert_uint_eq (cfg.cf_al_extents, 1024);
  ck_assert_uint_eq (cfg.cf_resync_rate, 0);
  ck_assert (!cfg.cf_csums);
  config_free (&cfg);
}
END_TEST

START_TEST (test_meta_values)
{
  struct repl_config cfg;
  char want[PATH_MAX + 64];

  /* Quoted "internal" is the word too; "./internal" is a file. */
  ck_assert_msg (load (TWO_DISKS ("a.img", "    meta: 'internal'\n",
                                  "b.img", "    meta: ./internal\n"), &cfg) == 0,
                 "%s", err);
  ck_assert_ptr_null (cfg.cf_nodes[0].nc_meta);
  ck_assert (cfg.cf_nodes[0].nc_meta_internal);
  ck_assert (!cfg.cf_nodes[0].nc_meta_default);
  snprintf (want, sizeof want, "%s/internal", tmpdir);
  ck_assert_str_eq (cfg.cf_nodes[1].nc_meta, want);
  ck_assert (!cfg.cf_nodes[1].nc_meta_internal);
  ck_assert (!cfg.cf_nodes[1].nc_meta_default);
  config_free (&cfg);

  /* Relative to the configuration file; absolute as is; a device. */
  ck_assert_msg (load (TWO_DISKS ("/dev/vg/r0", "    meta: /dev/vg/r0-md\n",
                                  "b.img", "    meta: md/b\n"), &cfg) == 0,
                 "%s", err);
  ck_assert_str_eq (cfg.cf_nodes[0].nc_meta, "/dev/vg/r0-md");
  snprintf (want, sizeof want, "%s/md/b", tmpdir);
  ck_assert_str_eq (cfg.cf_nodes[1].nc_meta, want);
  config_free (&cfg);

  /* Both nodes internal: nothing to collide. */
  ck_assert_msg (load (TWO_DISKS ("/dev/vg/r0", "    meta: internal\n",
                                  "/dev/vg/r0", "    meta: internal\n"), &cfg) == 0,
                 "%s", err);
  ck_assert (cfg.cf_nodes[0].nc_meta_internal && cfg.cf_nodes[1].nc_meta_internal);
  config_free (&cfg);
}
END_TEST

/* The usual multi-machine file, the same paths on every host: the same
 * disk path means different machines, so the metadata path may repeat,
 * given or by default. */
START_TEST (test_meta_same_disk)
{
  struct repl_config cfg;

  ck_assert_msg (load (TWO_DISKS ("/dev/vg/r0", "    meta: /dev/vg/r0-md\n",
                                  "/dev/vg/r0", "    meta: /dev/vg/r0-md\n"), &cfg) == 0,
                 "%s", err);
  ck_assert_str_eq (cfg.cf_nodes[0].nc_meta, "/dev/vg/r0-md");
  ck_assert_str_eq (cfg.cf_nodes[1].nc_meta, "/dev/vg/r0-md");
  config_free (&cfg);

  ck_assert_msg (load (TWO_DISKS ("/srv/r0.img", "", "/srv/r0.img", ""), &cfg) == 0,
                 "%s", err);
  ck_assert_str_eq (cfg.cf_nodes[0].nc_meta, "/srv/r0.img.meta");
  ck_assert_str_eq (cfg.cf_nodes[1].nc_meta, "/srv/r0.img.meta");
  config_free (&cfg);

  ck_assert_msg (load (TWO_DISKS ("/srv/r0.img", "",
                                  "/srv/r0.img", "    meta: /srv/r0.img.meta\n"),
                       &cfg) == 0, "%s", err);
  config_free (&cfg);
}
END_TEST

START_TEST (test_meta_bad)
{
  char want[PATH_MAX + 128];

  /* Empty, null, not a scalar, a NUL byte. */
  expect_error (7, ONE_NODE ("0", "h:1") "    meta: ''\n",
                "nodes[0] (alpha): meta: empty value");
  expect_error (7, ONE_NODE ("0", "h:1") "    meta:\n",
                "nodes[0] (alpha): meta: no value");
  expect_error (7, ONE_NODE ("0", "h:1") "    meta: [internal]\n",
                "nodes[0] (alpha): meta: expected a scalar, got a sequence");
  expect_error (7, ONE_NODE ("0", "h:1") "    meta: \"/m\\0x\"\n",
                "nodes[0] (alpha): meta:", "NUL");
  expect_error (8, ONE_NODE ("0", "h:1") "    meta: a\n    meta: b\n",
                "nodes[0] (alpha): duplicate key 'meta' (first at line 7)");
  expect_error (7, ONE_NODE ("0", "h:1") "    metadisk: internal\n",
                "nodes[0] (alpha): unknown key 'metadisk'");

  /* The node's own disk, written either way. */
  expect_error (7, ONE_NODE ("0", "h:1") "    meta: /dev/vg/r0\n",
                "nodes[0] (alpha): meta: '/dev/vg/r0' is the node's own disk");
  snprintf (want, sizeof want, "meta: '%s/a.img' is the node's own disk", tmpdir);
  expect_error (7, TWO_DISKS ("a.img", "    meta: ./a.img\n", "b.img", ""),
                "nodes[0] (alpha): ", want);

  /* Another node's disk: on the meta line, or (when the disk comes
   * second) on the disk line. */
  snprintf (want, sizeof want, "nodes[1] (beta): meta: '%s/a.img' is the disk of alpha",
            tmpdir);
  expect_error (11, TWO_DISKS ("a.img", "", "b.img", "    meta: a.img\n"), want);
  snprintf (want, sizeof want, "nodes[1] (beta): disk: '%s/m' is the metadata of alpha",
            tmpdir);
  expect_error (11, TWO_DISKS ("a.img", "    meta: m\n", "m", ""), want);
  /* alpha's default metadata is beta's disk. */
  snprintf (want, sizeof want,
            "nodes[1] (beta): disk: '%s/a.img.meta' is the default metadata of alpha",
            tmpdir);
  expect_error (10, TWO_DISKS ("a.img", "", "a.img.meta", ""), want);
  /* beta's default metadata is alpha's disk: on beta's entry line. */
  expect_error (7, TWO_DISKS ("/x.meta", "", "/x", ""),
                "nodes[1] (beta): meta: default '/x.meta' is the disk of alpha");

  /* Two nodes with different disks may not share a metadata path. */
  snprintf (want, sizeof want,
            "nodes[1] (beta): meta: duplicate %s/shared.meta, also used by alpha, "
            "whose disk is different", tmpdir);
  expect_error (12, TWO_DISKS ("a.img", "    meta: shared.meta\n",
                               "b.img", "    meta: ./shared.meta\n"), want);
  expect_error (8, TWO_DISKS ("a.img", "    meta: /srv/b.img.meta\n", "/srv/b.img", ""),
                "nodes[1] (beta): meta: default duplicate /srv/b.img.meta, also used by alpha");
  expect_error (12, TWO_DISKS ("/dev/sdb", "    meta: /dev/sdc1\n",
                               "/dev/sdc", "    meta: /dev/sdc1\n"),
                "meta: duplicate /dev/sdc1, also used by alpha");
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

/* metrics: off by default; host:port like address; never a node's
 * replication address, whichever of the two comes first. */
START_TEST (test_metrics)
{
  struct repl_config cfg;

  ck_assert_msg (load (TWO_NODES, &cfg) == 0, "%s", err);
  ck_assert_ptr_null (cfg.cf_nodes[0].nc_metrics);
  config_free (&cfg);

  ck_assert_msg (load (TWO_DISKS ("a.img", "    metrics: 127.0.0.1:9942\n",
                                  "b.img",
                                  "    metrics: '[::1]:9943'\n"), &cfg) == 0,
                 "%s", err);
  ck_assert_str_eq (cfg.cf_nodes[0].nc_metrics, "127.0.0.1:9942");
  ck_assert_str_eq (cfg.cf_nodes[0].nc_metrics_host, "127.0.0.1");
  ck_assert_str_eq (cfg.cf_nodes[0].nc_metrics_port, "9942");
  ck_assert_str_eq (cfg.cf_nodes[1].nc_metrics_host, "::1");
  config_free (&cfg);

  expect_error (7, ONE_NODE ("0", "h:1") "    metrics: h\n",
                "nodes[0] (alpha): metrics: 'h': no port");
  expect_error (7, ONE_NODE ("0", "h:1") "    metrics: 'h:0'\n",
                "nodes[0] (alpha): metrics: 'h:0': port out of range");
  expect_error (7, ONE_NODE ("0", "h:1") "    metrics: null\n",
                "nodes[0] (alpha): metrics: no value");
  expect_error (7, ONE_NODE ("0", "h:1") "    metrics: H:1\n",
                "nodes[0] (alpha): metrics: H:1 is the replication "
                "address of alpha");
  expect_error (11, TWO_DISKS ("a.img", "", "b.img", "    metrics: h:1\n"),
                "nodes[1] (beta): metrics: h:1 is the replication "
                "address of alpha");
  expect_error (10, TWO_DISKS ("a.img", "    metrics: h:2\n", "b.img", ""),
                "nodes[1] (beta): address: h:2 is the metrics address "
                "of alpha");
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
  tcase_add_test (tc, test_two_primaries);
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
  tcase_add_test (tc, test_load_buffer);
  tcase_add_test (tc, test_small_buffer);
  tcase_add_test (tc, test_names);
  tcase_add_test (tc, test_protocol);
  tcase_add_test (tc, test_ids);
  tcase_add_test (tc, test_net_values);
  tcase_add_test (tc, test_net_ping_order);
  tcase_add_test (tc, test_net_cork);
  tcase_add_test (tc, test_net_sockbuf);
  tcase_add_test (tc, test_metadata_values);
  tcase_add_test (tc, test_metadata_bad);
  tcase_add_test (tc, test_resync_values);
  tcase_add_test (tc, test_resync_bad);
  tcase_add_test (tc, test_sections_empty);
  tcase_add_test (tc, test_meta_values);
  tcase_add_test (tc, test_meta_same_disk);
  tcase_add_test (tc, test_meta_bad);
  tcase_add_test (tc, test_nodes_shape);
  tcase_add_test (tc, test_duplicates);
  tcase_add_test (tc, test_duplicate_address_normalised);
  tcase_add_test (tc, test_addresses);
  tcase_add_test (tc, test_control_too_long);
  tcase_add_test (tc, test_metrics);
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
