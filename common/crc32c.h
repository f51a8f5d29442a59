/* nbdrepl: crc32c (placeholder). */
