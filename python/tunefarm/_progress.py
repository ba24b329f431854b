"""A job's progress as people watch it: tune-client's progress line, redrawn in place on a terminal,
as an HTML progress bar updated in place in a Jupyter notebook (through IPython, which every
notebook kernel has), and a line per event where neither (a log file, a pipe)."""
import html
import sys

_WIDTH = 24


def _duration(seconds):
    """tune-client's durations: "45s", "12m", "1.5h"."""
    if seconds is None or seconds != seconds or seconds < 0:
        return "?"
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.1f}h"


def progress_line(status):
    """`tune-client watch`'s line for a JobStatus."""
    p = status.proto.progress
    budget = status.trials_budget
    filled = min(_WIDTH, status.trials_done * _WIDTH // budget) if budget > 0 else 0
    line = (f"[{'#' * filled}{'.' * (_WIDTH - filled)}] {status.trials_done}/{budget} trials  "
            f"best {status.best_gflops:.1f} GFLOP/s  last batch {p.current_gflops:.1f}  "
            f"errors {sum(status.errors.values())}  elapsed {_duration(status.elapsed_s)}  eta {_duration(status.eta_s)}")
    if status.latency_ms is not None:
        untuned = status.untuned_latency_ms
        line += f"  model ~{status.latency_ms:.3f} ms" + (f" (untuned {untuned:.3f} ms)" if untuned else "")
    return line


def _notebook_shell():
    """The IPython shell of a notebook kernel this runs in, or None."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython and hasattr(ipython, "get_ipython") else None
    return shell if shell is not None and getattr(shell, "kernel", None) is not None else None


class _Terminal:
    def __init__(self, file):
        self.file = file

    def update(self, status, message):
        self.file.write(f"\r{status}")
        self.file.flush()

    def note(self, text):
        self.file.write(f"\n{text}\n")
        self.file.flush()

    def close(self, status):
        self.file.write("\n")
        self.file.flush()


class _Lines:
    def __init__(self, file):
        self.file = file

    def update(self, status, message):
        if message:
            self.file.write(f"{status}  {message}\n")
            self.file.flush()

    def note(self, text):
        self.file.write(f"{text}\n")
        self.file.flush()

    def close(self, status):
        if status is not None:
            self.file.write(f"job {status.id} {status.state}: {status}\n")
            self.file.flush()


class _Notebook:
    def __init__(self):
        from IPython.display import HTML, display
        self.html = HTML
        self.handle = display(self.html("waiting for the job's first event"), display_id=True)

    def update(self, status, message):
        state = html.escape(status.state)
        text = html.escape(str(status).split("] ", 1)[-1])
        self.handle.update(self.html(
            f"<div><b>job {html.escape(status.id)}</b> {state} "
            f"<progress value='{status.trials_done}' max='{max(status.trials_budget, 1)}' style='width:16em'></progress>"
            f"<br><code>{text}</code>{'<br><small>' + html.escape(message) + '</small>' if message else ''}</div>"))

    def note(self, text):
        self.handle.update(self.html(f"<div>{html.escape(text)}</div>"))

    def close(self, status):
        if status is not None:
            self.update(status, status.error or status.activity)


def progress_display(file=None):
    if file is None and _notebook_shell() is not None:
        return _Notebook()
    file = file or sys.stdout
    return _Terminal(file) if hasattr(file, "isatty") and file.isatty() else _Lines(file)
