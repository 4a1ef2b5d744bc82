"""The kubelet's gRPC APIs that pycgpu speaks: the device plugin API
(``deviceplugin_v1beta1.proto``: Registration, DevicePlugin) and the
PodResources API (``podresources_v1.proto``: PodResourcesLister.List).

Their Python stubs (``NAME_pb2``, ``NAME_pb2_grpc``) are generated from the
.proto files when the package is built (setup.py), into this package; they
are imported from here only, never generated or looked up at run time.
grpcio and protobuf come with the ``k8s`` extra (``pip install
'pycgpu[k8s]'``): :func:`load` says so when they are missing.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType

from ...core.errors import Error

DEVICE_PLUGIN = "deviceplugin_v1beta1"
POD_RESOURCES = "podresources_v1"
EXTRA = "pip install 'pycgpu[k8s]'"


class ApiUnavailable(Error, RuntimeError):
    """grpcio/protobuf are not installed, or the package was built without
    its generated stubs."""


@dataclass(frozen=True)
class Api:
    """The generated messages (``pb2``) and services (``grpc``) of one .proto."""

    pb2: ModuleType
    grpc: ModuleType


def load(stem: str) -> Api:
    """The stubs of ``STEM.proto`` (:data:`DEVICE_PLUGIN`, :data:`POD_RESOURCES`)."""
    for dist in ("grpc", "google.protobuf"):
        try:
            importlib.import_module(dist)
        except ImportError as e:
            raise ApiUnavailable(f"the Kubernetes parts of pycgpu need grpcio and protobuf "
                                 f"({e}; fix: {EXTRA})") from None
    try:
        pb2 = importlib.import_module(f"{__name__}.{stem}_pb2")
        grpc_mod = importlib.import_module(f"{__name__}.{stem}_pb2_grpc")
    except ModuleNotFoundError as e:
        raise ApiUnavailable(f"the generated gRPC stubs {__name__}.{stem}_pb2* are missing "
                             f"({e}): pycgpu generates them when it is built; reinstall it "
                             f"({EXTRA}, or pip install -e '.[k8s]' in a checkout)") from None
    except Exception as e:  # protobuf's gencode/runtime version check, grpcio too old
        raise ApiUnavailable(f"the generated gRPC stubs {__name__}.{stem}_pb2* do not load: "
                             f"{e}") from None
    return Api(pb2, grpc_mod)
