"""gRPC client helpers for the sandboxd tests: message modules generated at test time with
`protoc --python_out` from proto/*.proto (grpc_tools is not needed), and thin call wrappers
over grpcio's generic channel API."""
import atexit
import importlib
import os
import socket
import shutil
import subprocess
import sys
import tempfile
import time

import grpc

from waiting import poll as wait_for  # noqa: F401 (re-exported to the gRPC tests)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_GEN = None


def _generate():
    global _GEN
    if _GEN is None:
        out = tempfile.mkdtemp(prefix="asb-pb2-")
        atexit.register(shutil.rmtree, out, True)  # the modules are loaded by then: leave nothing
        protos = [os.path.join(ROOT, "proto", p) for p in sorted(os.listdir(os.path.join(ROOT, "proto")))
                  if p.endswith(".proto")]
        subprocess.run(["protoc", f"--proto_path={ROOT}/proto", "--proto_path=/usr/include",
                        f"--python_out={out}", *protos], check=True)
        sys.path.insert(0, out)
        _GEN = out
    return _GEN


def pb():
    """The generated process_pb2 module."""
    _generate()
    return importlib.import_module("process_pb2")


def reflection_pb():
    _generate()
    return importlib.import_module("reflection_pb2")


SERVICE = "/process.v1.ProcessService/"


class Client:
    """Calls process.v1.ProcessService over one channel."""

    def __init__(self, target, timeout=20):
        self.pb = pb()
        self.channel = grpc.insecure_channel(target)
        grpc.channel_ready_future(self.channel).result(timeout=timeout)
        p = self.pb
        self.start_rpc = self.channel.unary_stream(SERVICE + "Start", p.StartRequest.SerializeToString,
                                                   p.StartResponse.FromString)
        self.execute_rpc = self.channel.unary_unary(SERVICE + "Execute", p.ExecuteRequest.SerializeToString,
                                                    p.ExecuteResponse.FromString)
        self.write_stdin_rpc = self.channel.unary_unary(SERVICE + "WriteStdin",
                                                        p.WriteStdinRequest.SerializeToString,
                                                        p.WriteStdinResponse.FromString)
        self.send_signal_rpc = self.channel.unary_unary(SERVICE + "SendSignal",
                                                        p.SendSignalRequest.SerializeToString,
                                                        p.SendSignalResponse.FromString)
        self.resize_rpc = self.channel.unary_unary(SERVICE + "ResizeTTY", p.ResizeTTYRequest.SerializeToString,
                                                   p.ResizeTTYResponse.FromString)

    def close(self):
        self.channel.close()

    def config(self, command, env=None, cwd=None):
        cfg = self.pb.ProcessConfig(command=list(command), env_vars=env or {})
        if cwd is not None:
            cfg.cwd = cwd
        return cfg

    def execute(self, command, env=None, cwd=None, timeout=30, **kw):
        return self.execute_rpc(self.pb.ExecuteRequest(config=self.config(command, env, cwd)),
                                timeout=timeout, **kw)

    def start(self, command, env=None, cwd=None, pty=None, timeout=None, **kw):
        req = self.pb.StartRequest(config=self.config(command, env, cwd))
        if pty is not None:
            req.pty.CopyFrom(self.pb.PTY(cols=pty[0], rows=pty[1]))
        return self.start_rpc(req, timeout=timeout, **kw)

    def write_stdin(self, pid, data=None, eof=False):
        req = self.pb.WriteStdinRequest(process_id=pid)
        if eof:
            req.eof.SetInParent()
        elif data is not None:
            req.input = data
        return self.write_stdin_rpc(req, timeout=10)

    def send_signal(self, pid, sig):
        return self.send_signal_rpc(self.pb.SendSignalRequest(process_id=pid, signal=sig), timeout=10)

    def resize(self, pid, cols, rows):
        return self.resize_rpc(self.pb.ResizeTTYRequest(process_id=pid, cols=cols, rows=rows), timeout=10)


def collect(stream):
    """Drains a Start stream: (events list, pid, stdout bytes, stderr bytes, exit code or None)."""
    events, out, err, pid, code = [], b"", b"", None, None
    for ev in stream:
        kind = ev.WhichOneof("event")
        events.append(kind)
        if kind == "init":
            pid = ev.init.process_id
        elif kind == "stdout":
            out += ev.stdout
        elif kind == "stderr":
            err += ev.stderr
        elif kind == "exit":
            code = ev.exit.exit_code
    return events, pid, out, err, code


def start_daemon(start_sandboxd, **kw):
    """Starts sandboxd without waiting for REST health and waits until gRPC answers."""
    d = start_sandboxd(wait=False, **kw)
    deadline = time.monotonic() + 15
    host, port = d.grpc_addr.rsplit(":", 1)
    while True:
        if d.proc.poll() is not None:
            raise AssertionError(f"sandboxd exited early:\n{d.output()}")
        try:
            socket.create_connection((host, int(port)), timeout=1).close()
        except OSError:
            if time.monotonic() > deadline:
                raise AssertionError(f"sandboxd gRPC not listening:\n{d.output()}")
            time.sleep(0.01)
            continue
        ch = grpc.insecure_channel(d.grpc_addr)
        try:
            grpc.channel_ready_future(ch).result(timeout=0.5)
            ch.close()
            return d
        except grpc.FutureTimeoutError:
            ch.close()
            if time.monotonic() > deadline:
                raise AssertionError(f"sandboxd gRPC not ready:\n{d.output()}")


def pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:  # gone between kill() and open()/read()
        return False
