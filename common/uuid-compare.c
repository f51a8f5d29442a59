/* nbdrepl: uuid-compare (placeholder, being written). */
