/* nbdrepl: activity log (placeholder, being written). */
