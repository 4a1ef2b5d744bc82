"""Where the device plugin learns which render nodes exist, and when that
changes: udev events on the ``drm`` subsystem (pyudev), or polling sysfs
(any host, the fake trees of the tests, a container without the netlink
socket). A watcher only says "something may have changed"; the plugin
rediscovers and compares."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ..core.devices import Device

Changed = Callable[[], None]
Log = Callable[[str], None]


class DeviceSource(Protocol):
    def devices(self) -> list[Device]:
        """The render nodes now, in order."""
        ...

    def watch(self, changed: Changed, stop: threading.Event) -> None:
        """Call @changed when the set may have changed; return once @stop is set."""
        ...


class PollSource:
    """Rediscover every @interval seconds."""

    def __init__(self, sysfs_root: Path = Path("/sys"), dev_root: Path = Path("/dev"),
                 interval: float = 5.0) -> None:
        self.sysfs_root, self.dev_root, self.interval = sysfs_root, dev_root, interval

    def devices(self) -> list[Device]:
        from ..core.devices import discover

        return discover(self.sysfs_root, self.dev_root)

    def watch(self, changed: Changed, stop: threading.Event) -> None:
        while not stop.wait(self.interval):
            changed()


class UdevSource(PollSource):
    """udev ``drm`` events, with a rediscovery every @interval seconds as
    well (a missed event heals); polling only when udev cannot be watched."""

    def __init__(self, log: Log, interval: float = 30.0) -> None:
        super().__init__(interval=interval)
        self.log = log

    def watch(self, changed: Changed, stop: threading.Event) -> None:
        try:
            import pyudev

            monitor = pyudev.Monitor.from_netlink(pyudev.Context())
            monitor.filter_by(subsystem="drm")
            monitor.start()
        except Exception as e:  # no libudev, no netlink socket in this namespace
            self.log(f"cannot watch udev ({e}); polling /sys/class/drm every "
                     f"{self.interval:g}s instead")
            super().watch(changed, stop)
            return
        idle = 0.0
        while not stop.is_set():
            event = monitor.poll(timeout=1.0)
            if event is not None and (event.device_node or "").startswith("/dev/dri/renderD"):
                changed()
                idle = 0.0
                continue
            idle += 1.0
            if idle >= self.interval:
                changed()
                idle = 0.0


class StaticSource:
    """A list set by hand (tests): set() replaces it and reports a change."""

    def __init__(self, devices: list[Device] | None = None) -> None:
        self._devices = list(devices or [])
        self._lock = threading.Lock()
        self._changed: list[Changed] = []

    def devices(self) -> list[Device]:
        with self._lock:
            return list(self._devices)

    def set(self, devices: list[Device]) -> None:
        with self._lock:
            self._devices = list(devices)
            callbacks = list(self._changed)
        for cb in callbacks:
            cb()

    def watch(self, changed: Changed, stop: threading.Event) -> None:
        with self._lock:
            self._changed.append(changed)
        stop.wait()
        with self._lock:
            self._changed.remove(changed)
