"""npuscope capture bootstrap: run a PaddlePaddle training script unchanged and profile a step window.

    python bootstrap.py --device cpu|npu|gpu --start-step 100 --steps 1 --out DIR \
        [--jit-compile on|off] [--keep-running] -- SCRIPT [ARGS...]

Self-contained on purpose (it is uploaded to remote hosts): standard library and ``paddle`` only.

How it works
------------
* Training steps are counted by wrapping, at class level, ``step``/``minimize`` of
  ``paddle.optimizer.Optimizer`` and of every subclass that overrides them (``Adam`` does; later
  subclasses are caught through ``__init_subclass__``), ``paddle.amp.AmpScaler``/``GradScaler``
  ``step``/``minimize`` and ``paddle.Model.train_batch``. A per-thread depth guard counts only the
  outermost call, so ``GradScaler.step`` -> ``optimizer.step`` or ``train_batch`` -> ``minimize`` is
  one step.
* "Step n" means "n optimizer steps have completed". When the count reaches ``--start-step`` the
  profiler starts (so it records the next step, 0-based index ``start``); after ``--steps`` more
  steps it stops and exports: ``--start-step 100 --steps 1`` records loop iteration 100 only.
* Short epochs: ``paddle.io.DataLoader.__iter__`` is wrapped to remember the loader being iterated.
  At the first step, if ``len(loader) <= start_step`` the window moves to the final ``steps`` steps
  of the first epoch: start ``max(1, len(loader) - steps)`` (a ``window_moved`` event says so).
  A loader without ``len`` (iterable dataset) leaves the window alone.
* After the export the manifest is written and, unless ``--keep-running``, the process ends at once
  with ``os._exit(0)`` (after flushing stdout/stderr). Raising ``SystemExit`` from inside
  ``optimizer.step`` would travel through the user's code, which may catch it, run a long
  teardown or block in a distributed barrier; ``os._exit`` skips the rest of training, atexit
  handlers and finalizers. Everything npuscope needs is on disk by then.

Progress: one JSON object per stdout line, prefixed ``NPUSCOPE ``. Manifest:
``DIR/npuscope_capture.json`` (with ``--keep-running`` it is first written with status
``captured`` as soon as the window is exported, then again when training ends). Exit codes: 0 ok (also a window cut short by the end of training),
1 the script failed, 2 bad arguments, 3 the device cannot be profiled here, 4 training ended before
the window started.
"""

from __future__ import annotations  # annotations stay text: the host's Python may be older

import argparse
import datetime
import functools
import json
import os
import platform
import runpy
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

MANIFEST = "npuscope_capture.json"
FORMAT = "npuscope-capture/1"
PREFIX = "NPUSCOPE "
STEP_EVENT_INTERVAL_S = 0.1  # at most ~10 step events per second
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_DEVICE, EXIT_NO_WINDOW = 0, 1, 2, 3, 4


def emit(event: str, **fields: Any) -> None:
    sys.stdout.write(PREFIX + json.dumps({"event": event, **fields}) + "\n")
    sys.stdout.flush()


def now_iso() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds")


def one_line(text: object) -> str:
    lines = [ln.strip() for ln in str(text).splitlines() if ln.strip()]
    return lines[0] if lines else ""


def parse_args(argv: list[str]) -> argparse.Namespace:
    if "--" in argv:
        cut = argv.index("--")
        opts, rest = argv[:cut], argv[cut + 1 :]
    else:
        opts, rest = argv, []
    parser = argparse.ArgumentParser(
        prog="bootstrap.py",
        usage="%(prog)s --device cpu|npu|gpu [--start-step N] [--steps N] --out DIR "
        "[--jit-compile on|off] [--keep-running] -- SCRIPT|-m MODULE [ARGS...]",
        description="Run a Paddle training script unchanged and profile a window of training steps.",
    )
    parser.add_argument("--device", choices=("cpu", "npu", "gpu"), required=True)
    parser.add_argument("--start-step", type=int, default=100)
    parser.add_argument("--steps", type=int, default=1)
    parser.add_argument("--out", required=True)
    parser.add_argument("--jit-compile", choices=("on", "off"))
    parser.add_argument("--keep-running", action="store_true")
    args = parser.parse_args(opts)
    if not rest:
        parser.error("missing '-- SCRIPT [ARGS...]'")
    if args.start_step < 0 or args.steps < 1:
        parser.error("--start-step must be >= 0 and --steps >= 1")
    args.module = None
    if rest[0] == "-m":
        if len(rest) < 2:
            parser.error("-m needs a module name")
        args.module, args.script, args.script_args = rest[1], None, rest[2:]
    else:
        args.script, args.script_args = rest[0], rest[1:]
    return args


class Capture:
    def __init__(self, args: argparse.Namespace, paddle: Any) -> None:
        self.args = args
        self.paddle = paddle
        self.out = os.path.abspath(args.out)
        self.start = args.start_step
        self.stop_at = args.start_step + args.steps
        self.moved = False
        self.epoch_length: int | None = None
        self.count = 0
        self.depth = threading.local()
        self.loader: Any = None  # the paddle.io.DataLoader being iterated
        self.prof: Any = None  # the paddle.profiler.Profiler while recording
        self.state = "waiting"  # waiting | recording | done
        self.finished = False
        self.files: list[str] = []
        self.last_step_event = 0.0
        self.manifest = {
            "format": FORMAT,
            "status": "running",
            "exit": None,
            "message": None,
            "device": args.device,
            "start_step": args.start_step,
            "steps": args.steps,
            "window": None,
            "steps_seen": 0,
            "files": [],
            "out": self.out,
            "script": os.path.abspath(args.script) if args.script else None,
            "module": getattr(args, "module", None),
            "script_args": list(args.script_args),
            "jit_compile": args.jit_compile,
            "keep_running": bool(args.keep_running),
            "paddle_version": getattr(paddle, "__version__", None),
            "python": platform.python_version(),
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "started_at": now_iso(),
            "capture_started_at": None,
            "capture_stopped_at": None,
            "finished_at": None,
        }

    # --- hooks -------------------------------------------------------------------------------
    def counted(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        if getattr(fn, "_npuscope_counted", False):
            return fn
        cap = self

        @functools.wraps(fn)
        def wrapper(*a: Any, **kw: Any) -> Any:
            depth = getattr(cap.depth, "n", 0)
            cap.depth.n = depth + 1
            try:
                result = fn(*a, **kw)
            finally:
                cap.depth.n = depth
            if depth == 0:
                cap.on_step()
            return result

        wrapper._npuscope_counted = True  # type: ignore[attr-defined]
        return wrapper

    def patch_class(self, cls: type, names: tuple[str, ...]) -> None:
        for name in names:
            fn = cls.__dict__.get(name)
            if callable(fn):
                setattr(cls, name, self.counted(fn))

    def patch_tree(self, base: type, names: tuple[str, ...]) -> None:
        seen: set[type] = set()
        todo = [base]
        while todo:
            cls = todo.pop()
            if cls in seen:
                continue
            seen.add(cls)
            self.patch_class(cls, names)
            todo.extend(cls.__subclasses__())

    def install(self) -> None:
        paddle = self.paddle
        # Paddle's Profiler wraps every optimizer's `step` in an "Optimization Step" RecordEvent
        # the first time a Profiler is built. If that happened after our patch, its wrapper would
        # sit outside ours and we would start/stop the profiler inside an open event ("should
        # not have time range intersection within one thread"). Let it wrap first, so ours is
        # the outermost and the window edges fall between steps.
        try:
            from paddle.profiler import utils as pp_utils

            pp_utils.wrap_optimizers()  # type: ignore[no-untyped-call]  # Paddle leaves it unannotated
        except Exception:  # noqa: BLE001 - private helper; older/newer Paddle may lack it
            pass
        names = ("step", "minimize")
        opt = paddle.optimizer.Optimizer
        self.patch_tree(opt, names)
        cap = self
        previous = opt.__dict__.get("__init_subclass__")

        def __init_subclass__(cls: Any, /, **kw: Any) -> None:  # optimizers defined by the user script
            if previous is not None:
                previous.__func__(cls, **kw)
            else:
                super(opt, cls).__init_subclass__(**kw)
            cap.patch_class(cls, names)

        opt.__init_subclass__ = classmethod(__init_subclass__)
        amp = getattr(paddle, "amp", None)
        for scaler in ("AmpScaler", "GradScaler"):
            if amp is not None and isinstance(getattr(amp, scaler, None), type):
                self.patch_tree(getattr(amp, scaler), names)
        model = getattr(paddle, "Model", None)
        if isinstance(model, type):
            self.patch_tree(model, ("train_batch",))
        loader_cls = paddle.io.DataLoader
        original_iter = loader_cls.__iter__

        @functools.wraps(original_iter)
        def __iter__(loader: Any) -> Any:
            cap.loader = loader
            return original_iter(loader)

        loader_cls.__iter__ = __iter__

    # --- window ------------------------------------------------------------------------------
    def move_window_for_short_epoch(self) -> None:
        if self.loader is None:
            return
        try:
            length = len(self.loader)
        except Exception:  # iterable dataset: no length
            return
        self.epoch_length = length
        if length > self.start:
            return
        start = max(1, length - self.args.steps)
        old = self.start
        self.start, self.stop_at, self.moved = start, start + self.args.steps, True
        emit(
            "window_moved",
            epoch_length=length,
            requested_start=old,
            start=self.start,
            stop=self.stop_at,
            reason=f"the first epoch has {length} steps, not more than --start-step {old}: "
            f"capturing its final steps instead",
        )

    def on_step(self) -> None:
        self.count += 1
        n = self.count
        if n == 1:
            self.move_window_for_short_epoch()
        t = time.monotonic()
        if t - self.last_step_event >= STEP_EVENT_INTERVAL_S:
            self.last_step_event = t
            emit("step", step=n)
        if self.state == "waiting" and n >= self.start:
            self.begin()
        elif self.state == "recording":
            if n >= self.stop_at:
                self.end()
                if not self.args.keep_running:
                    self.finish("ok", EXIT_OK, hard=True)
            else:
                self.prof.step()

    def begin(self) -> None:
        import paddle.profiler as pp_profiler

        target = {
            "cpu": pp_profiler.ProfilerTarget.CPU,
            "gpu": pp_profiler.ProfilerTarget.GPU,
            "npu": pp_profiler.ProfilerTarget.CUSTOM_DEVICE,
        }[self.args.device]
        kwargs: dict[str, Any] = {"custom_device_types": ["npu"]} if self.args.device == "npu" else {}
        self.before = set(self.list_files())
        self.prof = pp_profiler.Profiler(
            targets=[target],
            on_trace_ready=pp_profiler.export_chrome_tracing(self.out),
            **kwargs,
        )
        self.prof.start()
        self.state = "recording"
        self.window_start = self.count
        self.manifest["capture_started_at"] = now_iso()
        emit("capture_start", step=self.count)

    def end(self) -> None:
        self.state = "done"
        self.manifest["capture_stopped_at"] = now_iso()
        emit("capture_stop", step=self.count)
        self.prof.stop()  # on_trace_ready writes the *.paddle_trace.json
        self.manifest["window"] = {
            "start": self.window_start,
            "stop": self.count,
            "moved": self.moved,
            "epoch_length": self.epoch_length,
        }
        self.files = sorted(f for f in self.list_files() if f not in self.before)
        emit("exported", files=[os.path.join(self.out, f) for f in self.files])
        if self.args.keep_running:  # tell a watcher the capture is on disk while training goes on
            self.manifest.update(status="captured", files=list(self.files), steps_seen=self.count)
            self.write_manifest()

    def list_files(self) -> list[str]:
        found = []
        for root, _dirs, names in os.walk(self.out):
            for name in names:
                rel = os.path.relpath(os.path.join(root, name), self.out)
                if rel != MANIFEST and not rel.startswith(MANIFEST + "."):
                    found.append(rel)
        return found

    # --- end of run --------------------------------------------------------------------------
    def write_manifest(self) -> None:
        os.makedirs(self.out, exist_ok=True)
        path = os.path.join(self.out, MANIFEST)
        tmp = path + ".tmp"
        with open(tmp, "w") as fh:
            json.dump(self.manifest, fh, indent=2)
            fh.write("\n")
        os.replace(tmp, path)

    def finish(self, status: str, code: int, message: str | None = None, hard: bool = False) -> int:
        self.finished = True
        m = self.manifest
        m.update(status=status, exit=code, message=message, steps_seen=self.count)
        m["files"] = list(self.files)
        if m["window"] is None:
            m["window"] = {
                "start": self.start,
                "stop": self.stop_at,
                "moved": self.moved,
                "epoch_length": self.epoch_length,
                "captured": False,
            }
        m["finished_at"] = now_iso()
        if message and status in ("failed", "no_capture", "device_unavailable"):
            emit("error", message=message)
        self.write_manifest()
        emit("finished", exit=code)
        sys.stdout.flush()
        sys.stderr.flush()
        if hard:
            os._exit(code)
        return code


def device_problem(device: str, paddle: Any) -> str | None:
    if device == "npu":
        types = paddle.device.get_all_custom_device_type() or []
        if "npu" not in types:
            return f"--device npu: no NPU custom device in this Paddle (custom devices: {types or 'none'}); install the Ascend paddle-custom-npu plugin on an NPU host"
    elif device == "gpu":
        count = paddle.device.cuda.device_count() if paddle.is_compiled_with_cuda() else 0
        if count < 1:
            return "--device gpu: Paddle is not compiled with CUDA or no GPU is visible"
    return None


LAUNCHERS = ("paddle.distributed.launch", "paddle.distributed.fleet.launch")
WORKER_ENV = "NPUSCOPE_WORKER"
SITECUSTOMIZE = """# Written by the npuscope capture bootstrap: profiles each worker of a distributed launch.
import os
if os.environ.get("NPUSCOPE_WORKER") and os.environ.get("PADDLE_TRAINER_ID") is not None:
    import npuscope_bootstrap
    npuscope_bootstrap.start_worker()
"""


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    launcher = args.module in LAUNCHERS
    if args.jit_compile:
        os.environ["FLAGS_npu_jit_compile"] = "true" if args.jit_compile == "on" else "false"
    if args.device == "npu" and not launcher:  # where the NPU plugin writes its raw PROF_* data
        os.environ.setdefault("FLAGS_npu_profiling_dir", os.path.join(out, "ascend_profiling"))
    emit(
        "started",
        pid=os.getpid(),
        device=args.device,
        start_step=args.start_step,
        steps=args.steps,
        out=out,
        script=args.script or "-m " + args.module,
    )

    import paddle

    cap = Capture(args, paddle)
    problem = device_problem(args.device, paddle)
    if problem:
        print(f"npuscope capture: error: {problem}", file=sys.stderr)
        return cap.finish("device_unavailable", EXIT_DEVICE, problem)
    if args.jit_compile:
        try:
            paddle.set_flags({"FLAGS_npu_jit_compile": args.jit_compile == "on"})
        except Exception:
            pass  # unknown flag on CPU/GPU builds
    if launcher:
        return launch_workers(args, cap)
    cap.install()
    if args.start_step == 0:
        cap.begin()
    if args.module:
        sys.argv = [args.module, *args.script_args]
        sys.path[0] = os.getcwd()  # as `python -m MODULE` would
        return conclude(cap, run_main(lambda: runpy.run_module(args.module, run_name="__main__", alter_sys=True)))
    script = os.path.abspath(args.script)
    sys.argv = [args.script, *args.script_args]
    sys.path[0] = os.path.dirname(script)  # as `python SCRIPT` would
    return conclude(cap, run_main(lambda: runpy.run_path(script, run_name="__main__")))


def run_main(run: Callable[[], object]) -> str | None:
    """Run the user's entry point; None, or one line saying how it failed."""
    try:
        run()
    except SystemExit as exc:
        if exc.code not in (None, 0):
            return f"the script exited with {exc.code!r}"
    except BaseException as exc:  # noqa: BLE001 - report anything, including KeyboardInterrupt
        traceback.print_exc()
        return one_line(f"{type(exc).__name__}: {exc}") or type(exc).__name__
    return None


def conclude(cap: Capture, failure: str | None, hard: bool = False) -> int:
    if cap.state == "recording":  # training ended inside the window, or failed there
        try:
            cap.end()
        except Exception as exc:  # noqa: BLE001
            failure = failure or f"profiler export failed: {one_line(exc)}"
    if failure:
        return cap.finish("failed", EXIT_FAILED, failure, hard=hard)
    if cap.state == "done":
        short = cap.manifest["window"]["stop"] < cap.stop_at
        return cap.finish(
            "partial" if short else "ok",
            EXIT_OK,
            f"training ended at step {cap.count}, inside the window" if short else None,
            hard=hard,
        )
    return cap.finish(
        "no_capture",
        EXIT_NO_WINDOW,
        f"training ended after {cap.count} steps, before the capture window (start step {cap.start})",
        hard=hard,
    )


# --- distributed launch: every worker profiles itself into OUT/rank_N ---------------------------
def launch_workers(args: argparse.Namespace, cap: Capture) -> int:
    """Run the launcher with a sitecustomize hook that starts a Capture in each worker."""
    import shutil

    hook = os.path.join(cap.out, ".npuscope_hook")
    os.makedirs(hook, exist_ok=True)
    shutil.copyfile(os.path.abspath(__file__), os.path.join(hook, "npuscope_bootstrap.py"))
    with open(os.path.join(hook, "sitecustomize.py"), "w") as fh:
        fh.write(SITECUSTOMIZE)
    os.environ[WORKER_ENV] = json.dumps(
        {
            "device": args.device,
            "start_step": args.start_step,
            "steps": args.steps,
            "out": cap.out,
            "jit_compile": args.jit_compile,
            "keep_running": bool(args.keep_running),
        }
    )
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = hook + (os.pathsep + old if old else "")
    emit("launcher", module=args.module)
    sys.argv = [args.module, *args.script_args]
    sys.path[0] = os.getcwd()
    failure = run_main(lambda: runpy.run_module(args.module, run_name="__main__", alter_sys=True))
    ranks = {}
    for name in sorted(os.listdir(cap.out)):
        path = os.path.join(cap.out, name, MANIFEST)
        if name.startswith("rank_") and os.path.isfile(path):
            try:
                with open(path) as fh:
                    ranks[name[len("rank_") :]] = json.load(fh)
            except ValueError:
                continue
    m = cap.manifest
    m["ranks"] = {
        r: {k: v.get(k) for k in ("status", "exit", "message", "window", "steps_seen")} for r, v in ranks.items()
    }
    cap.files = [f"rank_{r}/{f}" for r, v in ranks.items() for f in v.get("files", [])]
    captured = [v for v in ranks.values() if v.get("status") in ("ok", "partial", "captured")]
    if captured:
        m["window"] = captured[0].get("window")
        cap.count = max(v.get("steps_seen") or 0 for v in ranks.values())
    failed = [f"rank {r}: {v.get('message')}" for r, v in ranks.items() if v.get("status") == "failed"]
    if failure or failed:
        return cap.finish("failed", EXIT_FAILED, "; ".join([*failed, *([failure] if failure else [])]))
    if not captured:
        why = next((v.get("message") for v in ranks.values() if v.get("message")), None)
        return cap.finish("no_capture", EXIT_NO_WINDOW, why or "no worker reached the capture window")
    return cap.finish("ok", EXIT_OK, f"{len(captured)} of {len(ranks)} ranks captured")


def start_worker() -> None:
    """Called from the sitecustomize hook at a worker's start: profile this rank."""
    import atexit

    spec = json.loads(os.environ.pop(WORKER_ENV))  # not inherited by this worker's own children
    rank = os.environ.get("PADDLE_TRAINER_ID", "0")
    argv = list(getattr(sys, "argv", []) or ["?"])
    args = argparse.Namespace(
        device=spec["device"],
        start_step=spec["start_step"],
        steps=spec["steps"],
        out=os.path.join(spec["out"], f"rank_{rank}"),
        jit_compile=spec["jit_compile"],
        keep_running=spec["keep_running"],
        module=None,
        script=argv[0] or "?",
        script_args=argv[1:],
    )
    os.makedirs(args.out, exist_ok=True)
    if args.device == "npu":
        os.environ["FLAGS_npu_profiling_dir"] = os.path.join(os.path.abspath(args.out), "ascend_profiling")
    import paddle

    cap = Capture(args, paddle)
    cap.install()
    if args.start_step == 0:
        cap.begin()
    atexit.register(lambda: cap.finished or conclude(cap, None))


if __name__ == "__main__":
    sys.exit(main())
