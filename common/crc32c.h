/* nbdrepl: CRC-32C (Castagnoli), the checksum of every metadata record.
 * Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
 *
 * The reflected polynomial 0x82F63B78 with the usual pre- and post-
 * inversion, as in iSCSI (RFC 3720), ext4 and btrfs:
 * crc32c (0, "123456789", 9) == 0xE3069283.  The value is chained like
 * zlib's crc32: crc32c (crc32c (0, a, la), b, lb) is the checksum of a
 * followed by b.  Thread-safe: the tables are built before main.
 */
#ifndef NBDREPL_CRC32C_H
#define NBDREPL_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* The checksum of buf[0..len), continuing from crc (0 to start).  Uses
 * the SSE4.2 crc32 instruction when the CPU has it. */
extern uint32_t crc32c (uint32_t crc, const void *buf, size_t len);

/* The same, always in software (slicing-by-8).  For the unit tests,
 * which check that both agree. */
extern uint32_t crc32c_sw (uint32_t crc, const void *buf, size_t len);

#endif /* NBDREPL_CRC32C_H */
