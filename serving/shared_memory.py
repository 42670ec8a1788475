"""System shared-memory regions (the KServe v2 / Triton extension): clients on the same host give
tensors as regions of POSIX shared memory instead of sending their bytes.

A client creates a shared-memory object (``tritonclient.utils.shared_memory``: ``shm_open(key)``,
so a file ``/dev/shm/<key>``), registers ``byte_size`` bytes of it from ``offset`` under a
``name``, then names the region, an offset in it and a byte size in an input's or requested
output's parameters (``shared_memory_region``, ``shared_memory_offset``,
``shared_memory_byte_size``). Inputs are read from the region, outputs written into it.

Everything is checked: names, keys (one path component under /dev/shm, opened without following
symbolic links, a regular file), that the registered span lies within the object, and that each
use lies within the registered span; a bad one is an ``InvalidRequest`` naming the region.
Regions are unmapped on unregister and when the server stops.
"""

from __future__ import annotations

import mmap
import os
import re
import stat
import threading
from dataclasses import dataclass

from serving.errors import InvalidRequest, shown

SHM_DIR = "/dev/shm"
_KEY = re.compile(r"^/?[A-Za-z0-9_.\-]{1,255}$")
_REGION_NAME = re.compile(r"^[A-Za-z0-9_.\-]{1,128}$")


@dataclass
class Region:
    name: str
    key: str
    offset: int
    byte_size: int
    mapping: mmap.mmap

    def status(self) -> dict:
        return {"name": self.name, "key": self.key, "offset": self.offset, "byte_size": self.byte_size}


class SharedMemoryRegistry:
    """The registered regions of one server; thread-safe."""

    def __init__(self) -> None:
        self._regions: dict[str, Region] = {}
        self._lock = threading.Lock()

    def register(self, name: str, key: str, offset: int, byte_size: int) -> None:
        if not isinstance(name, str) or not _REGION_NAME.match(name):
            raise InvalidRequest(f"invalid shared-memory region name {shown(name)}: use 1-128 letters, digits, '_', '.', '-'")
        if not isinstance(key, str) or not _KEY.match(key) or key.strip("/") in (".", ".."):
            raise InvalidRequest(f"region {name!r}: invalid shared-memory key {shown(key)}: one name under {SHM_DIR}, like '/input0'")
        for what, value in (("offset", offset), ("byte_size", byte_size)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidRequest(f"region {name!r}: {what} must be a non-negative integer, got {shown(value)}")
        if byte_size == 0:
            raise InvalidRequest(f"region {name!r}: byte_size must be at least 1")
        with self._lock:
            if name in self._regions:
                raise InvalidRequest(f"shared-memory region {name!r} is already registered; unregister it first")
            path = os.path.join(SHM_DIR, key.lstrip("/"))
            try:
                fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
            except OSError as exc:
                raise InvalidRequest(f"region {name!r}: cannot open shared-memory key {key!r}: {exc.strerror}") from None
            try:
                info = os.fstat(fd)
                if not stat.S_ISREG(info.st_mode):
                    raise InvalidRequest(f"region {name!r}: shared-memory key {key!r} is not a shared-memory object")
                if offset + byte_size > info.st_size:
                    raise InvalidRequest(f"region {name!r}: offset {offset} + byte_size {byte_size} runs past the end of "
                                         f"shared-memory key {key!r} ({info.st_size} bytes)")
                mapping = mmap.mmap(fd, info.st_size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            finally:
                os.close(fd)
            self._regions[name] = Region(name, key, offset, byte_size, mapping)

    def unregister(self, name: str = "") -> None:
        """Unregister ``name``, or every region for ""; a name not registered is no error (as Triton)."""
        with self._lock:
            names = list(self._regions) if not name else [name] if name in self._regions else []
            regions = [self._regions.pop(n) for n in names]
        for region in regions:
            _close(region.mapping)

    def status(self, name: str = "") -> list[dict]:
        with self._lock:
            if name and name not in self._regions:
                raise InvalidRequest(f"shared-memory region {shown(name)} is not registered")
            return [r.status() for n, r in sorted(self._regions.items()) if not name or n == name]

    def close(self) -> None:
        self.unregister("")

    def _span(self, name: str, offset: int, byte_size: int, tensor: str) -> tuple[Region, int]:
        if not isinstance(name, str):
            raise InvalidRequest(f"tensor {shown(tensor)}: shared_memory_region must be a string")
        region = self._regions.get(name)
        if region is None:
            raise InvalidRequest(f"tensor {shown(tensor)}: shared-memory region {shown(name)} is not registered")
        for what, value in (("shared_memory_offset", offset), ("shared_memory_byte_size", byte_size)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidRequest(f"tensor {shown(tensor)}: {what} must be a non-negative integer, got {shown(value)}")
        if offset + byte_size > region.byte_size:
            raise InvalidRequest(f"tensor {shown(tensor)}: offset {offset} + byte size {byte_size} runs past the end of "
                                 f"shared-memory region {name!r} ({region.byte_size} bytes)")
        return region, region.offset + offset

    def read(self, name: str, offset: int, byte_size: int, tensor: str) -> bytes:
        """A copy of ``byte_size`` bytes at ``offset`` of region ``name`` (copied: the client may
        rewrite the region once it has its answer, while the request's arrays live on)."""
        with self._lock:
            region, start = self._span(name, offset, byte_size, tensor)
            return region.mapping[start : start + byte_size]

    def check_output(self, name: str, offset: int, byte_size: int, tensor: str) -> None:
        with self._lock:
            self._span(name, offset, byte_size, tensor)

    def write(self, name: str, offset: int, byte_size: int, tensor: str, data: bytes) -> None:
        with self._lock:
            region, start = self._span(name, offset, byte_size, tensor)
            if len(data) > byte_size:
                raise InvalidRequest(f"output {shown(tensor)} is {len(data)} bytes, more than the {byte_size} bytes given "
                                     f"in shared-memory region {name!r}")
            region.mapping[start : start + len(data)] = data


def _close(mapping: mmap.mmap) -> None:
    try:
        mapping.close()
    except BufferError:  # a view of it is still alive: unmapped when that goes
        pass


@dataclass(frozen=True)
class RegionRef:
    """Where a tensor's bytes are, or go: a span of a registered region."""

    region: str
    offset: int
    byte_size: int


def region_ref(tensor: str, parameters: dict) -> RegionRef | None:
    """The span a tensor's parameters name (``shared_memory_region``, ``shared_memory_offset``,
    ``shared_memory_byte_size``), or None where they name no region."""
    region = parameters.get("shared_memory_region")
    if region is None:
        return None
    size = parameters.get("shared_memory_byte_size")
    if size is None:
        raise InvalidRequest(f"tensor {shown(tensor)}: shared_memory_region needs shared_memory_byte_size")
    offset = parameters.get("shared_memory_offset", 0)
    for what, value in (("shared_memory_offset", offset), ("shared_memory_byte_size", size)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InvalidRequest(f"tensor {shown(tensor)}: {what} must be a non-negative integer, got {shown(value)}")
    if not isinstance(region, str):
        raise InvalidRequest(f"tensor {shown(tensor)}: shared_memory_region must be a string, got {shown(region)}")
    return RegionRef(region, offset, size)
