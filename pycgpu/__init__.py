"""pycgpu: drive the Linux gpu cgroup controller (GPU time shares, priority
and GPU memory limits) and wire it into container runtimes."""

__version__ = "0.1.0"
