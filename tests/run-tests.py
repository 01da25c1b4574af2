#!/usr/bin/python3
"""Runs every test layer against one build and prints a single closing line `N passed, N failed`.

Layers: C unit tests (<build>/tests/test-*), pytest integration tests (tests/integration, real
processes on real sockets, binaries from <build>/bin), and libFuzzer corpus replay (build/fuzz/bin,
corpora under fuzz/corpus/<target>)."""
import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAN_ENV = {
    "ASAN_OPTIONS": "halt_on_error=1:detect_leaks=1:abort_on_error=0:exitcode=86",
    "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1:exitcode=87",
}


def run_unit(build):
    passed = failed = 0
    for binary in sorted(glob.glob(os.path.join(build, "tests", "test-*"))):
        proc = subprocess.run([binary], capture_output=True, text=True,
                              env={**os.environ, **SAN_ENV}, timeout=600)
        out = proc.stdout
        p = sum(1 for line in out.splitlines() if line.startswith("ok - "))
        f = sum(1 for line in out.splitlines() if line.startswith("not ok - "))
        if proc.returncode != 0 and f == 0:
            f = 1  # crashed or sanitizer report: count the binary as one failure
        if f:
            sys.stdout.write(out + proc.stderr)
        print(f"unit {os.path.basename(binary)}: {p} passed, {f} failed")
        passed += p
        failed += f
    return passed, failed


def run_pytest(build, extra):
    xml = os.path.join(ROOT, "build", "pytest-results.xml")
    env = {**os.environ, **SAN_ENV, "ASB_BUILD": os.path.abspath(build), "PYTHONDONTWRITEBYTECODE": "1"}
    # The tests' tmp_path directories under a temp root of this run, removed after it: pytest's
    # default (/tmp/pytest-of-<user>) keeps the last three runs' behind.
    basetemp = tempfile.mkdtemp(prefix="asb-pytest-")
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={xml}",
           f"--basetemp={basetemp}", os.path.join(ROOT, "tests", "integration")] + extra
    try:
        proc = subprocess.run(cmd, env=env, cwd=ROOT)
    finally:
        shutil.rmtree(basetemp, onerror=lambda _f, path, exc: print(
            f"run-tests: cannot remove {path}: {exc[1]}", file=sys.stderr))
    if not os.path.exists(xml):
        return 0, 1
    tree = ET.parse(xml).getroot()
    suites = [tree] if tree.tag == "testsuite" else list(tree)
    total = sum(int(s.get("tests", 0)) for s in suites)
    bad = sum(int(s.get("failures", 0)) + int(s.get("errors", 0)) for s in suites)
    skipped = sum(int(s.get("skipped", 0)) for s in suites)
    if proc.returncode not in (0, 1) and bad == 0:
        bad = 1  # collection error, interrupted run, ...
    print(f"pytest: {total - bad - skipped} passed, {bad} failed, {skipped} skipped")
    return total - bad - skipped, bad


def run_fuzz_corpora():
    passed = failed = 0
    for binary in sorted(glob.glob(os.path.join(ROOT, "build", "fuzz", "bin", "fuzz-*"))):
        name = os.path.basename(binary)
        inputs = sorted(glob.glob(os.path.join(ROOT, "fuzz", "corpus", name, "*")))
        if not inputs:
            print(f"fuzz {name}: no corpus")
            failed += 1
            continue
        proc = subprocess.run([binary] + inputs, capture_output=True, text=True,
                              env={**os.environ, **SAN_ENV}, timeout=600)
        ok = proc.returncode == 0
        if not ok:
            sys.stdout.write(proc.stderr[-4000:])
        print(f"fuzz {name}: replayed {len(inputs)} inputs: {'ok' if ok else 'FAILED'}")
        passed += ok
        failed += not ok
    return passed, failed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build/asan")
    ap.add_argument("pytest_args", nargs="*")
    args = ap.parse_args()
    build = os.path.join(ROOT, args.build) if not os.path.isabs(args.build) else args.build
    totals = [run_unit(build), run_pytest(build, args.pytest_args), run_fuzz_corpora()]
    passed = sum(p for p, _ in totals)
    failed = sum(f for _, f in totals)
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed or passed == 0 else 0)


if __name__ == "__main__":
    main()
