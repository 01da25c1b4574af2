"""`sandboxd [flags] -- CMD...`: the sandbox's main process (issue 4). Without `--` nothing
changes (every other sandboxd test)."""
import os
import signal

import requests

from waiting import poll as wait_for


def health(d):
    return requests.get(f"http://127.0.0.1:{d.rest_port}/v1/health", timeout=5).status_code


def test_main_process_exit_code_and_log(start_sandboxd, tmp_path):
    main = tmp_path / "main"
    main.mkdir()
    script = ('echo "cwd=$(pwd)"; echo "dir=${ASB_MAIN_DIR-unset}"; '
              'echo "pgid=$(ps -o pgid= -p $$ | tr -d " ") pid=$$"; echo oops >&2; exit 7')
    d = start_sandboxd(extra_args=["--", "sh", "-c", script], env={**os.environ, "ASB_MAIN_DIR": str(main)})
    assert wait_for(lambda: (main / "exit").exists()), d.output()
    assert (main / "exit").read_text() == "7\n"
    log = (main / "log").read_text()
    assert f"cwd={d.root}" in log
    assert "dir=unset" in log  # not leaked to the main process
    assert "oops" in log
    pg = dict(kv.split("=") for kv in log.split("\n")[2].split())
    assert pg["pgid"] == pg["pid"]  # its own process group
    # sandboxd keeps serving after the main process exited.
    assert health(d) == 200
    assert "main process exited" in d.output() and "code=7" in d.output()
    assert d.stop() == 0


def test_main_process_signalled_at_shutdown(start_sandboxd, tmp_path):
    main = tmp_path / "main"
    main.mkdir()
    d = start_sandboxd(extra_args=["--", "sleep", "600"], env={**os.environ, "ASB_MAIN_DIR": str(main)})
    assert health(d) == 200
    assert wait_for(lambda: "main process started" in d.output())
    assert d.stop(signal.SIGTERM) == 0
    assert (main / "exit").read_text() == str(128 + signal.SIGTERM) + "\n"


def test_main_process_not_found_is_127(start_sandboxd, tmp_path):
    main = tmp_path / "main"
    main.mkdir()
    d = start_sandboxd(extra_args=["--", "no-such-program-xyz"], env={**os.environ, "ASB_MAIN_DIR": str(main)})
    # Health answers once the listeners are up; the failed start is recorded a moment later.
    assert wait_for(lambda: (main / "exit").exists()), d.output()
    assert (main / "exit").read_text() == "127\n"
    assert "cannot start no-such-program-xyz" in (main / "log").read_text()
    assert health(d) == 200
    assert d.stop() == 0


def test_main_process_without_dir_shares_output(start_sandboxd):
    d = start_sandboxd(extra_args=["--", "sh", "-c", "echo from-main-process"])
    assert wait_for(lambda: "from-main-process" in d.output())
    assert wait_for(lambda: "main process exited" in d.output())
    assert health(d) == 200
    assert d.stop() == 0
