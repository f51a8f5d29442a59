/* nbdrepl: placeholder for the metadata unit tests, being written; skipped. */
int main (void) { return 77; }
