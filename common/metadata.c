/* nbdrepl: metadata (placeholder, being written). */
