"""Issue 31: a cancel event set during the scan, the write, the .bmap hashing and the
read-back stops each within 0.5 s with nothing left behind; Ctrl-C stops builds in every
thread; SIGTERM during a build leaves no temp file; progress has phases."""

from __future__ import annotations

import gzip
import os
import pathlib
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from typing import Any, Optional

import pytest

import blockwise

DATA_MIB = 384


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """A file of DATA_MIB MiB that is all data (no holes), for long write phases."""
    d = tmp_path_factory.mktemp("data")
    path = d / "data.bin"
    block = os.urandom(1 << 20)
    with open(path, "wb") as f:
        for i in range(DATA_MIB):
            f.write(i.to_bytes(8, "little") + block[8:])
    return path


def raw_spec(data: pathlib.Path) -> dict[str, Any]:
    return {
        "image": {"size": f"{DATA_MIB + 8}MiB", "table": "none"},
        "partition": [{"fs": "raw", "size": f"{DATA_MIB}MiB", "source": str(data)}],
    }


def leftovers(d: pathlib.Path) -> list[str]:
    return sorted(p.name for p in d.iterdir())


class Run:
    """Runs `call(progress, cancel)` in a thread; sets `cancel` once `phase` is reported."""

    def __init__(self, phase: str, call: Callable[..., Any]) -> None:
        self.phase = phase
        self.cancel = threading.Event()
        self.reached = threading.Event()
        self.first: Optional[tuple[int, Optional[int]]] = None
        self.calls: list[tuple[str, int, Optional[int]]] = []
        self.error: Optional[BaseException] = None
        self.value: Any = None
        self.ended = 0.0
        self.thread = threading.Thread(target=self._run, args=(call,))

    def progress(self, phase: str, done: int, total: Optional[int]) -> None:
        self.calls.append((phase, done, total))
        if phase == self.phase and not self.reached.is_set():
            self.first = (done, total)
            self.reached.set()

    def _run(self, call: Callable[..., Any]) -> None:
        try:
            self.value = call(self.progress, self.cancel)
        except BaseException as e:  # noqa: BLE001 - examined by the test
            self.error = e
        self.ended = time.monotonic()

    def cancel_in_phase(self) -> float:
        """Starts, waits for the phase, sets the event; returns the seconds until the call
        ended."""
        self.thread.start()
        while not self.reached.wait(0.01):
            assert self.thread.is_alive(), f"ended before {self.phase}: {self.error!r}"
        set_at = time.monotonic()
        self.cancel.set()
        self.thread.join(60)
        assert not self.thread.is_alive()
        return self.ended - set_at


def test_cancel_during_the_scan() -> None:
    # /usr: over 100,000 entries, seconds of stat calls.
    spec = {
        "image": {"size": "64GiB", "table": "none"},
        "partition": [{"fs": "ext4", "size": "fill", "contents": "/usr"}],
    }
    run = Run("scan", lambda progress, cancel: blockwise.plan(spec, progress=progress, cancel=cancel))
    took = run.cancel_in_phase()
    assert isinstance(run.error, blockwise.CancelledError), run.error
    assert "cancelled" in str(run.error)
    assert took < 0.5, f"the scan went on for {took:.3f} s"
    scans = [c for c in run.calls if c[0] == "scan"]
    assert scans and all(total is None for _, _, total in scans)


def test_cancel_during_the_write(data: pathlib.Path, tmp_path: pathlib.Path) -> None:
    out = tmp_path / "o.img"
    run = Run(
        "write",
        lambda progress, cancel: blockwise.build(raw_spec(data), out, progress=progress, cancel=cancel),
    )
    took = run.cancel_in_phase()
    assert isinstance(run.error, blockwise.CancelledError), run.error
    assert "nothing was written" in str(run.error)
    assert took < 0.5, f"the write went on for {took:.3f} s"
    writes = [c for c in run.calls if c[0] == "write"]
    assert writes[-1][1] < writes[-1][2], "the write ended before the cancel"  # type: ignore[operator]
    assert leftovers(tmp_path) == []


def test_cancel_during_the_bmap_hashing(data: pathlib.Path, tmp_path: pathlib.Path) -> None:
    out = tmp_path / "o.img"
    run = Run(
        "hash",
        lambda progress, cancel: blockwise.build(
            raw_spec(data), out, tmp_path / "o.bmap", progress=progress, cancel=cancel
        ),
    )
    took = run.cancel_in_phase()
    assert isinstance(run.error, blockwise.CancelledError), run.error
    assert took < 0.5, f"the hashing went on for {took:.3f} s"
    assert run.first is not None
    done, total = run.first
    assert total is not None and total >= DATA_MIB << 20
    assert done < total, "the hasher had finished with the writer: nothing to cancel"
    assert leftovers(tmp_path) == []


def test_cancel_during_the_read_back(data: pathlib.Path, tmp_path: pathlib.Path) -> None:
    img = tmp_path / "a.img"
    blockwise.build(raw_spec(data), img)
    target = tmp_path / "t.img"
    run = Run(
        "verify",
        lambda progress, cancel: blockwise.write(
            img, target, True, progress, cancel=cancel, raw=True
        ),
    )
    took = run.cancel_in_phase()
    assert isinstance(run.error, blockwise.CancelledError), run.error
    assert took < 0.5, f"the read-back went on for {took:.3f} s"
    verifies = [c for c in run.calls if c[0] == "verify"]
    assert verifies[-1][1] < verifies[-1][2], "the read-back ended before the cancel"  # type: ignore[operator]
    # The image was written in full; nothing else is there.
    assert leftovers(tmp_path) == ["a.img", "t.img"]


@pytest.mark.parametrize("name", ["a.img", "a.img.zst", "a.img.gz"])
def test_cancel_during_verify(tmp_path: pathlib.Path, name: str) -> None:
    """Also through a container: the decoders own the source, which polls the operation."""
    cancel = threading.Event()
    cancel.set()
    img = tmp_path / name
    spec = {"image": {"size": "64MiB"}, "partition": [{"fs": "fat32", "size": "fill"}]}
    if name.endswith(".gz"):
        blockwise.build(spec, tmp_path / "raw.img")
        img.write_bytes(gzip.compress((tmp_path / "raw.img").read_bytes(), 1))
    else:
        blockwise.build(spec, img)
    with pytest.raises(blockwise.CancelledError):
        blockwise.verify(img, cancel=cancel)
    assert blockwise.verify(img, cancel=threading.Event())["aligned"]


def test_cancel_is_checked_for_type() -> None:
    with pytest.raises(TypeError, match="threading.Event"):
        blockwise.plan({"image": {"size": "1GiB"}}, cancel=True)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="callable"):
        blockwise.plan({"image": {"size": "1GiB"}}, progress=3)  # type: ignore[arg-type]


def test_phases_of_a_build(data: pathlib.Path, tmp_path: pathlib.Path) -> None:
    (tmp_path / "c").mkdir()
    for i in range(20):
        (tmp_path / "c" / f"f{i}").write_bytes(os.urandom(50_000))
    spec = {
        "image": {"size": "64MiB", "table": "none"},
        "partition": [{"fs": "fat32", "size": "fill", "contents": str(tmp_path / "c")}],
    }
    calls: list[tuple[str, int, Optional[int]]] = []
    blockwise.build(spec, tmp_path / "o.img", tmp_path / "o.bmap",
                    lambda p, d, t: calls.append((p, d, t)))
    phases = [p for p, _, _ in calls]
    order = [p for i, p in enumerate(phases) if i == 0 or phases[i - 1] != p]
    assert order == ["scan", "write", "hash"], order
    scan = [c for c in calls if c[0] == "scan"]
    assert scan[-1] == ("scan", 20, None)  # every entry counted as it is reached
    for phase in ("write", "hash"):
        got = [c for c in calls if c[0] == phase]
        total = got[0][2]
        assert total and got[0][1] <= total and got[-1] == (phase, total, total), got
        assert [d for _, d, _ in got] == sorted(d for _, d, _ in got)


def test_phases_of_a_write(tmp_path: pathlib.Path) -> None:
    img = tmp_path / "a.img"
    blockwise.build({"image": {"size": "64MiB"}, "partition": [{"fs": "fat32", "size": "fill"}]}, img)
    calls: list[tuple[str, int, Optional[int]]] = []
    blockwise.write(img, tmp_path / "t.img", True, lambda p, d, t: calls.append((p, d, t)))
    assert [p for p, _, _ in calls][0] == "write" and calls[-1][0] == "verify"
    for phase in ("write", "verify"):
        got = [c for c in calls if c[0] == phase]
        assert got[0][1] == 0 and got[-1][1] == got[-1][2], got


def test_the_old_progress_form_still_works(tmp_path: pathlib.Path) -> None:
    calls: list[tuple[int, int]] = []
    with pytest.warns(DeprecationWarning, match=r"progress\(done, total\)"):
        blockwise.build(
            {"image": {"size": "64MiB"}, "partition": [{"fs": "fat32", "size": "fill"}]},
            tmp_path / "o.img",
            progress=lambda d, t: calls.append((d, t)),
        )
    total = calls[0][1]
    assert calls[0] == (0, total) and calls[-1] == (total, total)


CHILD = textwrap.dedent(
    """
    import concurrent.futures, pathlib, signal, sys, threading, time
    import blockwise

    # Ctrl-C as a terminal gives it: a shell that starts a job in the background (CI's
    # runner, `cmd &`) hands it SIGINT ignored, and Python then keeps it ignored.
    signal.signal(signal.SIGINT, signal.default_int_handler)

    out, data, mib, mode = pathlib.Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
    spec = {
        "image": {"size": f"{mib + 8}MiB", "table": "none"},
        "partition": [{"fs": "raw", "size": f"{mib}MiB", "source": data}],
    }
    lock = threading.Lock()
    started = set()

    def job(i):
        def progress(phase, done, total):
            first = False
            with lock:
                if phase == "write" and i not in started:
                    started.add(i)
                    first = True
                    print(f"writing {i}", flush=True)
            if first:
                # A slow card: the build is still writing when the signal comes, however
                # long the parent takes to send it (a build of this file alone can end
                # before a loaded machine schedules the parent again).
                time.sleep(1)
        try:
            blockwise.build(spec, out / f"o{i}.img", out / f"o{i}.bmap", progress)
            return "done"
        except KeyboardInterrupt:
            return "interrupted"

    if mode == "main":
        job(0)
        print("finished", flush=True)
        sys.exit(0)
    n = 1 if mode == "thread" else 2
    with concurrent.futures.ThreadPoolExecutor(n) as ex:
        futures = [ex.submit(job, i) for i in range(n)]
        try:
            results = [f.result() for f in futures]
        except KeyboardInterrupt:
            results = [f.result() for f in futures]
            print("results", *results, flush=True)
            sys.exit(130)
    print("results", *results, flush=True)
    """
)


def start_child(out: pathlib.Path, data: pathlib.Path, mode: str, wait_for: int) -> subprocess.Popen[str]:
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(out), str(data), str(DATA_MIB), mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    seen = 0
    while seen < wait_for:
        line = child.stdout.readline()
        if not line:
            child.kill()
            raise AssertionError(f"the child ended early: {child.communicate()}")
        if line.startswith("writing "):
            seen += 1
    return child


def test_ctrl_c_stops_builds_in_every_thread(data: pathlib.Path, tmp_path: pathlib.Path) -> None:
    child = start_child(tmp_path, data, "pool", 2)
    sent = time.monotonic()
    child.send_signal(signal.SIGINT)
    out, err = child.communicate(timeout=60)
    took = time.monotonic() - sent
    assert child.returncode == 130, (out, err)
    assert out.split() == ["results", "interrupted", "interrupted"], (out, err)
    assert took < 5, f"the process took {took:.1f} s to stop"
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("mode", ["main", "thread"])
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_leaves_nothing(
    data: pathlib.Path, tmp_path: pathlib.Path, mode: str, sig: signal.Signals
) -> None:
    child = start_child(tmp_path, data, mode, 1)
    child.send_signal(sig)
    out, err = child.communicate(timeout=60)
    # Ended by the signal, as Python ends by default, after the build removed its temp file.
    assert child.returncode == -sig, (child.returncode, out, err)
    assert "finished" not in out and "results" not in out
    assert leftovers(tmp_path) == []


FIRST_CALLS = textwrap.dedent(
    """
    import threading, blockwise
    spec = {"image": {"size": "64MiB"}, "partition": [{"fs": "fat32", "size": "fill"}]}
    go = threading.Barrier(4)
    def call():
        go.wait()
        blockwise.plan(spec, progress=lambda p, d, t: None)
    threads = [threading.Thread(target=call) for _ in range(4)]
    for t in threads: t.start()
    for t in threads: t.join()
    print("ok")
    """
)


def test_first_calls_in_several_threads_at_once() -> None:
    """The first operations of a process register the signal flags once; threads that wait
    for that do so without the GIL (they deadlocked with the registering thread's import of
    `signal` before). Fresh processes, four threads released together."""
    for _ in range(12):
        r = subprocess.run([sys.executable, "-c", FIRST_CALLS], capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 0 and r.stdout == "ok\n", r.stdout + r.stderr
