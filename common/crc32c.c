/* nbdrepl: CRC-32C (Castagnoli).
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * Software: slicing-by-8, eight 256-entry tables built by a constructor
 * (so that no thread ever sees them half built).  Hardware: on x86-64
 * with SSE4.2, the crc32 instruction, 8 bytes at a time; chosen once,
 * in the same constructor, with __builtin_cpu_supports.
 */
#include <config.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "crc32c.h"

#define CRC32C_POLY UINT32_C (0x82F63B78)   /* reflected 0x1EDC6F41 */

static uint32_t crc32c_table[8][256];
static bool crc32c_use_hw;

static void crc32c_init (void) __attribute__ ((constructor));

static void
crc32c_init (void)
{
  unsigned i, j, k;

  for (i = 0; i < 256; ++i) {
    uint32_t c = i;

    for (k = 0; k < 8; ++k)
      c = c & 1 ? (c >> 1) ^ CRC32C_POLY : c >> 1;
    crc32c_table[0][i] = c;
  }
  for (i = 0; i < 256; ++i)
    for (j = 1; j < 8; ++j)
      crc32c_table[j][i] = (crc32c_table[j - 1][i] >> 8) ^
                           crc32c_table[0][crc32c_table[j - 1][i] & 0xff];

#if defined (__x86_64__)
  __builtin_cpu_init ();
  crc32c_use_hw = __builtin_cpu_supports ("sse4.2");
#endif
}

/* Little-endian load, whatever the alignment (memcpy compiles to one
 * mov on x86). */
static inline uint64_t
crc32c_load64 (const uint8_t *p)
{
  uint64_t v;

  memcpy (&v, p, sizeof v);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  v = __builtin_bswap64 (v);
#endif
  return v;
}

uint32_t
crc32c_sw (uint32_t crc, const void *buf, size_t len)
{
  const uint8_t *p = buf;

  crc = ~crc;
  while (len >= 8) {
    uint64_t v = crc32c_load64 (p) ^ crc;

    crc = crc32c_table[7][v & 0xff] ^
          crc32c_table[6][(v >> 8) & 0xff] ^
          crc32c_table[5][(v >> 16) & 0xff] ^
          crc32c_table[4][(v >> 24) & 0xff] ^
          crc32c_table[3][(v >> 32) & 0xff] ^
          crc32c_table[2][(v >> 40) & 0xff] ^
          crc32c_table[1][(v >> 48) & 0xff] ^
          crc32c_table[0][v >> 56];
    p += 8;
    len -= 8;
  }
  while (len-- > 0)
    crc = (crc >> 8) ^ crc32c_table[0][(crc ^ *p++) & 0xff];
  return ~crc;
}

#if defined (__x86_64__)
static uint32_t __attribute__ ((target ("sse4.2")))
crc32c_hw (uint32_t crc, const void *buf, size_t len)
{
  const uint8_t *p = buf;
  uint64_t c = ~crc;

  while (len >= 8) {
    c = __builtin_ia32_crc32di (c, crc32c_load64 (p));
    p += 8;
    len -= 8;
  }
  while (len-- > 0)
    c = __builtin_ia32_crc32qi ((uint32_t) c, *p++);
  return ~(uint32_t) c;
}
#endif

uint32_t
crc32c (uint32_t crc, const void *buf, size_t len)
{
#if defined (__x86_64__)
  if (crc32c_use_hw)
    return crc32c_hw (crc, buf, len);
#endif
  return crc32c_sw (crc, buf, len);
}
