#!/usr/bin/env python3
"""Runs rdma-core's pyverbs test suite in the linux-on-sim guest (run.sh PYVERBS=1) and reports
every test on a line of its own as it ends, so that run.sh can check the run from the guest's
console log alone, and a hang or a crash still leaves every earlier result behind.

    cd <the suite's tests/ directory> && python3 pyv_runner.py --dev mlx5_0 --port 1 --gid 1

It is placed in the suite's directory (the guest's /tests): the suite's modules import its
`args_parser` as a top-level module and itself as the package `tests`. The suite's options
(--dev, --port, --gid, ...) go to that `args_parser`, which the tests read their device from;
the rest of the command line (a test name, -k PATTERN) is unittest's.

Lines it prints (anything else on the console is the tests' or the kernel's own):

    PYV-START <test id>
    PYV-TB <one line of a traceback>          (right when the test fails or errs)
    PYV-RESULT <ok|fail|error|skip|xfail|xpass> <test id> <seconds> <reason on one line, or ->
    PYV-SUMMARY N tests: N ok, N failed, N errors, N skipped

An expected failure counts as ok in the summary, an unexpected success as failed. A test still
running after ALARM seconds (default 300) gets SIGALRM, which raises in it and makes it an
error; if it has not ended GRACE seconds after that (stuck in C code that never returns to
Python), the runner reports it as an error, prints the summary so far and exits.
Exit status: 0 when nothing failed or erred, 1 otherwise, 3 after such an abort.
"""
import importlib.util
import os
import re
import signal
import sys
import threading
import time
import traceback
import unittest

ALARM = int(os.environ.get('PYV_ALARM', '300'))
GRACE = int(os.environ.get('PYV_GRACE', '60'))
HERE = os.path.dirname(os.path.abspath(__file__))


class TestAlarm(Exception):
    """Raised in the running test by SIGALRM."""


def on_alarm(signum, frame):
    raise TestAlarm(f'the test ran past the runner\'s {ALARM} s alarm (hang?)')


def one_line(text):
    return re.sub(r'\s+', ' ', str(text)).strip() or '-'


def test_name(test):
    """A test's id without spaces: a class or module fixture's error comes as
    'setUpClass (tests.test_x.Case)', reported here as tests.test_x.Case.setUpClass."""
    name = test.id()
    m = re.fullmatch(r'(\w+) \((.+)\)', name)
    if m:
        name = f'{m.group(2)}.{m.group(1)}'
    return name.replace(' ', '_')


def out(line):
    sys.stdout.write(line + '\n')
    sys.stdout.flush()


class LineResult(unittest.TestResult):
    """A unittest result that prints each test's outcome as soon as the test ends."""

    # The worst outcome of a test wins (a failing subtest makes the test fail).
    RANK = {'ok': 0, 'xfail': 1, 'skip': 2, 'xpass': 3, 'fail': 4, 'error': 5}

    def __init__(self):
        super().__init__()
        self.counts = {k: 0 for k in self.RANK}
        self.current = None   # (test, start time)
        self.status = None
        self.reason = None
        self.lock = threading.Lock()

    # --- the running test --------------------------------------------------------------
    def startTest(self, test):
        super().startTest(test)
        self.current, self.status, self.reason = (test, time.monotonic()), None, None
        out(f'PYV-START {test_name(test)}')
        signal.alarm(ALARM)

    def stopTest(self, test):
        signal.alarm(0)
        super().stopTest(test)
        self.report(test, self.status or 'ok', self.reason)

    def note(self, test, status, reason):
        if self.current is None or self.current[0] is not test:
            # A fixture (setUpClass, setUpModule, ...) that is not a test run: report it now.
            self.report(test, status, reason, seconds=0.0)
            return
        if self.status is None or self.RANK[status] > self.RANK[self.status]:
            self.status, self.reason = status, reason

    def report(self, test, status, reason, seconds=None):
        with self.lock:
            name = test_name(test)
            if seconds is None:
                seconds = time.monotonic() - self.current[1] if self.current else 0.0
                self.current = None
            self.counts[status] += 1
            out(f'PYV-RESULT {status} {name} {seconds:.2f} {one_line(reason or "-")}')

    def traceback_lines(self, test, kind, err):
        out(f'PYV-TB {kind}: {test_name(test)}')
        for chunk in traceback.format_exception(*err):
            for line in chunk.rstrip('\n').split('\n'):
                out(f'PYV-TB {line}')
        exc = traceback.format_exception_only(err[0], err[1])
        return exc[-1] if exc else str(err[1])

    # --- outcomes ----------------------------------------------------------------------
    def addSuccess(self, test):
        super().addSuccess(test)
        self.note(test, 'ok', None)

    def addError(self, test, err):
        super().addError(test, err)
        self.note(test, 'error', self.traceback_lines(test, 'ERROR', err))

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self.note(test, 'fail', self.traceback_lines(test, 'FAIL', err))

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self.note(test, 'skip', reason)

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self.note(test, 'xfail', traceback.format_exception_only(err[0], err[1])[-1])

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self.note(test, 'xpass', 'expected to fail, passed')

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        if err is None:
            return
        kind = 'fail' if issubclass(err[0], test.failureException) else 'error'
        reason = self.traceback_lines(subtest, kind.upper(), err)
        self.note(test, kind, f'{subtest._subDescription()}: {reason}')

    # --- the end -----------------------------------------------------------------------
    def summary(self):
        c = self.counts
        n = sum(c.values())
        out(f'PYV-SUMMARY {n} tests: {c["ok"] + c["xfail"]} ok, {c["fail"] + c["xpass"]} failed, '
            f'{c["error"]} errors, {c["skip"]} skipped')

    def bad(self):
        return self.counts['fail'] + self.counts['xpass'] + self.counts['error']


def watchdog(result, stop):
    """Ends the run if a test outlives its alarm by GRACE seconds (SIGALRM could not reach
    Python code: the main thread is stuck in C). Only runs while the GIL is free."""
    while not stop.wait(5):
        cur = result.current
        if cur is not None and time.monotonic() - cur[1] > ALARM + GRACE:
            result.report(cur[0], 'error', f'the test hung past {ALARM} + {GRACE} s; runner aborted')
            result.summary()
            out('PYV-ABORT the runner exits: a test could not be interrupted')
            os._exit(3)


def main():
    sys.path.insert(0, HERE)
    # The suite's own option parser: the tests read --dev/--port/--gid from it; it leaves the
    # options it does not know in sys.argv for unittest.
    from args_parser import parser
    parser.parse_args()
    # The suite's directory as the package `tests`; its load_tests collects every test_*.py.
    spec = importlib.util.spec_from_file_location('tests', os.path.join(HERE, '__init__.py'),
                                                  submodule_search_locations=[HERE])
    tests = importlib.util.module_from_spec(spec)
    sys.modules['tests'] = tests
    spec.loader.exec_module(tests)

    loader = unittest.TestLoader()
    names = [a for a in sys.argv[1:] if not a.startswith('-')]
    suite = loader.loadTestsFromNames(names, tests) if names else loader.loadTestsFromModule(tests)
    out(f'PYV-INFO {suite.countTestCases()} tests loaded; per-test alarm {ALARM} s; '
        f'config {parser.get_config()}')

    signal.signal(signal.SIGALRM, on_alarm)
    result = LineResult()
    stop = threading.Event()
    threading.Thread(target=watchdog, args=(result, stop), daemon=True).start()
    start = time.monotonic()
    suite(result)
    stop.set()
    result.summary()
    out(f'PYV-INFO suite took {time.monotonic() - start:.1f} s')
    return 1 if result.bad() else 0


if __name__ == '__main__':
    sys.exit(main())
