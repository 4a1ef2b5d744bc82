"""pycgpu: drive the Linux gpu cgroup controller (GPU time shares, priority
and GPU memory limits) and wire it into container runtimes.

The library is layered (docs/library.md): :mod:`pycgpu.core` (the cgroup
tree, knobs, devices, the model of a group's gpu.* files),
:mod:`pycgpu.runtime` (OCI configs, the hook, CDI), :mod:`pycgpu.k8s`,
:mod:`pycgpu.monitoring` and :mod:`pycgpu.cli`. Every error the library
raises derives from :class:`Error`."""

from .core.errors import Error

__version__ = "0.1.0"
__all__ = ["Error", "__version__"]
