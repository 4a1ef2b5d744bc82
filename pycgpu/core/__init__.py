"""The core layer: the gpu controller's files and the cgroup tree (read,
plan, write all or none), the devices they are keyed by, and the formats of
both. It imports nothing from the other layers (runtime, k8s, monitoring,
cli); they are built on it."""
