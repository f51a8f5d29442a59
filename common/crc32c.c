/* nbdrepl: crc32c (placeholder, being written). */
