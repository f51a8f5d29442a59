/* nbdrepl: uuid-compare (placeholder). */
