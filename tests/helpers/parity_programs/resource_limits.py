# Every resource limit.
# expected output: 'unused'
import resource
# test
print([resource.getrlimit(getattr(resource, name)) for name in dir(resource) if name.startswith('RLIMIT_')])
