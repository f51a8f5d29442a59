/* nbdrepl: metadata (placeholder). */
