"""The container-runtime layer: OCI configs and their createRuntime hook,
CDI specs, the ``pycgpu.io/*`` annotations and the node's allow-list of
them, and the image check. Built on :mod:`pycgpu.core` only."""
