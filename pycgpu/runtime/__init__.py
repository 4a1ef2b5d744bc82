"""The container-runtime layer: what runs when a container starts. OCI
configs and their createRuntime hook, CDI specs, the ``pycgpu.io/*``
annotations and the node's allow-list of them, the image check, and the
bookkeeping the hook keeps in the cgroup tree for Kubernetes pods
(:mod:`.kubepods`: pod weight sums, the share IDs the exporter labels by).
Built on :mod:`pycgpu.core` only; :mod:`pycgpu.k8s` (the kubelet's APIs)
is built on it."""
