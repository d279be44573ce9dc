"""Loading and validation: every supported source read into `Problem` records, each raw record checked with a
``file:line`` message when it is wrong, and the source's own comparisons turned into printed ones."""
