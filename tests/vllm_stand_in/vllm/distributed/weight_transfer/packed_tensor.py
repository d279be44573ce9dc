"""STAND-IN (not vLLM): the trainer side of the NCCL weight broadcast. With no group (CPU, no CUDA) it only walks
the weights TRL hands it, as the real producer does, and sends them nowhere: the HTTP requests around it are what
the test checks."""


def packed_nccl_broadcast_producer(iterator, group, src, post_iter_func):
    for item in iterator:
        post_iter_func(item)
