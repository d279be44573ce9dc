"""Test quality: what a program that does not solve a problem earns on its tests (trivial shares, cheap and
nearby wrong programs, mutants, the inputs of other classes), each problem's domain, and `verify`, which reports it;
q problems are checked here through their Python twins."""
