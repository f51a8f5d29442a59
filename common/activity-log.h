/* nbdrepl: activity log (placeholder). */
