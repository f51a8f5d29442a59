/* nbdrepl: big-endian fields of the wire format and the metadata.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 */
#ifndef NBDREPL_BYTE_ORDER_H
#define NBDREPL_BYTE_ORDER_H

#include <stdint.h>

static inline void
put_be16 (uint8_t *p, uint16_t v)
{
  p[0] = v >> 8;
  p[1] = v;
}

static inline void
put_be32 (uint8_t *p, uint32_t v)
{
  p[0] = v >> 24;
  p[1] = v >> 16;
  p[2] = v >> 8;
  p[3] = v;
}

static inline void
put_be64 (uint8_t *p, uint64_t v)
{
  put_be32 (p, v >> 32);
  put_be32 (p + 4, v);
}

static inline uint16_t
get_be16 (const uint8_t *p)
{
  return (uint16_t) (p[0] << 8 | p[1]);
}

static inline uint32_t
get_be32 (const uint8_t *p)
{
  return (uint32_t) p[0] << 24 | (uint32_t) p[1] << 16 |
         (uint32_t) p[2] << 8 | (uint32_t) p[3];
}

static inline uint64_t
get_be64 (const uint8_t *p)
{
  return (uint64_t) get_be32 (p) << 32 | get_be32 (p + 4);
}

#endif /* NBDREPL_BYTE_ORDER_H */
