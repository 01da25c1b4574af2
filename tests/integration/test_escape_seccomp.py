"""Escape suite, system calls (issue 13, docs/security.md "Seccomp"): from inside a real runc
sandbox, every kernel entry point the seccomp allowlist closes is tried with a raw system call
(escape_probe.c) and must fail with the errno the profile gives; the ordinary calls next to them
must keep working. After each attack asb serve and a witness sandbox must still be healthy.

The controls at the end run the same probe on the host as an unprivileged user without the
sandbox: the attacks that succeed there are the ones only the sandbox stops."""
import errno
import os
import shutil
import subprocess

import pytest

from asb_apiserver import CORE, sandbox
from escape_sandbox import Box, escape, start_escape_server  # noqa: F401
from local_sandbox import wait_ready

CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
NS_FLAGS = [CLONE_NEWUSER, CLONE_NEWUSER | CLONE_NEWNET, CLONE_NEWNET, CLONE_NEWNS, CLONE_NEWPID,
            CLONE_NEWIPC, CLONE_NEWUTS, CLONE_NEWCGROUP]

AF_UNIX, AF_INET, AF_INET6, AF_NETLINK, AF_PACKET, AF_ALG, AF_VSOCK = 1, 2, 10, 16, 17, 38, 40
SOCK_STREAM, SOCK_DGRAM, SOCK_RAW, SOCK_SEQPACKET = 1, 2, 3, 5
NETLINK_ROUTE, NETLINK_AUDIT, NETLINK_NETFILTER, NETLINK_KOBJECT_UEVENT = 0, 9, 12, 15
IPPROTO_ICMP = 1

# x86_64 numbers for calls the probe makes with zero arguments: the filter answers before the
# kernel looks at the arguments, so EPERM here is the profile, not a bad argument.
SYSCALL0 = {"kexec_load": 246, "init_module": 175, "finit_module": 313, "delete_module": 176,
            "reboot": 169, "swapon": 167, "acct": 163, "settimeofday": 164, "clock_settime": 227,
            "syslog": 103, "iopl": 172, "ioperm": 173, "open_tree": 428, "fsopen": 430,
            "move_mount": 429, "pidfd_getfd": 438, "kcmp": 312, "process_vm_writev": 311,
            "name_to_handle_at": 303, "request_key": 249, "lookup_dcookie": 212,
            "io_uring_enter": 426, "io_uring_register": 427, "modify_ldt": 154,
            "fanotify_init": 300, "sethostname": 170, "quotactl": 179}


def denied(res, err):
    return res["ret"] == -1 and res["errno"] == err


@pytest.fixture
def box(escape):
    b = escape.sandbox("attacker")
    yield b
    escape.assert_healthy()


@pytest.mark.parametrize("flags", NS_FLAGS, ids=lambda f: hex(f))
def test_clone_with_namespace_flags_is_refused(box, flags):
    assert denied(box.probe("clone", hex(flags)), errno.EPERM)


def test_clone3_is_enosys_so_libcs_fall_back(box):
    assert denied(box.probe("clone3", "0"), errno.ENOSYS)
    assert denied(box.probe("clone3", hex(CLONE_NEWUSER | CLONE_NEWNET)), errno.ENOSYS)


@pytest.mark.parametrize("flags", [CLONE_NEWUSER, CLONE_NEWNET, CLONE_NEWNS, CLONE_NEWUSER | CLONE_NEWNET])
def test_unshare_is_refused(box, flags):
    assert denied(box.probe("unshare", hex(flags)), errno.EPERM)
    code, _, _ = box.run("unshare", "-Ur", "true")
    assert code != 0


@pytest.mark.parametrize("ns", ["net", "mnt", "pid", "user", "uts"])
def test_setns_is_refused(box, ns):
    assert denied(box.probe("setns", f"/proc/self/ns/{ns}"), errno.EPERM)


@pytest.mark.parametrize("verb,args", [("mount", ["/tmp"]), ("umount", ["/proc"]),
                                        ("chroot", ["/tmp"]), ("pivot_root", ["/", "/tmp"])])
def test_mount_family_is_refused(box, verb, args):
    assert denied(box.probe(verb, *args), errno.EPERM)


@pytest.mark.parametrize("verb", ["io_uring_setup", "bpf", "perf_event_open", "keyctl", "add_key",
                                  "userfaultfd", "open_by_handle_at", "ptrace_traceme"])
def test_kernel_attack_surface_is_refused(box, verb):
    assert denied(box.probe(verb), errno.EPERM)


@pytest.mark.parametrize("name", sorted(SYSCALL0))
def test_machine_and_process_calls_are_refused(box, name):
    assert denied(box.probe("syscall0", SYSCALL0[name]), errno.EPERM)


def test_ptrace_cannot_reach_sandboxd_or_anything_outside(box):
    # PID 1 is sandboxd, under the same uid as the attacker: ptrace would own the daemon.
    assert "sandboxd" in box.run("cat", "/proc/1/cmdline")[1]
    assert denied(box.probe("ptrace_attach", 1), errno.EPERM)
    assert denied(box.probe("process_vm_readv", 1), errno.EPERM)
    # A host pid (asb serve's) means nothing inside: the pid namespace hides it, and ptrace is
    # refused before the kernel even looks it up.
    assert denied(box.probe("ptrace_attach", box.asb.proc.pid), errno.EPERM)
    code, _, _ = box.run("sh", "-c", f"test -e /proc/{box.asb.proc.pid}/root/etc/shadow")
    assert code != 0


@pytest.mark.parametrize("family,stype,proto,err", [
    (AF_VSOCK, SOCK_STREAM, 0, errno.EAFNOSUPPORT),      # to the hypervisor
    (AF_PACKET, SOCK_RAW, 0, errno.EAFNOSUPPORT),        # link layer
    (AF_PACKET, SOCK_DGRAM, 0, errno.EAFNOSUPPORT),
    (AF_ALG, SOCK_SEQPACKET, 0, errno.EAFNOSUPPORT),     # kernel crypto API
    (AF_NETLINK, SOCK_RAW, NETLINK_NETFILTER, errno.EPERM),  # nf_tables
    (AF_NETLINK, SOCK_RAW, NETLINK_AUDIT, errno.EPERM),
    (AF_NETLINK, SOCK_DGRAM, NETLINK_KOBJECT_UEVENT, errno.EPERM),
    (AF_INET, SOCK_RAW, IPPROTO_ICMP, errno.EPERM),      # raw IP: no CAP_NET_RAW
    (AF_INET6, SOCK_RAW, 58, errno.EPERM),
])
def test_socket_families_are_limited(box, family, stype, proto, err):
    assert denied(box.probe("socket", family, stype, proto), err)
    if family != AF_INET and family != AF_INET6:
        assert denied(box.probe("socketpair", family, stype, proto), err)


def test_32bit_and_x32_entry_points_kill_the_caller(box):
    """int 0x80 and x32 syscalls match no architecture of the filter: runc's bad-arch action kills
    the process instead of running an unfiltered call."""
    if os.uname().machine != "x86_64":
        pytest.skip("x86_64 only")
    for verb, nr in (("int80", 20), ("int80", 310), ("x32", 39), ("x32", 272)):
        code, out, _ = box.run("/workspace/escape-probe", verb, str(nr))
        assert code != 0 and "ret=" not in out, (verb, nr, code, out)


def test_personality_only_safe_values(box):
    assert box.probe("personality", "0xffffffff")["ret"] >= 0
    assert box.probe("personality", "0x0")["ret"] >= 0
    assert denied(box.probe("personality", hex(0x0040000)), errno.EPERM)  # ADDR_NO_RANDOMIZE
    assert denied(box.probe("personality", hex(0x0400000)), errno.EPERM)  # READ_IMPLIES_EXEC


def test_ordinary_programs_still_work(box):
    # clone without namespace flags (fork), threads through the clone3 -> clone fallback.
    assert box.probe("clone", "0")["ret"] > 0
    assert box.probe("thread")["ret"] == 0
    # The allowed families.
    for family, stype, proto in ((AF_UNIX, SOCK_STREAM, 0), (AF_INET, SOCK_STREAM, 0),
                                 (AF_INET6, SOCK_DGRAM, 0), (AF_NETLINK, SOCK_RAW, NETLINK_ROUTE)):
        assert box.probe("socket", family, stype, proto)["ret"] >= 0, (family, stype, proto)
    assert box.probe("socketpair", AF_UNIX, SOCK_STREAM, 0)["ret"] == 0
    code, out, err = box.python(
        "import socket, subprocess, threading, multiprocessing\n"
        "r = []\n"
        "t = threading.Thread(target=lambda: r.append(1)); t.start(); t.join()\n"
        "with multiprocessing.Pool(2) as p: r += p.map(abs, [-2])\n"
        "r.append(subprocess.run(['echo', 'sub'], capture_output=True, text=True).stdout.strip())\n"
        "s = socket.socket(socket.AF_INET); s.bind(('127.0.0.1', 0)); s.listen()\n"
        "c = socket.create_connection(s.getsockname()); a, _ = s.accept(); c.sendall(b'x')\n"
        "r.append(a.recv(1).decode())\n"
        "u = socket.socketpair(); u[0].sendall(b'u'); r.append(u[1].recv(1).decode())\n"
        "r.append([n for _, n in socket.if_nameindex()])\n"
        "print(r)\n")
    assert code == 0, err
    assert out.strip() == "[1, 2, 'sub', 'x', 'u', ['lo']]"
    code, out, err = box.run("ip", "-o", "addr", "show", "lo")
    assert code == 0 and "127.0.0.1" in out, err
    code, out, err = box.run("sh", "-c", "cd /tmp && printf 'int main(void){return 7;}' > t.c && "
                             "gcc t.c -o t && ./t; echo $?")
    assert out.strip().endswith("7"), out + err


@pytest.mark.parametrize("attack", [
    ["clone", hex(CLONE_NEWUSER | CLONE_NEWNET)],
    ["clone3", hex(CLONE_NEWUSER)],
    ["unshare", hex(CLONE_NEWUSER)],
    ["io_uring_setup"],
    ["socket", AF_VSOCK, SOCK_STREAM, 0],
    ["socket", AF_NETLINK, SOCK_RAW, NETLINK_NETFILTER],
    ["keyctl"],
])
def test_control_attack_works_outside_the_sandbox(escape, attack):
    """The same probe as an unprivileged host user, without the sandbox: where the host allows the
    call, the refusal inside is the sandbox's doing."""
    r = subprocess.run(["setpriv", "--reuid", "1000", "--regid", "1000", "--clear-groups",
                        "--inh-caps=-all", escape.probe_path, *[str(a) for a in attack]],
                       capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        pytest.skip(f"cannot run the probe unprivileged on the host: {r.stderr}")
    res = {k: int(v) for k, v in (kv.split("=") for kv in r.stdout.split())}
    if res["ret"] < 0:
        pytest.skip(f"the host itself refuses {attack} (errno {res['errno']})")
    inside = escape.sandbox("attacker").probe(*attack)
    assert inside["ret"] == -1 and inside["errno"] in (errno.EPERM, errno.ENOSYS, errno.EAFNOSUPPORT)


@pytest.mark.skipif(shutil.which("runsc") is None,
                    reason="runsc is not installed (scripts/deps.sh installs Debian's runsc)")
def test_every_runtime_handler_gets_the_profile(tmp_path_factory, tmp_path):
    """A sandbox of another RuntimeClass gets the same filter: gVisor's runsc (Debian's) applies
    config.json's profile inside its Sentry only with --oci-seccomp, which a wrapper named runsc
    logs before it hands the call to the real runsc."""
    log = tmp_path / "runsc.log"
    fake = tmp_path / "bin" / "runsc"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\n"
                    f"echo \"$*\" >> {log}\n"
                    f"exec {shutil.which('runsc')} \"$@\"\n")
    fake.chmod(0o755)
    esc, cleanup = start_escape_server(tmp_path_factory,
                                       env={"ASB_RUNTIME_CLASSES": f"gvisor={fake}"})
    try:
        body = sandbox("gvisor-box")
        body["spec"]["podTemplate"]["spec"]["runtimeClassName"] = "gvisor"
        r = esc.asb.post(esc.asb.path(CORE, "sandboxes", "default"), body)
        assert r.status_code == 201, r.text
        uid = r.json()["metadata"]["uid"]
        wait_ready(esc.asb, "gvisor-box", timeout=60)
        run_calls = [line for line in log.read_text().splitlines() if " run " in f" {line} "]
        assert run_calls and all("--oci-seccomp run" in c for c in run_calls), log.read_text()
        box = Box(esc.asb, esc.state_dir, "gvisor-box", uid)
        esc.boxes["gvisor-box"] = box
        box.install_probe(esc.probe_path)
        status = box.run("grep", "^Seccomp:", "/proc/self/status")[1]
        assert status.split() == ["Seccomp:", "2"]
        assert denied(box.probe("clone", hex(CLONE_NEWUSER | CLONE_NEWNET)), errno.EPERM)
        # runsc answers every refusal of the profile with EPERM (it ignores errnoRet), and
        # leaves clone3 to the Sentry, which has none (ENOSYS) in Debian's release.
        assert denied(box.probe("clone3", "0"), errno.ENOSYS)
        assert denied(box.probe("socket", AF_VSOCK, SOCK_STREAM, 0), errno.EPERM)
        esc.assert_healthy()
    finally:
        esc.close()
        cleanup()
