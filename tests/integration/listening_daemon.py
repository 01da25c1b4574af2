"""A daemon under test that prints `listening address=HOST:PORT` once it serves (acp-server,
`asb mcp --listen`): started on a free loopback port, its output in a log file, stopped with
SIGTERM and checked for sanitizer reports. Imported explicitly."""
import re
import signal
import subprocess
import time

from asb_apiserver import SANITIZER_EXIT_CODES


class ListeningDaemon:
    """Subclasses set self.name, self.log_path, self.env and implement argv()."""

    address = None
    proc = None

    def argv(self):
        raise NotImplementedError

    def on_listening(self):
        """Called once self.address is known."""

    def start(self, timeout=15):
        self.log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self.argv(), stdin=subprocess.DEVNULL, stdout=self.log,
                                     stderr=subprocess.STDOUT, env=self.env,
                                     start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = re.search(r"listening address=(\S+)", self.output())
            if m:
                self.address = m.group(1)
                self.on_listening()
                return self
            if self.proc.poll() is not None:
                raise AssertionError(f"{self.name} exited ({self.proc.returncode}):\n{self.output()}")
            time.sleep(0.02)
        raise AssertionError(f"{self.name} not listening within {timeout}s:\n{self.output()}")

    def output(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")

    def stop(self, timeout=20):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"{self.name} did not exit:\n{self.output()}")
        finally:
            self.log.close()
        out = self.output()
        assert code not in SANITIZER_EXIT_CODES, f"{SANITIZER_EXIT_CODES[code]}:\n{out}"
        assert "ERROR: AddressSanitizer" not in out and "ERROR: LeakSanitizer" not in out \
            and "runtime error:" not in out, out
        return code
