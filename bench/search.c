/* bench/search.c: search-time benchmark (being written next). */
#include <stdio.h>
int main(void) { fprintf(stderr, "bench/search: not built yet\n"); return 1; }
