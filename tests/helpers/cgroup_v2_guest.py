"""A cgroup v2-only Linux guest under qemu, for testing the judge's cgroup code on a real v2 kernel on a host that
runs cgroup v1 (this machine) or none.

The guest is Debian's own kernel (the package ``linux-image-amd64`` depends on, fetched with ``apt-get download``)
and a busybox initramfs. The kernel's ``vmlinuz`` is decompressed to an ELF ``vmlinux``, which qemu boots through
its PVH entry (a few seconds faster than the bzImage's real-mode start under TCG). The initramfs loads the 9p,
virtio and overlay modules, mounts the host's ``/`` read-only over 9p under a tmpfs overlay and ``switch_root``s
into it (bwrap cannot make namespaces under a plain ``chroot``), with a fresh ``/proc``, ``/sys``, ``/dev``,
``/tmp`` and ``/run``, and cgroup2 alone at ``/sys/fs/cgroup`` mounted ``nsdelegate`` as systemd mounts it. So the
guest runs the host's own Python, packages and checkout, and the host's files cannot be changed from inside.

``run_in_guest(script)`` boots it, runs ``script`` (sh) as root in the host's current folder, and returns its exit
code and output; files the script writes under ``$GUEST_OUT`` are in the returned folder. qemu runs in TCG
(software emulation: ``/dev/kvm`` may be absent or, as on this machine, run only its own kind of guest), so a
guest is slow: about 5 s to boot, Python a few times slower than on the host.

The kernel and initramfs are built once into ``~/.cache/q-grpo-tests/cgroup-v2-guest-<kernel package>/``.
``scripts/install.sh --cgroup-v2-guest`` installs the Debian packages it needs (qemu-system-x86, busybox-static).
"""

from __future__ import annotations

import gzip
import io
import lzma
import os
import platform
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "q-grpo-tests"
PACKAGES = {"qemu-system-x86_64": "qemu-system-x86", "busybox": "busybox-static"}
# The kernel modules the guest needs (what they depend on is loaded first): virtio over PCI, 9p over virtio,
# overlayfs.
MODULES = ("virtio_pci", "9pnet_virtio", "9p", "overlay")
GUEST_MEMORY_MB = 3072
GUEST_CPUS = 2
INIT = r"""#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
for module in $(cat /modules); do insmod "/modules.d/$module.ko" || echo "init: insmod $module failed"; done
mkdir -p /host /rw /new
mount -t 9p -o trans=virtio,version=9p2000.L,ro,cache=loose,msize=512000 host /host || echo "init: no host share"
mount -t tmpfs -o size=1g rw /rw
mkdir -p /rw/upper /rw/work
mount -t overlay -o lowerdir=/host,upperdir=/rw/upper,workdir=/rw/work overlay /new || echo "init: no overlay"
mkdir -p /new/guest-out
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 out /new/guest-out || echo "init: no out share"
mount --move /proc /new/proc
mount --move /sys /new/sys
mount --move /dev /new/dev
mount -t cgroup2 -o nsdelegate cgroup2 /new/sys/fs/cgroup
mkdir -p /new/dev/pts /new/dev/shm
mount -t devpts devpts /new/dev/pts
mount -t tmpfs tmpfs /new/dev/shm
mount -t tmpfs tmpfs /new/tmp
mount -t tmpfs tmpfs /new/run
cp /stage2 /new/run/stage2
exec switch_root /new /bin/sh /run/stage2
"""
# Runs in the switched root: the script from the out share, its output and exit code back there, then power off.
STAGE2 = r"""
export PATH="$(cat /guest-out/path)" HOME=/root LANG=C.UTF-8
cd "$(cat /guest-out/cwd)"
ip link set lo up 2>/dev/null
/bin/sh /guest-out/script > /guest-out/output 2>&1
echo $? > /guest-out/rc
sync
echo o > /proc/sysrq-trigger
sleep 10
"""

# The guest's /tmp and /run are its own: a current folder under them (a checkout in /tmp) comes in over a share of
# its own, read-only, at the same path.
CWD_SHARE = r"""cwd="$(cat /guest-out/cwd)"
if [ ! -d "$cwd" ]; then
  mkdir -p "$cwd" && mount -t 9p -o trans=virtio,version=9p2000.L,ro,cache=loose,msize=512000 cwd "$cwd" && cd "$cwd"
fi
"""


class GuestUnavailable(RuntimeError):
    """The guest cannot be built or booted here; the message says why (a test skips with it)."""


def missing_packages() -> list[str]:
    return [package for command, package in PACKAGES.items() if shutil.which(command) is None]


def kernel_package() -> str:
    """The versioned kernel package that Debian's ``linux-image-amd64`` depends on."""
    try:
        shown = subprocess.run(
            ["apt-cache", "depends", "linux-image-amd64"], capture_output=True, text=True, check=True, timeout=60
        ).stdout
    except (OSError, subprocess.SubprocessError) as error:
        raise GuestUnavailable(f"apt-cache cannot name the kernel package: {error}") from None
    found = re.search(r"Depends: (linux-image-\S+)", shown)
    if not found:
        raise GuestUnavailable(f"apt-cache depends linux-image-amd64 names no kernel: {shown.strip()!r}")
    return found.group(1)


def vmlinux_from(vmlinuz: bytes) -> bytes:
    """The ELF kernel inside a bzImage: the first xz (Debian's) or gzip stream in it that decompresses to ELF."""
    for magic, decompress in ((b"\xfd7zXZ\x00", _xz), (b"\x1f\x8b\x08", _gzip)):
        start = vmlinuz.find(magic)
        while start != -1:
            try:
                kernel = decompress(vmlinuz[start:])
            except (lzma.LZMAError, OSError, EOFError):
                kernel = b""
            if kernel.startswith(b"\x7fELF"):
                return kernel
            start = vmlinuz.find(magic, start + 1)
    raise GuestUnavailable("no xz or gzip ELF kernel found in vmlinuz")


def _xz(data: bytes) -> bytes:
    return lzma.LZMADecompressor(format=lzma.FORMAT_XZ).decompress(data)


def _gzip(data: bytes) -> bytes:
    return gzip.GzipFile(fileobj=io.BytesIO(data)).read()


def _cpio(entries: list[tuple[str, int, bytes]]) -> bytes:
    """An uncompressed initramfs (cpio "newc"): ``(name, mode, data)`` each, folders before what they hold."""
    out = bytearray()
    for number, (name, mode, data) in enumerate([*entries, ("TRAILER!!!", 0, b"")], start=1):
        encoded = name.encode() + b"\0"
        fields = [number, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(encoded), 0]
        out += b"070701" + b"".join(b"%08X" % field for field in fields) + encoded
        out += b"\0" * (-len(out) % 4) + data
        out += b"\0" * (-len(out) % 4)
    return bytes(out)


def _modules(root: Path) -> list[tuple[str, bytes]]:
    """The kernel modules the initramfs loads from the unpacked kernel package ``root``: ``MODULES`` and what they
    depend on (each module's ``depends=`` entry), each after its dependencies."""
    found = {path.name[:-3]: path for path in root.glob("lib/modules/*/kernel/**/*.ko")}
    ordered: list[tuple[str, bytes]] = []

    def add(name: str) -> None:
        if name in (each for each, _ in ordered):
            return
        if name not in found:
            raise GuestUnavailable(f"the kernel package has no module {name} (built in?)")
        data = found[name].read_bytes()
        depends = re.search(rb"depends=([^\0]*)\0", data)
        for dependency in filter(None, (depends.group(1).decode().split(",") if depends else [])):
            add(dependency)
        ordered.append((name, data))

    for module in MODULES:
        add(module)
    return ordered


def build(target: Path) -> None:
    """Fetch the kernel package and write ``vmlinux`` and ``initramfs.cpio`` into ``target``."""
    busybox = shutil.which("busybox")
    with tempfile.TemporaryDirectory(prefix="cgroup-v2-guest-") as scratch:
        package = kernel_package()
        fetched = subprocess.run(
            ["apt-get", "download", package], cwd=scratch, capture_output=True, text=True, timeout=600
        )
        debs = list(Path(scratch).glob("*.deb"))
        if fetched.returncode != 0 or not debs:
            raise GuestUnavailable(f"apt-get download {package} failed: {fetched.stderr.strip()[-300:]}")
        unpacked = Path(scratch) / "kernel"
        subprocess.run(["dpkg-deb", "-x", str(debs[0]), str(unpacked)], check=True, timeout=300)
        [vmlinuz] = unpacked.glob("boot/vmlinuz-*")
        modules = _modules(unpacked)
        entries = [
            ("bin", 0o40755, b""),
            ("bin/busybox", 0o100755, Path(busybox).read_bytes()),
            ("init", 0o100755, INIT.encode()),
            ("stage2", 0o100644, STAGE2.encode()),
            ("modules", 0o100644, "\n".join(name for name, _ in modules).encode() + b"\n"),
            ("modules.d", 0o40755, b""),
            *((f"modules.d/{name}.ko", 0o100644, data) for name, data in modules),
            *((name, 0o40755, b"") for name in ("proc", "sys", "dev", "tmp")),
        ]
        target.mkdir(parents=True)
        (target / "vmlinux").write_bytes(vmlinux_from(vmlinuz.read_bytes()))
        (target / "initramfs.cpio").write_bytes(_cpio(entries))


def cached_guest() -> Path:
    """The folder holding ``vmlinux`` and ``initramfs.cpio``, built on first use (concurrent builds each write a
    private folder and rename it into place)."""
    if platform.machine() != "x86_64":
        raise GuestUnavailable(f"the guest is Debian's x86-64 kernel; this machine is {platform.machine()}")
    missing = missing_packages()
    if missing:
        raise GuestUnavailable(
            f"{' and '.join(missing)} not installed (scripts/install.sh --cgroup-v2-guest installs them)"
        )
    target = CACHE / f"cgroup-v2-guest-{kernel_package()}"
    if (target / "initramfs.cpio").exists():
        return target
    CACHE.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="building-", dir=CACHE))
    try:
        build(scratch / "guest")
        try:
            os.rename(scratch / "guest", target)
        except OSError:
            if not (target / "initramfs.cpio").exists():
                raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return target


def run_in_guest(script: str, timeout: float = 600, cpus: int = GUEST_CPUS) -> tuple[int | None, str, Path]:
    """Boot the guest, run ``script`` with ``sh`` in this process's current folder, power off. Returns its exit
    code (None if it did not finish), its output (with the guest's console after it if it did not finish) and a
    folder holding what it wrote under ``$GUEST_OUT`` (the caller removes its parent)."""
    guest = cached_guest()
    out = Path(tempfile.mkdtemp(prefix="cgroup-v2-guest-out-"))
    (out / "script").write_text(f"export GUEST_OUT=/guest-out/files\nmkdir -p $GUEST_OUT\n{CWD_SHARE}{script}")
    (out / "cwd").write_text(os.getcwd())
    (out / "path").write_text(os.environ.get("PATH", "/usr/bin:/bin"))
    command = [
        "qemu-system-x86_64",
        "-accel",
        "tcg,thread=multi",
        "-cpu",
        "max",
        "-smp",
        str(cpus),
        "-m",
        str(GUEST_MEMORY_MB),
        "-nodefaults",
        "-no-reboot",
        "-display",
        "none",
        "-kernel",
        str(guest / "vmlinux"),
        "-initrd",
        str(guest / "initramfs.cpio"),
        "-append",
        "console=ttyS0 quiet panic=-1 random.trust_cpu=on",
        "-serial",
        f"file:{out / 'console'}",
        "-virtfs",
        "local,path=/,mount_tag=host,security_model=none,readonly=on,multidevs=remap",
        "-virtfs",
        f"local,path={out},mount_tag=out,security_model=none",
        "-virtfs",
        f"local,path={os.getcwd()},mount_tag=cwd,security_model=none,readonly=on,multidevs=remap",
    ]
    started = time.monotonic()
    try:
        subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        pass
    output = (out / "output").read_text(errors="replace") if (out / "output").exists() else ""
    rc_text = (out / "rc").read_text().strip() if (out / "rc").exists() else ""
    rc = int(rc_text) if rc_text.lstrip("-").isdigit() else None
    if rc is None:
        console = (out / "console").read_text(errors="replace") if (out / "console").exists() else ""
        output += f"\n[the guest did not finish in {time.monotonic() - started:.0f} s; its console:]\n{console[-4000:]}"
    return rc, output, out / "files"
