# __main__ as the interpreter makes it: its names (``__annotations__``),
# a SourceFileLoader.
# expected output: 'unused'
# test
print(list(globals()), type(__loader__).__name__, __loader__.name, __loader__.path)
