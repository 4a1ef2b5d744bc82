"""The pycgpu subcommands, one module per command family; pycgpu.cli
assembles them into the ``pycgpu`` group."""
