"""Kubernetes: a kubelet device plugin that advertises each GPU as shares
(``pycgpu.io/gpu-share``) and answers Allocate with the CDI device and the
``pycgpu.io/gpu.*`` annotations that pycgpu's createRuntime hook applies.

:mod:`.shares` is the share arithmetic (no gRPC), :mod:`.sources` the
render-node watchers, :mod:`.plugin` the gRPC side, :mod:`.proto` the stubs
generated from ``deviceplugin_v1beta1.proto``. grpc is imported by
:mod:`.plugin` only.
"""
