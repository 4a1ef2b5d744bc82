"""Kubernetes: a kubelet device plugin that advertises each GPU as shares
(``pycgpu.io/gpu-share``) and answers Allocate with the CDI device and the
``pycgpu.io/gpu.*`` annotations that pycgpu's createRuntime hook applies.

:mod:`.shares` is the share arithmetic (no gRPC), :mod:`.sources` the
render-node watchers, :mod:`.plugin` the gRPC side, :mod:`.api` the stubs
of the kubelet's APIs, generated when the package is built. grpc (the
``k8s`` extra) is imported by :mod:`.plugin` and :mod:`.podresources` only,
when they are used.
"""
