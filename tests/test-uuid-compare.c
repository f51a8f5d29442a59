/* nbdrepl: placeholder for the uuid-compare unit tests, being written; skipped. */
int main (void) { return 77; }
