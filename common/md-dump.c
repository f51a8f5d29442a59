/* nbdrepl: `replctl dump-md` — the metadata described for people.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 */
#include <config.h>

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <string.h>

#include "bitmap.h"
#include "metadata.h"

/* "1.5 GiB", for people. */
static const char *
md_human (uint64_t bytes, char *buf, size_t len)
{
  static const char *const units[] = { "KiB", "MiB", "GiB", "TiB", "PiB",
                                       "EiB" };
  double v = bytes;
  unsigned u = 0;

  if (bytes < 1024) {
    snprintf (buf, len, "%" PRIu64 " B", bytes);
    return buf;
  }
  v /= 1024;
  while (v >= 1024 && u + 1 < sizeof units / sizeof units[0]) {
    v /= 1024;
    u++;
  }
  snprintf (buf, len, "%.1f %s", v, units[u]);
  return buf;
}

static void
md_dump_flags (FILE *fp, uint32_t flags)
{
  static const struct { uint32_t f; const char *name; } names[] = {
    { MD_FLAG_CONSISTENT, "consistent" },
    { MD_FLAG_WAS_UPTODATE, "was-uptodate" },
    { MD_FLAG_PRIMARY, "primary" },
    { MD_FLAG_CRASHED_PRIMARY, "crashed-primary" },
    { MD_FLAG_CLEAN, "clean" },
    { MD_FLAG_TENTATIVE, "tentative" },
  };
  size_t i;
  bool any = false;

  for (i = 0; i < sizeof names / sizeof names[0]; ++i)
    if (flags & names[i].f) {
      fprintf (fp, "%s%s", any ? " " : "", names[i].name);
      any = true;
    }
  if (!any)
    fprintf (fp, "none");
}

int
md_dump (struct md *md, FILE *fp, char *err, size_t errlen)
{
  const struct md_super *sb = &md->md_super;
  const struct md_geometry *g = &sb->ms_geom;
  const struct md_layout *l = &md->md_layout;
  char h1[32], h2[32];
  uint32_t i, nactive = 0;

  assert (md->md_magic == MD_HANDLE_MAGIC);
  fprintf (fp, "format: nbdrepl metadata version %d, %s at offset %" PRIu64
           "\n", g->mg_bm_offset != 0 ? MD_FORMAT_VERSION_MOVED
                                      : MD_FORMAT_VERSION,
           md_human (l->ml_total, h1, sizeof h1), md->md_base);
  fprintf (fp, "instance: 0x%016" PRIx64 "\n", sb->ms_instance);
  fprintf (fp, "superblock: slot %c, seq %" PRIu64, "AB"[md->md_super_slot],
           sb->ms_seq);
  if (md->md_other_seq != 0)
    fprintf (fp, " (slot %c: seq %" PRIu64 ")\n",
             "AB"[!md->md_super_slot], md->md_other_seq);
  else
    fprintf (fp, " (slot %c: %s)\n", "AB"[!md->md_super_slot],
             md->md_other_why);
  fprintf (fp, "node-id: %" PRIu32 "\n", sb->ms_node_id);
  fprintf (fp, "size: %" PRIu64 " (%s)\n", g->mg_size,
           md_human (g->mg_size, h1, sizeof h1));
  fprintf (fp, "flags: ");
  md_dump_flags (fp, sb->ms_flags);
  fprintf (fp, "\n");
  fprintf (fp, "current-uuid: 0x%016" PRIx64 "\n", sb->ms_current_uuid);
  fprintf (fp, "history-uuids:");
  for (i = 0; i < MD_UUID_HISTORY; ++i)
    fprintf (fp, " 0x%016" PRIx64, sb->ms_history_uuid[i]);
  fprintf (fp, "\n");
  fprintf (fp, "primary-since: ");
  if (sb->ms_primary_since == 0)
    fprintf (fp, "never\n");
  else {
    time_t t = sb->ms_primary_since / 1000;
    struct tm tm;
    char when[64];

    gmtime_r (&t, &tm);
    strftime (when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    fprintf (fp, "%s (%" PRIu64 " ms since the epoch)\n", when,
             sb->ms_primary_since);
  }
  fprintf (fp, "bitmap-granularity: %" PRIu32 "\n", g->mg_granularity);
  fprintf (fp, "activity-log: %" PRIu32 " extents of %s (%s), ring of %"
           PRIu32 " transactions of %" PRIu32 " bytes\n",
           g->mg_al_extents, md_human (g->mg_al_extent_size, h1, sizeof h1),
           md_human ((uint64_t) g->mg_al_extents * g->mg_al_extent_size,
                     h2, sizeof h2),
           g->mg_al_ring, l->ml_txn_size);
  for (i = 0; i < g->mg_al_extents; ++i)
    nactive += md->md_al_table[i] != MD_AL_EMPTY;
  fprintf (fp, "activity-log-transaction: seq %" PRIu64 " in ring slot %"
           PRIu32 " (%" PRIu32 " of %" PRIu32 " slots valid), %" PRIu32
           " active extents\n", md->md_al_seq, md->md_al_slot,
           md->md_al_valid, g->mg_al_ring, nactive);
  if (nactive > 0) {
    uint32_t shown = 0;

    fprintf (fp, "active-extents:");
    for (i = 0; i < g->mg_al_extents; ++i) {
      if (md->md_al_table[i] == MD_AL_EMPTY)
        continue;
      if (shown++ == 64) {
        fprintf (fp, " ... (%" PRIu32 " more)", nactive - 64);
        break;
      }
      fprintf (fp, " %" PRIu32, md->md_al_table[i]);
    }
    fprintf (fp, "\n");
  }

  fprintf (fp, "peer-slots: %" PRIu32 " (bitmaps of %" PRIu64 " pages",
           g->mg_npeers, l->ml_bm_pages);
  if (g->mg_bm_offset != 0)     /* the volume grew: they moved */
    fprintf (fp, ", at offset %" PRIu64, g->mg_bm_offset);
  fprintf (fp, ")\n");
  for (i = 0; i < g->mg_npeers; ++i) {
    const struct md_peer *pr = &sb->ms_peers[i];
    struct bitmap bm;
    uint64_t nbad;

    if (pr->mp_node_id == MD_NO_PEER) {
      fprintf (fp, "  slot %" PRIu32 ": free\n", i);
      continue;
    }
    if (bitmap_init (&bm, g->mg_size, g->mg_granularity) == -1) {
      int e = errno;
      snprintf (err, errlen, "bitmap_init: %s", strerror (e));
      errno = e;
      return -1;
    }
    if (md_read_bitmap (md, i, &bm, 0, l->ml_bm_pages, &nbad,
                        err, errlen) == -1) {
      bitmap_free (&bm);
      return -1;
    }
    fprintf (fp, "  slot %" PRIu32 ": node-id %" PRIu32 " bitmap-uuid 0x%016"
             PRIx64 " flags %s out-of-sync %" PRIu64 " (%s)",
             i, pr->mp_node_id, pr->mp_bitmap_uuid,
             pr->mp_flags & MD_PEER_OUTDATED ? "outdated" : "none",
             bitmap_dirty_bytes (&bm),
             md_human (bitmap_dirty_bytes (&bm), h1, sizeof h1));
    if (nbad > 0)
      fprintf (fp, " damaged-pages %" PRIu64 " (read as all dirty)", nbad);
    fprintf (fp, "\n");
    bitmap_free (&bm);
  }
  return 0;
}
