"""SIGTERM/SIGINT handled in threads of their own: a handler that needs a lock the main thread
holds when the signal comes (a stop's lock, threading.Event's) still runs, where a plain
handler would wait for ever on its own thread; a second signal is not held up behind a first
handler that waits; a signal received before ``restore`` is handled before it returns. Real
processes, real signals."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRELUDE = f"""
import os, signal, sys, threading
sys.path.insert(0, {str(ROOT)!r})
from mirror_maker.ops.signals import SignalDispatch
"""

#: The main thread holds the lock the handler needs while the signal is delivered and while
#: Python would run a plain handler (at its next bytecodes), then waits for the handler.
SCRIPT = PRELUDE + """
lock, handled = threading.Lock(), threading.Event()

def on_signal(signum):
    with lock:
        print("handled", signal.Signals(signum).name, threading.current_thread().name, flush=True)
        handled.set()

dispatch = SignalDispatch(on_signal, 'signals')
dispatch.install()
with lock:
    os.kill(os.getpid(), signal.SIGTERM)
    total = sum(range(100000))  # bytecodes: where Python runs a plain handler
print("handled in time" if handled.wait(5) else "not handled", flush=True)
"""


def run(code: str) -> subprocess.CompletedProcess:
    """The script's outcome; one that deadlocks is killed after 10 s (TimeoutExpired)."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=10)


def test_a_handler_that_needs_a_lock_the_main_thread_holds_runs_in_its_own_thread():
    done = run(SCRIPT)
    assert done.returncode == 0, done
    assert done.stdout == "handled SIGTERM signals-0\nhandled in time\n", done


def test_restore_puts_back_the_handlers_there_before():
    code = PRELUDE + """
before = signal.getsignal(signal.SIGINT)
dispatch = SignalDispatch(print, 'signals')
dispatch.install()
dispatch.install()  # again, as after a SparkContext took SIGINT
assert signal.getsignal(signal.SIGINT) is not before
dispatch.restore()
assert signal.getsignal(signal.SIGINT) is before and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
print("restored")
"""
    done = run(code)
    assert done.returncode == 0 and done.stdout == "restored\n", done


def test_a_second_signal_is_handled_while_the_first_handler_still_waits():
    code = PRELUDE + """
seen = []

def on_signal(signum):
    seen.append(signum)
    if len(seen) == 1:
        threading.Event().wait()  # a first stop that never finishes
    print("second", flush=True)
    os._exit(143)

dispatch = SignalDispatch(on_signal, 'signals')
dispatch.install()
os.kill(os.getpid(), signal.SIGTERM)
while not seen:
    threading.Event().wait(0.01)
os.kill(os.getpid(), signal.SIGINT)
threading.Event().wait(5)
print("the second signal was not handled", flush=True)
"""
    done = run(code)
    assert done.returncode == 143 and done.stdout == "second\n", done


def test_a_signal_received_before_restore_is_handled_before_it_returns():
    code = PRELUDE + """
handled = []
dispatch = SignalDispatch(lambda signum: handled.append(signum), 'signals')
dispatch.install()
os.kill(os.getpid(), signal.SIGTERM)
dispatch.restore()
print(handled == [signal.SIGTERM], threading.active_count(), flush=True)
"""
    done = run(code)
    assert done.returncode == 0 and done.stdout == "True 1\n", done


def test_a_sigterm_before_the_run_takes_the_signals_exits_143_as_the_jvm_does():
    code = PRELUDE + """
from mirror_maker.ops.signals import exit_on_sigterm_until_handled
exit_on_sigterm_until_handled()
os.kill(os.getpid(), signal.SIGTERM)
threading.Event().wait(5)
print("SIGTERM ignored", flush=True)
"""
    done = run(code)
    assert done.returncode == 143 and done.stdout == "", done
