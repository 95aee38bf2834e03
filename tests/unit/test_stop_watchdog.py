"""The stop's last bound: a process whose every thread waits on a C call that holds the GIL (as
confluent-kafka's rebalance callback did at a consumer's close) still ends, with every thread's
stack in its log; a stop that finishes disarms it. Real processes, a real GIL-holding call."""

import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRELUDE = f"import ctypes, sys, time\nsys.path.insert(0, {str(ROOT)!r})\n" \
          "from mirror_maker.ops.stop_watchdog import StopWatchdog\nwatchdog = StopWatchdog()\n"
#: libc's sleep() called through PyDLL keeps the GIL: no Python code runs until it returns.
HOLD_THE_GIL = "ctypes.PyDLL(None).sleep(30)\n"


def run(code: str):
    """The script's outcome; one still running after 10 s fails the test (the held call lasts 30)."""
    return subprocess.run([sys.executable, "-c", PRELUDE + code], capture_output=True, text=True, timeout=10)


def test_a_stop_stuck_in_a_call_that_holds_the_gil_ends_after_its_bound_with_the_stacks():
    done = run("watchdog.arm(1)\n" + HOLD_THE_GIL)
    assert done.returncode == -signal.SIGALRM, done
    assert "Timeout (0:00:01)!" in done.stderr and 'File "<string>", line 6' in done.stderr, done.stderr


def test_a_stop_that_finishes_disarms_it():
    done = run("watchdog.arm(1)\nwatchdog.disarm()\ntime.sleep(3)\nprint('still here')\n")
    assert done.returncode == 0 and done.stdout == "still here\n" and "Timeout" not in done.stderr, done


def test_sigusr1_writes_every_thread_s_stack_even_while_a_call_holds_the_gil():
    code = PRELUDE + ("from mirror_maker.ops.stop_watchdog import dump_stacks_on_sigusr1\nimport threading\n"
                      "dump_stacks_on_sigusr1()\nthreading.Thread(target=time.sleep, args=(5,), daemon=True).start()\n"
                      "print('holding', flush=True)\nctypes.PyDLL(None).sleep(2)\nprint('went on')\n")
    process = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout.readline() == "holding\n"
        process.send_signal(signal.SIGUSR1)
        out, err = process.communicate(timeout=10)
    finally:
        process.kill()
    assert process.returncode == 0 and out == "went on\n", (out, err)
    assert err.count("most recent call first") == 2 and "in <module>" in err, err


def test_the_process_ends_with_its_status_after_atexit_without_the_interpreter_s_finalization():
    """Finalization would wait here on a thread that never ends (as librdkafka's destroy of a
    client handle can on a broker thread); the exit does not, and atexit's callbacks still run."""
    done = run("import atexit, logging, threading\nfrom mirror_maker.ops.stop_watchdog import exit_process\n"
               "threading.Thread(target=threading.Event().wait).start()\n"
               "atexit.register(print, 'atexit ran')\nlogging.basicConfig()\n"
               "logging.getLogger('t').warning('last line')\nprint('buffered', end='')\nexit_process(143)\n")
    assert done.returncode == 143, done
    assert done.stdout == "bufferedatexit ran\n" and "last line" in done.stderr, done


def test_the_process_ends_with_its_status_even_without_a_stderr():
    """``2>&-``: no stderr for faulthandler's stacks, and still the status and atexit's output."""
    code = PRELUDE + "import atexit\nfrom mirror_maker.ops.stop_watchdog import exit_process\n" \
                     "atexit.register(print, 'atexit ran')\nexit_process(143)\n"
    done = subprocess.run(["sh", "-c", f'"{sys.executable}" -c "$0" 2>&-', code], capture_output=True,
                          text=True, timeout=10)
    assert done.returncode == 143 and done.stdout == "atexit ran\n", done


def test_both_commands_answer_help_and_version_through_a_pipe_with_their_status():
    """What ``--help`` and ``--version`` print is flushed before the process ends."""
    bin_dir = ROOT / "bin"
    for script, args, status, text in (("kafka-mirror-maker.py", ["--version"], 0, "."),
                                       ("kafka-mirror-maker.py", ["--no.such.option"], 1, "--no.such.option"),
                                       ("connect-mirror-maker.py", ["--help"], 0, "mm2.properties")):
        done = subprocess.run([sys.executable, str(bin_dir / script), *args], capture_output=True, text=True,
                              timeout=30)
        assert done.returncode == status and text in done.stdout + done.stderr, done
