bench_learners: gnuplot failed: line 0: warning: Skipping data file with no valid points

gnuplot> plot '/tmp/bls/learners.dat' using 2:xtic(1) title 'steps/s' lc rgb '#4477aa'
                                                                                      ^
         line 0: x range is invalid
Measured by `bench/bench_learners.py` (3 rounds of 2 s; load average 1.3 at the start, 1.3 at the end; 2 CPUs).

| case | steps/s (median) | CPU ms per M steps | ratio | against | target | met |
|---|---|---|---|---|---|---|

