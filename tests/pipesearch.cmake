# The pipeline search (search/pipeline.c) against brute force over the same
# space, forced stages and micro-batches, S = M = 1 against the plain DP.
sb_unit_test(test_pipesearch test_pipesearch.c)
