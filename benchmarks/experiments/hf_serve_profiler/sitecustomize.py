"""Profiler control inside the model process of ``transformers serve`` (imported by every Python that has this
folder on PYTHONPATH; acts only where HF_SERVE_PROFILE_CTL names a folder and the process is a multiprocessing
child, which is where transformers serve runs its model).

A daemon thread polls the folder: a file ``start`` (holding the trace's path) starts ``torch.profiler`` and is
answered with ``started``; a file ``stop`` stops it, writes the Chrome trace and is answered with ``done``. Used
by benchmarks/experiments/hf_serve_trace.py.
"""

import os
import sys
import threading
import time


def _control(folder: str) -> None:
    while True:
        start = os.path.join(folder, "start")
        if not os.path.exists(start):
            time.sleep(0.005)
            continue
        import torch  # only now: the model process imported it long before (no import beside its own)

        with open(start) as f:
            path = f.read().strip()
        os.unlink(start)
        activities = [torch.profiler.ProfilerActivity.CPU]
        if torch.cuda.is_available():
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        prof = torch.profiler.profile(activities=activities)
        prof.__enter__()
        open(os.path.join(folder, "started"), "w").close()
        stop = os.path.join(folder, "stop")
        while not os.path.exists(stop):
            time.sleep(0.002)
        os.unlink(stop)
        prof.__exit__(None, None, None)
        prof.export_chrome_trace(path)
        open(os.path.join(folder, "done"), "w").close()


_folder = os.environ.get("HF_SERVE_PROFILE_CTL")
if _folder and "--multiprocessing-fork" in getattr(sys, "orig_argv", ()):
    threading.Thread(target=_control, args=(_folder,), name="wavemla-profile-ctl", daemon=True).start()
